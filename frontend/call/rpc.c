/* The call layer's calls (docs/remoting.md "Synchronous and asynchronous calls"): seq
 * numbers, the pending CallFrame, synchronous calls and batches, async calls and their
 * back-pressure through slFence, deferred errors, and the stub runtime of
 * sluice/stub_runtime.h.
 *
 * One mutex (the state's io, rpc_state.h) covers the pending frame (kept encoded: frame.c) and
 * the channel. A thread making a synchronous call appends it to the pending frame, sends the
 * frame and waits until its reply arrives (rpc_replies.c); when a frame of async calls leaves
 * is the send window's (rpc_sender.c). Around every call the filters run in their one order
 * (filters.c): answers given here, what is forgotten before a call leaves, what a reply
 * brings. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "call/allocs.h"
#include "call/busy.h"
#include "call/callbacks.h"
#include "call/connection.h"
#include "call/contexts.h"
#include "call/memo.h"
#include "call/filters.h"
#include "call/lanes.h"
#include "call/frame.h"
#include "call/notice.h"
#include "call/rpc.h"
#include "call/rpc_replies.h"
#include "call/rpc_sender.h"
#include "call/rpc_state.h"
#include "call/rpc_stats.h"
#include "component.h"
#include "sluice/fe_calls.h"
#include "sluice/lanes.h"
#include "sluice/log.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define SMALL_BULK ((size_t)64 << 10) /* async bulk up to this is copied and coalesced */

/* Appends call (already given seq/context/bulk_length) to the pending frame. */
static CUresult pending_append(const Sluice__Wire__Call *call)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    sl_error e;
    if (sl_wire_check_call(call, NULL, &e)) {
        sl_log(SL_LOG_ERR, SL_FE_COMPONENT, "refusing to send call %u: %s", call->call_id, e.msg);
        return CUDA_ERROR_INVALID_VALUE;
    }
    uint64_t t0 = rs->pf.calls ? rs->pend_t0_ns : sl_fe_now_ns();
    if (sl_fe_frame_append(&rs->pf, call))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rs->pend_t0_ns = t0;
    const struct sl_call_info *ci = sl_call_lookup(call->call_id);
    sl_fe_filters_appended(call, ci);
    return CUDA_SUCCESS;
}

/* Queues call with len bytes of bulk copied, ahead of the call about to leave (the lock held). */
static CUresult queue_copied(Sluice__Wire__Call *call, const void *data, size_t len)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    call->seq = ++rs->seq;
    call->context = sl_fe_current_ctx_id();
    call->bulk_length = len;
    if (sl_fe_frame_reserve_bulk(&rs->pf, len)) {
        rs->seq--;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = pending_append(call);
    if (rc != CUDA_SUCCESS) {
        rs->seq--;
        return rc;
    }
    sl_fe_frame_add_bulk(&rs->pf, data, len);
    rs->inflight_calls++;
    rs->inflight_bulk += len;
    rs->inflight_seq = rs->seq;
    return CUDA_SUCCESS;
}

/* Queues slMappedWrite (mapped.c found bytes the program changed) with its bytes copied. */
static CUresult mapped_emit(uint64_t dptr, uint64_t offset, const void *data, size_t len)
{
    Sluice__Cuda__SlMappedWriteRequest req = SLUICE__CUDA__SL_MAPPED_WRITE_REQUEST__INIT;
    req.dptr = dptr;
    req.offset = offset;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(slMappedWrite, &call, &req);
    return queue_copied(&call, data, len);
}

/* Queues cuMemcpyHtoDAsync (managed.c found pages the program wrote) with its bytes copied. */
static CUresult managed_push(uint64_t dst, const void *data, size_t len)
{
    /* the legacy stream: after the device work queued before it, as the program's writes were */
    Sluice__Cuda__CuMemcpyHtoDAsyncV2Request req =
        SLUICE__CUDA__CU_MEMCPY_HTO_DASYNC_V2_REQUEST__INIT;
    req.dst_device = dst;
    req.src_host = len;
    req.byte_count = len;
    req.h_stream = (uint64_t)(uintptr_t)CU_STREAM_LEGACY;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuMemcpyHtoDAsync_v2, &call, &req);
    return queue_copied(&call, data, len);
}

/* Queues the free of an allocation the cache gave up (allocs.c), in the context it was made
 * in, without waiting (Call.no_reply: answered as an async call). */
static CUresult release_emit(uint64_t dptr, uint64_t ctx)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    Sluice__Cuda__CuMemFreeV2Request req = SLUICE__CUDA__CU_MEM_FREE_V2_REQUEST__INIT;
    req.dptr = dptr;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuMemFree_v2, &call, &req);
    call.no_reply = true;
    call.context = ctx;
    call.seq = ++rs->seq;
    CUresult rc = pending_append(&call);
    if (rc != CUDA_SUCCESS) {
        rs->seq--;
        return rc;
    }
    rs->inflight_calls++;
    rs->inflight_seq = rs->seq;
    rs->stats.async_calls++;
    return CUDA_SUCCESS;
}

static const struct sl_fe_emit g_emit = {
    .mapped = mapped_emit, .managed = managed_push, .release = release_emit};

/* A call that takes memory the quota counts: refused for memory while the allocation cache
 * holds some, it is asked once more after the cache was given back (allocs.h). */
static int takes_memory(const struct sl_call_info *ci)
{
    return ci && (ci->quota == SL_QUOTA_ALLOC || ci->quota == SL_QUOTA_COUNTED ||
                  ci->quota == SL_QUOTA_ARRAY);
}

/* A call's encoded arguments in hex, up to 24 bytes ("-" when they are longer than 64 or
 * absent): debug logs, to tell which question a call asked. */
static void args_hex(const Sluice__Wire__Call *call, char *out, size_t cap)
{
    uint8_t buf[64];
    size_t n = 0;
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&sluice__wire__call__descriptor, call->args_case);
    const ProtobufCMessage *rq = f && f->type == PROTOBUF_C_TYPE_MESSAGE
                                     ? *(ProtobufCMessage *const *)((const char *)call + f->offset)
                                     : NULL;
    if (rq && protobuf_c_message_get_packed_size(rq) <= sizeof buf)
        n = protobuf_c_message_pack(rq, buf);
    size_t k = 0;
    for (size_t i = 0; i < n && k + 3 <= cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%02x", buf[i]);
    out[k] = 0;
    if (!k && cap > 1)
        snprintf(out, cap, "-");
}

/* ------------------------------------------------------------------ entry points */
static CUresult begin(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    if (sl_fe_in_callback())
        return CUDA_ERROR_NOT_PERMITTED;
    for (;;) {
        pthread_mutex_lock(&rs->io);
        if (rs->attached)
            break;
        pthread_mutex_unlock(&rs->io);
        CUresult rc = sl_fe_ensure_session();
        if (rc != CUDA_SUCCESS)
            return rc;
        pthread_mutex_lock(&rs->io);
        if (!rs->attached) {
            pthread_mutex_unlock(&rs->io);
            return CUDA_ERROR_DEVICE_UNAVAILABLE;
        }
        break;
    }
    if (rs->dead) {
        pthread_mutex_unlock(&rs->io);
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    }
    return CUDA_SUCCESS; /* the lock held */
}

static uint64_t bulk_total(const struct iovec *in, size_t n)
{
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++)
        t += in[i].iov_len;
    return t;
}

/* Set while this thread asks for the rest of the device's writes to mapped memory. */
static _Thread_local int t_mapped_rest;
/* Set while this thread makes the later parts of one API call (sl_fe_rest_of_call). */
static _Thread_local int t_rest_of_call;

void sl_fe_rest_of_call(int on)
{
    t_rest_of_call = on;
}
static void mapped_rest_locked(void);

/* With bulk lanes (lanes.c): a large bulk goes on them in pieces, a large reply's bulk is asked
 * for on them. */
static void lanes_mark(Sluice__Wire__Call *call, size_t out_cap)
{
    unsigned lanes = sl_fe_lanes_active();
    call->lane_pieces = lanes && call->bulk_length >= SL_FE_LANE_MIN_BULK
                            ? sl_lane_pieces_for(call->bulk_length, lanes)
                            : 0;
    call->reply_on_lanes = lanes && out_cap >= SL_FE_LANE_MIN_BULK;
}

/* Sends the pending frame, then call's bulk: after the frame, or in pieces on the lanes. The
 * lanes' sends are waited for without the lock: a lane thread may first have to hand a reply's
 * piece to the reader, which needs the lock to read that reply; other threads' frames may go
 * meanwhile (the worker runs the calls in seq order and waits for this one's pieces). */
static CUresult send_bulk(const Sluice__Wire__Call *call, const struct iovec *in, size_t n)
{
    if (!call->lane_pieces)
        return sl_fe_pending_send(in, n);
    CUresult rc = sl_fe_pending_send(NULL, 0);
    if (rc == CUDA_SUCCESS) {
        struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
        pthread_mutex_unlock(&rs->io);
        rc = sl_fe_lanes_send(call->seq, in, n, call->bulk_length, call->lane_pieces);
        pthread_mutex_lock(&rs->io);
    }
    if (rc != CUDA_SUCCESS) {
        sl_error e;
        sl_fail(&e, SL_ERR_PEER_LOST, "call seq %llu: a bulk lane failed",
                (unsigned long long)call->seq);
        return sl_fe_rpc_lost("bulk lane", &e);
    }
    return rc;
}

static CUresult call_locked(Sluice__Wire__Call *call, const struct iovec *in, size_t n, void *out,
                            size_t out_cap, size_t *out_len, Sluice__Wire__Reply **reply,
                            int retried)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    const struct sl_call_info *ci = sl_call_lookup(call->call_id);
    uint32_t flags = ci ? ci->flags : 0;
    int memo = (flags & SL_CALL_MEMO) && !n && !out;
    if (!call->context)
        call->context = sl_fe_current_ctx_id();
    if (ci && (ci->idle == SL_IDLE_QUERY_STREAM || ci->idle == SL_IDLE_QUERY_EVENT) &&
        sl_fe_busy_known())
        sl_fe_read_pending(); /* a StreamDone of a busy stream may be there (busy.c) */
    if (sl_fe_filters_answer(call, memo, rs->seq, reply)) { /* the memo or the idle streams */
        rs->stats.memo_hits++;
        return CUDA_SUCCESS;
    }
    /* the frame in flight first: waiting for it lets other threads append to the pending frame,
     * which must not then hold a call whose bulk follows the frame (sl_fe_pending_send); one not
     * taken yet goes with this call */
    struct timespec t_in = {0, 0}; /* for the debug line only */
    if (sl_log_enabled(SL_LOG_DEBUG))
        clock_gettime(CLOCK_MONOTONIC, &t_in);
    CUresult rc = sl_fe_outbox_join();
    if (rc != CUDA_SUCCESS)
        return rc;
    sl_fe_filters_before(call, flags, rs->seq);
    /* the fences that fetch the rest of a reply's mapped bytes belong to the call being answered:
     * they compare nothing (what other threads change meanwhile goes with the next call) */
    if (!t_mapped_rest && !t_rest_of_call && (rc = sl_fe_filters_sync_out(&g_emit)) != CUDA_SUCCESS)
        return rc;
    call->seq = ++rs->seq;
    call->bulk_length = bulk_total(in, n);
    lanes_mark(call, out ? out_cap : 0);
    rc = pending_append(call);
    if (rc != CUDA_SUCCESS) {
        rs->seq--;
        return rc;
    }
    /* the waiter first: with lane pieces the lock is let go while they go, and the reader may
     * meanwhile read this call's reply (the worker has all pieces before the last send ends) */
    struct sl_fe_waiter w = {.seq = call->seq, .out = out, .out_cap = out_cap};
    pthread_cond_t cv;
    pthread_cond_init(&cv, NULL);
    sl_fe_waiters_add(&w, 1, &cv);
    rc = send_bulk(call, in, n);
    if (rc != CUDA_SUCCESS) {
        sl_fe_waiters_remove(&w, 1);
        if (w.reply)
            sl_wire_reply_free(w.reply);
        pthread_cond_destroy(&cv);
        return rc;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = sl_fe_wait_replies(&w, 1, &cv); /* the lock released while waiting */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_cond_destroy(&cv);
    rs->stats.sync_calls++;
    sl_fe_rpc_count_sync(call->call_id);
    rs->stats.wait_ns +=
        (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!retried && w.reply->result == CUDA_ERROR_OUT_OF_MEMORY && takes_memory(ci) &&
        sl_fe_allocs_release_cached()) {
        sl_fe_filters_answered(call, w.reply, memo, rs->seq);
        sl_wire_reply_free(w.reply);
        return call_locked(call, in, n, out, out_cap, out_len, reply, 1);
    }
    if (out_len)
        *out_len = w.out_len;
    *reply = w.reply;
    sl_fe_notice_reply(call->call_id, w.reply->result, w.reply->detail);
    if (sl_log_enabled(SL_LOG_DEBUG)) {
        const struct sl_call_info *ci = sl_call_lookup(call->call_id);
        char args[2 * 24 + 1];
        args_hex(call, args, sizeof args);
        /* the round trip from the send's end; the send's own time and when the call began
         * (CLOCK_MONOTONIC, as in the worker's debug line: tests/gpu/datapath_trace.py) */
        sl_log(
            SL_LOG_DEBUG, SL_FE_COMPONENT,
            "%s seq %llu ctx %llx args %s -> %d%s%s (%.1f us; sent in %.1f us from %lld ns)",
            ci ? ci->name : "?", (unsigned long long)call->seq, (unsigned long long)call->context,
            args, w.reply->result, w.reply->detail && *w.reply->detail ? ": " : "",
            w.reply->detail ? w.reply->detail : "",
            (double)((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec)) / 1e3,
            (double)((t0.tv_sec - t_in.tv_sec) * 1000000000LL + (t0.tv_nsec - t_in.tv_nsec)) / 1e3,
            (long long)t_in.tv_sec * 1000000000LL + t_in.tv_nsec);
    }
    if (w.out_overflow && w.reply->result == CUDA_SUCCESS)
        w.reply->result = CUDA_ERROR_INVALID_VALUE;
    sl_fe_filters_answered(call, w.reply, memo, rs->seq);
    if (w.reply->mapped_more && !t_mapped_rest)
        mapped_rest_locked();
    return CUDA_SUCCESS;
}

/* The device's writes to mapped memory that one reply could not carry (Reply.mapped_more): asked
 * for with slFence until a reply has none left, before the call returns to the program. */
static void mapped_rest_locked(void)
{
    t_mapped_rest = 1;
    for (int more = 1; more;) {
        Sluice__Cuda__SlFenceRequest req = SLUICE__CUDA__SL_FENCE_REQUEST__INIT;
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        SL_FE_SET(slFence, &call, &req);
        Sluice__Wire__Reply *rep = NULL;
        sl_fe_rpc_state()->stats.fences++;
        CUresult rc = call_locked(&call, NULL, 0, NULL, 0, NULL, &rep, 1);
        more = rc == CUDA_SUCCESS && rep && rep->mapped_more;
        sl_fe_reply_free(rep);
    }
    t_mapped_rest = 0;
}

CUresult sl_fe_call_bulk(Sluice__Wire__Call *call, const struct iovec *in, size_t n, void *out,
                         size_t out_cap, size_t *out_len, Sluice__Wire__Reply **reply)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    *reply = NULL;
    if (n > 7)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = begin();
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = call_locked(call, in, n, out, out_cap, out_len, reply, 0);
    pthread_mutex_unlock(&rs->io);
    return rc;
}

CUresult sl_fe_call_batch(Sluice__Wire__Call *const *calls, size_t n, void *const *out,
                          const size_t *out_cap, size_t *out_len, Sluice__Wire__Reply **replies)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    for (size_t i = 0; i < n && i < SL_FE_BATCH_MAX; i++)
        replies[i] = NULL;
    if (n == 0 || n > SL_FE_BATCH_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = begin();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sl_fe_waiter ws[SL_FE_BATCH_MAX];
    size_t k = 0;
    if ((rc = sl_fe_outbox_join()) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&rs->io);
        return rc;
    }
    /* every call's before first, so that what they give up (a cached allocation a copy names:
     * allocs.c) goes out ahead of the batch with the rest of sync_out. A batch's answers teach
     * the memo nothing, so no answer of its own calls is kept that a forget here would miss. */
    for (size_t i = 0; i < n; i++) {
        const struct sl_call_info *ci = sl_call_lookup(calls[i]->call_id);
        if (!calls[i]->context)
            calls[i]->context = sl_fe_current_ctx_id();
        sl_fe_filters_before(calls[i], ci ? ci->flags : 0, rs->seq);
    }
    if (t_rest_of_call || (rc = sl_fe_filters_sync_out(&g_emit)) == CUDA_SUCCESS) {
        for (; k < n; k++) {
            calls[k]->seq = ++rs->seq;
            calls[k]->bulk_length = 0;
            lanes_mark(calls[k], out[k] ? out_cap[k] : 0);
            if ((rc = pending_append(calls[k])) != CUDA_SUCCESS) {
                rs->seq--;
                break;
            }
            ws[k] =
                (struct sl_fe_waiter){.seq = calls[k]->seq, .out = out[k], .out_cap = out_cap[k]};
        }
    }
    /* what was appended is sent and answered, also when a later call could not be */
    CUresult io = sl_fe_pending_send(NULL, 0);
    pthread_cond_t cv;
    pthread_cond_init(&cv, NULL);
    if (io == CUDA_SUCCESS && k) {
        sl_fe_waiters_add(ws, k, &cv);
        io = sl_fe_wait_replies(ws, k, &cv);
    }
    pthread_cond_destroy(&cv);
    rs->stats.sync_calls += k;
    for (size_t i = 0; i < k; i++)
        sl_fe_rpc_count_sync(calls[i]->call_id);
    if (io != CUDA_SUCCESS) {
        pthread_mutex_unlock(&rs->io);
        return io;
    }
    for (size_t i = 0; i < k; i++) {
        if (ws[i].out_overflow && ws[i].reply->result == CUDA_SUCCESS)
            ws[i].reply->result = CUDA_ERROR_INVALID_VALUE;
        sl_fe_filters_answered_batch(calls[i], ws[i].reply, rs->seq);
        out_len[i] = ws[i].out_len;
        replies[i] = ws[i].reply;
    }
    for (size_t i = 0; i < k; i++)
        if (ws[i].reply->mapped_more && !t_mapped_rest) {
            mapped_rest_locked();
            break;
        }
    pthread_mutex_unlock(&rs->io);
    return rc;
}

void sl_fe_memo_seed(Sluice__Wire__Call *call, const Sluice__Wire__Reply *reply)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    const struct sl_call_info *ci = sl_call_lookup(call->call_id);
    if (!ci || !(ci->flags & SL_CALL_MEMO))
        return;
    if (!call->context)
        call->context = sl_fe_current_ctx_id();
    pthread_mutex_lock(&rs->io);
    sl_fe_memo_put(call, reply);
    pthread_mutex_unlock(&rs->io);
}

CUresult sl_fe_call(Sluice__Wire__Call *call, Sluice__Wire__Reply **reply)
{
    return sl_fe_call_bulk(call, NULL, 0, NULL, 0, NULL, reply);
}

CUresult sl_fe_pod_out(CUresult rc, const ProtobufCBinaryData *pod, void *dst, size_t size)
{
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pod || pod->len != size)
        return CUDA_ERROR_UNKNOWN; /* not the answer this call has */
    memcpy(dst, pod->data, size);
    return CUDA_SUCCESS;
}

void sl_fe_reply_free(Sluice__Wire__Reply *reply)
{
    if (reply)
        sl_wire_reply_free(reply);
}

CUresult sl_fe_reply_result(CUresult rc, Sluice__Wire__Reply *rep)
{
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    return rc;
}

/* slFence with the lock held. */
static CUresult fence_locked(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    Sluice__Cuda__SlFenceRequest req = SLUICE__CUDA__SL_FENCE_REQUEST__INIT;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(slFence, &call, &req);
    Sluice__Wire__Reply *rep = NULL;
    rs->stats.fences++;
    CUresult rc = call_locked(&call, NULL, 0, NULL, 0, NULL, &rep, 1);
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult sl_fe_fence(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    CUresult rc = begin();
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = fence_locked();
    pthread_mutex_unlock(&rs->io);
    return rc;
}

CUresult sl_fe_enqueue_async_bulk(Sluice__Wire__Call *call, const struct iovec *in, size_t n)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    if (n > 7)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = begin();
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t blen = bulk_total(in, n);
    int direct = blen > SMALL_BULK; /* its bulk follows the frame: the frame in flight first */
    if (direct && (rc = sl_fe_outbox_drain()) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&rs->io);
        return rc;
    }
    const struct sl_call_info *info = sl_call_lookup(call->call_id);
    sl_fe_filters_before(call, info ? info->flags : 0, rs->seq);
    if (!t_rest_of_call && (rc = sl_fe_filters_sync_out(&g_emit)) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&rs->io);
        return rc;
    }
    call->seq = ++rs->seq;
    if (!call->context)
        call->context = sl_fe_current_ctx_id();
    call->bulk_length = blen;
    lanes_mark(call, 0);
    if (!direct && blen) {
        if (sl_fe_frame_reserve_bulk(&rs->pf, blen)) {
            rs->seq--;
            pthread_mutex_unlock(&rs->io);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    rc = pending_append(call);
    if (rc != CUDA_SUCCESS) {
        rs->seq--;
        pthread_mutex_unlock(&rs->io);
        return rc;
    }
    if (!direct) {
        for (size_t i = 0; i < n; i++)
            sl_fe_frame_add_bulk(&rs->pf, in[i].iov_base, in[i].iov_len);
    }
    rs->inflight_calls++;
    rs->inflight_bulk += blen;
    rs->inflight_seq = rs->seq;
    rs->stats.async_calls++;
    if (sl_log_enabled(SL_LOG_DEBUG)) {
        const struct sl_call_info *ci = sl_call_lookup(call->call_id);
        char args[2 * 24 + 1];
        args_hex(call, args, sizeof args);
        sl_log(SL_LOG_DEBUG, SL_FE_COMPONENT, "%s seq %llu args %s%s queued (async)",
               ci ? ci->name : "?", (unsigned long long)call->seq, args,
               call->per_thread_stream ? " ptsz" : "");
    }
    if (direct) /* the guest's buffer is encrypted before send returns (lanes too) */
        rc = send_bulk(call, in, n);
    else
        rc = sl_fe_frame_queued(); /* the send window decides */
    if (rc == CUDA_SUCCESS && (rs->inflight_calls >= rs->lim.inflight_calls ||
                               rs->inflight_bulk >= rs->lim.inflight_bulk))
        rc = fence_locked();
    pthread_mutex_unlock(&rs->io);
    return rc;
}

CUresult sl_fe_enqueue_async(Sluice__Wire__Call *call)
{
    return sl_fe_enqueue_async_bulk(call, NULL, 0);
}
