/* Rectangle and array copies. cuMemcpy2D_v2 / cuMemcpy3D_v2 (and the Async ones): the pod as the
 * frontend rewrote it (a host side is a contiguous block of WidthInBytes * Height (* Depth)
 * bytes: the call's bulk for a source, the reply's bulk for a destination); device sides are
 * checked against the session's memory, array sides translated. cuMemcpyHtoA_v2 /
 * cuMemcpyAtoH_v2: the array id is translated, the host side is the call's bulk / the reply's
 * bulk. A synchronous one with a host side behind busy work waits off the call path, queued as
 * its async form (copy_wait.c). */
#include <stdlib.h>
#include <string.h>

#include "api/copy_rect.h"
#include "api/copy_wait.h"
#include "bounds.h"
#include "session/ranges.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

/* ---------------------------------------------------------------- queued forms (copy_wait.h) */

/* A rectangle's host side is its destination's when that is host memory, else its source's. */
static CUresult q_2d(struct sl_be_call *c, void *u, void *host, CUstream st)
{
    CUDA_MEMCPY2D *p = u;
    if (p->dstMemoryType == CU_MEMORYTYPE_HOST)
        p->dstHost = host;
    else
        p->srcHost = host;
    return BE_PTSZ(c->api, cuMemcpy2DAsync_v2, c->call)(p, st);
}

static CUresult q_3d(struct sl_be_call *c, void *u, void *host, CUstream st)
{
    CUDA_MEMCPY3D *p = u;
    if (p->dstMemoryType == CU_MEMORYTYPE_HOST)
        p->dstHost = host;
    else
        p->srcHost = host;
    return BE_PTSZ(c->api, cuMemcpy3DAsync_v2, c->call)(p, st);
}

struct qarray { /* an array copy: the array, the offset in it, the length */
    CUarray a;
    size_t off, n;
};

static CUresult q_atoh(struct sl_be_call *c, void *u, void *host, CUstream st)
{
    const struct qarray *q = u;
    return BE_PTSZ(c->api, cuMemcpyAtoHAsync_v2, c->call)(host, q->a, q->off, q->n, st);
}

static CUresult q_htoa(struct sl_be_call *c, void *u, void *host, CUstream st)
{
    const struct qarray *q = u;
    return BE_PTSZ(c->api, cuMemcpyHtoAAsync_v2, c->call)(q->a, q->off, host, q->n, st);
}

/* ---------------------------------------------------------------- 2D / 3D copies */

/* out: the host buffer (destination) the caller sends back as bulk. */
static CUresult side_in(struct sl_be_call *c, struct be_rect_side d, int is_src, size_t w, size_t h,
                        size_t depth, uint8_t **out)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    uint64_t total;
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
    default: /* UNIFIED: a device address here (guest memory was made HOST by the frontend) */
        return be_rect_side_check(s, reply, d, w, h, depth, is_src, "a rectangle copy");
    }
}

CUresult be_rect_side_check(sl_be_session *s, Sluice__Wire__Reply *reply, struct be_rect_side d,
                            size_t w, size_t h, size_t depth, int is_src, const char *what)
{
    switch (*d.type) {
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED: {
        uint64_t p = *d.pitch ? *d.pitch : w, hr = d.height ? *d.height : 0, start, span;
        if (!w || !h || !depth)
            return CUDA_SUCCESS; /* nothing is touched; the driver decides */
        if (!be_rect_extent(*d.dev, *d.x, *d.y, d.z ? *d.z : 0, p, hr, w, h, depth, &start, &span))
            return CUDA_ERROR_INVALID_VALUE;
        CUresult rc = sl_be_devptr_check(s, start, span);
        if (rc != CUDA_SUCCESS)
            sl_be_detail(reply, "%s of %s outside the session's memory",
                         is_src ? "source" : "destination", what);
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
        sl_be_detail(reply, "memory type %d in %s", (int)*d.type, what);
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The part of a 2D/3D copy both shapes share: both sides checked (a host source is the call's
 * bulk, a host destination a buffer *out for the reply), the stream of an async copy, and no
 * capture of a copy that touches guest memory. */
static CUresult copy_prepare(struct sl_be_call *c, struct be_rect_side src, struct be_rect_side dst,
                             size_t w, size_t h, size_t d, int async, uint64_t stream, CUstream *st,
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

/* A synchronous rectangle copy with one host side waits off the call path behind busy work as
 * the 1D ones do: queued as its async form (queue: q_2d, q_3d) from the call's bulk, or into
 * page-locked memory. 0: the caller copies as before. */
static int rect_queued(struct sl_be_call *c, be_copy_queue queue, void *pod, int async_fn,
                       CUmemorytype src, CUmemorytype dst, size_t n, uint8_t **out, CUresult *rc)
{
    if (!async_fn || (src == CU_MEMORYTYPE_HOST) == (dst == CU_MEMORYTYPE_HOST))
        return 0;
    if (src == CU_MEMORYTYPE_HOST)
        return be_htod_queued(c, n, queue, pod, rc);
    return be_dtoh_queued(c, queue, pod, n, out, rc);
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
    struct be_rect_side src = {
        &p.srcMemoryType, &p.srcHost, &p.srcDevice, &p.srcArray, &p.srcXInBytes,
        &p.srcY,          NULL,       &p.srcPitch,  NULL};
    struct be_rect_side dst = {&p.dstMemoryType,
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
        } else if (!rect_queued(c, q_2d, &p, BE_PTSZ(api, cuMemcpy2DAsync_v2, call) != NULL,
                                p.srcMemoryType, p.dstMemoryType, p.WidthInBytes * p.Height, &out,
                                &rc)) {
            CUresult (*fn)(const CUDA_MEMCPY2D *) =
                call->per_thread_stream && api->cuMemcpy2D_v2_ptds ? api->cuMemcpy2D_v2_ptds
                                                                   : api->cuMemcpy2D_v2;
            rc = fn ? fn(&p) : CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    return be_dtoh_answer(c, out, c->out_len, rc);
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
    struct be_rect_side src = {&p.srcMemoryType, &p.srcHost,     &p.srcDevice,
                               &p.srcArray,      &p.srcXInBytes, &p.srcY,
                               &p.srcZ,          &p.srcPitch,    &p.srcHeight};
    struct be_rect_side dst = {&p.dstMemoryType, (const void **)&p.dstHost,
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
        } else if (!rect_queued(c, q_3d, &p, BE_PTSZ(api, cuMemcpy3DAsync_v2, call) != NULL,
                                p.srcMemoryType, p.dstMemoryType,
                                p.WidthInBytes * p.Height * p.Depth, &out, &rc)) {
            CUresult (*fn)(const CUDA_MEMCPY3D *) =
                call->per_thread_stream && api->cuMemcpy3D_v2_ptds ? api->cuMemcpy3D_v2_ptds
                                                                   : api->cuMemcpy3D_v2;
            rc = fn ? fn(&p) : CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    return be_dtoh_answer(c, out, c->out_len, rc);
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
    struct qarray q = {a, (size_t)rq->dst_offset, (size_t)rq->byte_count};
    if (BE_PTSZ(api, cuMemcpyHtoAAsync_v2, call) && be_htod_queued(c, q.n, q_htoa, &q, &rc))
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
    struct qarray q = {a, (size_t)rq->src_offset, (size_t)rq->byte_count};
    if (!(BE_PTSZ(api, cuMemcpyAtoHAsync_v2, call) &&
          be_dtoh_queued(c, q_atoh, &q, q.n, &buf, &rc)))
        rc = fn(buf, a, q.off, q.n);
    return be_dtoh_answer(c, buf, rq->byte_count, rc);
}
