/* The call layer (frontend/call/) against an in-process fake transport that plays the
 * backend: it decodes every ClientMessage the frontend sends and answers each synchronous call
 * with canned ServerMessages. Covers coalescing, deferred errors, printf output, host callbacks
 * before the synchronous reply, and the slFence back-pressure. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/image_kernels.h"
#include "call/allocs.h"
#include "call/frame.h"
#include "call/image_hints.h"
#include "call/memo.h"
#include "call/env.h"
#include "call/rpc.h"
#include "call/rpc_session.h"
#include "call/rpc_stats.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

/* ------------------------------------------------------------------ the fake backend */
#define QMAX 16
static struct {
    uint8_t *q[QMAX];
    size_t qlen[QMAX];
    int qn, qhead;
    uint8_t *cur;
    /* what the frontend sent */
    int frames, calls, callback_done;
    uint64_t last_callback_done;
    uint32_t call_ids[8192];
    uint64_t bulk_bytes;
    /* script for the next synchronous reply */
    int32_t next_result;
    uint64_t next_failed_seq;
    const char *next_stdout;
    int callback_first; /* send HostCallback{id 99, fn = last cuLaunchHostFunc id} first */
    uint64_t host_fn_id;
    /* frames of async calls only: the thread that sent the last one, and a delay for them */
    pthread_t async_sender;
    unsigned async_send_us;
    uint64_t last_seq;
    int seq_out_of_order;
    int bulk_mismatch;        /* a frame whose calls announced other bulk than followed it */
    atomic_int in_async_send; /* a frame of async calls is being sent */
    int first_bulk_byte[2];   /* of the last cuMemcpyHtoD_v2 and cuMemcpyHtoDAsync_v2 */
    int frame_calls[64];      /* calls per frame */
    /* the reply to the next call of hold_call waits until release is set */
    uint32_t hold_call;
    uint8_t *held;
    size_t held_len;
    atomic_int holding, release;
    int nowait_frees; /* cuMemFree_v2 sent without waiting */
    uint64_t kernel;  /* what cuLibraryGetKernel answers */
    int give_layout;  /* ...with its parameter layout (a pointer and an int) */
    int watch_asked;  /* calls that asked Call.watch */
    uint64_t watched; /* the seq of the last reply that said Reply.watched */
} F;

static void queue_server(Sluice__Wire__ServerMessage *m)
{
    uint8_t *buf;
    size_t len;
    sl_error e;
    assert_int_equal(sl_wire_encode_server(m, NULL, &buf, &len, &e), SL_OK);
    if (F.hold_call && m->replies && m->replies->n_replies &&
        m->replies->replies[0]->call_id == F.hold_call && !atomic_load(&F.holding)) {
        F.held = buf;
        F.held_len = len;
        atomic_store(&F.holding, 1);
        return;
    }
    assert_true(F.qn < QMAX);
    F.q[F.qn] = buf;
    F.qlen[F.qn++] = len;
}

static void answer(const Sluice__Wire__Call *c)
{
    if (F.callback_first) {
        Sluice__Wire__HostCallback hc = SLUICE__WIRE__HOST_CALLBACK__INIT;
        hc.id = 99;
        hc.fn = F.host_fn_id;
        Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
        m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_CALLBACK;
        m.callback = &hc;
        queue_server(&m);
        F.callback_first = 0;
    }
    Sluice__Wire__Reply r = SLUICE__WIRE__REPLY__INIT;
    r.seq = c->seq;
    r.call_id = c->call_id;
    r.result = F.next_result;
    r.failed_seq = F.next_failed_seq;
    F.watch_asked += c->watch;
    if (c->watch && F.next_result == CUDA_ERROR_NOT_READY) { /* the worker watches the stream */
        r.watched = 1;
        F.watched = c->seq;
    }
    if (F.next_stdout) {
        r.stdout_data.data = (uint8_t *)F.next_stdout;
        r.stdout_data.len = strlen(F.next_stdout);
    }
    Sluice__Cuda__CuStreamIsCapturingReply cap = SLUICE__CUDA__CU_STREAM_IS_CAPTURING_REPLY__INIT;
    if (c->call_id == SL_CALL_cuStreamIsCapturing) { /* not capturing */
        r.out_case = SLUICE__WIRE__REPLY__OUT_CU_STREAM_IS_CAPTURING;
        r.cu_stream_is_capturing = &cap;
    }
    Sluice__Cuda__SlMappedAllocReply map = SLUICE__CUDA__SL_MAPPED_ALLOC_REPLY__INIT;
    if (c->call_id == SL_CALL_slMappedAlloc) { /* the twin at the guest's address */
        map.dptr = c->sl_mapped_alloc->address;
        r.out_case = SLUICE__WIRE__REPLY__OUT_SL_MAPPED_ALLOC;
        r.sl_mapped_alloc = &map;
    }
    Sluice__Cuda__CuMemAllocV2Reply alloc = SLUICE__CUDA__CU_MEM_ALLOC_V2_REPLY__INIT;
    if (c->call_id == SL_CALL_cuMemAlloc_v2 && F.next_result == CUDA_SUCCESS) {
        alloc.dptr = 0x7f0000000000ull + (c->seq << 20); /* a fresh base per call */
        r.out_case = SLUICE__WIRE__REPLY__OUT_CU_MEM_ALLOC_V2;
        r.cu_mem_alloc_v2 = &alloc;
    }
    uint64_t lay_off[2] = {0, 8}, lay_size[2] = {8, 4};
    Sluice__Cuda__CuLibraryGetKernelReply kern = SLUICE__CUDA__CU_LIBRARY_GET_KERNEL_REPLY__INIT;
    if (c->call_id == SL_CALL_cuLibraryGetKernel && F.next_result == CUDA_SUCCESS) {
        kern.p_kernel = F.kernel;
        if (F.give_layout) {
            kern.param_layout = 1;
            kern.n_param_offsets = kern.n_param_sizes = 2;
            kern.param_offsets = lay_off;
            kern.param_sizes = lay_size;
        }
        r.out_case = SLUICE__WIRE__REPLY__OUT_CU_LIBRARY_GET_KERNEL;
        r.cu_library_get_kernel = &kern;
    }
    Sluice__Cuda__CuKernelGetAttributeReply kattr =
        SLUICE__CUDA__CU_KERNEL_GET_ATTRIBUTE_REPLY__INIT;
    if (c->call_id == SL_CALL_cuKernelGetAttribute && F.next_result == CUDA_SUCCESS) {
        kattr.pi = (int32_t)c->cu_kernel_get_attribute->attrib * 10; /* an answer per attribute */
        r.out_case = SLUICE__WIRE__REPLY__OUT_CU_KERNEL_GET_ATTRIBUTE;
        r.cu_kernel_get_attribute = &kattr;
    }
    Sluice__Cuda__SlParamLayoutReply lay = SLUICE__CUDA__SL_PARAM_LAYOUT_REPLY__INIT;
    if (c->call_id == SL_CALL_slParamLayout && F.next_result == CUDA_SUCCESS) {
        lay.count = 2;
        lay.n_offsets = lay.n_sizes = 2;
        lay.offsets = lay_off;
        lay.sizes = lay_size;
        r.out_case = SLUICE__WIRE__REPLY__OUT_SL_PARAM_LAYOUT;
        r.sl_param_layout = &lay;
    }
    F.next_result = 0;
    F.next_failed_seq = 0;
    F.next_stdout = NULL;
    Sluice__Wire__Reply *rs[1] = {&r};
    Sluice__Wire__ReplyFrame f = SLUICE__WIRE__REPLY_FRAME__INIT;
    f.n_replies = 1;
    f.replies = rs;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES;
    m.replies = &f;
    queue_server(&m);
}

/* The byte at off of the bulk that followed a frame, -1 past its end. */
static int bulk_byte(const struct iovec *bulk, size_t n, uint64_t off)
{
    for (size_t i = 0; i < n; off -= bulk[i].iov_len, i++)
        if (off < bulk[i].iov_len)
            return ((const uint8_t *)bulk[i].iov_base)[off];
    return -1;
}

static sl_code fake_send(void *t, const void *msg, size_t len, const struct iovec *bulk, size_t n,
                         sl_error *e)
{
    (void)t;
    for (size_t i = 0; i < n; i++)
        F.bulk_bytes += bulk[i].iov_len;
    Sluice__Wire__ClientMessage *m = NULL;
    if (sl_wire_decode_client(msg, len, NULL, &m, e))
        return e->code;
    if (m->kind_case == SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLBACK_DONE) {
        F.callback_done++;
        F.last_callback_done = m->callback_done->id;
    } else if (m->kind_case == SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS) {
        int async_only = 1;
        uint64_t announced = 0, followed = 0;
        for (size_t i = 0; i < m->calls->n_calls; i++) {
            const Sluice__Wire__Call *c = m->calls->calls[i];
            if (!sl_call_is_async(sl_call_lookup(c->call_id), c))
                async_only = 0;
            if (c->bulk_length && c->call_id == SL_CALL_cuMemcpyHtoD_v2)
                F.first_bulk_byte[0] = bulk_byte(bulk, n, announced);
            if (c->bulk_length && c->call_id == SL_CALL_cuMemcpyHtoDAsync_v2)
                F.first_bulk_byte[1] = bulk_byte(bulk, n, announced);
            announced += c->bulk_length;
        }
        for (size_t i = 0; i < n; i++)
            followed += bulk[i].iov_len;
        if (announced != followed)
            F.bulk_mismatch = 1;
        if (async_only) {
            F.async_sender = pthread_self();
            atomic_store(&F.in_async_send, 1);
            if (F.async_send_us)
                usleep(F.async_send_us);
            atomic_store(&F.in_async_send, 0);
        }
        if (F.frames < 64)
            F.frame_calls[F.frames] = (int)m->calls->n_calls;
        F.frames++;
        for (size_t i = 0; i < m->calls->n_calls; i++) {
            const Sluice__Wire__Call *c = m->calls->calls[i];
            if (c->seq <= F.last_seq)
                F.seq_out_of_order = 1;
            F.last_seq = c->seq;
            if (F.calls < 8192)
                F.call_ids[F.calls] = c->call_id;
            F.calls++;
            if (c->call_id == SL_CALL_cuLaunchHostFunc)
                F.host_fn_id = c->cu_launch_host_func->fn;
            if (c->call_id == SL_CALL_cuMemFree_v2 && c->no_reply)
                F.nowait_frees++;
            if (!sl_call_is_async(sl_call_lookup(c->call_id), c))
                answer(c);
        }
    }
    sl_wire_free_client(m);
    return SL_OK;
}

static sl_code fake_recv(void *t, const void **msg, size_t *len, uint64_t *bulk_len, int timeout_ms,
                         sl_error *e)
{
    (void)t;
    free(F.cur);
    F.cur = NULL;
    if (F.qhead == F.qn && F.held && atomic_load(&F.release)) {
        F.cur = F.held;
        F.held = NULL;
        *msg = F.cur;
        *len = F.held_len;
        *bulk_len = 0;
        return SL_OK;
    }
    if (F.qhead == F.qn && F.held) { /* a held reply: the backend is still working */
        usleep(1000);
        return sl_fail(e, SL_ERR_TIMEOUT, "nothing yet");
    }
    if (F.qhead == F.qn && timeout_ms == 0) /* only what is there now (busy.c's look) */
        return sl_fail(e, SL_ERR_TIMEOUT, "nothing yet");
    if (F.qhead == F.qn)
        return sl_fail(e, SL_ERR_PEER_LOST, "fake backend has nothing to say");
    F.cur = F.q[F.qhead];
    *msg = F.cur;
    *len = F.qlen[F.qhead++];
    if (F.qhead == F.qn)
        F.qhead = F.qn = 0;
    *bulk_len = 0;
    return SL_OK;
}

static sl_code fake_recv_bulk(void *t, void *dst, size_t len, sl_error *e)
{
    (void)t;
    (void)dst;
    (void)len;
    return sl_fail(e, SL_ERR_PROTOCOL, "no bulk here");
}

static int setup(void **state)
{
    (void)state;
    free(F.cur);
    free(F.held);
    memset(&F, 0, sizeof F);
    sl_fe_rpc_reset();
    struct sl_fe_transport tr = {fake_send, fake_recv, fake_recv_bulk, NULL, NULL, NULL};
    sl_fe_rpc_attach(&tr);
    struct sl_fe_rpc_limits l = {256, (size_t)4 << 20, 4096, (uint64_t)256 << 20, 0, 0, 0, 0, 0};
    sl_fe_rpc_set_limits(&l);
    return 0;
}

/* ------------------------------------------------------------------ tests */
static void *sync_context(void *arg)
{
    *(CUresult *)arg = cuCtxSynchronize();
    return NULL;
}

/* A thread waiting for a slow reply (a cuCtxSynchronize the backend completes late) holds up no
 * other thread: another thread's call goes out and is answered meanwhile; the waiting thread
 * gets its own reply after. */
static void blocking_call_delays_no_other_thread(void **state)
{
    (void)state;
    F.hold_call = SL_CALL_cuCtxSynchronize;
    CUresult sync_rc = CUDA_ERROR_UNKNOWN;
    pthread_t waiter;
    assert_int_equal(pthread_create(&waiter, NULL, sync_context, &sync_rc), 0);
    for (int i = 0; i < 5000 && !atomic_load(&F.holding); i++)
        usleep(1000);
    assert_true(atomic_load(&F.holding)); /* its call went out; its reply is held */
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    assert_int_equal(cuStreamIsCapturing(NULL, &st), CUDA_SUCCESS); /* answered meanwhile */
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
    assert_int_equal(sync_rc, CUDA_ERROR_UNKNOWN); /* still waiting */
    atomic_store(&F.release, 1);
    assert_int_equal(pthread_join(waiter, NULL), 0);
    assert_int_equal(sync_rc, CUDA_SUCCESS);
}

static void coalescing(void **state)
{
    (void)state;
    for (int i = 0; i < 10; i++)
        assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS);
    assert_int_equal(F.frames, 0); /* nothing sent yet */
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(F.frames, 1);
    assert_int_equal(F.calls, 11);
    assert_int_equal(F.call_ids[10], SL_CALL_cuCtxSynchronize);
    struct sl_fe_rpc_stats st;
    sl_fe_rpc_stats(&st);
    assert_int_equal(st.frames_sent, 1);
}

static void frame_limit_flushes(void **state)
{
    (void)state;
    struct sl_fe_rpc_limits l = {4, (size_t)4 << 20, 4096, (uint64_t)256 << 20, 0, 0, 0, 0, 0};
    sl_fe_rpc_set_limits(&l);
    for (int i = 0; i < 8; i++)
        assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS);
    assert_int_equal(F.frames, 2);
    assert_int_equal(F.calls, 8);
}

static uint64_t frames_sent(void)
{
    struct sl_fe_rpc_stats st;
    sl_fe_rpc_stats(&st);
    return st.frames_sent;
}

/* With flush_us set, async calls reach the backend without a synchronizing call: the first at
 * once (nothing was sent lately), the next ones with the frame, sent by the sender thread
 * once the oldest has waited flush_us; no later call is needed for that. */
static void queued_calls_go_out_without_a_sync(void **state)
{
    (void)state;
    struct sl_fe_rpc_limits l = {256, (size_t)4 << 20, 4096, (uint64_t)256 << 20, 100000, 0, 0, 0,
                                 0};
    sl_fe_rpc_set_limits(&l);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS);
    assert_int_equal(frames_sent(), 1);
    assert_int_equal(cuMemsetD8Async(0x1000, 2, 16, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(0x1000, 3, 16, NULL), CUDA_SUCCESS);
    for (int i = 0; i < 500 && frames_sent() < 2; i++)
        usleep(10000);
    assert_int_equal(frames_sent(), 2);
    struct sl_fe_rpc_stats st;
    sl_fe_rpc_stats(&st);
    assert_int_equal(st.calls_sent, 3);
    assert_int_equal(st.sync_calls, 0);
    l.flush_us = 0;
    sl_fe_rpc_set_limits(&l);
}

static void *queue_small_copy(void *arg)
{
    (void)arg;
    static uint8_t small[1024];
    memset(small, 0xbb, sizeof small);
    usleep(50000);
    assert_int_equal(cuMemcpyHtoDAsync_v2(0x3000, small, sizeof small, NULL), CUDA_SUCCESS);
    return NULL;
}

/* With limits.sender, a due frame is handed to the sender thread: the program's thread does not
 * send it, and calls made while it is being sent wait in the next frame (not the program), which
 * goes when that send ends; a synchronous call first waits for the frame in flight. Calls reach
 * the backend in seq order. */
static void sender_thread_sends_async_frames(void **state)
{
    (void)state;
    struct sl_fe_rpc_limits l = {256, (size_t)4 << 20, 4096, (uint64_t)256 << 20, 1000, 0, 1, 0, 0};
    sl_fe_rpc_set_limits(&l);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS); /* quiet link: due */
    for (int i = 0; i < 500 && frames_sent() < 1; i++)
        usleep(1000);
    assert_int_equal(frames_sent(), 1);
    assert_false(pthread_equal(F.async_sender, pthread_self()));
    struct sl_fe_rpc_stats st;
    sl_fe_rpc_stats(&st);
    assert_int_equal(st.frames_handed, 1);

    F.async_send_us = 300000; /* the next frame's send takes 0.3 s */
    usleep(2000);
    assert_int_equal(cuMemsetD8Async(0x1000, 2, 16, NULL), CUDA_SUCCESS); /* quiet again: due */
    assert_int_equal(cuMemsetD8Async(0x1000, 3, 16, NULL), CUDA_SUCCESS);
    usleep(2000);
    assert_int_equal(cuMemsetD8Async(0x1000, 4, 16, NULL), CUDA_SUCCESS); /* due, in flight */
    assert_int_equal(cuMemsetD8Async(0x1000, 5, 16, NULL), CUDA_SUCCESS);
    for (int i = 0; i < 2000 && frames_sent() < 3; i++)
        usleep(1000);
    assert_int_equal(frames_sent(), 3); /* [2] then [3, 4, 5], both by the thread */
    assert_int_equal(F.frame_calls[1], 1);
    assert_int_equal(F.frame_calls[2], 3);

    /* a synchronous copy whose bulk follows its frame waits for the frame in flight, and the
     * sender thread does not take its frame meanwhile (it would go without the bulk) */
    static uint8_t host[128 << 10];
    memset(host, 0xaa, sizeof host);
    F.async_send_us = 300000;
    assert_int_equal(cuMemsetD8Async(0x1000, 7, 16, NULL), CUDA_SUCCESS); /* handed over */
    for (int i = 0; i < 5000 && !atomic_load(&F.in_async_send); i++)
        usleep(100); /* the thread sends it */
    assert_true(atomic_load(&F.in_async_send));
    pthread_t other; /* queues a copy of its own while this thread waits for the frame */
    assert_int_equal(pthread_create(&other, NULL, queue_small_copy, NULL), 0);
    assert_int_equal(cuMemcpyHtoD_v2(0x2000, host, sizeof host), CUDA_SUCCESS);
    assert_int_equal(pthread_join(other, NULL), 0);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_false(F.bulk_mismatch);
    assert_int_equal(F.first_bulk_byte[0], 0xaa); /* each call's bulk, in call order */
    assert_int_equal(F.first_bulk_byte[1], 0xbb);
    usleep(2000);
    int before = F.frames, calls = F.calls;
    assert_int_equal(cuMemsetD8Async(0x1000, 6, 16, NULL), CUDA_SUCCESS); /* quiet: handed over */
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);                   /* after it */
    sl_fe_rpc_stats(&st);
    if (st.frames_joined) { /* the thread had not taken it: it went in the sync's frame */
        assert_int_equal(F.frames, before + 1);
        assert_int_equal(F.frame_calls[before], 2);
    } else {
        assert_int_equal(F.frames, before + 2);
        assert_int_equal(F.frame_calls[before], 1);
    }
    assert_int_equal(F.calls, calls + 2);
    assert_false(F.seq_out_of_order);
    assert_false(F.bulk_mismatch);
    sl_fe_rpc_stats(&st);
    /* [7], the other thread's copy and [6]: by the thread or, not taken yet, here */
    assert_in_range(st.frames_handed, 3, 6);
    F.async_send_us = 0;
    l.flush_us = 0;
    sl_fe_rpc_set_limits(&l);
}

/* With hold_us, a lone async call that went due waits in the outbox: a synchronous call made
 * meanwhile takes it along in one frame, in call order; with none it leaves after the hold,
 * from the sender thread. */
static void sender_holds_a_lone_call(void **state)
{
    (void)state;
    struct sl_fe_rpc_limits l = {256, (size_t)4 << 20, 4096, (uint64_t)256 << 20, 1000, 0, 1,
                                 0,   200000};
    sl_fe_rpc_set_limits(&l);
    usleep(2000);
    int before = F.frames, calls = F.calls;
    struct sl_fe_rpc_stats st0, st;
    sl_fe_rpc_stats(&st0);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS); /* quiet: due, held */
    usleep(20000);
    assert_int_equal(F.frames, before);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(F.frames, before + 1);
    assert_int_equal(F.frame_calls[before], 2);
    assert_int_equal(F.calls, calls + 2);
    sl_fe_rpc_stats(&st);
    assert_int_equal(st.frames_joined, st0.frames_joined + 1);

    usleep(2000);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_int_equal(cuMemsetD8Async(0x1000, 2, 16, NULL), CUDA_SUCCESS); /* held, then sent */
    for (int i = 0; i < 2000 && F.frames < before + 2; i++)
        usleep(1000);
    assert_int_equal(F.frames, before + 2);
    assert_int_equal(F.frame_calls[before + 1], 1);
    clock_gettime(CLOCK_MONOTONIC, &b);
    assert_true((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec) >= 150000000LL);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_false(F.seq_out_of_order);
    l.flush_us = 0;
    l.hold_us = 0;
    sl_fe_rpc_set_limits(&l);
}

static void sender_from_env(void **state)
{
    (void)state;
    setenv("SLUICE_SENDER", "0", 1);
    assert_int_equal(sl_fe_rpc_sender_from_env(1), 0);
    setenv("SLUICE_SENDER", "1", 1);
    assert_int_equal(sl_fe_rpc_sender_from_env(0), 1);
    setenv("SLUICE_SENDER", "2", 1); /* logged, the default */
    assert_int_equal(sl_fe_rpc_sender_from_env(1), 1);
    assert_int_equal(sl_fe_rpc_sender_from_env(0), 0);
    unsetenv("SLUICE_SENDER");
    assert_int_equal(sl_fe_rpc_sender_from_env(1), 1);
}

static int calls_of(uint32_t id)
{
    int n = 0;
    for (int i = 0; i < F.calls && i < 8192; i++)
        n += F.call_ids[i] == id;
    return n;
}

/* A kernel's first launch: the layout that came with cuLibraryGetKernel's answer is used and no
 * slParamLayout travels; without it (an older backend, no context current there) the launch
 * asks. Either way the parameters are packed at the layout's offsets (12 bytes). */
static void first_launch_uses_the_layout_of_the_answer(void **state)
{
    (void)state;
    for (int given = 1; given >= 0; given--) {
        F.kernel = given ? 0x4242 : 0x4343; /* the layout cache outlives a test */
        F.give_layout = given;
        CUkernel k = NULL;
        assert_int_equal(cuLibraryGetKernel(&k, (CUlibrary)0x11, given ? "with" : "without"),
                         CUDA_SUCCESS);
        assert_int_equal((uintptr_t)k, F.kernel);
        uint64_t ptr = 0x1000;
        int n = 7;
        void *params[] = {&ptr, &n};
        uint64_t bulk_before = F.bulk_bytes;
        assert_int_equal(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
                         CUDA_SUCCESS);
        assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
        assert_int_equal(calls_of(SL_CALL_slParamLayout), given ? 0 : 1);
        assert_int_equal(F.bulk_bytes - bulk_before, 12);
    }
}

/* A library whose load listed its kernels: cuLibraryGetKernel for a listed name is answered
 * here with the listed id and the kernel's first launch asks no layout; a name the list lacks is
 * asked for; a module's functions are answered the same way (cuModuleGetFunction); a listing
 * that does not add up is ignored. */
static void listed_kernels_are_not_asked_for(void **state)
{
    (void)state;
    uint64_t handles[2] = {0x5151, 0x5252}, offs[2] = {0, 8}, sizes[2] = {8, 4};
    uint32_t counts[2] = {2, 0};
    char names[] = "first\0second";
    Sluice__Cuda__SlLoadImageReply o = SLUICE__CUDA__SL_LOAD_IMAGE_REPLY__INIT;
    o.kernel_names = (ProtobufCBinaryData){sizeof names, (uint8_t *)names};
    o.n_kernel_handles = o.n_kernel_param_counts = 2;
    o.kernel_handles = handles;
    o.kernel_param_counts = counts;
    o.n_kernel_param_offsets = o.n_kernel_param_sizes = 2;
    o.kernel_param_offsets = offs;
    o.kernel_param_sizes = sizes;
    sl_fe_image_kernels_keep(0x21, 1, &o);
    CUkernel k = NULL;
    assert_int_equal(cuLibraryGetKernel(&k, (CUlibrary)0x21, "second"), CUDA_SUCCESS);
    assert_int_equal((uintptr_t)k, 0x5252);
    assert_int_equal(cuLibraryGetKernel(&k, (CUlibrary)0x21, "first"), CUDA_SUCCESS);
    assert_int_equal((uintptr_t)k, 0x5151);
    assert_int_equal(calls_of(SL_CALL_cuLibraryGetKernel), 0);
    uint64_t ptr = 0x1000;
    int n = 7;
    void *params[] = {&ptr, &n};
    assert_int_equal(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
                     CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(calls_of(SL_CALL_slParamLayout), 0);
    assert_int_equal(F.bulk_bytes, 12);
    F.kernel = 0x5353;
    assert_int_equal(cuLibraryGetKernel(&k, (CUlibrary)0x21, "third"), CUDA_SUCCESS);
    assert_int_equal((uintptr_t)k, 0x5353);
    assert_int_equal(calls_of(SL_CALL_cuLibraryGetKernel), 1);
    CUfunction f = NULL; /* a module's functions the same way */
    sl_fe_image_kernels_keep(0x31, 0, &o);
    assert_int_equal(cuModuleGetFunction(&f, (CUmodule)0x31, "second"), CUDA_SUCCESS);
    assert_int_equal((uintptr_t)f, 0x5252);
    assert_int_equal(calls_of(SL_CALL_cuModuleGetFunction), 0);
    counts[1] = 1; /* three parameters counted, two given */
    sl_fe_image_kernels_keep(0x22, 1, &o);
    assert_int_equal(cuLibraryGetKernel(&k, (CUlibrary)0x22, "first"), CUDA_SUCCESS);
    assert_int_equal(calls_of(SL_CALL_cuLibraryGetKernel), 2);
}

/* The image hints: a SessionAccept's set replaces the last one; an image sent is hinted from
 * then on; only the first 8 bytes of the hash count. */
static void image_hints_say_what_the_backend_holds(void **state)
{
    (void)state;
    uint8_t a[32] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0xff};
    uint8_t b[32] = {0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10};
    uint8_t c[32] = {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07};
    const uint64_t hints[] = {0xfedcba9876543210ull, 7, 0x0102030405060708ull};
    sl_fe_image_hints_set(hints, 3);
    assert_true(sl_fe_image_hinted(a));
    assert_true(sl_fe_image_hinted(b));
    assert_true(sl_fe_image_hinted(c));
    c[7] = 8;
    assert_false(sl_fe_image_hinted(c));
    sl_fe_image_hint_add(c);
    assert_true(sl_fe_image_hinted(c));
    sl_fe_image_hint_add(c);        /* twice: one entry */
    sl_fe_image_hints_set(NULL, 0); /* a new session that holds nothing */
    assert_false(sl_fe_image_hinted(a));
    assert_false(sl_fe_image_hinted(c));
}

static void stats_name_the_synchronous_calls(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) { /* work in between: each synchronization travels */
        assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, (CUstream)0x77), CUDA_SUCCESS);
        assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    }
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    uint32_t ids[2];
    uint64_t counts[2];
    assert_int_equal(sl_fe_rpc_top_sync(ids, counts, 2), 2);
    assert_int_equal(ids[0], SL_CALL_cuCtxSynchronize);
    assert_int_equal(counts[0], 3);
    assert_int_equal(ids[1], SL_CALL_cuStreamSynchronize);
    assert_int_equal(counts[1], 1);
    assert_int_equal(sl_fe_rpc_top_sync(ids, counts, 1), 1);
    assert_int_equal(ids[0], SL_CALL_cuCtxSynchronize);
}

/* A stream synchronized with nothing sent since is idle: synchronizing or querying it again is
 * answered here; any work sent, or an error in the answer, makes the next one travel. */
static void idle_stream_answered_here(void **state)
{
    (void)state;
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(F.calls, 1);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS); /* leaves the stream idle, travels */
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(F.calls, 2);
    assert_int_equal(cuStreamSynchronize((CUstream)0x77), CUDA_SUCCESS); /* another stream */
    assert_int_equal(F.calls, 3);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(F.calls, 5);
    F.next_result = CUDA_ERROR_LAUNCH_FAILED; /* an error: nothing is known idle any more */
    assert_int_equal(cuStreamSynchronize((CUstream)0x77), CUDA_ERROR_LAUNCH_FAILED);
    F.next_result = CUDA_SUCCESS;
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(F.calls, 7);
}

/* The worker's StreamDone{seq}, queued after what the fake backend sent so far. */
static void stream_done(uint64_t seq)
{
    Sluice__Wire__StreamDone sd = SLUICE__WIRE__STREAM_DONE__INIT;
    sd.seq = seq;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_STREAM_DONE;
    m.stream_done = &sd;
    queue_server(&m);
}

/* A stream query the worker answered NOT_READY and watches: the next queries are answered
 * here, until its StreamDone is read (by the query itself: no thread waits) or the stream gets
 * work; a StreamDone read before its reply reached the answer keeps nothing busy. */
static void busy_stream_answered_here(void **state)
{
    (void)state;
    CUstream a = (CUstream)0x77, b = (CUstream)0x88;
    F.next_result = CUDA_ERROR_NOT_READY;
    assert_int_equal(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    assert_int_equal(F.calls, 1);
    assert_int_equal(F.watch_asked, 1);
    uint64_t q = F.watched;
    assert_true(q != 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    assert_int_equal(F.calls, 1);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, b), CUDA_SUCCESS); /* another stream's work */
    assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    assert_int_equal(F.calls, 3);
    stream_done(q); /* read by the next query, which then asks the worker */
    assert_int_equal(cuStreamQuery(a), CUDA_SUCCESS);
    assert_int_equal(F.calls, 4);

    F.next_result = CUDA_ERROR_NOT_READY; /* watched again; then work on the stream itself */
    assert_int_equal(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuMemsetD8Async(0x1000, 2, 16, a), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(a), CUDA_SUCCESS);
    assert_int_equal(F.calls, 7);

    stream_done(F.last_seq + 1); /* before the reply it belongs to: nothing stays busy */
    F.next_result = CUDA_ERROR_NOT_READY;
    assert_int_equal(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    assert_int_equal(F.watched, F.last_seq);
    assert_int_equal(cuStreamQuery(a), CUDA_SUCCESS);
    assert_int_equal(F.calls, 9);
    /* the legacy stream is never watched */
    F.next_result = CUDA_ERROR_NOT_READY;
    int asked = F.watch_asked;
    assert_int_equal(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
    assert_int_equal(F.watch_asked, asked);

    /* an event: known busy until its StreamDone, or until it is recorded again */
    CUevent ev = (CUevent)0x99;
    int calls = F.calls;
    F.next_result = CUDA_ERROR_NOT_READY;
    assert_int_equal(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    assert_int_equal(F.watch_asked, asked + 1);
    assert_int_equal(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuStreamQuery(a), CUDA_SUCCESS); /* a stream is not the event */
    assert_int_equal(F.calls, calls + 2);
    assert_int_equal(cuEventRecord(ev, b), CUDA_SUCCESS);
    assert_int_equal(cuEventQuery(ev), CUDA_SUCCESS); /* the record went first, then this */
    assert_int_equal(F.calls, calls + 4);
}

/* Work on one stream leaves another known idle (a thread syncing its own idle stream while
 * another computes: the head-of-line case of issue 18); work on it, or on the legacy stream,
 * does not. */
static void idle_stream_kept_by_another_streams_work(void **state)
{
    (void)state;
    CUstream a = (CUstream)0x77, b = (CUstream)0x88;
    assert_int_equal(cuStreamSynchronize(a), CUDA_SUCCESS);
    assert_int_equal(F.calls, 1);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, b), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(a), CUDA_SUCCESS); /* answered here */
    assert_int_equal(cuStreamQuery(a), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS); /* the memset, then this */
    assert_int_equal(F.calls, 3);
    assert_int_equal(cuStreamSynchronize(a), CUDA_SUCCESS);
    assert_int_equal(F.calls, 3);
    assert_int_equal(cuMemsetD8Async(0x1000, 2, 16, a), CUDA_SUCCESS); /* its own work */
    assert_int_equal(cuStreamSynchronize(a), CUDA_SUCCESS);
    assert_int_equal(F.calls, 5);
    assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS); /* still idle */
    assert_int_equal(F.calls, 5);
    assert_int_equal(cuMemsetD8Async(0x1000, 3, 16, NULL), CUDA_SUCCESS); /* the legacy stream */
    assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS);
    assert_int_equal(F.calls, 7);
}

/* After a context synchronization, when every stream that got work since is known idle, the
 * next cuCtxSynchronize is answered here (float(loss) then torch.cuda.synchronize()). */
static void idle_context_answered_here(void **state)
{
    (void)state;
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS); /* travels: nothing known */
    assert_int_equal(F.calls, 1);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(F.calls, 3);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS); /* the one busy stream is idle */
    assert_int_equal(F.calls, 3);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, (CUstream)0x77), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS); /* stream 0x77 may still run */
    assert_int_equal(F.calls, 7);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS); /* nothing since */
    assert_int_equal(F.calls, 7);
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    int before = F.calls;
    assert_int_equal(cuLaunchKernelEx(&cfg, (CUfunction)0x99, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    int after_sync = F.calls;
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS); /* its stream (NULL) is idle */
    assert_int_equal(F.calls, after_sync);
    assert_true(after_sync > before);
    assert_int_equal(cuMemsetD8_v2(0x1000, 1, 16), CUDA_SUCCESS); /* work of no readable stream */
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(F.calls, after_sync + 3);
}

/* Bytes the guest wrote into mapped memory travel (slMappedWrite) but are no device work: the
 * context stays known idle (cuDNN changes its mapped flag every other training step). */
static void mapped_write_keeps_context_idle(void **state)
{
    (void)state;
    void *p = NULL;
    assert_int_equal(cuMemHostAlloc(&p, 64, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS); /* travels: the clean point */
    int calls = F.calls;
    ((volatile uint8_t *)p)[3] = 7;
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS); /* travels after the write */
    assert_int_equal(F.calls, calls + 2);
    assert_int_equal(F.call_ids[calls], SL_CALL_slMappedWrite);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS); /* answered here */
    assert_int_equal(F.calls, calls + 2);
    ((volatile uint8_t *)p)[4] = 9;
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, (CUstream)0x77), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS); /* stream 0x77 has work: travels */
    assert_int_equal(F.calls, calls + 5);
    assert_int_equal(cuMemFreeHost(p), CUDA_SUCCESS);
}

/* Page-locked allocations of at most 4 KiB are mapped (kernels may be handed them, as under
 * unified addressing) while they take at most 64 KiB of pages; the rest, and larger ones, stay
 * plain guest memory. */
static void small_pinned_memory_is_mapped(void **state)
{
    (void)state;
    void *p[17] = {0}, *big = NULL;
    unsigned mapped = 0;
    for (int i = 0; i < 17; i++) {
        assert_int_equal(cuMemAllocHost_v2(&p[i], i ? 4096 : 8), CUDA_SUCCESS);
        assert_int_equal(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED,
                                               (CUdeviceptr)(uintptr_t)p[i]),
                         CUDA_SUCCESS);
        assert_int_equal(mapped, i < 16);
    }
    CUdeviceptr d = 0;
    assert_int_equal(cuMemHostGetDevicePointer_v2(&d, p[0], 0), CUDA_SUCCESS);
    assert_int_equal(d, (CUdeviceptr)(uintptr_t)p[0]); /* the fake puts twins at the address */
    assert_int_equal(cuMemHostAlloc(&big, 8192, 0), CUDA_SUCCESS);
    assert_int_equal(
        cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, (CUdeviceptr)(uintptr_t)big),
        CUDA_SUCCESS);
    assert_int_equal(mapped, 0);
    unsigned flags = 1;
    assert_int_equal(cuMemHostGetFlags(&flags, p[1]), CUDA_SUCCESS);
    assert_int_equal(flags, 0);                          /* the program's flags, not DEVICEMAP */
    assert_int_equal(cuMemFreeHost(p[0]), CUDA_SUCCESS); /* gives its page back */
    assert_int_equal(cuMemFreeHost(p[16]), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocHost_v2(&p[16], 100), CUDA_SUCCESS);
    assert_int_equal(
        cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, (CUdeviceptr)(uintptr_t)p[16]),
        CUDA_SUCCESS);
    assert_int_equal(mapped, 1);
    for (int i = 1; i < 17; i++)
        assert_int_equal(cuMemFreeHost(p[i]), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeHost(big), CUDA_SUCCESS);
}

/* With the mapped bound (1 GiB per process) spent by DEVICEMAP memory, a small page-locked
 * allocation is plain memory, silently: no "not supported" line, which the program did not ask for.
 */
static void small_pinned_memory_when_mapped_bound_spent(void **state)
{
    (void)state;
    void *huge = NULL, *small = NULL;
    assert_int_equal(cuMemHostAlloc(&huge, (size_t)1 << 30, CU_MEMHOSTALLOC_DEVICEMAP),
                     CUDA_SUCCESS);
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(p[1], 2);
    CUresult rc = cuMemAllocHost_v2(&small, 64);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    char buf[512] = {0};
    ssize_t got = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    assert_int_equal(rc, CUDA_SUCCESS);
    assert_true(got <= 0); /* nothing logged */
    unsigned mapped = 1;
    assert_int_equal(
        cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, (CUdeviceptr)(uintptr_t)small),
        CUDA_SUCCESS);
    assert_int_equal(mapped, 0);
    assert_int_equal(cuMemFreeHost(small), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeHost(huge), CUDA_SUCCESS);
}

/* A stream that waited on an event recorded on another stream: once the waiter is known idle,
 * so is the other stream, unless it got work after the record (cuDNN's fork and join). */
static void idle_context_follows_events(void **state)
{
    (void)state;
    CUstream side = (CUstream)0x77;
    CUevent fork = (CUevent)0x501, join = (CUevent)0x502;
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(fork, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(side, fork, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, side), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(join, side), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(NULL, join, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(0x1000, 2, 16, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    int n = F.calls;
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS); /* both streams are done */
    assert_int_equal(F.calls, n);
    assert_int_equal(cuStreamSynchronize(side), CUDA_SUCCESS); /* and the side stream is idle */
    assert_int_equal(F.calls, n);

    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, side), CUDA_SUCCESS); /* the same, but */
    assert_int_equal(cuEventRecord(join, side), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(NULL, join, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(0x1000, 3, 16, side), CUDA_SUCCESS); /* work after it */
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    n = F.calls;
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS); /* the side stream may still run */
    assert_int_equal(F.calls, n + 1);

    /* a wait on an unknown event */
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, side), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(NULL, (CUevent)0x503, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    n = F.calls;
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(F.calls, n + 1);

    /* cuDNN's step, as traced on the GPU: one event handle re-recorded; the side stream ends
     * with a wait on the main stream (not work of its own) */
    CUevent e = (CUevent)0x504;
    for (int step = 0; step < 12; step++) { /* every step: the tables do not fill up */
        assert_int_equal(cuEventRecord(e, NULL), CUDA_SUCCESS);
        assert_int_equal(cuStreamWaitEvent(side, e, 0), CUDA_SUCCESS);
        assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, side), CUDA_SUCCESS);
        assert_int_equal(cuEventRecord(e, side), CUDA_SUCCESS);
        assert_int_equal(cuStreamWaitEvent(NULL, e, 0), CUDA_SUCCESS);
        assert_int_equal(cuEventRecord(e, NULL), CUDA_SUCCESS);
        assert_int_equal(cuStreamWaitEvent(side, e, 0), CUDA_SUCCESS);
        assert_int_equal(cuMemsetD8Async(0x1000, 2, 16, NULL), CUDA_SUCCESS);
        assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
        n = F.calls;
        assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
        assert_int_equal(F.calls, n);
    }

    /* the side stream waits on a third stream that may still run: not idle */
    CUstream third = (CUstream)0x78;
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, third), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(e, third), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(join, side), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(side, e, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(NULL, join, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    n = F.calls;
    assert_int_equal(cuStreamSynchronize(side), CUDA_SUCCESS);
    assert_int_equal(F.calls, n + 1);
}

static int sent(uint32_t call_id)
{
    int n = 0;
    for (int i = 0; i < F.calls && i < 8192; i++)
        n += F.call_ids[i] == call_id;
    return n;
}

/* cuStreamIsCapturing's answer is kept; a stream wait forgets it only once a capture was begun
 * in the process (before that no stream can join one). */
static void capture_answer_kept_until_a_capture(void **state)
{
    (void)state;
    sl_fe_memo_clear();
    CUstream st = (CUstream)0x55;
    CUstreamCaptureStatus cs;
    assert_int_equal(cuStreamIsCapturing(st, &cs), CUDA_SUCCESS);
    assert_int_equal(cuStreamIsCapturing(st, &cs), CUDA_SUCCESS);
    assert_int_equal(sent(SL_CALL_cuStreamIsCapturing), 1);
    assert_int_equal(cuStreamWaitEvent(st, (CUevent)0x66, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamIsCapturing(st, &cs), CUDA_SUCCESS);
    assert_int_equal(sent(SL_CALL_cuStreamIsCapturing), 1);
    F.next_result = CUDA_ERROR_NOT_READY; /* a poll: the memo keeps its answers */
    assert_int_equal(cuStreamQuery(st), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuStreamIsCapturing(st, &cs), CUDA_SUCCESS);
    assert_int_equal(sent(SL_CALL_cuStreamIsCapturing), 1);
    assert_int_equal(cuStreamBeginCapture_v2((CUstream)0x77, CU_STREAM_CAPTURE_MODE_GLOBAL),
                     CUDA_SUCCESS);
    assert_int_equal(cuStreamIsCapturing(st, &cs), CUDA_SUCCESS);
    assert_int_equal(sent(SL_CALL_cuStreamIsCapturing), 2);
    assert_int_equal(cuStreamWaitEvent(st, (CUevent)0x66, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamIsCapturing(st, &cs), CUDA_SUCCESS);
    assert_int_equal(sent(SL_CALL_cuStreamIsCapturing), 3);
}

/* A kernel attribute setter forgets only the answers about that attribute (and occupancy's):
 * cuBLAS sets one attribute of each kernel it uses, and every query used to be asked again. */
static void attribute_setter_forgets_its_attribute(void **state)
{
    (void)state;
    sl_fe_memo_clear();
    CUkernel k = (CUkernel)0x91;
    int v = 0;
    CUstreamCaptureStatus cs;
    const CUfunction_attribute dyn = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               regs = CU_FUNC_ATTRIBUTE_NUM_REGS;
    assert_int_equal(cuKernelGetAttribute(&v, dyn, k, 0), CUDA_SUCCESS);
    assert_int_equal(v, (int)dyn * 10);
    assert_int_equal(cuKernelGetAttribute(&v, regs, k, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamIsCapturing((CUstream)0x55, &cs), CUDA_SUCCESS);
    assert_int_equal(sent(SL_CALL_cuKernelGetAttribute), 2);
    assert_int_equal(cuKernelSetAttribute(dyn, 65536, k, 0), CUDA_SUCCESS);
    assert_int_equal(cuKernelGetAttribute(&v, regs, k, 0), CUDA_SUCCESS); /* kept */
    assert_int_equal(v, (int)regs * 10);
    assert_int_equal(cuStreamIsCapturing((CUstream)0x55, &cs), CUDA_SUCCESS);
    assert_int_equal(sent(SL_CALL_cuStreamIsCapturing), 1);
    assert_int_equal(sent(SL_CALL_cuKernelGetAttribute), 2);
    assert_int_equal(cuKernelGetAttribute(&v, dyn, k, 0), CUDA_SUCCESS); /* asked again */
    assert_int_equal(sent(SL_CALL_cuKernelGetAttribute), 3);
    assert_int_equal(cuKernelSetAttribute(dyn, 65536, k, 0), CUDA_SUCCESS); /* the same set */
    assert_int_equal(sent(SL_CALL_cuKernelSetAttribute), 1);
    assert_int_equal(cuKernelSetAttribute(dyn, 1024, k, 0), CUDA_SUCCESS); /* another value */
    assert_int_equal(sent(SL_CALL_cuKernelSetAttribute), 2);
    assert_int_equal(cuKernelSetAttribute(dyn, 65536, k, 0), CUDA_SUCCESS);
    assert_int_equal(sent(SL_CALL_cuKernelSetAttribute), 3);
    assert_int_equal(cuKernelSetCacheConfig(k, CU_FUNC_CACHE_PREFER_L1, 0), CUDA_SUCCESS);
    assert_int_equal(cuKernelGetAttribute(&v, regs, k, 0), CUDA_SUCCESS); /* everything goes */
    assert_int_equal(sent(SL_CALL_cuKernelGetAttribute), 4);
}

/* The backend's "send the image's bytes" (slLoadImage answered CUDA_ERROR_FILE_NOT_FOUND) is
 * part of loading a module, not an error that may have changed state: the memo keeps its
 * answers (cudart and cuDNN load images all through a run). */
static void image_upload_keeps_memo(void **state)
{
    (void)state;
    sl_fe_memo_clear();
    CUstream st = (CUstream)0x55;
    CUstreamCaptureStatus cs;
    assert_int_equal(cuStreamIsCapturing(st, &cs), CUDA_SUCCESS);
    Sluice__Cuda__SlLoadImageRequest req = SLUICE__CUDA__SL_LOAD_IMAGE_REQUEST__INIT;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_slLoadImage;
    call.args_case = SLUICE__WIRE__CALL__ARGS_SL_LOAD_IMAGE;
    call.sl_load_image = &req;
    Sluice__Wire__Reply *rep = NULL;
    F.next_result = CUDA_ERROR_FILE_NOT_FOUND;
    assert_int_equal(sl_fe_call_bulk(&call, NULL, 0, NULL, 0, NULL, &rep), CUDA_SUCCESS);
    assert_int_equal(rep->result, CUDA_ERROR_FILE_NOT_FOUND);
    sl_fe_reply_free(rep);
    assert_int_equal(cuStreamIsCapturing(st, &cs), CUDA_SUCCESS);
    assert_int_equal(sent(SL_CALL_cuStreamIsCapturing), 1);
    F.next_result = CUDA_ERROR_INVALID_VALUE; /* any other error: forgotten */
    assert_int_equal(sl_fe_call_bulk(&call, NULL, 0, NULL, 0, NULL, &rep), CUDA_SUCCESS);
    assert_int_equal(rep->result, CUDA_ERROR_INVALID_VALUE);
    sl_fe_reply_free(rep);
    assert_int_equal(cuStreamIsCapturing(st, &cs), CUDA_SUCCESS);
    assert_int_equal(sent(SL_CALL_cuStreamIsCapturing), 2);
}

/* Each thread's per-thread default stream is its own: another thread's synchronization of
 * "its" per-thread stream says nothing about this one's. */
static void *sync_per_thread_stream(void *arg)
{
    (void)arg;
    assert_int_equal(cuStreamSynchronize_ptsz(NULL), CUDA_SUCCESS);
    return NULL;
}

static void per_thread_streams_are_distinct(void **state)
{
    (void)state;
    assert_int_equal(cuMemsetD8Async_ptsz(0x1000, 1, 16, NULL), CUDA_SUCCESS);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sync_per_thread_stream, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    int n = F.calls;
    assert_int_equal(cuStreamSynchronize_ptsz(NULL), CUDA_SUCCESS); /* travels */
    assert_int_equal(F.calls, n + 1);
    assert_int_equal(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS); /* the same */
    assert_int_equal(F.calls, n + 1);
}

/* After a reply the window opens: the first async call goes at once, the next frame waits
 * start_us, the one after twice that, up to flush_us. */
static void window_opens_after_a_reply(void **state)
{
    (void)state;
    struct sl_fe_rpc_limits l = {
        256, (size_t)4 << 20, 4096, (uint64_t)256 << 20, 1000000, 50000, 0, 0, 0};
    sl_fe_rpc_set_limits(&l);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS); /* quiet link */
    assert_int_equal(F.frames, 1);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(F.frames, 2);
    assert_int_equal(cuMemsetD8Async(0x1000, 2, 16, NULL), CUDA_SUCCESS); /* at once */
    assert_int_equal(F.frames, 3);
    assert_int_equal(cuMemsetD8Async(0x1000, 3, 16, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(0x1000, 4, 16, NULL), CUDA_SUCCESS);
    assert_int_equal(F.frames, 3);
    usleep(70000);
    assert_int_equal(cuMemsetD8Async(0x1000, 5, 16, NULL), CUDA_SUCCESS); /* waited 50 ms */
    assert_int_equal(F.frames, 4);
    assert_int_equal(cuMemsetD8Async(0x1000, 6, 16, NULL), CUDA_SUCCESS);
    usleep(70000);
    assert_int_equal(cuMemsetD8Async(0x1000, 7, 16, NULL), CUDA_SUCCESS); /* window 100 ms */
    assert_int_equal(F.frames, 4);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(F.frames, 5);
    assert_int_equal(F.calls, 9);
    l.flush_us = 0;
    sl_fe_rpc_set_limits(&l);
}

static void flush_delay_from_env(void **state)
{
    (void)state;
    unsetenv("SLUICE_FLUSH_US");
    assert_int_equal(sl_fe_rpc_flush_us_from_env(0), SL_FE_FLUSH_US_DEFAULT);
    setenv("SLUICE_FLUSH_US", "0", 1);
    assert_int_equal(sl_fe_rpc_flush_us_from_env(0), 0);
    setenv("SLUICE_FLUSH_US", "200", 1);
    assert_int_equal(sl_fe_rpc_flush_us_from_env(0), 200);
    const char *bad[] = {"-5", "12us", "99999999999", " "};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("SLUICE_FLUSH_US", bad[i], 1);
        assert_int_equal(sl_fe_rpc_flush_us_from_env(0), SL_FE_FLUSH_US_DEFAULT);
    }
    unsetenv("SLUICE_FLUSH_US");
    unsetenv("SLUICE_FLUSH_START_US");
    assert_int_equal(sl_fe_rpc_start_us_from_env(0), SL_FE_START_US_DEFAULT);
    setenv("SLUICE_FLUSH_START_US", "0", 1);
    assert_int_equal(sl_fe_rpc_start_us_from_env(0), 0);
    setenv("SLUICE_FLUSH_START_US", "x", 1);
    assert_int_equal(sl_fe_rpc_start_us_from_env(0), SL_FE_START_US_DEFAULT);
    unsetenv("SLUICE_FLUSH_START_US");
    /* with the sender thread, a short constant window */
    assert_int_equal(sl_fe_rpc_flush_us_from_env(1), SL_FE_FLUSH_US_SENDER);
    assert_int_equal(sl_fe_rpc_start_us_from_env(1), SL_FE_START_US_SENDER);
    setenv("SLUICE_FLUSH_US", "300", 1);
    assert_int_equal(sl_fe_rpc_flush_us_from_env(1), 300);
    unsetenv("SLUICE_FLUSH_US");
}

static void deferred_error_at_next_sync(void **state)
{
    (void)state;
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS);
    F.next_result = CUDA_ERROR_LAUNCH_FAILED;
    F.next_failed_seq = 1;
    assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_LAUNCH_FAILED);
    struct sl_fe_rpc_stats st;
    sl_fe_rpc_stats(&st);
    assert_int_equal(st.deferred_errors, 1);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
}

/* A free of a live allocation's base goes without waiting (Call.no_reply, with the next frame);
 * a second free of it, an address inside it, one never allocated, and one whose context was
 * destroyed go synchronously and get the backend's answer at once. The allocation cache is
 * off here (test_alloc_cache.c tests it). */
static void free_of_live_allocation_waits_for_nothing(void **state)
{
    (void)state;
    sl_fe_allocs_configure(0, 0, 0);
    CUdeviceptr a = 0, b = 0;
    assert_int_equal(cuMemAlloc_v2(&a, 1 << 20), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&b, 1 << 20), CUDA_SUCCESS);
    assert_true(a && b && a != b);
    int frames = F.frames;
    assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
    assert_int_equal(F.nowait_frees, 0); /* queued: nothing waited for it */
    F.next_result = CUDA_ERROR_INVALID_VALUE;
    assert_int_equal(cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE); /* sync: after the first */
    assert_int_equal(F.nowait_frees, 1);
    assert_int_equal(F.frames, frames + 1); /* one frame: the queued free, then this one */
    F.next_result = CUDA_ERROR_INVALID_VALUE;
    assert_int_equal(cuMemFree_v2(b + 256), CUDA_ERROR_INVALID_VALUE);
    F.next_result = CUDA_ERROR_INVALID_VALUE;
    assert_int_equal(cuMemFree_v2(0xdead0000), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(F.nowait_frees, 1);
    /* a failed allocation is not tracked; a free that fails in the backend is a deferred
     * error of the next synchronizing call */
    CUdeviceptr c = 0;
    F.next_result = CUDA_ERROR_OUT_OF_MEMORY;
    assert_int_equal(cuMemAlloc_v2(&c, 1 << 20), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMemFree_v2(b), CUDA_SUCCESS);
    F.next_result = CUDA_ERROR_ILLEGAL_ADDRESS;
    F.next_failed_seq = F.last_seq + 1; /* the free's seq */
    assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(F.nowait_frees, 2);
}

static void stdout_data_written(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(p[1], 1);
    F.next_stdout = "hello from the device\n";
    CUresult rc = cuCtxSynchronize();
    dup2(saved, 1);
    close(saved);
    close(p[1]);
    assert_int_equal(rc, CUDA_SUCCESS);
    char buf[64] = {0};
    assert_int_equal(read(p[0], buf, sizeof buf - 1), 22);
    assert_string_equal(buf, "hello from the device\n");
    close(p[0]);
}

static int g_ran;
static int g_done_when_ran;
static void host_fn(void *user)
{
    g_ran = *(int *)user;
    g_done_when_ran = F.callback_done;
}

static void host_callback_before_reply(void **state)
{
    (void)state;
    int v = 42;
    g_ran = 0;
    assert_int_equal(cuLaunchHostFunc(NULL, host_fn, &v), CUDA_SUCCESS);
    assert_int_equal(g_ran, 0);
    F.callback_first = 1;
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(g_ran, 42);
    assert_int_equal(g_done_when_ran, 0); /* ran before its callback_done was sent */
    assert_int_equal(F.callback_done, 1);
    assert_int_equal(F.last_callback_done, 99);
    assert_int_not_equal(F.host_fn_id, 0);
}

static void backpressure_fence(void **state)
{
    (void)state;
    struct sl_fe_rpc_limits l = {256, (size_t)4 << 20, 8, (uint64_t)256 << 20, 0, 0, 0, 0, 0};
    sl_fe_rpc_set_limits(&l);
    for (int i = 0; i < 7; i++)
        assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS);
    assert_int_equal(F.frames, 0);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS);
    assert_int_equal(F.frames, 1);
    assert_int_equal(F.calls, 9);
    assert_int_equal(F.call_ids[8], SL_CALL_slFence);
    struct sl_fe_rpc_stats st;
    sl_fe_rpc_stats(&st);
    assert_int_equal(st.fences, 1);
    /* the fence's reply answered everything: 7 more do not fence again */
    for (int i = 0; i < 7; i++)
        assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS);
    sl_fe_rpc_stats(&st);
    assert_int_equal(st.fences, 1);
}

static void fence_reports_deferred_error(void **state)
{
    (void)state;
    struct sl_fe_rpc_limits l = {256, (size_t)4 << 20, 2, (uint64_t)256 << 20, 0, 0, 0, 0, 0};
    sl_fe_rpc_set_limits(&l);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_SUCCESS);
    F.next_result = CUDA_ERROR_ILLEGAL_ADDRESS;
    F.next_failed_seq = 1;
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
}

static void async_bulk_is_copied(void **state)
{
    (void)state;
    uint8_t data[1000];
    memset(data, 7, sizeof data);
    assert_int_equal(cuMemcpyHtoDAsync_v2(0x2000, data, sizeof data, NULL), CUDA_SUCCESS);
    memset(data, 0, sizeof data); /* the caller may reuse its buffer at once */
    assert_int_equal(F.frames, 0);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(F.bulk_bytes, 1000);
    assert_int_equal(F.call_ids[0], SL_CALL_cuMemcpyHtoDAsync_v2);
}

/* The synchronous copies return the backend's answer (a regression: the reply used to be read
 * before the call stored it, so every refusal came back as CUDA_SUCCESS and the reply leaked). */
static void sync_copy_errors_are_returned(void **state)
{
    (void)state;
    uint8_t data[64];
    memset(data, 7, sizeof data);
    F.next_result = CUDA_ERROR_INVALID_VALUE;
    assert_int_equal(cuMemcpyHtoD_v2(0x2000, data, sizeof data), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(F.call_ids[0], SL_CALL_cuMemcpyHtoD_v2);
    F.next_result = CUDA_ERROR_INVALID_VALUE;
    assert_int_equal(cuMemcpyHtoD_v2_ptds(0x2000, data, sizeof data), CUDA_ERROR_INVALID_VALUE);
    F.next_result = CUDA_ERROR_INVALID_VALUE;
    assert_int_equal(cuMemcpyDtoD_v2(0x2000, 0x3000, sizeof data), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(F.call_ids[2], SL_CALL_cuMemcpyDtoD_v2);
    assert_int_equal(cuMemcpyHtoD_v2(0x2000, data, sizeof data), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoD_v2(0x2000, 0x3000, sizeof data), CUDA_SUCCESS);
}

static void lost_connection_fails_cleanly(void **state)
{
    (void)state;
    sl_fe_rpc_detach();
    assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_DEVICE_UNAVAILABLE);
    assert_int_equal(cuMemsetD8Async(0x1000, 1, 16, NULL), CUDA_ERROR_DEVICE_UNAVAILABLE);
}

static void unsupported_returns_not_supported(void **state)
{
    (void)state;
    assert_int_equal(cuGraphDebugDotPrint(NULL, "x", 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuGraphDebugDotPrint(NULL, "x", 0), CUDA_ERROR_NOT_SUPPORTED);
}

/* Security: these are never forwarded, whatever the backend's driver offers (CUDA IPC and
 * shareable handles travel as tokens the backend brokers: ipc_calls_travel,
 * shareable_descriptors). */
static void security_calls_never_travel(void **state)
{
    (void)state;
    CUmemGenericAllocationHandle mc;
    CUmulticastObjectProp prop = {0};
    size_t gran;
    assert_int_equal(cuMemRetainAllocationHandle(&mc, (void *)0x1000), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuMulticastCreate(&mc, &prop), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuMulticastGetGranularity(&gran, &prop, CU_MULTICAST_GRANULARITY_MINIMUM),
                     CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuMulticastAddDevice(mc, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuMulticastUnbind(mc, 0, 0, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(F.calls, 0);
    assert_int_equal(F.frames, 0);
}

/* CUDA IPC travels as its own calls: the handles are the backend's tokens (docs/security.md,
 * "IPC handles"), the frontend passes them as they are; the backend's answer is the program's. */
static void ipc_calls_travel(void **state)
{
    (void)state;
    CUipcMemHandle mh;
    CUipcEventHandle eh;
    memset(&mh, 0x5a, sizeof mh);
    memset(&eh, 0x5b, sizeof eh);
    CUevent ev = NULL;
    CUdeviceptr p = 0;
    F.next_result = CUDA_ERROR_INVALID_VALUE;
    assert_int_equal(cuIpcGetMemHandle(&mh, 0x1000), CUDA_ERROR_INVALID_VALUE);
    F.next_result = CUDA_ERROR_INVALID_VALUE;
    assert_int_equal(cuIpcOpenMemHandle_v2(&p, mh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(p, 0);
    F.next_result = CUDA_ERROR_INVALID_VALUE;
    assert_int_equal(cuIpcCloseMemHandle(0x1000), CUDA_ERROR_INVALID_VALUE);
    F.next_result = CUDA_ERROR_INVALID_HANDLE;
    assert_int_equal(cuIpcGetEventHandle(&eh, (CUevent)0x0b00000000000001ull),
                     CUDA_ERROR_INVALID_HANDLE);
    F.next_result = CUDA_ERROR_INVALID_VALUE;
    assert_int_equal(cuIpcOpenEventHandle(&ev, eh), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(F.calls, 5);
    assert_int_equal(F.call_ids[0], SL_CALL_cuIpcGetMemHandle);
    assert_int_equal(F.call_ids[1], SL_CALL_cuIpcOpenMemHandle_v2);
    assert_int_equal(F.call_ids[2], SL_CALL_cuIpcCloseMemHandle);
    assert_int_equal(F.call_ids[3], SL_CALL_cuIpcGetEventHandle);
    assert_int_equal(F.call_ids[4], SL_CALL_cuIpcOpenEventHandle);
}

/* Shareable handles (frontend/api/shareable.c): a descriptor that is not a Sluice memfd of the
 * right kind is CUDA_ERROR_INVALID_VALUE and never travels, nor does a handle type other than
 * POSIX file descriptors; no descriptor is left behind. The memfd's way through the backend:
 * e2e.shareable_ipc.*, e2e.ipc_attacks. */
static void shareable_descriptors(void **state)
{
    (void)state;
    int pp[2];
    assert_int_equal(pipe(pp), 0);
    int before = fcntl(pp[1], F_DUPFD, 0); /* the lowest free descriptor now */
    close(before);
    CUmemoryPool pool = NULL;
    CUmemGenericAllocationHandle h = 0;
    assert_int_equal(cuMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)pp[0],
                                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                        0),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)pp[0],
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)-1,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                     CUDA_ERROR_INVALID_VALUE);
    int fd = -1;
    assert_int_equal(cuMemExportToShareableHandle(&fd, 1, CU_MEM_HANDLE_TYPE_FABRIC, 0),
                     CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(
        cuMemExportToShareableHandle(NULL, 1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(
        cuMemPoolExportToShareableHandle(&fd, (CUmemoryPool)0x1, CU_MEM_HANDLE_TYPE_WIN32, 0),
        CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(F.calls, 0);
    assert_int_equal(fd, -1);
    int now = fcntl(pp[1], F_DUPFD, 0);
    assert_int_equal(now, before); /* no descriptor left open */
    close(now);
    close(pp[0]);
    close(pp[1]);
}

/* The occupancy calls travel as their own calls; a kernel's id goes as the function. */
static void occupancy_calls(void **state)
{
    (void)state;
    int n = -1, grid = -1, block = -1;
    CUfunction f = (CUfunction)(uintptr_t)0x0400000000000007ull;
    F.next_result = CUDA_ERROR_INVALID_HANDLE;
    assert_int_equal(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, 128, 0),
                     CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(F.call_ids[0], SL_CALL_cuOccupancyMaxActiveBlocksPerMultiprocessor);
    F.next_result = CUDA_ERROR_INVALID_HANDLE;
    assert_int_equal(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, f, 128, 0, 1),
                     CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(F.call_ids[1], SL_CALL_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags);
    F.next_result = CUDA_ERROR_INVALID_HANDLE;
    assert_int_equal(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, NULL, 0, 0),
                     CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(F.call_ids[2], SL_CALL_cuOccupancyMaxPotentialBlockSize);
    /* a success without the reply member is a protocol problem, never garbage */
    assert_int_equal(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, 128, 0),
                     CUDA_ERROR_UNKNOWN);
    assert_int_equal(n, -1);
    assert_int_equal(cuOccupancyMaxActiveBlocksPerMultiprocessor(NULL, f, 128, 0),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(F.calls, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(coalescing, setup),
        cmocka_unit_test_setup(first_launch_uses_the_layout_of_the_answer, setup),
        cmocka_unit_test_setup(listed_kernels_are_not_asked_for, setup),
        cmocka_unit_test_setup(image_hints_say_what_the_backend_holds, setup),
        cmocka_unit_test_setup(blocking_call_delays_no_other_thread, setup),
        cmocka_unit_test_setup(frame_limit_flushes, setup),
        cmocka_unit_test_setup(queued_calls_go_out_without_a_sync, setup),
        cmocka_unit_test_setup(window_opens_after_a_reply, setup),
        cmocka_unit_test_setup(flush_delay_from_env, setup),
        cmocka_unit_test_setup(sender_thread_sends_async_frames, setup),
        cmocka_unit_test_setup(sender_holds_a_lone_call, setup),
        cmocka_unit_test_setup(sender_from_env, setup),
        cmocka_unit_test_setup(stats_name_the_synchronous_calls, setup),
        cmocka_unit_test_setup(idle_stream_answered_here, setup),
        cmocka_unit_test_setup(idle_stream_kept_by_another_streams_work, setup),
        cmocka_unit_test_setup(busy_stream_answered_here, setup),
        cmocka_unit_test_setup(idle_context_answered_here, setup),
        cmocka_unit_test_setup(mapped_write_keeps_context_idle, setup),
        cmocka_unit_test_setup(small_pinned_memory_is_mapped, setup),
        cmocka_unit_test_setup(small_pinned_memory_when_mapped_bound_spent, setup),
        cmocka_unit_test_setup(per_thread_streams_are_distinct, setup),
        cmocka_unit_test_setup(capture_answer_kept_until_a_capture, setup),
        cmocka_unit_test_setup(image_upload_keeps_memo, setup),
        cmocka_unit_test_setup(attribute_setter_forgets_its_attribute, setup),
        cmocka_unit_test_setup(idle_context_follows_events, setup),
        cmocka_unit_test_setup(deferred_error_at_next_sync, setup),
        cmocka_unit_test_setup(free_of_live_allocation_waits_for_nothing, setup),
        cmocka_unit_test_setup(stdout_data_written, setup),
        cmocka_unit_test_setup(host_callback_before_reply, setup),
        cmocka_unit_test_setup(backpressure_fence, setup),
        cmocka_unit_test_setup(fence_reports_deferred_error, setup),
        cmocka_unit_test_setup(async_bulk_is_copied, setup),
        cmocka_unit_test_setup(sync_copy_errors_are_returned, setup),
        cmocka_unit_test_setup(lost_connection_fails_cleanly, setup),
        cmocka_unit_test_setup(unsupported_returns_not_supported, setup),
        cmocka_unit_test_setup(security_calls_never_travel, setup),
        cmocka_unit_test_setup(shareable_descriptors, setup),
        cmocka_unit_test_setup(ipc_calls_travel, setup),
        cmocka_unit_test_setup(occupancy_calls, setup),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    sl_fe_rpc_reset();
    free(F.cur);
    return rc;
}
