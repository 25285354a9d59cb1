/* Blocking waits off the call path (docs/backend.md "Waits off the call path"). The session
 * thread runs one session's calls in order; a cuStreamSynchronize on a 300 ms kernel used to
 * hold every other guest thread's calls for 300 ms (and made their cuStreamQuery answer after
 * the kernel). Now a call with the table's blocks= fact whose work still runs is handed off:
 *
 *   blocks=stream  the session thread records a private event on the stream (so the wait
 *                  covers what was queued before the call, on the session thread's own
 *                  per-thread stream too) and a waiter thread synchronizes on that event;
 *   blocks=event   a waiter synchronizes on the guest's event;
 *   blocks=ctx     a waiter makes the context current and synchronizes it (inline when no
 *                  async call ran in the context since its last synchronize).
 *
 * Before handing off, the session thread polls the stream or event while no other frame is
 * queued, up to spin_ns: a short wait (a small kernel) completes inline without a thread
 * switch. A waiter (waiters.c) that is done queues the wait as completed and wakes the session
 * thread, which sends the reply between frames (deferred errors, sticky errors, printf output
 * and the accounting as for an inline call). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "session/waits.h"
#include "session/waiters.h"
#include "accounting/timing.h"
#include "bounds.h"
#include "daemon/outbox.h"
#include "session/contexts.h"
#include "session/deferred.h"
#include "session/printf.h"
#include "session/reply.h"
#include "session/streams.h"
#include "session/staging.h"
#include "session/state.h"
#include "sluice/call_facts.h"
#include "sluice/log.h"

/* ---------------------------------------------------------------- the session thread */
struct be_waits *be_waits_new(sl_be_session *s, unsigned max, uint64_t spin_ns)
{
    struct be_waits *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->threads = calloc(max ? max : 1, sizeof *w->threads);
    if (!w->threads) {
        free(w);
        return NULL;
    }
    w->s = s;
    w->max = max;
    w->spin_ns = spin_ns;
    w->todo_t = &w->todo;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    atomic_init(&w->n_done, 0);
    atomic_init(&w->n_todo, 0);
    return w;
}

int be_waits_ready(const struct be_waits *w)
{
    return w && atomic_load_explicit(&w->n_done, memory_order_acquire) != 0;
}

unsigned be_waits_outstanding(const struct be_waits *w)
{
    return w ? w->outstanding : 0;
}

/* The stream a call names, as the driver knows it; 0 when it names none the session has. */
static int call_stream(sl_be_session *s, const Sluice__Wire__Call *call, CUstream *st)
{
    uint64_t id = 0;
    if (!s->api->cuEventCreate || !s->api->cuEventRecord || !sl_call_stream(call, &id) ||
        be_stream(s, id, st) != CUDA_SUCCESS)
        return 0;
    if (call->per_thread_stream && *st == NULL)
        *st = CU_STREAM_PER_THREAD;
    return 1;
}

/* A private event recorded on st (what is queued there now), in x; 0 when none could be. */
static int stream_event(sl_be_session *s, CUstream st, struct be_wait *x)
{
    /* blocking sync: past the poll the waiter sleeps in the driver instead of spinning there,
     * which slowed every other driver call of the worker (the head-of-line rows, run 22) and
     * cost a core per waiting guest thread */
    if (!be_event_on(s, st, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC, &x->ev))
        return 0;
    x->own_ev = 1;
    return 1;
}

/* The object a blocks= call waits on; 0 when the call should run inline. */
static int target(struct be_waits *w, const struct sl_be_call *c, const struct sl_call_info *ci,
                  struct be_ctx *cur, struct be_wait *x)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = s->api;
    const Sluice__Wire__Call *call = c->call;
    x->ctx = cur ? cur->ctx : NULL;
    switch (ci->blocks) {
    case SL_BLOCKS_STREAM: {
        CUstream st;
        if (!api->cuStreamQuery || !call_stream(s, call, &st) || be_poll_done(w->s, st, NULL))
            return 0;
        return stream_event(s, st, x);
    }
    case SL_BLOCKS_EVENT: {
        void *ev = NULL;
        if (!api->cuEventQuery ||
            sl_be_handle_get(s, SL_H_EVENT, sl_call_event(call), &ev) != CUDA_SUCCESS || !ev)
            return 0;
        if (be_poll_done(w->s, NULL, (CUevent)ev))
            return 0;
        x->ev = (CUevent)ev;
        x->event_id = sl_call_event(call);
        return 1;
    }
    case SL_BLOCKS_CTX: {
        uint64_t id = sl_call_context_arg(call);
        if (!id && cur && cur->async_seq <= cur->synced_seq)
            return 0; /* nothing ran since its last synchronize: idle, answered inline */
        if (id) {
            void *cx = NULL;
            if (sl_be_handle_get(s, SL_H_CONTEXT, id, &cx) != CUDA_SUCCESS || !cx)
                return 0;
            x->ctx = (CUcontext)cx;
        }
        return x->ctx != NULL; /* no query for a context: always handed off */
    }
    default:
        return 0;
    }
}

int be_waits_defer(struct be_waits *w, struct sl_be_call *c, const struct sl_call_info *ci,
                   struct be_ctx *cur)
{
    if (!w || !ci || !ci->blocks || !w->max || !w->s->api->cuEventDestroy_v2 ||
        !w->s->api->cuEventSynchronize)
        return 0;
    struct be_wait *x = calloc(1, sizeof *x);
    if (!x)
        return 0;
    if (!target(w, c, ci, cur, x)) {
        free(x);
        return 0;
    }
    x->seq = c->call->seq;
    x->ctx_id = c->call->context;
    x->call_id = c->call->call_id;
    x->kind = ci->blocks;
    be_acct_call_begin(c->s, c->call); /* the runs before it close as for an inline call */
    /* not handed: the handler waits inline; the accounting's begin is harmless twice */
    return be_waits_hand(w, x);
}

int be_waits_defer_copy(struct be_waits *w, struct sl_be_call *c, CUstream st, void *buf,
                        uint64_t n, int stage)
{
    const struct sl_driver_api *api = w ? w->s->api : NULL;
    if (!w || !w->max || !api->cuEventCreate || !api->cuEventRecord || !api->cuEventQuery ||
        !api->cuEventSynchronize || !api->cuEventDestroy_v2 ||
        (stage && w->stages >= BE_MAX_LENT_STAGES))
        return 0;
    struct be_wait *x = calloc(1, sizeof *x);
    if (!x)
        return 0;
    if (!stream_event(w->s, st, x)) {
        free(x);
        return 0;
    }
    struct be_ctx *cur = be_ctx_find(w->s, c->call->context);
    x->ctx = cur ? cur->ctx : NULL;
    x->seq = c->call->seq;
    x->ctx_id = c->call->context;
    x->call_id = c->call->call_id;
    x->kind = SL_BLOCKS_STREAM;
    x->copy = 1;
    x->out = buf;
    x->out_len = n;
    x->stage = stage;
    x->reply_on_lanes = c->call->reply_on_lanes;
    if (!be_waits_hand(w, x))
        return 0;
    w->stages += stage != 0;
    c->deferred = 1;
    return 1;
}

/* What a watch waits on: a private event recorded on the queried stream, or the queried event
 * itself (a wait on it: destroyed by the guest, the event stays until the watch ends,
 * be_waits_adopt). */
static int watch_target(struct be_waits *w, const struct sl_be_call *c,
                        const struct sl_call_info *ci, struct be_wait *x)
{
    CUstream st;
    void *ev = NULL;
    if (ci->idle == SL_IDLE_QUERY_STREAM)
        return call_stream(w->s, c->call, &st) && stream_event(w->s, st, x);
    if (sl_be_handle_get(w->s, SL_H_EVENT, sl_call_event(c->call), &ev) != CUDA_SUCCESS || !ev)
        return 0;
    x->ev = (CUevent)ev;
    x->event_id = sl_call_event(c->call);
    return 1;
}

int be_waits_watch(struct be_waits *w, const struct sl_be_call *c, const struct sl_call_info *ci,
                   struct be_ctx *cur)
{
    if (!w || !w->max || w->watches >= BE_MAX_WATCHES || !w->s->api->cuEventQuery ||
        !w->s->api->cuEventSynchronize || !w->s->api->cuEventDestroy_v2)
        return 0;
    struct be_wait *x = calloc(1, sizeof *x);
    if (!x)
        return 0;
    if (!watch_target(w, c, ci, x)) {
        free(x);
        return 0;
    }
    x->seq = c->call->seq;
    x->ctx_id = c->call->context;
    x->call_id = c->call->call_id;
    x->kind = WATCH;
    x->ctx = cur ? cur->ctx : NULL;
    if (!be_waits_hand(w, x))
        return 0;
    w->watches++;
    return 1;
}

static void push_stream_done(sl_be_session *s, struct be_wait *x)
{
    Sluice__Wire__StreamDone sd = SLUICE__WIRE__STREAM_DONE__INIT;
    sd.seq = x->seq;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_STREAM_DONE;
    m.stream_done = &sd;
    sl_error e;
    x->pushed = 1;
    if (be_outbox_push_message(s->srv, s->peer, &m, &e) != SL_OK) /* the guest keeps asking */
        sl_log(SL_LOG_ERR, BE_COMPONENT, "session %llu: StreamDone of seq %llu: %s",
               (unsigned long long)s->id, (unsigned long long)x->seq, e.msg);
}

void be_waits_push_watched(struct be_waits *w)
{
    if (!w || !w->watches)
        return;
    for (struct be_wait *x = w->all; x; x = x->all_next)
        if (x->kind == WATCH && !x->pushed &&
            w->s->api->cuEventQuery(x->ev) != CUDA_ERROR_NOT_READY)
            push_stream_done(w->s, x);
}

int be_waits_adopt(struct be_waits *w, uint64_t handle)
{
    if (!w || !handle)
        return 0;
    int n = 0;
    for (struct be_wait *x = w->all; x; x = x->all_next)
        if (x->event_id == handle) {
            x->adopted = 1;
            n++;
        }
    return n > 0;
}

/* x is off the list: the driver's event of a destroyed guest event goes with its last wait */
static void release_adopted(struct be_waits *w, const struct be_wait *x)
{
    if (!x->adopted)
        return;
    for (const struct be_wait *o = w->all; o; o = o->all_next)
        if (o->adopted && o->ev == x->ev)
            return;
    w->s->api->cuEventDestroy_v2(x->ev);
}

/* A copy's bytes for its reply: the slot itself, or copied out of the lent staging buffer,
 * which goes back to its context (bc). */
static void copy_out(struct be_waits *w, struct be_wait *x, struct be_ctx *bc, struct sl_be_call *c)
{
    c->out = x->out;
    c->out_len = x->out_len;
    if (!x->stage)
        return; /* a failed copy's slot is freed with the reply */
    c->out = x->rc == CUDA_SUCCESS ? malloc(x->out_len ? x->out_len : 1) : NULL;
    if (c->out)
        memcpy(c->out, x->out, x->out_len);
    else if (x->rc == CUDA_SUCCESS)
        x->rc = CUDA_ERROR_OUT_OF_MEMORY;
    be_stage_give_back(w->s, bc, x->out, x->rc == CUDA_SUCCESS);
    w->stages--;
}

/* The reply of a completed wait, as be_run_call and run_job would have sent it; a watch's
 * StreamDone unless it went already. */
static void finish_one(struct be_waits *w, struct be_wait *x)
{
    sl_be_session *s = w->s;
    if (x->kind == WATCH) {
        w->watches--;
        if (!x->pushed)
            push_stream_done(s, x);
        if (x->own_ev)
            s->api->cuEventDestroy_v2(x->ev);
        release_adopted(w, x);
        free(x);
        return;
    }
    const struct sl_call_info *ci = sl_call_lookup(x->call_id);
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.seq = x->seq;
    call.call_id = x->call_id;
    call.context = x->ctx_id;
    call.reply_on_lanes = x->reply_on_lanes;
    if (be_printf_active() && ci && (ci->flags & SL_CALL_PRINTS)) {
        be_printf_lock(); /* the driver flushed device printf during the wait: take it */
        be_printf_unlock_drain(s);
    }
    if (!x->copy) /* a copy's handler returned when it was queued: counted then */
        be_acct_call_end(s, &call, x->rc);
    struct be_ctx *bc = be_ctx_find(s, x->ctx_id);
    if (bc && be_is_sticky(x->rc))
        bc->sticky = x->rc;
    if (bc && x->kind == SL_BLOCKS_CTX && x->ctx == bc->ctx && x->rc == CUDA_SUCCESS &&
        x->seq > bc->synced_seq)
        bc->synced_seq = x->seq; /* the calls after it count on their own */
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    reply.seq = x->seq;
    reply.call_id = x->call_id;
    struct sl_be_call c = {.s = s, .api = s->api, .call = &call, .reply = &reply};
    if (x->copy)
        copy_out(w, x, bc, &c);
    reply.result = (int32_t)x->rc;
    s->calls += !x->copy;
    if (x->rc != CUDA_SUCCESS)
        s->errors++;
    be_waits_push_watched(w);
    be_session_send_reply(s, &c);
    release_adopted(w, x);
    free(x);
}

void be_waits_finish(struct be_waits *w)
{
    if (!be_waits_ready(w))
        return;
    pthread_mutex_lock(&w->mu);
    struct be_wait *list = w->done;
    w->done = NULL;
    atomic_store_explicit(&w->n_done, 0, memory_order_release);
    pthread_mutex_unlock(&w->mu);
    struct be_wait *rev = NULL; /* oldest first */
    while (list) {
        struct be_wait *n = list->next;
        list->next = rev;
        rev = list;
        list = n;
    }
    while (rev) {
        struct be_wait *n = rev->next;
        for (struct be_wait **pp = &w->all; *pp; pp = &(*pp)->all_next)
            if (*pp == rev) {
                *pp = rev->all_next;
                break;
            }
        w->outstanding--;
        finish_one(w, rev);
        rev = n;
    }
}

void be_waits_drain(struct be_waits *w)
{
    if (!w)
        return;
    while (w->outstanding) {
        pthread_mutex_lock(&w->s->mu);
        while (!be_waits_ready(w)) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 10000000L; /* a waiter's wake-up also comes by s->cv */
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&w->s->cv, &w->s->mu, &ts);
        }
        pthread_mutex_unlock(&w->s->mu);
        be_waits_finish(w);
    }
}

void be_waits_free(struct be_waits *w)
{
    if (!w)
        return;
    be_waits_drain(w);
    be_waiters_stop(w);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->threads);
    free(w);
}
