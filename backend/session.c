/* Session lifecycle: the bare session (tables, pre-assigned primary context ids), its worker
 * thread and bounded job queue, context ids (lazily created per-session contexts, never the
 * process's real primary context), the per-call path (context switch, sticky errors, deferred
 * errors, printf capture) and the cleanup that frees everything the session held. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "sluice/relax.h"
#include "sluice/log.h"

/* ---------------------------------------------------------------- contexts */

struct be_ctx *be_ctx_find(sl_be_session *s, uint64_t id)
{
    if (be_id_kind(id) != SL_H_CONTEXT)
        return NULL;
    for (size_t i = 0; i < s->n_ctxs; i++)
        if (s->ctxs[i]->id == id)
            return s->ctxs[i];
    return NULL;
}

CUresult be_ctx_ensure(sl_be_session *s, struct be_ctx *c)
{
    if (c->ctx)
        return CUDA_SUCCESS;
    if (c->ordinal < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUdevice dev;
    CUresult rc = sl_be_device_get(s, c->ordinal, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUcontext ctx = NULL;
    if (s->api->cuCtxCreate_v4)
        rc = s->api->cuCtxCreate_v4(&ctx, NULL, c->flags, dev);
    else if (s->api->cuCtxCreate_v2)
        rc = s->api->cuCtxCreate_v2(&ctx, c->flags, dev);
    else
        rc = CUDA_ERROR_NOT_SUPPORTED;
    s->cur_ctx = UINT64_MAX; /* cuCtxCreate made it current: re-set before the next call */
    if (rc != CUDA_SUCCESS)
        return rc;
    c->ctx = ctx;
    sl_log(SL_LOG_DEBUG, BE_COMPONENT, "session %llu: context %llx created on device %d",
           (unsigned long long)s->id, (unsigned long long)c->id, c->ordinal);
    return CUDA_SUCCESS;
}

CUresult be_ctx_add(sl_be_session *s, CUcontext ctx, int ordinal, int primary, uint64_t *id)
{
    if (s->n_ctxs >= BE_MAX_CONTEXTS)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct be_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* the id comes from the handle counter; the handle table keeps it reserved */
    CUresult rc = be_handles_put(&s->h, SL_H_CONTEXT, c, 0, 0, &c->id);
    if (rc != CUDA_SUCCESS) {
        free(c);
        return rc;
    }
    c->ctx = ctx;
    c->ordinal = ordinal;
    c->primary = primary;
    s->ctxs[s->n_ctxs++] = c;
    *id = c->id;
    return CUDA_SUCCESS;
}

/* Everything that lived in the context: handles made while it was current, its ranges. */
static void drop_ctx_objects(sl_be_session *s, uint64_t id)
{
    for (size_t i = 0; i < s->h.cap; i++) {
        struct be_handle *h = &s->h.slot[i];
        if (h->id > 1 && h->owner_ctx == id && be_id_kind(h->id) != SL_H_CONTEXT)
            sl_be_handle_drop(s, be_id_kind(h->id), h->id);
    }
    be_mem_remove_owner(&s->mem, id);
}

void be_ctx_forget(sl_be_session *s, uint64_t id)
{
    for (size_t i = 0; i < s->n_ctxs; i++) {
        if (s->ctxs[i]->id != id)
            continue;
        drop_ctx_objects(s, id);
        be_handles_del(&s->h, id);
        free(s->ctxs[i]);
        s->ctxs[i] = s->ctxs[--s->n_ctxs];
        if (s->cur_ctx == id)
            s->cur_ctx = UINT64_MAX;
        return;
    }
}

/* Destroys the real context behind c (primary ids stay, to be re-created lazily). */
static CUresult ctx_destroy(sl_be_session *s, struct be_ctx *c)
{
    CUresult rc = CUDA_SUCCESS;
    if (c->ctx) {
        be_acct_ctx_gone(s, c->ctx); /* accounting.c: its timed work is measured first */
        if (s->api->cuCtxSynchronize_v2)
            s->api->cuCtxSynchronize_v2(c->ctx);
        rc = s->api->cuCtxDestroy_v2 ? s->api->cuCtxDestroy_v2(c->ctx) : CUDA_ERROR_NOT_SUPPORTED;
        if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_CONTEXT_IS_DESTROYED)
            return rc;
        rc = CUDA_SUCCESS;
    }
    c->ctx = NULL;
    c->sticky = CUDA_SUCCESS;
    drop_ctx_objects(s, c->id);
    s->cur_ctx = UINT64_MAX;
    return rc;
}

/* ---------------------------------------------------------------- session-level handlers */

static CUresult primary_of(sl_be_session *s, int32_t ordinal, struct be_ctx **out)
{
    if (!s->devs || ordinal < 0 || ordinal >= s->devs->count)
        return CUDA_ERROR_INVALID_DEVICE;
    struct be_ctx *c = be_ctx_find(s, s->primary_ids[ordinal]);
    if (!c) { /* the guest destroyed it with cuCtxDestroy: a new one */
        CUresult rc = be_ctx_add(s, NULL, ordinal, 1, &s->primary_ids[ordinal]);
        if (rc != CUDA_SUCCESS)
            return rc;
        c = be_ctx_find(s, s->primary_ids[ordinal]);
    }
    *out = c;
    return CUDA_SUCCESS;
}

CUresult be_h_cuDevicePrimaryCtxSetFlags_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    struct be_ctx *cx;
    CUresult rc = primary_of(s, call->cu_device_primary_ctx_set_flags_v2->dev, &cx);
    if (rc != CUDA_SUCCESS)
        return rc;
    unsigned f = call->cu_device_primary_ctx_set_flags_v2->flags;
    if (f & ~(unsigned)(CU_CTX_SCHED_MASK | CU_CTX_LMEM_RESIZE_TO_MAX | CU_CTX_SYNC_MEMOPS))
        return CUDA_ERROR_INVALID_VALUE;
    cx->flags = f; /* applies when the context is (re)created */
    return CUDA_SUCCESS;
}

CUresult be_h_cuDevicePrimaryCtxGetState(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    struct be_ctx *cx;
    CUresult rc = primary_of(s, call->cu_device_primary_ctx_get_state->dev, &cx);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuDevicePrimaryCtxGetStateReply *rp =
        BE_REPLY(reply, cu_device_primary_ctx_get_state,
                 SLUICE__WIRE__REPLY__OUT_CU_DEVICE_PRIMARY_CTX_GET_STATE,
                 Sluice__Cuda__CuDevicePrimaryCtxGetStateReply,
                 sluice__cuda__cu_device_primary_ctx_get_state_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->flags = cx->flags;
    rp->active = cx->ctx != NULL;
    return CUDA_SUCCESS;
}

CUresult be_h_cuDevicePrimaryCtxReset_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    struct be_ctx *cx;
    CUresult rc = primary_of(s, call->cu_device_primary_ctx_reset_v2->dev, &cx);
    return rc == CUDA_SUCCESS ? ctx_destroy(s, cx) : rc;
}

CUresult be_h_cuCtxCreate_v4(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuCtxCreateV4Request *rq = call->cu_ctx_create_v4;
    if (rq->flags & ~(unsigned)(CU_CTX_SCHED_MASK | CU_CTX_LMEM_RESIZE_TO_MAX | CU_CTX_SYNC_MEMOPS |
                                CU_CTX_MAP_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t id;
    CUresult rc = be_ctx_add(s, NULL, rq->dev, 0, &id);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct be_ctx *cx = be_ctx_find(s, id);
    cx->flags = rq->flags;
    if (rq->dev < 0 || !s->devs || rq->dev >= s->devs->count)
        rc = CUDA_ERROR_INVALID_DEVICE;
    else
        rc = be_ctx_ensure(s, cx);
    if (rc != CUDA_SUCCESS) {
        be_ctx_forget(s, id);
        return rc;
    }
    Sluice__Cuda__CuCtxCreateV4Reply *rp =
        BE_REPLY(reply, cu_ctx_create_v4, SLUICE__WIRE__REPLY__OUT_CU_CTX_CREATE_V4,
                 Sluice__Cuda__CuCtxCreateV4Reply, sluice__cuda__cu_ctx_create_v4_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->pctx = id;
    return CUDA_SUCCESS;
}

CUresult be_h_cuCtxDestroy_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    struct be_ctx *cx = be_ctx_find(s, call->cu_ctx_destroy_v2->ctx);
    if (!cx)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = ctx_destroy(s, cx);
    if (rc == CUDA_SUCCESS && !cx->primary)
        be_ctx_forget(s, cx->id);
    return rc;
}

CUresult be_h_slFence(struct sl_be_call *c)
{
    Sluice__Wire__Reply *reply = c->reply;
    /* every earlier call of the session ran before this one (one worker, in order) */
    return BE_REPLY(reply, sl_fence, SLUICE__WIRE__REPLY__OUT_SL_FENCE, Sluice__Cuda__SlFenceReply,
                    sluice__cuda__sl_fence_reply__init)
               ? CUDA_SUCCESS
               : CUDA_ERROR_OUT_OF_MEMORY;
}
/* ---------------------------------------------------------------- one call */

static CUresult switch_ctx(sl_be_session *s, uint64_t id, struct be_ctx **cur)
{
    *cur = NULL;
    if (id == 0) {
        if (s->cur_ctx != 0 && s->api->cuCtxSetCurrent)
            s->api->cuCtxSetCurrent(NULL);
        s->cur_ctx = 0;
        return CUDA_SUCCESS;
    }
    struct be_ctx *c = be_ctx_find(s, id);
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = be_ctx_ensure(s, c);
    if (rc != CUDA_SUCCESS)
        return rc;
    *cur = c;
    if (s->cur_ctx == id)
        return CUDA_SUCCESS;
    rc = s->api->cuCtxSetCurrent ? s->api->cuCtxSetCurrent(c->ctx) : CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_SUCCESS)
        s->cur_ctx = id;
    return rc;
}

CUresult be_run_call(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const struct sl_call_info *ci = sl_call_lookup(call->call_id);
    reply->seq = call->seq;
    reply->call_id = call->call_id;
    struct be_ctx *cur = NULL;
    CUresult rc = switch_ctx(s, call->context, &cur);
    if (rc == CUDA_SUCCESS && cur && cur->sticky && !(ci && (ci->flags & SL_CALL_UNSTICKY)))
        rc = cur->sticky;
    if (rc == CUDA_SUCCESS) {
        /* after these CUDA promises device printf output: they run under the printf lock and
         * drain the pipe (launches also flush earlier kernels' output: printf.c's watcher) */
        int lock = be_printf_active() && ci && (ci->flags & SL_CALL_PRINTS);
        if (lock)
            be_printf_lock();
        rc = be_layers_run(c, ci); /* accounting and quota around the handler (accounting/) */
        if (lock)
            be_printf_unlock_drain(s);
        if (cur && be_is_sticky(rc) && be_ctx_find(s, call->context) == cur)
            cur->sticky = rc;
    }
    reply->result = (int32_t)rc;
    s->calls++;
    if (rc != CUDA_SUCCESS) {
        s->errors++;
        if (sl_log_enabled(SL_LOG_DEBUG)) {
            const struct sl_call_info *ci = sl_call_lookup(call->call_id);
            sl_log(SL_LOG_DEBUG, BE_COMPONENT, "session %llu instance %s: seq %llu %s -> %d%s%s",
                   (unsigned long long)s->id, s->instance, (unsigned long long)call->seq,
                   ci ? ci->name : "?", (int)rc, reply->detail && *reply->detail ? ": " : "",
                   reply->detail ? reply->detail : "");
        }
    }
    return rc;
}

/* ---------------------------------------------------------------- lifecycle */

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
        free(j->blob);
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

static void send_reply(sl_be_session *s, struct sl_be_call *c)
{
    Sluice__Wire__Reply *reply = c->reply;
    be_mapped_collect(s, reply); /* mapped.c: device writes to mapped host memory */
    uint8_t *out;
    size_t out_len;
    be_printf_take(s, &out, &out_len);
    if (out_len) {
        reply->stdout_data.data = out;
        reply->stdout_data.len = out_len;
    }
    be_deferred_stamp(&s->def, &reply->failed_seq, &reply->result);
    uint8_t *bulk = NULL;
    size_t blen = 0;
    if (c->out) {
        if (reply->result == CUDA_SUCCESS) {
            bulk = c->out;
            blen = c->out_len;
            reply->bulk_length = blen;
        } else {
            free(c->out);
        }
        c->out = NULL;
        c->out_len = 0;
    }
    Sluice__Wire__Reply *one[1] = {reply};
    Sluice__Wire__ReplyFrame rf = SLUICE__WIRE__REPLY_FRAME__INIT;
    rf.n_replies = 1;
    rf.replies = one;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES;
    m.replies = &rf;
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_error e;
    if (sl_wire_encode_server(&m, NULL, &buf, &len, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "session %llu instance %s project %s: reply: %s",
               (unsigned long long)s->id, s->instance, s->project, e.msg);
        free(bulk);
        be_outbox_push_close(s->srv, s->peer, SL_ERR_PROTOCOL, "backend could not encode a reply");
    } else {
        be_outbox_push_reply(s->srv, s->peer, buf, len, bulk, blen);
    }
    reply->stdout_data.data = NULL;
    reply->stdout_data.len = 0;
    free(out);
    be_mapped_collect_done(reply);
}

static void run_job(sl_be_session *s, struct be_job *job)
{
    const Sluice__Wire__CallFrame *f = job->msg->calls;
    be_acct_frame_begin(s); /* accounting.c: a capped instance's frame may wait (GPU share) */
    struct timespec t0, t1, t2;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t i = 0; i < f->n_calls; i++) {
        const Sluice__Wire__Call *call = f->calls[i];
        const struct sl_call_info *ci = sl_call_lookup(call->call_id);
        int async = ci && (ci->flags & SL_CALL_ASYNC);
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
        CUresult rc = be_run_call(&c);
        if (async) {
            be_deferred_async(&s->def, call->seq, rc);
            free(c.out); /* async calls have no reply (DtoHAsync: see copy.c) */
        } else {
            send_reply(s, &c);
        }
        sl_be_reply_clear(&reply);
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
        if (be_acct_ms_to_tick(s) <= 0)
            be_acct_tick(s);     /* accounting.c: the interval's usage records */
        if (ran && s->spin_ns) { /* spin.c: the next frame usually follows soon */
            uint64_t end = be_now_ns() + s->spin_ns;
            while (!atomic_load_explicit(&s->q_jobs, memory_order_acquire) && be_now_ns() < end)
                sl_cpu_relax();
        }
        ran = 0;
        pthread_mutex_lock(&s->mu);
        while (!s->qhead && !s->closing) {
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
            continue; /* a record is due */
        }
        struct be_job *job = s->qhead;
        if (!job) {
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
    be_session_release_all(s);
    sl_log(SL_LOG_INFO, BE_COMPONENT,
           "session %llu instance %s project %s: ended after %llu calls (%llu failed), "
           "everything freed",
           (unsigned long long)s->id, s->instance, s->project, (unsigned long long)s->calls,
           (unsigned long long)s->errors);
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

void be_session_release_all(sl_be_session *s)
{
    be_callbacks_cancel(s);
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
            if (s->api->cuCtxDestroy_v2)
                s->api->cuCtxDestroy_v2(c->ctx);
        }
        free(c);
        s->n_ctxs--;
    }
    if (s->api && s->api->cuCtxSetCurrent && s->cur_ctx != UINT64_MAX && s->cur_ctx != 0)
        s->api->cuCtxSetCurrent(NULL);
    s->cur_ctx = UINT64_MAX;
    be_graph_release(s); /* graph*.c, vmm.c, link.c: their bookkeeping */
    be_handles_free(&s->h);
    be_mem_free(&s->mem);
    free(s->stdout_buf);
    s->stdout_buf = NULL;
    s->stdout_len = 0;
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
