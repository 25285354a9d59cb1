/* Copies and memsets. Host -> device: the call's bulk (taken by the channel thread into a job
 * buffer, at most 64 MiB per call) must be exactly ByteCount bytes. Device -> host: the worker
 * copies into a buffer that becomes the reply's bulk (up to 64 KiB by way of the context's
 * page-locked staging buffer: copy_small.c); a synchronous copy behind busy work waits off
 * the call path (copy_wait.c). Every device range (both sides of a
 * device-to-device copy, the whole extent of a memset) is checked against the session's
 * allocation table first.
 *
 * cuMemcpy2D_v2 / cuMemcpy3D_v2 (and the Async ones): the pod as the frontend rewrote it (a host
 * side is a contiguous block of WidthInBytes * Height (* Depth) bytes: the call's bulk for a
 * source, the reply's bulk for a destination); device sides are checked against the session's
 * memory, array sides translated. cuMemcpyHtoA_v2 / cuMemcpyAtoH_v2: the array id is
 * translated, the host side is the call's bulk / the reply's bulk. */
#include <stdlib.h>
#include <string.h>

#include "api/copy_small.h"
#include "api/copy_wait.h"
#include "bounds.h"
#include "session/bulk_pool.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

static CUresult range(sl_be_session *s, Sluice__Wire__Reply *reply, uint64_t ptr, uint64_t len,
                      const char *what)
{
    CUresult rc = sl_be_devptr_check(s, ptr, len);
    if (rc != CUDA_SUCCESS)
        sl_be_detail(reply, "%s 0x%llx+%llu is not memory of this session", what,
                     (unsigned long long)ptr, (unsigned long long)len);
    return rc;
}

static CUresult take_bulk(struct sl_be_call *c, uint64_t n)
{
    Sluice__Wire__Reply *reply = c->reply;
    if (n > BE_MAX_BULK_PER_CALL) {
        sl_be_detail(reply, "copy of %llu bytes over the 64 MiB per call limit",
                     (unsigned long long)n);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (c->in_len != n || (n && !c->in)) {
        sl_be_detail(reply, "bulk of %llu bytes for a copy of %llu", (unsigned long long)c->in_len,
                     (unsigned long long)n);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult out_bulk(struct sl_be_call *c, uint64_t n, uint8_t **buf)
{
    Sluice__Wire__Reply *reply = c->reply;
    if (n > BE_MAX_BULK_PER_CALL) {
        sl_be_detail(reply, "copy of %llu bytes over the 64 MiB per call limit",
                     (unsigned long long)n);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (c->in_len) {
        sl_be_detail(reply, "unexpected bulk with a device-to-host copy");
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* a piece of 1 MiB or more is copied into a page-locked slot (session/bulk_pool.c), at the
     * bus's rate; the channel or the lanes encrypt it from there and give it back */
    *buf = be_pool_take(c->s->pool, (size_t)n);
    if (*buf)
        be_pool_pin(c->s->pool, *buf);
    else
        *buf = malloc(n ? n : 1);
    return *buf ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

#define PT(api, name, call)                                                                        \
    ((call)->per_thread_stream && (api)->name##_ptds ? (api)->name##_ptds : (api)->name)
#define PZ(api, name, call)                                                                        \
    ((call)->per_thread_stream && (api)->name##_ptsz ? (api)->name##_ptsz : (api)->name)

CUresult be_h_cuMemcpyHtoD_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemcpyHtoDV2Request *rq = call->cu_memcpy_hto_d_v2;
    CUresult rc = take_bulk(c, rq->byte_count);
    if (rc == CUDA_SUCCESS)
        rc = range(s, reply, rq->dst_device, rq->byte_count, "destination");
    if (rc != CUDA_SUCCESS)
        return rc;
    /* queued, then waited for off the call path while the stream is busy (copy_wait.c) */
    if (be_htod_queued(c, rq->dst_device, rq->byte_count, &rc))
        return rc;
    CUresult (*fn)(CUdeviceptr, const void *, size_t) = PT(api, cuMemcpyHtoD_v2, call);
    return fn ? fn(rq->dst_device, c->in, rq->byte_count) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult be_h_cuMemcpyHtoDAsync_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemcpyHtoDAsyncV2Request *rq = call->cu_memcpy_hto_dasync_v2;
    CUstream st;
    CUresult rc = take_bulk(c, rq->byte_count);
    if (rc == CUDA_SUCCESS)
        rc = range(s, reply, rq->dst_device, rq->byte_count, "destination");
    if (rc == CUDA_SUCCESS)
        rc = be_stream(s, rq->h_stream, &st);
    if (rc == CUDA_SUCCESS)
        rc = be_refuse_if_capturing(s, reply, st, call->per_thread_stream,
                                    "a copy from guest memory");
    if (rc != CUDA_SUCCESS)
        return rc;
    /* the source is freed or reused after this call: pageable memory the driver has staged when
     * the call returns, or a page-locked slot the pool holds until the copy is done */
    CUresult (*fn)(CUdeviceptr, const void *, size_t, CUstream) =
        PZ(api, cuMemcpyHtoDAsync_v2, call);
    CUresult (*sync)(CUstream) = PZ(api, cuStreamSynchronize, call);
    rc = fn ? fn(rq->dst_device, c->in, rq->byte_count, st) : CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_SUCCESS && be_pool_hold(s->pool, c->in, st) != 0)
        rc = sync ? sync(st) : CUDA_ERROR_NOT_SUPPORTED; /* no event: the copy ends here */
    return rc;
}

/* The reply's bytes, unless the copy failed or its wait went off the call path (the slot is
 * the wait's then; a small copy's buffer is not needed). */
static CUresult dtoh_answer(struct sl_be_call *c, uint8_t *buf, uint64_t n, CUresult rc)
{
    if (c->deferred && !be_bulk_is_slot(buf))
        be_bulk_free(buf);
    if (c->deferred)
        return CUDA_SUCCESS;
    if (rc != CUDA_SUCCESS) {
        be_bulk_free(buf);
        return rc;
    }
    c->out = buf;
    c->out_len = n;
    return CUDA_SUCCESS;
}

CUresult be_h_cuMemcpyDtoH_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemcpyDtoHV2Request *rq = call->cu_memcpy_dto_h_v2;
    uint8_t *buf = NULL;
    CUresult rc = range(s, reply, rq->src_device, rq->byte_count, "source");
    if (rc == CUDA_SUCCESS)
        rc = out_bulk(c, rq->byte_count, &buf);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* up to 64 KiB through the context's page-locked staging buffer, larger pieces into their
     * page-locked slot; either waits off the call path while the stream is busy (copy_wait.c) */
    if (!be_small_dtoh(c, buf, rq->src_device, rq->byte_count, NULL, &rc) &&
        !be_dtoh_slot(c, buf, rq->src_device, rq->byte_count, NULL, &rc)) {
        CUresult (*fn)(void *, CUdeviceptr, size_t) = PT(api, cuMemcpyDtoH_v2, call);
        rc = fn ? fn(buf, rq->src_device, rq->byte_count) : CUDA_ERROR_NOT_SUPPORTED;
    }
    return dtoh_answer(c, buf, rq->byte_count, rc);
}

/* Completes before the reply (docs/remoting.md): the data travels with the reply. */
CUresult be_h_cuMemcpyDtoHAsync_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemcpyDtoHAsyncV2Request *rq = call->cu_memcpy_dto_hasync_v2;
    uint8_t *buf = NULL;
    CUstream st;
    CUresult rc = range(s, reply, rq->src_device, rq->byte_count, "source");
    if (rc == CUDA_SUCCESS)
        rc = be_stream(s, rq->h_stream, &st);
    if (rc == CUDA_SUCCESS)
        rc =
            be_refuse_if_capturing(s, reply, st, call->per_thread_stream, "a copy to guest memory");
    if (rc == CUDA_SUCCESS)
        rc = out_bulk(c, rq->byte_count, &buf);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!be_small_dtoh(c, buf, rq->src_device, rq->byte_count, st, &rc) &&
        !be_dtoh_slot(c, buf, rq->src_device, rq->byte_count, st, &rc)) {
        CUresult (*fn)(void *, CUdeviceptr, size_t, CUstream) = PZ(api, cuMemcpyDtoHAsync_v2, call);
        CUresult (*sync)(CUstream) = PZ(api, cuStreamSynchronize, call);
        rc = fn ? fn(buf, rq->src_device, rq->byte_count, st) : CUDA_ERROR_NOT_SUPPORTED;
        if (rc == CUDA_SUCCESS)
            rc = sync ? sync(st) : CUDA_ERROR_NOT_SUPPORTED;
    }
    return dtoh_answer(c, buf, rq->byte_count, rc);
}

static CUresult dtod_check(struct sl_be_call *c, uint64_t dst, uint64_t src, uint64_t n)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    if (c->in_len) {
        sl_be_detail(reply, "unexpected bulk with a device-to-device copy");
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = range(s, reply, dst, n, "destination");
    return rc == CUDA_SUCCESS ? range(s, reply, src, n, "source") : rc;
}

CUresult be_h_cuMemcpyDtoD_v2(struct sl_be_call *c)
{
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    const Sluice__Cuda__CuMemcpyDtoDV2Request *rq = call->cu_memcpy_dto_d_v2;
    CUresult rc = dtod_check(c, rq->dst_device, rq->src_device, rq->byte_count);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUresult (*fn)(CUdeviceptr, CUdeviceptr, size_t) = PT(api, cuMemcpyDtoD_v2, call);
    return fn ? fn(rq->dst_device, rq->src_device, rq->byte_count) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult be_h_cuMemcpy(struct sl_be_call *c)
{
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    const Sluice__Cuda__CuMemcpyRequest *rq = call->cu_memcpy;
    CUresult rc = dtod_check(c, rq->dst, rq->src, rq->byte_count);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUresult (*fn)(CUdeviceptr, CUdeviceptr, size_t) = PT(api, cuMemcpy, call);
    return fn ? fn(rq->dst, rq->src, rq->byte_count) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult be_h_cuMemcpyDtoDAsync_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    const Sluice__Cuda__CuMemcpyDtoDAsyncV2Request *rq = call->cu_memcpy_dto_dasync_v2;
    CUstream st;
    CUresult rc = dtod_check(c, rq->dst_device, rq->src_device, rq->byte_count);
    if (rc == CUDA_SUCCESS)
        rc = be_stream(s, rq->h_stream, &st);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUresult (*fn)(CUdeviceptr, CUdeviceptr, size_t, CUstream) =
        PZ(api, cuMemcpyDtoDAsync_v2, call);
    return fn ? fn(rq->dst_device, rq->src_device, rq->byte_count, st) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult be_h_cuMemcpyAsync(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    const Sluice__Cuda__CuMemcpyAsyncRequest *rq = call->cu_memcpy_async;
    CUstream st;
    CUresult rc = dtod_check(c, rq->dst, rq->src, rq->byte_count);
    if (rc == CUDA_SUCCESS)
        rc = be_stream(s, rq->h_stream, &st);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUresult (*fn)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = PZ(api, cuMemcpyAsync, call);
    return fn ? fn(rq->dst, rq->src, rq->byte_count, st) : CUDA_ERROR_NOT_SUPPORTED;
}

/* ---------------------------------------------------------------- memsets: the whole extent is
 * checked here, then the generated handler runs (it only checks the start pointer). */

static int mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

static CUresult memset_1d(sl_be_session *s, Sluice__Wire__Reply *reply, uint64_t dst, uint64_t n,
                          unsigned elem)
{
    uint64_t bytes;
    if (!mul_ok(n, elem, &bytes))
        return CUDA_ERROR_INVALID_VALUE;
    return range(s, reply, dst, bytes, "memset destination");
}

static CUresult memset_2d(sl_be_session *s, Sluice__Wire__Reply *reply, uint64_t dst,
                          uint64_t pitch, uint64_t width, uint64_t height, unsigned elem)
{
    uint64_t row, rows, bytes;
    if (height == 0 || width == 0)
        return range(s, reply, dst, 0, "memset destination");
    if (!mul_ok(width, elem, &row) || !mul_ok(pitch, height - 1, &rows) ||
        __builtin_add_overflow(rows, row, &bytes))
        return CUDA_ERROR_INVALID_VALUE;
    return range(s, reply, dst, bytes, "memset destination");
}

#define MEMSET1(name, field, elem)                                                                 \
    CUresult be_h_##name(struct sl_be_call *c)                                                     \
    {                                                                                              \
        const Sluice__Wire__Call *call = c->call;                                                  \
        CUresult rc = memset_1d(c->s, c->reply, call->field->dst_device, call->field->n, elem);    \
        return rc == CUDA_SUCCESS ? sl_be_gen_##name(c) : rc;                                      \
    }
#define MEMSET2(name, field, elem)                                                                 \
    CUresult be_h_##name(struct sl_be_call *c)                                                     \
    {                                                                                              \
        const Sluice__Wire__Call *call = c->call;                                                  \
        CUresult rc = memset_2d(c->s, c->reply, call->field->dst_device, call->field->dst_pitch,   \
                                call->field->width, call->field->height, elem);                    \
        return rc == CUDA_SUCCESS ? sl_be_gen_##name(c) : rc;                                      \
    }

MEMSET1(cuMemsetD8_v2, cu_memset_d8_v2, 1)
MEMSET1(cuMemsetD16_v2, cu_memset_d16_v2, 2)
MEMSET1(cuMemsetD32_v2, cu_memset_d32_v2, 4)
MEMSET1(cuMemsetD8Async, cu_memset_d8_async, 1)
MEMSET1(cuMemsetD16Async, cu_memset_d16_async, 2)
MEMSET1(cuMemsetD32Async, cu_memset_d32_async, 4)
MEMSET2(cuMemsetD2D8_v2, cu_memset_d2_d8_v2, 1)
MEMSET2(cuMemsetD2D16_v2, cu_memset_d2_d16_v2, 2)
MEMSET2(cuMemsetD2D32_v2, cu_memset_d2_d32_v2, 4)
MEMSET2(cuMemsetD2D8Async, cu_memset_d2_d8_async, 1)
MEMSET2(cuMemsetD2D16Async, cu_memset_d2_d16_async, 2)
MEMSET2(cuMemsetD2D32Async, cu_memset_d2_d32_async, 4)

/* ---------------------------------------------------------------- 2D / 3D copies */

struct side {
    CUmemorytype *type;
    const void **host;
    CUdeviceptr *dev;
    CUarray *arr;
    size_t *x, *y, *z, *pitch, *height; /* z, height NULL for 2D */
};

/* out: the host buffer (destination) the caller sends back as bulk. */
static CUresult side_in(struct sl_be_call *c, struct side d, int is_src, size_t w, size_t h,
                        size_t depth, uint8_t **out)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    uint64_t total, span, start;
    switch (*d.type) {
    case CU_MEMORYTYPE_HOST:
        if (*d.host || *d.pitch != w || *d.x || *d.y || (d.z && *d.z) ||
            (d.height && *d.height != h) || __builtin_mul_overflow((uint64_t)w, h, &total) ||
            __builtin_mul_overflow(total, depth, &total) || total > BE_MAX_BULK_PER_CALL) {
            sl_be_detail(reply, "host side of a rectangle copy not as the frontend sends it");
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (is_src) {
            if (c->in_len != total) {
                sl_be_detail(reply, "copy of %llu bytes with %llu bulk bytes",
                             (unsigned long long)total, (unsigned long long)c->in_len);
                return CUDA_ERROR_INVALID_VALUE;
            }
            *d.host = c->in;
        } else {
            if (*out)
                return CUDA_ERROR_INVALID_VALUE;
            *out = malloc(total ? total : 1);
            if (!*out)
                return CUDA_ERROR_OUT_OF_MEMORY;
            *d.host = *out;
            c->out_len = total;
        }
        return CUDA_SUCCESS;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED: {
        /* UNIFIED: a device address here (guest memory was made HOST by the frontend) */
        uint64_t p = *d.pitch ? *d.pitch : w, hr = d.height ? *d.height : 0;
        uint64_t rows = 0, z = d.z ? *d.z : 0;
        if (!w || !h || !depth)
            return CUDA_SUCCESS; /* nothing is touched; the driver decides */
        /* first byte: ((z * hr + y) * p + x); extent: ((depth - 1) * hr + h - 1) * p + w */
        if (__builtin_mul_overflow(z, hr, &rows) || __builtin_add_overflow(rows, *d.y, &rows) ||
            __builtin_mul_overflow(rows, p, &start) ||
            __builtin_add_overflow(start, *d.x, &start) ||
            __builtin_add_overflow(start, (uint64_t)*d.dev, &start) ||
            __builtin_mul_overflow((uint64_t)(depth - 1), hr, &span) ||
            __builtin_add_overflow(span, (uint64_t)(h - 1), &span) ||
            __builtin_mul_overflow(span, p, &span) || __builtin_add_overflow(span, w, &span))
            return CUDA_ERROR_INVALID_VALUE;
        CUresult rc = sl_be_devptr_check(s, start, span);
        if (rc != CUDA_SUCCESS)
            sl_be_detail(reply, "%s of a rectangle copy outside the session's memory",
                         is_src ? "source" : "destination");
        return rc;
    }
    case CU_MEMORYTYPE_ARRAY: {
        void *n = NULL;
        CUresult rc = *d.arr ? sl_be_handle_get(s, SL_H_ARRAY, (uint64_t)(uintptr_t)*d.arr, &n)
                             : CUDA_ERROR_INVALID_HANDLE;
        *d.arr = (CUarray)n;
        return rc;
    }
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The part of a 2D/3D copy both shapes share: both sides checked (a host source is the call's
 * bulk, a host destination a buffer *out for the reply), the stream of an async copy, and no
 * capture of a copy that touches guest memory. */
static CUresult copy_prepare(struct sl_be_call *c, struct side src, struct side dst, size_t w,
                             size_t h, size_t d, int async, uint64_t stream, CUstream *st,
                             uint8_t **out)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    c->out_len = 0;
    CUresult rc = side_in(c, src, 1, w, h, d, out);
    if (rc == CUDA_SUCCESS && *src.type != CU_MEMORYTYPE_HOST && c->in_len)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = side_in(c, dst, 0, w, h, d, out);
    *st = NULL;
    if (rc == CUDA_SUCCESS && async)
        rc = be_stream(s, stream, st);
    if (rc == CUDA_SUCCESS && async &&
        (*src.type == CU_MEMORYTYPE_HOST || *dst.type == CU_MEMORYTYPE_HOST))
        rc = be_refuse_if_capturing(s, reply, *st, call->per_thread_stream,
                                    "a copy from or to guest memory");
    return rc;
}

/* The reply's bulk is the host destination's bytes, if any. */
static CUresult copy_done(struct sl_be_call *c, CUresult rc, uint8_t *out)
{
    if (rc != CUDA_SUCCESS || !out) {
        free(out);
        c->out_len = 0;
        return rc;
    }
    c->out = out;
    return CUDA_SUCCESS;
}

static CUresult copy2d(struct sl_be_call *c, const ProtobufCBinaryData *pod, int async,
                       uint64_t stream)
{
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    CUDA_MEMCPY2D p;
    if (pod->len != sizeof p) {
        sl_be_detail(c->reply, "CUDA_MEMCPY2D of %zu bytes", pod->len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&p, pod->data, sizeof p);
    uint8_t *out = NULL;
    struct side src = {&p.srcMemoryType, &p.srcHost, &p.srcDevice, &p.srcArray, &p.srcXInBytes,
                       &p.srcY,          NULL,       &p.srcPitch,  NULL};
    struct side dst = {&p.dstMemoryType,
                       (const void **)&p.dstHost,
                       &p.dstDevice,
                       &p.dstArray,
                       &p.dstXInBytes,
                       &p.dstY,
                       NULL,
                       &p.dstPitch,
                       NULL};
    CUstream st;
    CUresult rc = copy_prepare(c, src, dst, p.WidthInBytes, p.Height, 1, async, stream, &st, &out);
    if (rc == CUDA_SUCCESS) {
        if (async) {
            CUresult (*fn)(const CUDA_MEMCPY2D *, CUstream) =
                call->per_thread_stream && api->cuMemcpy2DAsync_v2_ptsz
                    ? api->cuMemcpy2DAsync_v2_ptsz
                    : api->cuMemcpy2DAsync_v2;
            rc = fn ? fn(&p, st) : CUDA_ERROR_NOT_SUPPORTED;
        } else {
            CUresult (*fn)(const CUDA_MEMCPY2D *) =
                call->per_thread_stream && api->cuMemcpy2D_v2_ptds ? api->cuMemcpy2D_v2_ptds
                                                                   : api->cuMemcpy2D_v2;
            rc = fn ? fn(&p) : CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    return copy_done(c, rc, out);
}

static CUresult copy3d(struct sl_be_call *c, const ProtobufCBinaryData *pod, int async,
                       uint64_t stream)
{
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    CUDA_MEMCPY3D p;
    if (pod->len != sizeof p) {
        sl_be_detail(c->reply, "CUDA_MEMCPY3D of %zu bytes", pod->len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&p, pod->data, sizeof p);
    p.reserved0 = p.reserved1 = NULL;
    uint8_t *out = NULL;
    struct side src = {&p.srcMemoryType, &p.srcHost, &p.srcDevice, &p.srcArray, &p.srcXInBytes,
                       &p.srcY,          &p.srcZ,    &p.srcPitch,  &p.srcHeight};
    struct side dst = {&p.dstMemoryType, (const void **)&p.dstHost,
                       &p.dstDevice,     &p.dstArray,
                       &p.dstXInBytes,   &p.dstY,
                       &p.dstZ,          &p.dstPitch,
                       &p.dstHeight};
    CUstream st;
    CUresult rc =
        copy_prepare(c, src, dst, p.WidthInBytes, p.Height, p.Depth, async, stream, &st, &out);
    if (rc == CUDA_SUCCESS) {
        if (async) {
            CUresult (*fn)(const CUDA_MEMCPY3D *, CUstream) =
                call->per_thread_stream && api->cuMemcpy3DAsync_v2_ptsz
                    ? api->cuMemcpy3DAsync_v2_ptsz
                    : api->cuMemcpy3DAsync_v2;
            rc = fn ? fn(&p, st) : CUDA_ERROR_NOT_SUPPORTED;
        } else {
            CUresult (*fn)(const CUDA_MEMCPY3D *) =
                call->per_thread_stream && api->cuMemcpy3D_v2_ptds ? api->cuMemcpy3D_v2_ptds
                                                                   : api->cuMemcpy3D_v2;
            rc = fn ? fn(&p) : CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    return copy_done(c, rc, out);
}

CUresult be_h_cuMemcpy2D_v2(struct sl_be_call *c)
{
    const Sluice__Wire__Call *call = c->call;
    return copy2d(c, &call->cu_memcpy2_d_v2->p_copy, 0, 0);
}

CUresult be_h_cuMemcpy2DAsync_v2(struct sl_be_call *c)
{
    const Sluice__Wire__Call *call = c->call;
    return copy2d(c, &call->cu_memcpy2_dasync_v2->p_copy, 1, call->cu_memcpy2_dasync_v2->h_stream);
}

CUresult be_h_cuMemcpy3D_v2(struct sl_be_call *c)
{
    const Sluice__Wire__Call *call = c->call;
    return copy3d(c, &call->cu_memcpy3_d_v2->p_copy, 0, 0);
}

CUresult be_h_cuMemcpy3DAsync_v2(struct sl_be_call *c)
{
    const Sluice__Wire__Call *call = c->call;
    return copy3d(c, &call->cu_memcpy3_dasync_v2->p_copy, 1, call->cu_memcpy3_dasync_v2->h_stream);
}

static CUresult array_of(sl_be_session *s, uint64_t id, CUarray *a)
{
    void *n = NULL;
    CUresult rc = id ? sl_be_handle_get(s, SL_H_ARRAY, id, &n) : CUDA_ERROR_INVALID_HANDLE;
    *a = (CUarray)n;
    return rc;
}

CUresult be_h_cuMemcpyHtoA_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemcpyHtoAV2Request *rq = call->cu_memcpy_hto_a_v2;
    if (rq->src_host != rq->byte_count || c->in_len != rq->byte_count) {
        sl_be_detail(reply, "copy of %llu bytes with %llu bulk bytes",
                     (unsigned long long)rq->byte_count, (unsigned long long)c->in_len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUarray a;
    CUresult rc = array_of(s, rq->dst_array, &a);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUresult (*fn)(CUarray, size_t, const void *, size_t) =
        call->per_thread_stream && api->cuMemcpyHtoA_v2_ptds ? api->cuMemcpyHtoA_v2_ptds
                                                             : api->cuMemcpyHtoA_v2;
    return fn ? fn(a, (size_t)rq->dst_offset, c->in, (size_t)rq->byte_count)
              : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult be_h_cuMemcpyAtoH_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemcpyAtoHV2Request *rq = call->cu_memcpy_ato_h_v2;
    if (rq->dst_host != rq->byte_count || rq->byte_count > BE_MAX_BULK_PER_CALL || c->in_len) {
        sl_be_detail(reply, "array to host copy of %llu bytes", (unsigned long long)rq->byte_count);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUarray a;
    CUresult rc = array_of(s, rq->src_array, &a);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUresult (*fn)(void *, CUarray, size_t, size_t) =
        call->per_thread_stream && api->cuMemcpyAtoH_v2_ptds ? api->cuMemcpyAtoH_v2_ptds
                                                             : api->cuMemcpyAtoH_v2;
    if (!fn)
        return CUDA_ERROR_NOT_SUPPORTED;
    uint8_t *buf = malloc(rq->byte_count ? rq->byte_count : 1);
    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = fn(buf, a, (size_t)rq->src_offset, (size_t)rq->byte_count);
    if (rc != CUDA_SUCCESS) {
        free(buf);
        return rc;
    }
    c->out = buf;
    c->out_len = rq->byte_count;
    return CUDA_SUCCESS;
}
