/* Small synchronous device-to-host copies (backend/api/copy_small.c, session/staging.c) on the
 * driver test double (tests/double, loaded as the backend loads a driver), the calls run through
 * be_run_call as the session thread runs them. A few of the double's functions are wrapped to
 * count what the backend asked for (and, where a test says so, to answer an error as a GPU
 * would): the size cut-over (up to 64 KiB through the page-locked staging buffer, above it the
 * driver's own copy into the reply's buffer), both calls (cuMemcpyDtoH_v2 on the legacy or the
 * per-thread stream, cuMemcpyDtoHAsync_v2 on a stream), the staging buffer's life (one per
 * context, made at the first small copy, freed when the context is reset or destroyed and at
 * the session's end), the wait (the stream polled, then synchronized), an error of the work
 * before the copy coming back as the copy's answer, and the fallbacks (a capture the stream
 * cannot be queried under, a driver that refuses page-locked memory), and copies behind busy work
 * leaving the call path (1D and rectangles). TEST DOUBLE: nothing here is a GPU result. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/outbox.h"
#include "session/bulk_pool.h"
#include "session/contexts.h"
#include "session/devices.h"
#include "session/run.h"
#include "session/session.h"
#include "session/staging.h"
#include "session/state.h"
#include "session/waits.h"
#include "sluice/backend_dispatch.h"

static struct sl_driver_api real; /* the double's functions */
static struct sl_driver_api api;  /* what the session calls: real, some wrapped */
static struct be_devices devs;

static struct {
    int host_alloc, free_host, async_copy, sync_copy, query, sync;
    void *last_async_dst;
    CUstream last_async_stream;
    int ptsz_async;
    CUresult sync_answer;      /* once, instead of the double's (0: the double's) */
    CUresult capturing_answer; /* cuStreamIsCapturing's (0: the double's) */
    int refuse_host_alloc;
} n;

static CUresult w_host_alloc(void **p, size_t size, unsigned flags)
{
    n.host_alloc++;
    return n.refuse_host_alloc ? CUDA_ERROR_OUT_OF_MEMORY : real.cuMemHostAlloc(p, size, flags);
}
static CUresult w_free_host(void *p)
{
    n.free_host++;
    return real.cuMemFreeHost(p);
}
static CUresult w_async(void *d, CUdeviceptr s, size_t len, CUstream st)
{
    n.async_copy++;
    n.last_async_dst = d;
    n.last_async_stream = st;
    return real.cuMemcpyDtoHAsync_v2(d, s, len, st);
}
static CUresult w_async_ptsz(void *d, CUdeviceptr s, size_t len, CUstream st)
{
    n.ptsz_async++;
    return w_async(d, s, len, st);
}
static CUresult w_sync_copy(void *d, CUdeviceptr s, size_t len)
{
    n.sync_copy++;
    return real.cuMemcpyDtoH_v2(d, s, len);
}
static CUresult w_query(CUstream st)
{
    n.query++;
    return real.cuStreamQuery(st);
}
static CUresult w_sync(CUstream st)
{
    n.sync++;
    CUresult rc = real.cuStreamSynchronize(st);
    if (n.sync_answer) {
        rc = n.sync_answer;
        n.sync_answer = CUDA_SUCCESS;
    }
    return rc;
}
static CUresult w_capturing(CUstream st, CUstreamCaptureStatus *cs)
{
    return n.capturing_answer ? n.capturing_answer : real.cuStreamIsCapturing(st, cs);
}

static int setup(void **state)
{
    (void)state;
    void *dl = dlopen(SLUICE_DOUBLE_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!dl || sl_driver_api_load(&real, dl) == 0)
        return -1;
    sl_error e;
    if (be_devices_load(&real, &devs, &e) != SL_OK)
        return -1;
    api = real;
    api.cuMemHostAlloc = w_host_alloc;
    api.cuMemFreeHost = w_free_host;
    api.cuMemcpyDtoHAsync_v2 = w_async;
    api.cuMemcpyDtoHAsync_v2_ptsz = w_async_ptsz;
    api.cuMemcpyDtoH_v2 = w_sync_copy;
    api.cuMemcpyDtoH_v2_ptds = w_sync_copy;
    api.cuStreamQuery = api.cuStreamQuery_ptsz = w_query;
    api.cuStreamSynchronize = api.cuStreamSynchronize_ptsz = w_sync;
    api.cuStreamIsCapturing = api.cuStreamIsCapturing_ptsz = w_capturing;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    be_devices_free(&devs);
    return 0;
}

/* One call through be_run_call; the reply's bulk (a device-to-host copy's bytes) lands in out. */
static CUresult run(sl_be_session *s, Sluice__Wire__Call *call, const void *in, size_t in_len,
                    void *out, size_t *out_len, Sluice__Wire__Reply *keep)
{
    static uint64_t seq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    call->seq = ++seq;
    struct sl_be_call c = {
        .s = s, .api = s->api, .call = call, .reply = &reply, .in = in, .in_len = in ? in_len : 0};
    CUresult rc = be_run_call(&c);
    if (out_len)
        *out_len = c.out_len;
    if (c.out && out)
        memcpy(out, c.out, c.out_len);
    be_bulk_free(c.out); /* a slot (session/bulk_pool.c) or malloc'd */
    if (keep)
        *keep = reply;
    else
        sl_be_reply_clear(&reply);
    return rc;
}

static CUdeviceptr alloc(sl_be_session *s, uint64_t ctx, size_t size)
{
    Sluice__Cuda__CuMemAllocV2Request rq = SLUICE__CUDA__CU_MEM_ALLOC_V2_REQUEST__INIT;
    rq.bytesize = size;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuMemAlloc_v2;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEM_ALLOC_V2;
    call.cu_mem_alloc_v2 = &rq;
    call.context = ctx;
    Sluice__Wire__Reply reply;
    assert_int_equal(run(s, &call, NULL, 0, NULL, NULL, &reply), CUDA_SUCCESS);
    CUdeviceptr p = reply.cu_mem_alloc_v2->dptr;
    sl_be_reply_clear(&reply);
    return p;
}

static void htod(sl_be_session *s, uint64_t ctx, CUdeviceptr dst, const void *src, size_t len)
{
    Sluice__Cuda__CuMemcpyHtoDV2Request rq = SLUICE__CUDA__CU_MEMCPY_HTO_DV2_REQUEST__INIT;
    rq.dst_device = dst;
    rq.src_host = len;
    rq.byte_count = len;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuMemcpyHtoD_v2;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEMCPY_HTO_D_V2;
    call.cu_memcpy_hto_d_v2 = &rq;
    call.context = ctx;
    assert_int_equal(run(s, &call, src, len, NULL, NULL, NULL), CUDA_SUCCESS);
}

static CUresult dtoh(sl_be_session *s, uint64_t ctx, int per_thread, void *dst, CUdeviceptr src,
                     size_t len)
{
    Sluice__Cuda__CuMemcpyDtoHV2Request rq = SLUICE__CUDA__CU_MEMCPY_DTO_HV2_REQUEST__INIT;
    rq.dst_host = len;
    rq.src_device = src;
    rq.byte_count = len;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuMemcpyDtoH_v2;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEMCPY_DTO_H_V2;
    call.cu_memcpy_dto_h_v2 = &rq;
    call.context = ctx;
    call.per_thread_stream = per_thread;
    size_t got = 0;
    CUresult rc = run(s, &call, NULL, 0, dst, &got, NULL);
    if (rc == CUDA_SUCCESS)
        assert_int_equal(got, len);
    return rc;
}

static CUresult dtoh_async(sl_be_session *s, uint64_t ctx, uint64_t stream, void *dst,
                           CUdeviceptr src, size_t len)
{
    Sluice__Cuda__CuMemcpyDtoHAsyncV2Request rq =
        SLUICE__CUDA__CU_MEMCPY_DTO_HASYNC_V2_REQUEST__INIT;
    rq.dst_host = len;
    rq.src_device = src;
    rq.byte_count = len;
    rq.h_stream = stream;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuMemcpyDtoHAsync_v2;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEMCPY_DTO_HASYNC_V2;
    call.cu_memcpy_dto_hasync_v2 = &rq;
    call.context = ctx;
    size_t got = 0;
    CUresult rc = run(s, &call, NULL, 0, dst, &got, NULL);
    if (rc == CUDA_SUCCESS)
        assert_int_equal(got, len);
    return rc;
}

static sl_be_session *session(void)
{
    memset(&n, 0, sizeof n);
    sl_be_session *s = be_session_new(1, &api, &devs);
    assert_non_null(s);
    return s;
}

#define BIG ((size_t)256 << 10)
static uint8_t pattern[BIG], back[BIG];

static void fill(void)
{
    for (size_t i = 0; i < BIG; i++)
        pattern[i] = (uint8_t)(i * 131 + 7);
}

/* Up to 64 KiB by way of the staging buffer, above it the driver's own copy; the bytes are the
 * device's either way, and the buffer is made once. */
static void test_cut_over(void **state)
{
    (void)state;
    sl_be_session *s = session();
    uint64_t ctx = s->primary_ids[0];
    CUdeviceptr d = alloc(s, ctx, BIG);
    fill();
    htod(s, ctx, d, pattern, BIG);
    struct be_ctx *cx = be_ctx_find(s, ctx);

    size_t sizes[] = {1, 4, 4096, BE_STAGE_BYTES};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        memset(back, 0, sizeof back);
        assert_int_equal(dtoh(s, ctx, 0, back, d + 3, sizes[i]), CUDA_SUCCESS);
        assert_memory_equal(back, pattern + 3, sizes[i]);
        assert_int_equal(n.async_copy, (int)i + 1);
        assert_ptr_equal(n.last_async_dst, cx->stage);
        assert_null(n.last_async_stream); /* the legacy default stream (the non-ptsz call) */
    }
    assert_int_equal(n.sync_copy, 0);
    assert_int_equal(n.host_alloc, 1);
    assert_non_null(cx->stage);
    /* every wait ended in the stream's synchronization (the driver's answer, printf flushed) */
    assert_int_equal(n.sync, 4);
    assert_true(n.query >= 4);

    /* one byte more: the driver's synchronous copy, as before */
    memset(back, 0, sizeof back);
    assert_int_equal(dtoh(s, ctx, 0, back, d, BE_STAGE_BYTES + 1), CUDA_SUCCESS);
    assert_memory_equal(back, pattern, BE_STAGE_BYTES + 1);
    assert_int_equal(n.sync_copy, 1);
    assert_int_equal(n.async_copy, 4);
    assert_int_equal(dtoh(s, ctx, 0, back, d, BIG), CUDA_SUCCESS);
    assert_memory_equal(back, pattern, BIG);
    assert_int_equal(n.sync_copy, 2);

    /* the per-thread default stream (cuMemcpyDtoH_v2_ptds): the _ptsz copy on it */
    memset(back, 0, sizeof back);
    assert_int_equal(dtoh(s, ctx, 1, back, d + 8, 8), CUDA_SUCCESS);
    assert_memory_equal(back, pattern + 8, 8);
    assert_int_equal(n.ptsz_async, 1);
    assert_null(n.last_async_stream);

    /* a range outside the session's memory is refused before anything is copied */
    int before = n.async_copy;
    assert_int_equal(dtoh(s, ctx, 0, back, d + BIG - 2, 4), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(n.async_copy, before);

    be_session_free(s);
    assert_int_equal(n.free_host, 1); /* the session's end freed it */
}

/* cuMemcpyDtoHAsync_v2 (.item(): a copy on the program's stream, completed before the reply):
 * small on the call's own stream through the staging buffer, large into the reply's buffer. */
static void test_async_call(void **state)
{
    (void)state;
    sl_be_session *s = session();
    uint64_t ctx = s->primary_ids[0];
    CUdeviceptr d = alloc(s, ctx, BIG);
    fill();
    htod(s, ctx, d, pattern, BIG);
    CUstream st = NULL;
    assert_int_equal(real.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    uint64_t sid;
    assert_int_equal(sl_be_handle_put(s, SL_H_STREAM, st, 0, &sid), CUDA_SUCCESS);
    struct be_ctx *cx = be_ctx_find(s, ctx);

    memset(back, 0, sizeof back);
    assert_int_equal(dtoh_async(s, ctx, sid, back, d + 1, 4), CUDA_SUCCESS);
    assert_memory_equal(back, pattern + 1, 4);
    assert_ptr_equal(n.last_async_dst, cx->stage);
    assert_ptr_equal(n.last_async_stream, st);
    assert_int_equal(n.sync, 1);

    memset(back, 0, sizeof back);
    assert_int_equal(dtoh_async(s, ctx, sid, back, d, BIG), CUDA_SUCCESS);
    assert_memory_equal(back, pattern, BIG);
    assert_true(n.last_async_dst != cx->stage); /* the reply's own buffer, as before */
    assert_int_equal(n.async_copy, 2);
    assert_int_equal(n.host_alloc, 1);
    be_session_free(s);
    assert_int_equal(n.free_host, 1);
}

/* One buffer per context: a created context gets its own, destroying it frees it, resetting
 * the primary context frees the primary's and the next copy makes a new one. */
static void test_staging_life(void **state)
{
    (void)state;
    sl_be_session *s = session();
    uint64_t primary = s->primary_ids[0];
    CUdeviceptr d = alloc(s, primary, 4096);
    fill();
    htod(s, primary, d, pattern, 4096);
    assert_int_equal(dtoh(s, primary, 0, back, d, 16), CUDA_SUCCESS);
    assert_int_equal(n.host_alloc, 1);

    Sluice__Cuda__CuCtxCreateV4Request cq = SLUICE__CUDA__CU_CTX_CREATE_V4_REQUEST__INIT;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuCtxCreate_v4;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_CTX_CREATE_V4;
    call.cu_ctx_create_v4 = &cq;
    call.context = primary;
    Sluice__Wire__Reply reply;
    assert_int_equal(run(s, &call, NULL, 0, NULL, NULL, &reply), CUDA_SUCCESS);
    uint64_t made = reply.cu_ctx_create_v4->pctx;
    sl_be_reply_clear(&reply);
    CUdeviceptr d2 = alloc(s, made, 4096);
    htod(s, made, d2, pattern + 100, 4096);
    memset(back, 0, sizeof back);
    assert_int_equal(dtoh(s, made, 0, back, d2, 64), CUDA_SUCCESS);
    assert_memory_equal(back, pattern + 100, 64);
    assert_int_equal(n.host_alloc, 2);
    assert_true(be_ctx_find(s, made)->stage != be_ctx_find(s, primary)->stage);

    Sluice__Cuda__CuCtxDestroyV2Request dq = SLUICE__CUDA__CU_CTX_DESTROY_V2_REQUEST__INIT;
    dq.ctx = made;
    call = (Sluice__Wire__Call)SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuCtxDestroy_v2;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_CTX_DESTROY_V2;
    call.cu_ctx_destroy_v2 = &dq;
    call.context = primary;
    assert_int_equal(run(s, &call, NULL, 0, NULL, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(n.free_host, 1);

    /* the primary context reset: its buffer goes, the next copy (after a new allocation: the
     * reset took the memory too) makes another */
    Sluice__Cuda__CuDevicePrimaryCtxResetV2Request rq =
        SLUICE__CUDA__CU_DEVICE_PRIMARY_CTX_RESET_V2_REQUEST__INIT;
    call = (Sluice__Wire__Call)SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuDevicePrimaryCtxReset_v2;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_DEVICE_PRIMARY_CTX_RESET_V2;
    call.cu_device_primary_ctx_reset_v2 = &rq;
    assert_int_equal(run(s, &call, NULL, 0, NULL, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(n.free_host, 2);
    assert_null(be_ctx_find(s, primary)->stage);
    d = alloc(s, primary, 4096);
    htod(s, primary, d, pattern + 7, 4096);
    memset(back, 0, sizeof back);
    assert_int_equal(dtoh(s, primary, 0, back, d, 32), CUDA_SUCCESS);
    assert_memory_equal(back, pattern + 7, 32);
    assert_int_equal(n.host_alloc, 3);
    be_session_free(s);
    assert_int_equal(n.free_host, 3);
}

/* The work before the copy failed (a kernel's illegal address, seen at the synchronization):
 * the copy answers that error, as the driver's synchronous copy does, with no bytes; its buffer
 * is not used again (the failed copy might still write it), and the next copy gets a new one. */
static void test_error_of_earlier_work(void **state)
{
    (void)state;
    sl_be_session *s = session();
    uint64_t ctx = s->primary_ids[0];
    CUdeviceptr d = alloc(s, ctx, 4096);
    fill();
    htod(s, ctx, d, pattern, 4096);
    n.sync_answer = CUDA_ERROR_ILLEGAL_ADDRESS;
    size_t got = 99;
    Sluice__Cuda__CuMemcpyDtoHV2Request rq = SLUICE__CUDA__CU_MEMCPY_DTO_HV2_REQUEST__INIT;
    rq.dst_host = rq.byte_count = 4;
    rq.src_device = d;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuMemcpyDtoH_v2;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEMCPY_DTO_H_V2;
    call.cu_memcpy_dto_h_v2 = &rq;
    call.context = ctx;
    assert_int_equal(run(s, &call, NULL, 0, back, &got, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(got, 0);
    assert_int_equal(n.free_host, 1);
    /* sticky: the session answers it for every later call of the context, as the driver does */
    assert_int_equal(be_ctx_find(s, ctx)->sticky, CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(dtoh(s, ctx, 0, back, d, 4), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(n.async_copy, 1);
    be_session_free(s);
}

/* The wait polls the stream while the copy is not done, then synchronizes once: the double's
 * work takes simulated time (2 us + 20 GB/s per copy or memset, on the stream's clock), so a
 * copy behind 4 ms of memsets on the legacy stream is not done at first. */
static void test_wait_polls(void **state)
{
    (void)state;
    sl_be_session *s = session();
    s->spin_ns = 2000u * 1000000u; /* longer than the work: it ends while polling */
    uint64_t ctx = s->primary_ids[0];
    CUdeviceptr d = alloc(s, ctx, BE_STAGE_BYTES);
    fill();
    htod(s, ctx, d, pattern, BE_STAGE_BYTES);
    CUdeviceptr big = alloc(s, ctx, (size_t)16 << 20);
    for (int i = 0; i < 5; i++) /* 5 x 839 us on the legacy stream's clock */
        assert_int_equal(real.cuMemsetD8_v2(big, 0, (size_t)16 << 20), CUDA_SUCCESS);
    n.query = n.sync = 0;
    assert_int_equal(dtoh(s, ctx, 0, back, d, BE_STAGE_BYTES), CUDA_SUCCESS);
    assert_memory_equal(back, pattern, BE_STAGE_BYTES);
    assert_true(n.query > 1); /* NOT_READY at first */
    assert_int_equal(n.sync, 1);
    s->spin_ns = 0; /* no polling: one query, then the driver's wait */
    n.query = n.sync = 0;
    assert_int_equal(dtoh(s, ctx, 0, back, d, BE_STAGE_BYTES), CUDA_SUCCESS);
    assert_memory_equal(back, pattern, BE_STAGE_BYTES);
    assert_int_equal(n.query, 1);
    assert_int_equal(n.sync, 1);
    be_session_free(s);
}

/* The driver's own copy where the staging path cannot answer as it would: a capture the
 * stream cannot be queried under (the legacy stream while a blocking stream captures:
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), and a driver that refuses page-locked memory (asked
 * once per context). */
static void test_fallbacks(void **state)
{
    (void)state;
    sl_be_session *s = session();
    uint64_t ctx = s->primary_ids[0];
    CUdeviceptr d = alloc(s, ctx, 4096);
    fill();
    htod(s, ctx, d, pattern, 4096);
    n.capturing_answer = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    assert_int_equal(dtoh(s, ctx, 0, back, d, 4), CUDA_SUCCESS);
    assert_int_equal(n.sync_copy, 1);
    assert_int_equal(n.async_copy, 0);
    assert_int_equal(n.host_alloc, 0);
    n.capturing_answer = CUDA_SUCCESS;

    n.refuse_host_alloc = 1;
    for (int i = 0; i < 3; i++) {
        memset(back, 0, sizeof back);
        assert_int_equal(dtoh(s, ctx, 0, back, d + 4, 4), CUDA_SUCCESS);
        assert_memory_equal(back, pattern + 4, 4);
    }
    assert_int_equal(n.host_alloc, 1);
    assert_int_equal(n.sync_copy, 4);
    assert_int_equal(n.async_copy, 0);
    be_session_free(s);
    assert_int_equal(n.free_host, 0);
}

static int sunk, sunk_right; /* replies the outbox took; those with the copied bytes */
static void sink(int close_it, sl_code code, const char *why, uint8_t *msg, size_t len,
                 uint8_t *bulk, size_t blen)
{
    (void)close_it, (void)code, (void)why, (void)len;
    sunk++;
    sunk_right += bulk && blen == 8 && memcmp(bulk, pattern + 16, 8) == 0;
    free(msg);
    be_bulk_free(bulk);
}

/* A session whose legacy stream is kept busy (about 34 ms on its clock), with waiter threads
 * as in a worker and the outbox's replies going to sink; *ctx its context, *d 4 KiB of the
 * pattern on the device. */
static sl_be_session *busy_session(uint64_t *ctx, CUdeviceptr *d)
{
    sl_be_session *s = session();
    s->spin_ns = 0;
    *ctx = s->primary_ids[0];
    *d = alloc(s, *ctx, 4096);
    fill();
    htod(s, *ctx, *d, pattern, 4096);
    s->waits = be_waits_new(s, BE_MAX_WAITERS, 0); /* from here on, as in a worker */
    assert_non_null(s->waits);
    be_outbox_set_sink(sink);
    sunk = sunk_right = 0;
    CUdeviceptr big = alloc(s, *ctx, (size_t)16 << 20);
    for (int i = 0; i < 40; i++)
        assert_int_equal(real.cuMemsetD8_v2(big, 0, (size_t)16 << 20), CUDA_SUCCESS);
    return s;
}

/* A copy behind work still running (the legacy stream kept busy, no polling) leaves the call
 * path: the call answers at once with its reply deferred, the staging buffer lent to the wait
 * (the context's next copy makes another), and the reply with the bytes comes from the waits;
 * past BE_MAX_LENT_STAGES buffers out the copies wait inline, so that a guest pipelining copies
 * cannot pin host memory without bound. The first buffer back after the last lent one made
 * way is freed, as the context has one again. */
static void test_busy_copy_off_path(void **state)
{
    (void)state;
    uint64_t ctx;
    CUdeviceptr d;
    sl_be_session *s = busy_session(&ctx, &d);
    n.host_alloc = n.sync = 0;
    const int copies = (int)BE_MAX_LENT_STAGES + 4;
    for (int i = 0; i < copies; i++) {
        Sluice__Cuda__CuMemcpyDtoHV2Request rq = SLUICE__CUDA__CU_MEMCPY_DTO_HV2_REQUEST__INIT;
        rq.dst_host = 8;
        rq.src_device = d + 16;
        rq.byte_count = 8;
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        call.call_id = SL_CALL_cuMemcpyDtoH_v2;
        call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEMCPY_DTO_H_V2;
        call.cu_memcpy_dto_h_v2 = &rq;
        call.context = ctx;
        Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
        call.seq = 1000 + (uint64_t)i;
        struct sl_be_call c = {.s = s, .api = s->api, .call = &call, .reply = &reply};
        assert_int_equal(be_run_call(&c), CUDA_SUCCESS);
        assert_int_equal(c.deferred, i < (int)BE_MAX_LENT_STAGES);
        if (!c.deferred) { /* waited inline: the bytes are in the call's reply */
            assert_int_equal(c.out_len, 8);
            assert_memory_equal(c.out, pattern + 16, 8);
        }
        be_bulk_free(c.out); /* a slot (session/bulk_pool.c) or malloc'd */
        sl_be_reply_clear(&reply);
    }
    assert_int_equal(n.host_alloc, (int)BE_MAX_LENT_STAGES + 1);
    assert_int_equal(n.sync, 4);
    assert_int_equal(be_waits_outstanding(s->waits), BE_MAX_LENT_STAGES);
    be_waits_drain(s->waits);
    assert_int_equal(sunk, (int)BE_MAX_LENT_STAGES);
    assert_int_equal(sunk_right, (int)BE_MAX_LENT_STAGES);
    assert_int_equal(n.free_host, (int)BE_MAX_LENT_STAGES);
    be_session_free(s);
    be_outbox_set_sink(NULL);
    assert_int_equal(n.free_host, (int)BE_MAX_LENT_STAGES + 1);
}

/* One cuMemcpy2D_v2 of 8 bytes between dev and the host (to_host, else from in), the pod as
 * the frontend sends it (the host side packed); *deferred: its wait left the call path. */
static CUresult rect(sl_be_session *s, uint64_t ctx, CUdeviceptr dev, int to_host, const void *in,
                     uint64_t seq, int *deferred)
{
    CUDA_MEMCPY2D p;
    memset(&p, 0, sizeof p);
    p.WidthInBytes = 8;
    p.Height = 1;
    if (to_host) {
        p.srcMemoryType = CU_MEMORYTYPE_DEVICE, p.srcDevice = dev, p.srcPitch = 8;
        p.dstMemoryType = CU_MEMORYTYPE_HOST, p.dstPitch = 8;
    } else {
        p.srcMemoryType = CU_MEMORYTYPE_HOST, p.srcPitch = 8;
        p.dstMemoryType = CU_MEMORYTYPE_DEVICE, p.dstDevice = dev, p.dstPitch = 8;
    }
    Sluice__Cuda__CuMemcpy2DV2Request rq = SLUICE__CUDA__CU_MEMCPY2_DV2_REQUEST__INIT;
    rq.p_copy.data = (uint8_t *)&p;
    rq.p_copy.len = sizeof p;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuMemcpy2D_v2;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEMCPY2_D_V2;
    call.cu_memcpy2_d_v2 = &rq;
    call.context = ctx;
    call.seq = seq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    struct sl_be_call c = {
        .s = s, .api = s->api, .call = &call, .reply = &reply, .in = in, .in_len = in ? 8 : 0};
    CUresult rc = be_run_call(&c);
    *deferred = c.deferred;
    be_bulk_free(c.out);
    sl_be_reply_clear(&reply);
    return rc;
}

/* A rectangle copy (cuMemcpy2D_v2, the pod as the frontend sends it: the host side packed) behind
 * busy work leaves the call path as the 1D copies do, both ways: to the host through the staging
 * buffer (its reply with the bytes comes from the waits), to the device from the call's bytes
 * (the bytes on the device once the wait is done). */
static void test_busy_rect_off_path(void **state)
{
    (void)state;
    uint64_t ctx;
    CUdeviceptr d;
    sl_be_session *s = busy_session(&ctx, &d);
    int deferred = 0;
    assert_int_equal(rect(s, ctx, d + 16, 1, NULL, 2000, &deferred), CUDA_SUCCESS);
    assert_true(deferred);
    static const uint8_t mark[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(rect(s, ctx, d + 64, 0, mark, 2001, &deferred), CUDA_SUCCESS);
    assert_true(deferred);
    assert_int_equal(be_waits_outstanding(s->waits), 2);
    be_waits_drain(s->waits);
    assert_int_equal(sunk, 2);
    assert_int_equal(sunk_right, 1); /* the first reply with the device's 8 bytes */
    be_waits_free(s->waits);
    s->waits = NULL; /* every wait inline again: the check's own copy answers at once */
    uint8_t got[8];
    assert_int_equal(dtoh(s, ctx, 0, got, d + 64, 8), CUDA_SUCCESS);
    assert_memory_equal(got, mark, 8);
    be_session_free(s);
    be_outbox_set_sink(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_over),           cmocka_unit_test(test_async_call),
        cmocka_unit_test(test_staging_life),       cmocka_unit_test(test_error_of_earlier_work),
        cmocka_unit_test(test_wait_polls),         cmocka_unit_test(test_fallbacks),
        cmocka_unit_test(test_busy_copy_off_path), cmocka_unit_test(test_busy_rect_off_path),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
