/* Copies with host sides (docs/remoting.md "Copies"). Host -> device: the bytes follow the call
 * as bulk; device -> host: the reply's bulk is decrypted straight into the destination. Copies
 * over 16 MiB are split into 16 MiB calls, sent without waiting for each other: all but the last
 * piece of a synchronous host -> device copy travel as the async call, the device -> host pieces
 * are requested together (sl_fe_call_batch). Copies into guest memory complete before the call
 * returns, also the *Async ones (v1): the copy runs in the stream's order and the stream is
 * synchronized before the call returns (in the backend, one round trip, up to 16 MiB; above,
 * the frontend synchronizes the stream first); into mapped host memory the device copies into
 * its twin too (dtoh_mapped). 2D/3D copies gather or scatter
 * their host rectangle into or from one contiguous bulk; the pod sent has the host pointer
 * cleared and the host pitch set to the row width. Copies between host memory and an array:
 * copy_array.c. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "api/capture.h"
#include "api/copy.h"
#include "api/memory.h"
#include "call/managed.h"
#include "call/mapped_sync.h"
#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

static CUresult dtod(bool pt, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, int async,
                     int unified);

/* A host side in managed memory is the device's address: the copy runs on the device (the
 * guest's dirty pages go before it, its pages are invalidated after it), never through the
 * guest's pages, which this thread may not fault on while it holds the call layer's lock. */
static int managed(const void *p)
{
    return p && sl_fe_managed_find((uintptr_t)p, NULL, NULL);
}

/* An async copy is queued, so the backend's check of its device pointer would only surface at
 * a later call; the driver refuses a bogus one at the call (measured: 1 for 0x10). Refused here
 * only where no device allocation can be: the first page, and above the 57-bit virtual address
 * space no x86-64 process (nor the GPU's unified addresses) reaches. */
static int not_device_memory(CUdeviceptr p, size_t n)
{
    return n && (p < 4096 || p + n < p || p + n > ((CUdeviceptr)1 << 57));
}

/* An async copy with one side in guest memory on a capturing stream becomes a memcpy node of
 * the capture's graph (api/capture.c): the bytes move when the graph is launched. */
static CUresult capture_1d(bool pt, CUstream s, CUdeviceptr ddst, void *hdst, CUdeviceptr dsrc,
                           const void *hsrc, size_t n)
{
    if (!n)
        return CUDA_SUCCESS;
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.WidthInBytes = n;
    c.Height = c.Depth = 1;
    c.srcMemoryType = hsrc ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    c.srcHost = hsrc;
    c.srcDevice = dsrc;
    c.dstMemoryType = hdst ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    c.dstHost = hdst;
    c.dstDevice = ddst;
    return sl_fe_capture_copy(pt, s, &c);
}

static CUresult htod(bool pt, CUdeviceptr dst, const void *src, size_t n, CUstream s, int async)
{
    if (n && !src)
        return CUDA_ERROR_INVALID_VALUE;
    if (async && not_device_memory(dst, n))
        return CUDA_ERROR_INVALID_VALUE;
    if (managed(src))
        return dtod(pt, dst, (CUdeviceptr)(uintptr_t)src, n, s, async, 0);
    if (async && sl_fe_capturing(pt, s))
        return capture_1d(pt, s, dst, NULL, 0, src, n);
    size_t off = 0;
    do {
        size_t c = n - off > SL_FE_MAX_COPY_CHUNK ? SL_FE_MAX_COPY_CHUNK : n - off;
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        call.per_thread_stream = pt;
        struct iovec iov = {(void *)((const char *)src + off), c};
        CUresult rc;
        if (async || off + c < n) {
            /* Every piece of a synchronous copy but the last goes without waiting, so that the
             * pieces overlap on their way; the last one's reply reports a failure of any of
             * them (a deferred error), and comes once all of them were copied. */
            Sluice__Cuda__CuMemcpyHtoDAsyncV2Request r =
                SLUICE__CUDA__CU_MEMCPY_HTO_DASYNC_V2_REQUEST__INIT;
            r.dst_device = dst + off;
            r.src_host = c;
            r.byte_count = c;
            r.h_stream = (uint64_t)(uintptr_t)s;
            SL_FE_SET(cuMemcpyHtoDAsync_v2, &call, &r);
            rc = sl_fe_enqueue_async_bulk(&call, &iov, c ? 1 : 0);
        } else {
            Sluice__Cuda__CuMemcpyHtoDV2Request r = SLUICE__CUDA__CU_MEMCPY_HTO_DV2_REQUEST__INIT;
            r.dst_device = dst + off;
            r.src_host = c;
            r.byte_count = c;
            SL_FE_SET(cuMemcpyHtoD_v2, &call, &r);
            Sluice__Wire__Reply *rep = NULL;
            rc = sl_fe_call_bulk(&call, &iov, c ? 1 : 0, NULL, 0, NULL, &rep);
            rc = sl_fe_reply_result(rc, rep);
        }
        if (rc != CUDA_SUCCESS)
            return rc;
        off += c;
    } while (off < n);
    return CUDA_SUCCESS;
}

static CUresult stream_sync(bool pt, CUstream s)
{
    return pt ? cuStreamSynchronize_ptsz(s) : cuStreamSynchronize(s);
}

static CUresult dtoh_mapped(bool pt, void *dst, uint64_t twin, CUdeviceptr src, size_t n,
                            CUstream s, int async);

static CUresult dtoh_guest(bool pt, void *dst, CUdeviceptr src, size_t n);

static CUresult dtoh(bool pt, void *dst, CUdeviceptr src, size_t n)
{
    uint64_t twin;
    if (n && !dst)
        return CUDA_ERROR_INVALID_VALUE;
    if (managed(dst))
        return dtod(pt, (CUdeviceptr)(uintptr_t)dst, src, n, NULL, 0, 0);
    if (sl_fe_mapped_dptr(dst, n, &twin))
        return dtoh_mapped(pt, dst, twin, src, n, NULL, 0);
    return dtoh_guest(pt, dst, src, n);
}

/* The bytes into guest memory, in pieces of at most SL_FE_MAX_COPY_CHUNK. */
static CUresult dtoh_guest(bool pt, void *dst, CUdeviceptr src, size_t n)
{
    size_t off = 0;
    do {
        /* up to SL_FE_BATCH_MAX pieces at once: the backend copies the next while this side
         * decrypts the one before */
        Sluice__Cuda__CuMemcpyDtoHV2Request r[SL_FE_BATCH_MAX];
        Sluice__Wire__Call call[SL_FE_BATCH_MAX], *calls[SL_FE_BATCH_MAX];
        void *out[SL_FE_BATCH_MAX];
        size_t cap[SL_FE_BATCH_MAX], got[SL_FE_BATCH_MAX];
        Sluice__Wire__Reply *rep[SL_FE_BATCH_MAX];
        size_t k = 0;
        for (size_t o = off; k < SL_FE_BATCH_MAX && (o < n || k == 0); k++) {
            size_t c = n - o > SL_FE_MAX_COPY_CHUNK ? SL_FE_MAX_COPY_CHUNK : n - o;
            r[k] =
                (Sluice__Cuda__CuMemcpyDtoHV2Request)SLUICE__CUDA__CU_MEMCPY_DTO_HV2_REQUEST__INIT;
            r[k].dst_host = c;
            r[k].src_device = src + o;
            r[k].byte_count = c;
            call[k] = (Sluice__Wire__Call)SLUICE__WIRE__CALL__INIT;
            call[k].per_thread_stream = pt;
            SL_FE_SET(cuMemcpyDtoH_v2, &call[k], &r[k]);
            calls[k] = &call[k];
            out[k] = (char *)dst + o;
            cap[k] = c;
            o += c;
        }
        CUresult rc = sl_fe_call_batch(calls, k, out, cap, got, rep);
        for (size_t i = 0; i < k; i++) {
            CUresult ri = rep[i] ? (CUresult)rep[i]->result : CUDA_ERROR_UNKNOWN;
            if (ri == CUDA_SUCCESS && got[i] != cap[i])
                ri = CUDA_ERROR_UNKNOWN;
            if (rc == CUDA_SUCCESS)
                rc = ri;
            sl_fe_reply_free(rep[i]);
            off += cap[i];
        }
        if (rc != CUDA_SUCCESS)
            return rc;
    } while (off < n);
    return CUDA_SUCCESS;
}

static CUresult dtod(bool pt, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, int async,
                     int unified)
{
    if (async && (not_device_memory(dst, n) || not_device_memory(src, n)))
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.per_thread_stream = pt;
    Sluice__Cuda__CuMemcpyDtoDV2Request r = SLUICE__CUDA__CU_MEMCPY_DTO_DV2_REQUEST__INIT;
    Sluice__Cuda__CuMemcpyDtoDAsyncV2Request ra =
        SLUICE__CUDA__CU_MEMCPY_DTO_DASYNC_V2_REQUEST__INIT;
    Sluice__Cuda__CuMemcpyRequest u = SLUICE__CUDA__CU_MEMCPY_REQUEST__INIT;
    Sluice__Cuda__CuMemcpyAsyncRequest ua = SLUICE__CUDA__CU_MEMCPY_ASYNC_REQUEST__INIT;
    if (unified && async) {
        ua.dst = dst, ua.src = src, ua.byte_count = n, ua.h_stream = (uint64_t)(uintptr_t)s;
        SL_FE_SET(cuMemcpyAsync, &call, &ua);
    } else if (unified) {
        u.dst = dst, u.src = src, u.byte_count = n;
        SL_FE_SET(cuMemcpy, &call, &u);
    } else if (async) {
        ra.dst_device = dst, ra.src_device = src, ra.byte_count = n;
        ra.h_stream = (uint64_t)(uintptr_t)s;
        SL_FE_SET(cuMemcpyDtoDAsync_v2, &call, &ra);
    } else {
        r.dst_device = dst, r.src_device = src, r.byte_count = n;
        SL_FE_SET(cuMemcpyDtoD_v2, &call, &r);
    }
    if (async)
        return sl_fe_enqueue_async(&call);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    return sl_fe_reply_result(rc, rep);
}

/* ------------------------------------------------------------------ 1D entry points */

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return htod(false, dstDevice, srcHost, ByteCount, NULL, 0);
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return htod(true, dstDevice, srcHost, ByteCount, NULL, 0);
}
CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return dtoh(false, dstHost, srcDevice, ByteCount);
}
CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return dtoh(true, dstHost, srcDevice, ByteCount);
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return dtod(false, dstDevice, srcDevice, ByteCount, NULL, 0, 0);
}
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return dtod(true, dstDevice, srcDevice, ByteCount, NULL, 0, 0);
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                              CUstream hStream)
{
    return htod(false, dstDevice, srcHost, ByteCount, hStream, 1);
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                   CUstream hStream)
{
    return htod(true, dstDevice, srcHost, ByteCount, hStream, 1);
}

/* A copy into guest memory completes before it returns (v1). Up to one piece it is one round
 * trip: the backend copies in the stream's order and synchronizes the stream before it
 * answers with the bytes (backend/copy.c), which is what a training loop's float(loss) does.
 * Larger ones synchronize the stream first, then copy in pieces. */
static CUresult dtoh_async_guest(bool pt, void *dst, CUdeviceptr src, size_t n, CUstream s);

static CUresult dtoh_async(bool pt, void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    uint64_t twin;
    if (dst && !managed(dst) && sl_fe_capturing(pt, s))
        return capture_1d(pt, s, 0, dst, src, 0, n);
    if (n && !dst)
        return CUDA_ERROR_INVALID_VALUE;
    if (managed(dst))
        return dtod(pt, (CUdeviceptr)(uintptr_t)dst, src, n, s, 1, 0);
    if (sl_fe_mapped_dptr(dst, n, &twin))
        return dtoh_mapped(pt, dst, twin, src, n, s, 1);
    return dtoh_async_guest(pt, dst, src, n, s);
}

/* A copy into mapped host memory (docs/remoting.md "Mapped host memory"): the device copies into
 * the range's twin, as the driver's DMA into the page-locked range would; the backend takes
 * the twin's bytes as the guest's once the stream is done (slMappedSettle); the ordinary copy
 * brings the same bytes into the guest's range, whose shadow takes them. Both sides then agree:
 * the bytes cross once, as bulk (lanes included), and no reply or slMappedWrite sends them
 * again. Async ones complete before they return, as every copy into guest memory does. */
static CUresult dtoh_mapped(bool pt, void *dst, uint64_t twin, CUdeviceptr src, size_t n,
                            CUstream s, int async)
{
    CUresult rc = dtod(pt, twin, src, n, s, 1, 0);
    sl_fe_rest_of_call(1); /* the program's changes went before the first part */
    if (rc == CUDA_SUCCESS) {
        Sluice__Cuda__SlMappedSettleRequest r = SLUICE__CUDA__SL_MAPPED_SETTLE_REQUEST__INIT;
        r.dptr = twin;
        r.length = n;
        r.h_stream = (uint64_t)(uintptr_t)s;
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        call.per_thread_stream = pt;
        SL_FE_SET(slMappedSettle, &call, &r);
        rc = sl_fe_enqueue_async(&call);
    }
    if (rc == CUDA_SUCCESS)
        rc = async ? dtoh_async_guest(pt, dst, src, n, s) : dtoh_guest(pt, dst, src, n);
    sl_fe_rest_of_call(0);
    if (rc == CUDA_SUCCESS)
        sl_fe_mapped_settled(dst, n);
    return rc;
}

static CUresult dtoh_async_guest(bool pt, void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    if (n > SL_FE_MAX_COPY_CHUNK) {
        CUresult rc = stream_sync(pt, s);
        return rc != CUDA_SUCCESS ? rc : dtoh_guest(pt, dst, src, n);
    }
    Sluice__Cuda__CuMemcpyDtoHAsyncV2Request r =
        SLUICE__CUDA__CU_MEMCPY_DTO_HASYNC_V2_REQUEST__INIT;
    r.dst_host = n;
    r.src_device = src;
    r.byte_count = n;
    r.h_stream = (uint64_t)(uintptr_t)s;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.per_thread_stream = pt;
    SL_FE_SET(cuMemcpyDtoHAsync_v2, &call, &r);
    Sluice__Wire__Reply *rep = NULL;
    size_t got = 0;
    CUresult rc = sl_fe_call_bulk(&call, NULL, 0, dst, n, &got, &rep);
    rc = sl_fe_reply_result(rc, rep);
    return rc == CUDA_SUCCESS && got != n ? CUDA_ERROR_UNKNOWN : rc;
}
CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream)
{
    return dtoh_async(false, dstHost, srcDevice, ByteCount, hStream);
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{
    return dtoh_async(true, dstHost, srcDevice, ByteCount, hStream);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream)
{
    return dtod(false, dstDevice, srcDevice, ByteCount, hStream, 1, 0);
}
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{
    return dtod(true, dstDevice, srcDevice, ByteCount, hStream, 1, 0);
}

/* Unified addresses: the frontend tells guest memory (its own ranges, or mapped here) from
 * device memory. */
static CUresult unified(bool pt, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, int async)
{
    int dh = sl_fe_is_host_pointer((void *)(uintptr_t)dst);
    int sh = sl_fe_is_host_pointer((void *)(uintptr_t)src);
    if (dh && sh) {
        CUresult rc = async ? stream_sync(pt, s) : CUDA_SUCCESS;
        if (rc == CUDA_SUCCESS && n)
            memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
        return rc;
    }
    if (sh)
        return htod(pt, dst, (const void *)(uintptr_t)src, n, s, async);
    if (dh)
        return async ? dtoh_async(pt, (void *)(uintptr_t)dst, src, n, s)
                     : dtoh(pt, (void *)(uintptr_t)dst, src, n);
    return dtod(pt, dst, src, n, s, async, 1);
}
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return unified(false, dst, src, ByteCount, NULL, 0);
}
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return unified(true, dst, src, ByteCount, NULL, 0);
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    return unified(false, dst, src, ByteCount, hStream, 1);
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    return unified(true, dst, src, ByteCount, hStream, 1);
}

/* ------------------------------------------------------------------ 2D / 3D */
struct side {
    CUmemorytype *type;
    const void **host;
    CUdeviceptr *dev;
    size_t *pitch, *height, *x, *y, *z;
};

/* A UNIFIED side names its address in the device field (cuda.h; cudaMemcpyDefault fills it so):
 * guest memory (pageable, page-locked, registered, mapped) becomes a HOST side with that address
 * as its host pointer, as the driver resolves it under unified addressing; anything else stays
 * UNIFIED and the backend's driver resolves it. Returns whether the side is in guest memory. */
static int resolve_side(struct side d)
{
    if (*d.type == CU_MEMORYTYPE_UNIFIED &&
        sl_fe_is_host_pointer((const void *)(uintptr_t)*d.dev)) {
        *d.type = CU_MEMORYTYPE_HOST;
        *d.host = (const void *)(uintptr_t)*d.dev;
        *d.dev = 0;
    }
    return *d.type == CU_MEMORYTYPE_HOST;
}

/* A host side's first byte of row y of slice z. */
static size_t host_offset(struct side d, size_t width, size_t height, size_t y, size_t z)
{
    size_t pitch = *d.pitch ? *d.pitch : width;
    size_t rows = d.height && *d.height ? *d.height : height;
    size_t z0 = d.z ? *d.z : 0;
    return ((z0 + z) * rows + *d.y + y) * pitch + *d.x;
}

/* Host to host rectangles stay in the guest: row by row, after the stream's earlier work when
 * the copy is async (the driver orders it in the stream). */
static CUresult host_rect(bool pt, struct side src, struct side dst, size_t width, size_t height,
                          size_t depth, CUstream s, int async)
{
    if (width && height && depth && (!*src.host || !*dst.host))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = async ? stream_sync(pt, s) : CUDA_SUCCESS;
    if (rc != CUDA_SUCCESS || !width)
        return rc;
    for (size_t z = 0; z < depth; z++)
        for (size_t y = 0; y < height; y++)
            memmove((uint8_t *)(uintptr_t)*dst.host + host_offset(dst, width, height, y, z),
                    (const uint8_t *)*src.host + host_offset(src, width, height, y, z), width);
    return CUDA_SUCCESS;
}

/* copy3d: every 2D copy is a 3D one of depth 1 (own struct, sent as the caller's pod). */
static CUresult copy_rect(bool pt, int three_d, void *pod, size_t podlen, struct side src,
                          struct side dst, size_t width, size_t height, size_t depth, CUstream s,
                          int async)
{
    int sh = resolve_side(src);
    int dh = resolve_side(dst);
    if (sh && dh)
        return host_rect(pt, src, dst, width, height, depth, s, async);
    size_t total = width * height * depth;
    uint8_t *tmp = NULL;
    uint8_t *hbase = NULL;
    struct side *h = sh ? &src : dh ? &dst : NULL;
    struct side hs = {0};
    size_t hpitch = 0, hheight = 0, hx = 0, hy = 0, hz = 0;
    if (h) {
        hbase = (uint8_t *)(uintptr_t)*h->host;
        if (!hbase && total)
            return CUDA_ERROR_INVALID_VALUE;
        hpitch = *h->pitch, hheight = h->height ? *h->height : 0;
        hx = *h->x, hy = *h->y, hz = h->z ? *h->z : 0;
        hs = (struct side){
            NULL, NULL, NULL, &hpitch, h->height ? &hheight : NULL, &hx, &hy, h->z ? &hz : NULL};
        *h->host = NULL;
        *h->pitch = width;
        if (h->height)
            *h->height = height;
        *h->x = *h->y = 0;
        if (h->z)
            *h->z = 0;
        tmp = total ? malloc(total) : NULL;
        if (total && !tmp)
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (sh) {
        for (size_t z = 0; z < depth; z++)
            for (size_t y = 0; y < height; y++)
                memcpy(tmp + (z * height + y) * width, hbase + host_offset(hs, width, height, y, z),
                       width);
    }
    CUresult rc = CUDA_SUCCESS;
    if (dh && async)
        rc = stream_sync(pt, s);
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.per_thread_stream = pt;
    Sluice__Cuda__CuMemcpy2DV2Request r2 = SLUICE__CUDA__CU_MEMCPY2_DV2_REQUEST__INIT;
    Sluice__Cuda__CuMemcpy3DV2Request r3 = SLUICE__CUDA__CU_MEMCPY3_DV2_REQUEST__INIT;
    Sluice__Cuda__CuMemcpy2DAsyncV2Request r2a = SLUICE__CUDA__CU_MEMCPY2_DASYNC_V2_REQUEST__INIT;
    Sluice__Cuda__CuMemcpy3DAsyncV2Request r3a = SLUICE__CUDA__CU_MEMCPY3_DASYNC_V2_REQUEST__INIT;
    ProtobufCBinaryData bd = {podlen, pod};
    int send_async = async && !dh;
    if (three_d && send_async) {
        r3a.p_copy = bd, r3a.h_stream = (uint64_t)(uintptr_t)s;
        SL_FE_SET(cuMemcpy3DAsync_v2, &call, &r3a);
    } else if (three_d) {
        r3.p_copy = bd;
        SL_FE_SET(cuMemcpy3D_v2, &call, &r3);
    } else if (send_async) {
        r2a.p_copy = bd, r2a.h_stream = (uint64_t)(uintptr_t)s;
        SL_FE_SET(cuMemcpy2DAsync_v2, &call, &r2a);
    } else {
        r2.p_copy = bd;
        SL_FE_SET(cuMemcpy2D_v2, &call, &r2);
    }
    struct iovec iov = {tmp, total};
    if (rc == CUDA_SUCCESS && send_async) {
        rc = sl_fe_enqueue_async_bulk(&call, &iov, sh && total ? 1 : 0);
    } else if (rc == CUDA_SUCCESS) {
        Sluice__Wire__Reply *rep = NULL;
        size_t got = 0;
        rc = sl_fe_call_bulk(&call, &iov, sh && total ? 1 : 0, dh ? tmp : NULL, dh ? total : 0,
                             &got, &rep);
        rc = sl_fe_reply_result(rc, rep);
        if (rc == CUDA_SUCCESS && dh && got != total)
            rc = CUDA_ERROR_UNKNOWN;
    }
    if (rc == CUDA_SUCCESS && dh) {
        for (size_t z = 0; z < depth; z++)
            for (size_t y = 0; y < height; y++)
                memcpy(hbase + host_offset(hs, width, height, y, z), tmp + (z * height + y) * width,
                       width);
    }
    free(tmp);
    return rc;
}

/* A side of a 2D/3D copy in guest memory (HOST, or UNIFIED at a guest address). */
static int guest_side(CUmemorytype t, CUdeviceptr dev)
{
    return t == CU_MEMORYTYPE_HOST ||
           (t == CU_MEMORYTYPE_UNIFIED && sl_fe_is_host_pointer((const void *)(uintptr_t)dev) &&
            !managed((const void *)(uintptr_t)dev));
}

/* An async 2D/3D copy with one side in guest memory on a capturing stream: a memcpy node. */
static int capture_rect(bool pt, const CUDA_MEMCPY3D *c, CUstream s, int async)
{
    int sh = guest_side(c->srcMemoryType, c->srcDevice);
    int dh = guest_side(c->dstMemoryType, c->dstDevice);
    return async && sh != dh && sl_fe_capturing(pt, s);
}

static CUresult copy2d(bool pt, const CUDA_MEMCPY2D *p, CUstream s, int async)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (async) {
        CUDA_MEMCPY3D c3;
        memset(&c3, 0, sizeof c3);
        c3.srcXInBytes = p->srcXInBytes, c3.srcY = p->srcY;
        c3.srcMemoryType = p->srcMemoryType, c3.srcHost = p->srcHost;
        c3.srcDevice = p->srcDevice, c3.srcArray = p->srcArray, c3.srcPitch = p->srcPitch;
        c3.dstXInBytes = p->dstXInBytes, c3.dstY = p->dstY;
        c3.dstMemoryType = p->dstMemoryType, c3.dstHost = p->dstHost;
        c3.dstDevice = p->dstDevice, c3.dstArray = p->dstArray, c3.dstPitch = p->dstPitch;
        c3.WidthInBytes = p->WidthInBytes, c3.Height = p->Height, c3.Depth = 1;
        if (capture_rect(pt, &c3, s, async))
            return sl_fe_capture_copy(pt, s, &c3);
    }
    CUDA_MEMCPY2D c = *p;
    struct side src = {&c.srcMemoryType, &c.srcHost, &c.srcDevice, &c.srcPitch, NULL,
                       &c.srcXInBytes,   &c.srcY,    NULL};
    struct side dst = {&c.dstMemoryType,
                       (const void **)&c.dstHost,
                       &c.dstDevice,
                       &c.dstPitch,
                       NULL,
                       &c.dstXInBytes,
                       &c.dstY,
                       NULL};
    return copy_rect(pt, 0, &c, sizeof c, src, dst, c.WidthInBytes, c.Height, 1, s, async);
}

static CUresult copy3d(bool pt, const CUDA_MEMCPY3D *p, CUstream s, int async)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (capture_rect(pt, p, s, async))
        return sl_fe_capture_copy(pt, s, p);
    CUDA_MEMCPY3D c = *p;
    struct side src = {&c.srcMemoryType, &c.srcHost,     &c.srcDevice, &c.srcPitch,
                       &c.srcHeight,     &c.srcXInBytes, &c.srcY,      &c.srcZ};
    struct side dst = {&c.dstMemoryType, (const void **)&c.dstHost,
                       &c.dstDevice,     &c.dstPitch,
                       &c.dstHeight,     &c.dstXInBytes,
                       &c.dstY,          &c.dstZ};
    return copy_rect(pt, 1, &c, sizeof c, src, dst, c.WidthInBytes, c.Height, c.Depth ? c.Depth : 1,
                     s, async);
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    return copy2d(false, pCopy, NULL, 0);
}
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    return copy2d(true, pCopy, NULL, 0);
}
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
    return copy2d(false, pCopy, NULL, 0);
}
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    return copy2d(true, pCopy, NULL, 0);
}
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    return copy2d(false, pCopy, hStream, 1);
}
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    return copy2d(true, pCopy, hStream, 1);
}
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
    return copy3d(false, pCopy, NULL, 0);
}
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy)
{
    return copy3d(true, pCopy, NULL, 0);
}
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    return copy3d(false, pCopy, hStream, 1);
}
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    return copy3d(true, pCopy, hStream, 1);
}
