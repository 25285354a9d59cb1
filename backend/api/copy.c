/* Copies and memsets. Host -> device: the call's bulk (taken by the channel thread into a job
 * buffer, at most 64 MiB per call) must be exactly ByteCount bytes. Device -> host: the worker
 * copies into a buffer that becomes the reply's bulk (up to 64 KiB by way of the context's
 * page-locked staging buffer: copy_small.c); a synchronous copy behind busy work waits off
 * the call path (copy_wait.c). Every device range (both sides of a
 * device-to-device copy, the whole extent of a memset) is checked against the session's
 * allocation table first. Rectangle and array copies: copy_rect.c. */
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
    /* a copy over 64 KiB is made into a page-locked slot (session/bulk_pool.c), at the
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

/* ---------------------------------------------------------------- queued forms (copy_wait.h) */

struct q1d { /* a 1D copy: its device side and length */
    CUdeviceptr dev;
    size_t n;
};

static CUresult q_dtoh(struct sl_be_call *c, void *u, void *host, CUstream st)
{
    const struct q1d *q = u;
    return BE_PTSZ(c->api, cuMemcpyDtoHAsync_v2, c->call)(host, q->dev, q->n, st);
}

static CUresult q_htod(struct sl_be_call *c, void *u, void *host, CUstream st)
{
    const struct q1d *q = u;
    return BE_PTSZ(c->api, cuMemcpyHtoDAsync_v2, c->call)(q->dev, host, q->n, st);
}

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
    struct q1d q = {rq->dst_device, rq->byte_count};
    if (BE_PTSZ(api, cuMemcpyHtoDAsync_v2, call) && be_htod_queued(c, q.n, q_htod, &q, &rc))
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
    struct q1d q = {rq->src_device, rq->byte_count};
    int queued = BE_PTSZ(api, cuMemcpyDtoHAsync_v2, call) != NULL;
    if (!(queued && be_small_dtoh(c, buf, q.n, NULL, q_dtoh, &q, &rc)) &&
        !(queued && be_dtoh_slot(c, buf, q.n, NULL, q_dtoh, &q, &rc))) {
        CUresult (*fn)(void *, CUdeviceptr, size_t) = PT(api, cuMemcpyDtoH_v2, call);
        rc = fn ? fn(buf, rq->src_device, rq->byte_count) : CUDA_ERROR_NOT_SUPPORTED;
    }
    return be_dtoh_answer(c, buf, rq->byte_count, rc);
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
    struct q1d q = {rq->src_device, rq->byte_count};
    int queued = BE_PTSZ(api, cuMemcpyDtoHAsync_v2, call) != NULL;
    if (!(queued && be_small_dtoh(c, buf, q.n, st, q_dtoh, &q, &rc)) &&
        !(queued && be_dtoh_slot(c, buf, q.n, st, q_dtoh, &q, &rc))) {
        CUresult (*fn)(void *, CUdeviceptr, size_t, CUstream) = PZ(api, cuMemcpyDtoHAsync_v2, call);
        CUresult (*sync)(CUstream) = PZ(api, cuStreamSynchronize, call);
        rc = fn ? fn(buf, rq->src_device, rq->byte_count, st) : CUDA_ERROR_NOT_SUPPORTED;
        if (rc == CUDA_SUCCESS)
            rc = sync ? sync(st) : CUDA_ERROR_NOT_SUPPORTED;
    }
    return be_dtoh_answer(c, buf, rq->byte_count, rc);
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
