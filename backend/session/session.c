/* Session lifecycle: the bare session (tables, pre-assigned primary context ids), its worker
 * thread and bounded job queue, the frames it runs (each call through session/run.c, its reply
 * sent), and the cleanup that frees everything the session held. */
#include "session/session.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accounting/records.h"
#include "api/callback.h"
#include "api/graph_life.h"
#include "api/mapped.h"
#include "daemon/outbox.h"
#include "bounds.h"
#include "session/contexts.h"
#include "session/deferred.h"
#include "session/bulk_pool.h"
#include "session/devices.h"
#include "session/handles.h"
#include "session/printf.h"
#include "session/ranges.h"
#include "session/reply.h"
#include "session/run.h"
#include "session/spin.h"
#include "session/staging.h"
#include "session/state.h"
#include "session/waits.h"
#include "sluice/backend_dispatch.h"
#include "sluice/error.h"
#include "sluice/lanes.h"
#include "sluice/log.h"
#include "sluice/relax.h"

struct be_call_time {   /* calls of one id run by a session */
    uint64_t n;         /* calls run */
    uint64_t timed, ns; /* calls timed, their time from dispatch to reply sent */
};

sl_be_session *be_session_new(uint64_t id, const struct sl_driver_api *api,
                              const struct be_devices *devs)
{
    sl_be_session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->id = id;
    s->api = api;
    s->devs = devs;
    s->cur_ctx = UINT64_MAX;
    s->pool = be_pool_new(api, BE_POOL_SLOTS); /* NULL: large copies' bytes are malloc'd */
    be_handles_init(&s->h, BE_MAX_HANDLES);
    be_mem_init(&s->mem, BE_MAX_ALLOCS);
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the worker's timed waits (usage ticks) */
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    s->next_cb = 1;
    int n = devs ? devs->count : 0;
    s->primary_ids = calloc(n ? (size_t)n : 1, sizeof *s->primary_ids);
    s->st.by_call = calloc(SL_CALL_ID_MAX + 1, sizeof *s->st.by_call); /* optional */
    if (!s->primary_ids) {
        be_session_free(s);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (be_ctx_add(s, NULL, i, 1, &s->primary_ids[i]) != CUDA_SUCCESS) {
            be_session_free(s);
            return NULL;
        }
    return s;
}

void be_job_free(struct be_job *j)
{
    if (!j)
        return;
    if (j->blob)
        be_bulk_free(j->blob);
    else if (j->bulk && j->msg && j->msg->calls)
        for (size_t i = 0; i < j->msg->calls->n_calls; i++)
            free(j->bulk[i]);
    free(j->bulk);
    if (j->msg)
        sl_wire_free_client(j->msg);
    free(j);
}

sl_code be_session_enqueue(sl_be_session *s, struct be_job *job, sl_error *e)
{
    size_t calls = job->msg->calls->n_calls;
    pthread_mutex_lock(&s->mu);
    if (s->closing) {
        pthread_mutex_unlock(&s->mu);
        return sl_fail(e, SL_ERR_CLOSED, "session is closing");
    }
    if (s->q_calls + calls > BE_MAX_QUEUED_CALLS || s->q_bytes + job->bytes > BE_MAX_QUEUED_BYTES) {
        pthread_mutex_unlock(&s->mu);
        return sl_fail(e, SL_ERR_TOO_LARGE,
                       "more than %u calls or %zu MiB of bulk waiting: back-pressure ignored",
                       BE_MAX_QUEUED_CALLS, BE_MAX_QUEUED_BYTES >> 20);
    }
    job->next = NULL;
    if (s->qtail)
        s->qtail->next = job;
    else
        s->qhead = job;
    s->qtail = job;
    s->q_calls += calls;
    s->q_bytes += job->bytes;
    atomic_fetch_add(&s->q_jobs, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return SL_OK;
}

#define BE_LANE_WAIT_MS 30000 /* the pieces of the call at the head, at most (lanes.c) */

/* The call at the head has its bulk on the lanes: the session thread waits for its pieces
 * (only its: a later call's may have arrived already). A lane lost or broken, or pieces that do
 * not come, end the session with that reason: the call never runs on a partial bulk. */
static sl_code lanes_wait(sl_be_session *s, struct be_job *job, const Sluice__Wire__Call *call)
{
    sl_error e;
    if (!job->lanes) {
        sl_fail(&e, SL_ERR_PROTOCOL, "call seq %llu has lane pieces on a session without lanes",
                (unsigned long long)call->seq);
    } else if (sl_lane_asm_wait(job->lanes, call->seq, BE_LANE_WAIT_MS, &e) == SL_OK) {
        sl_lane_asm_forget(job->lanes, call->seq);
        return SL_OK;
    }
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "session %llu: %s", (unsigned long long)s->id, e.msg);
    /* a lane thread may still be writing another piece into the blob: it is left to the
     * process's exit, which follows the session's end */
    job->blob = NULL;
    free(job->bulk);
    job->bulk = NULL;
    be_outbox_push_close(s->srv, s->peer, e.code, e.msg);
    return e.code;
}

/* The debug line of one call: its result, its time here and when it began (CLOCK_MONOTONIC,
 * as the guest's debug line: tests/gpu/datapath_trace.py joins them by seq). */
static void log_call(const sl_be_session *s, const Sluice__Wire__Call *call,
                     const struct sl_call_info *ci, const Sluice__Wire__Reply *reply, CUresult rc,
                     int deferred, const struct timespec *d0, const struct timespec *d1)
{
    double us = (double)(d1->tv_sec - d0->tv_sec) * 1e6 + (double)(d1->tv_nsec - d0->tv_nsec) / 1e3;
    const char *detail = reply->detail ? reply->detail : "";
    sl_log(SL_LOG_DEBUG, BE_COMPONENT,
           "session %llu instance %s: seq %llu %s -> %d%s%s (%.1f us from %lld ns%s)",
           (unsigned long long)s->id, s->instance, (unsigned long long)call->seq,
           ci ? ci->name : "?", (int)rc, *detail ? ": " : "", detail, us,
           (long long)d0->tv_sec * 1000000000LL + d0->tv_nsec,
           deferred ? "; its wait goes on off the call path" : "");
}

static void run_job(sl_be_session *s, struct be_job *job)
{
    const Sluice__Wire__CallFrame *f = job->msg->calls;
    be_acct_frame_begin(s); /* accounting.c: a capped instance's frame may wait (GPU share) */
    be_pool_reap(s->pool);  /* bulk_pool.c: slots whose async copies are done */
    if (job->blob)
        be_pool_pin(s->pool, job->blob); /* a slot's first use: registered with the driver */
    struct timespec t0, t1, t2;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t i = 0; i < f->n_calls; i++) {
        /* an abandoned session runs no more calls: a launch into a full GPU queue blocks
         * until a slot frees, which on a shared GPU took seconds per frame */
        if (atomic_load_explicit(&s->abandon, memory_order_relaxed))
            break;
        const Sluice__Wire__Call *call = f->calls[i];
        if (call->lane_pieces && lanes_wait(s, job, call) != SL_OK)
            break;
        const struct sl_call_info *ci = sl_call_lookup(call->call_id);
        int async = sl_call_is_async(ci, call);
        Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
        /* every synchronous call is timed, every 16th asynchronous one of each id: a clock
         * read costs as much as a tenth of a launch on some VMs */
        struct be_call_time *ct =
            s->st.by_call && call->call_id <= SL_CALL_ID_MAX ? &s->st.by_call[call->call_id] : NULL;
        int timed = ct && (!async || (ct->n & 15) == 0);
        struct timespec c0, c1;
        if (timed)
            clock_gettime(CLOCK_MONOTONIC, &c0);
        const uint8_t *bulk = job->bulk ? job->bulk[i] : NULL;
        struct sl_be_call c = {.s = s,
                               .api = s->api,
                               .call = call,
                               .reply = &reply,
                               .in = bulk,
                               .in_len = bulk ? call->bulk_length : 0};
        atomic_store_explicit(&s->doing, ci ? ci->name : "a call", memory_order_relaxed);
        struct timespec d0, d1;
        int debug = sl_log_enabled(SL_LOG_DEBUG);
        if (debug)
            clock_gettime(CLOCK_MONOTONIC, &d0);
        CUresult rc = be_run_call(&c);
        if (debug)
            clock_gettime(CLOCK_MONOTONIC, &d1);
        atomic_store_explicit(&s->doing, NULL, memory_order_relaxed);
        if (c.deferred) {
            /* waits.c sends the reply when the GPU work is done */
        } else if (async) {
            be_deferred_async(&s->def, call->seq, rc);
            be_bulk_free(c.out); /* async calls have no reply (DtoHAsync: see copy.c) */
        } else {
            be_waits_push_watched(s->waits); /* waits.c: watched streams found done go first */
            be_session_send_reply(s, &c);
        }
        if (debug) /* after the reply left: the line's own time is not the guest's */
            log_call(s, call, ci, &reply, rc, c.deferred, &d0, &d1);
        sl_be_reply_clear(&reply);
        /* a wait done meanwhile answers now, not after the frame: the pieces of a large copy
         * behind busy work go out as each is copied (waits.c) */
        be_waits_finish(s->waits);
        if (ct)
            ct->n++;
        if (timed) {
            clock_gettime(CLOCK_MONOTONIC, &c1);
            ct->timed++;
            ct->ns +=
                (uint64_t)((c1.tv_sec - c0.tv_sec) * 1000000000LL + (c1.tv_nsec - c0.tv_nsec));
        }
    }
    pthread_mutex_lock(&s->mu);
    int more = s->qhead != NULL;
    pthread_mutex_unlock(&s->mu);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    be_acct_frame_end(s, more); /* accounting.c: close the timed runs, measure what finished */
    clock_gettime(CLOCK_MONOTONIC, &t2);
    s->st.frames++;
    s->st.backlog += more;
    s->st.busy_ns += (uint64_t)((t2.tv_sec - t0.tv_sec) * 1000000000LL + (t2.tv_nsec - t0.tv_nsec));
    s->st.runs_ns += (uint64_t)((t2.tv_sec - t1.tv_sec) * 1000000000LL + (t2.tv_nsec - t1.tv_nsec));
}

/* A call id's estimated total time: its mean over the timed calls times all its calls. */
static double call_total_ns(const struct be_call_time *t)
{
    return t->timed ? (double)t->ns / (double)t->timed * (double)t->n : 0.0;
}

/* One line naming the calls that took most of the session thread's time (a synchronous call's
 * time includes its wait for the GPU). */
static void log_call_times(const sl_be_session *s)
{
    enum { TOP = 8 };
    uint32_t ids[TOP];
    size_t n = 0;
    if (!s->st.by_call)
        return;
    for (uint32_t id = 1; id <= SL_CALL_ID_MAX; id++) {
        double ns = call_total_ns(&s->st.by_call[id]);
        if (!s->st.by_call[id].timed ||
            (n == TOP && ns <= call_total_ns(&s->st.by_call[ids[TOP - 1]])))
            continue;
        size_t at = n < TOP ? n++ : TOP - 1;
        while (at > 0 && call_total_ns(&s->st.by_call[ids[at - 1]]) < ns) {
            ids[at] = ids[at - 1];
            at--;
        }
        ids[at] = id;
    }
    char line[1024];
    size_t len = 0;
    for (size_t i = 0; i < n && len < sizeof line; i++) {
        const struct be_call_time *t = &s->st.by_call[ids[i]];
        const char *name = sl_call_table[ids[i]].name ? sl_call_table[ids[i]].name : "?";
        int w = snprintf(line + len, sizeof line - len, "%s%s %llu x %.1f us = %.1f ms",
                         i ? ", " : "", name, (unsigned long long)t->n,
                         (double)t->ns / 1e3 / (double)t->timed, call_total_ns(t) / 1e6);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    if (n)
        sl_log(SL_LOG_INFO, BE_COMPONENT, "session %llu: its thread's time went most to: %s",
               (unsigned long long)s->id, line);
}

static void *worker(void *arg)
{
    sl_be_session *s = arg;
    pthread_setname_np(pthread_self(), "sl-session");
    int ran = 0;
    for (;;) {
        be_waits_finish(s->waits); /* waits.c: replies of waits the GPU completed */
        if (be_acct_ms_to_tick(s) <= 0)
            be_acct_tick(s);     /* accounting.c: the interval's usage records */
        if (ran && s->spin_ns) { /* spin.c: the next frame usually follows soon */
            uint64_t end = be_now_ns() + s->spin_ns;
            while (!atomic_load_explicit(&s->q_jobs, memory_order_acquire) &&
                   !be_waits_ready(s->waits) && be_now_ns() < end)
                sl_cpu_relax();
        }
        ran = 0;
        pthread_mutex_lock(&s->mu);
        while (!s->qhead && !s->closing && !be_waits_ready(s->waits)) {
            int64_t ms = be_acct_ms_to_tick(s);
            if (ms <= 0)
                break;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts); /* s->cv runs on CLOCK_MONOTONIC */
            ms = ms > 3600000 ? 3600000 : ms;
            ts.tv_sec += (time_t)(ms / 1000);
            ts.tv_nsec += (long)(ms % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        }
        if (!s->qhead && !s->closing) {
            pthread_mutex_unlock(&s->mu);
            continue; /* a record is due, or a wait completed */
        }
        struct be_job *job = s->qhead;
        if (!job || atomic_load(&s->abandon)) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        int closing = s->closing;
        s->qhead = job->next;
        if (!s->qhead)
            s->qtail = NULL;
        s->q_calls -= job->msg->calls->n_calls;
        s->q_bytes -= job->bytes;
        atomic_fetch_sub(&s->q_jobs, 1);
        pthread_mutex_unlock(&s->mu);
        ran = 1;
        if (!closing)
            run_job(s, job);
        be_job_free(job);
    }
    int abandon = atomic_load(&s->abandon);
    be_pool_log(s->pool, (unsigned long long)s->id);
    if (abandon) { /* be_session_abandon: the final record, then the process exits */
        be_callbacks_cancel(s);
        be_acct_final_record(s);
    } else {
        be_session_release_all(s);
    }
    sl_log(SL_LOG_INFO, BE_COMPONENT,
           "session %llu instance %s project %s: ended after %llu calls (%llu failed), %s",
           (unsigned long long)s->id, s->instance, s->project, (unsigned long long)s->calls,
           (unsigned long long)s->errors,
           abandon ? "its work still queued on the GPU not waited for" : "everything freed");
    sl_log(SL_LOG_INFO, BE_COMPONENT,
           "session %llu: %llu frames took %.1f ms of its thread (%.1f ms closing and measuring "
           "timed runs); %llu of them had the next frame queued behind them",
           (unsigned long long)s->id, (unsigned long long)s->st.frames, (double)s->st.busy_ns / 1e6,
           (double)s->st.runs_ns / 1e6, (unsigned long long)s->st.backlog);
    if (s->st.img_sent || s->st.img_kept)
        sl_log(SL_LOG_INFO, BE_COMPONENT,
               "session %llu: module images: %llu received (%.1f MiB), %llu taken from the "
               "backend's cache or image store without their bytes, %llu asked for again",
               (unsigned long long)s->id, (unsigned long long)s->st.img_sent,
               (double)s->st.img_sent_bytes / 1048576.0, (unsigned long long)s->st.img_kept,
               (unsigned long long)s->st.img_asked);
    log_call_times(s);
    atomic_store(&s->finished, 1);
    return NULL;
}

sl_code be_session_start(sl_be_session *s, sl_error *e)
{
    s->waits = be_waits_new(s, BE_MAX_WAITERS, s->spin_ns); /* NULL: every wait inline */
    if (pthread_create(&s->thread, NULL, worker, s) != 0)
        return sl_fail(e, SL_ERR_NOMEM, "cannot start the session's worker thread");
    s->started = 1;
    return SL_OK;
}

void be_session_close(sl_be_session *s)
{
    pthread_mutex_lock(&s->mu);
    s->closing = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    be_callbacks_cancel(s);
}

int be_session_abandon(sl_be_session *s, int64_t wait_ms)
{
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->abandon, 1);
    s->closing = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    be_callbacks_cancel(s);
    if (!s->started)
        return 1;
    uint64_t until = be_now_ns() + (uint64_t)wait_ms * 1000000u;
    while (!atomic_load(&s->finished) && be_now_ns() < until) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&s->finished);
}

void be_session_release_all(sl_be_session *s)
{
    be_callbacks_cancel(s);
    be_waits_free(s->waits); /* waits.c: every wait ends (its reply goes if the guest is there) */
    s->waits = NULL;
    be_acct_finish(s); /* accounting.c: the final usage record, before the contexts go */
    be_mapped_release_all(s);
    /* libraries are context-independent: unload them first (their kernels go with them) */
    for (size_t i = 0; i < s->h.cap; i++) {
        struct be_handle *h = &s->h.slot[i];
        if (h->id > 1 && be_id_kind(h->id) == SL_H_LIBRARY && s->api && s->api->cuLibraryUnload)
            s->api->cuLibraryUnload((CUlibrary)h->native);
    }
    /* destroying a context frees everything it held (memory, modules, streams, events) */
    while (s->n_ctxs) {
        struct be_ctx *c = s->ctxs[s->n_ctxs - 1];
        if (c->ctx && s->api) {
            if (s->api->cuCtxSynchronize_v2)
                s->api->cuCtxSynchronize_v2(c->ctx);
            be_stage_free(s, c); /* staging.c */
            if (s->api->cuCtxDestroy_v2)
                s->api->cuCtxDestroy_v2(c->ctx);
        }
        free(c);
        s->n_ctxs--;
    }
    be_pool_free(s->pool); /* the contexts are gone: no copy reads or writes a slot */
    s->pool = NULL;
    if (s->api && s->api->cuCtxSetCurrent && s->cur_ctx != UINT64_MAX && s->cur_ctx != 0)
        s->api->cuCtxSetCurrent(NULL);
    s->cur_ctx = UINT64_MAX;
    be_graph_release(s); /* graph*.c, vmm.c, link.c: their bookkeeping */
    be_handles_free(&s->h);
    be_mem_free(&s->mem);
    free(s->stdout_buf);
    s->stdout_buf = NULL;
    s->stdout_len = 0;
    free(s->stderr_buf);
    s->stderr_buf = NULL;
    s->stderr_len = 0;
}

void be_session_free(sl_be_session *s)
{
    if (!s)
        return;
    if (s->started) {
        be_session_close(s);
        pthread_join(s->thread, NULL);
    } else {
        be_session_release_all(s);
    }
    for (struct be_job *j = s->qhead, *n; j; j = n) {
        n = j->next;
        be_job_free(j);
    }
    be_handles_free(&s->h);
    be_mem_free(&s->mem);
    free(s->primary_ids);
    free(s->st.by_call);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
