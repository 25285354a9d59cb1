/* The waiter threads of a session's waits off the call path (waits.c says which waits and how
 * their replies go; docs/backend.md "Waits off the call path"). They start on demand, up to the
 * session's maximum, take handed-off waits in order, complete each (an event polled for spin_ns,
 * then synchronized; a context synchronized), queue it as done and wake the session thread.
 * Idle, they poll for the next wait for spin_ns before they sleep. They only call the driver,
 * never the session's tables. */
#include <stdatomic.h>
#include <stdlib.h>

#include "session/spin.h"
#include "session/state.h"
#include "session/streams.h"
#include "session/waiters.h"
#include "sluice/call_facts.h"
#include "sluice/relax.h"

static CUresult poll_then_block(const struct sl_driver_api *api, CUevent ev, uint64_t spin_ns)
{
    uint64_t end = be_now_ns() + spin_ns;
    for (;;) {
        CUresult rc = api->cuEventQuery(ev);
        if (rc != CUDA_ERROR_NOT_READY)
            return rc;
        if (be_now_ns() >= end)
            return api->cuEventSynchronize(ev);
        sl_cpu_relax();
    }
}

static void complete(struct be_waits *w, struct be_wait *x)
{
    const struct sl_driver_api *api = w->s->api;
    if (x->ctx && api->cuCtxSetCurrent)
        api->cuCtxSetCurrent(x->ctx);
    if (x->kind == SL_BLOCKS_CTX) { /* its context (or cuCtxSynchronize_v2's) is current here */
        x->rc = api->cuCtxSynchronize();
    } else {
        /* a copy's wait is the worker's own, as its inline poll: no capture of another stream
         * in global mode may see it (api/copy_wait.c) */
        CUstreamCaptureMode mode = x->copy ? be_capture_relax(w->s) : CU_STREAM_CAPTURE_MODE_GLOBAL;
        x->rc = poll_then_block(api, x->ev, w->spin_ns);
        if (x->copy)
            be_capture_restore(w->s, mode);
    }
    if (x->own_ev && x->kind != WATCH) /* a watch's the session thread queries too */
        api->cuEventDestroy_v2(x->ev);
}

static void *waiter_main(void *arg)
{
    struct be_waits *w = arg;
    pthread_setname_np(pthread_self(), "sl-wait");
    pthread_mutex_lock(&w->mu);
    for (;;) {
        if (!w->todo && !w->stop && w->spin_ns) { /* the next wait often follows soon */
            pthread_mutex_unlock(&w->mu);
            uint64_t end = be_now_ns() + w->spin_ns;
            while (!atomic_load_explicit(&w->n_todo, memory_order_acquire) && be_now_ns() < end)
                sl_cpu_relax();
            pthread_mutex_lock(&w->mu);
        }
        while (!w->todo && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        struct be_wait *x = w->todo;
        if (!x)
            break; /* stopping, nothing left */
        w->todo = x->next;
        if (!w->todo)
            w->todo_t = &w->todo;
        atomic_fetch_sub_explicit(&w->n_todo, 1, memory_order_relaxed);
        w->idle--;
        pthread_mutex_unlock(&w->mu);
        complete(w, x);
        pthread_mutex_lock(&w->mu);
        x->next = w->done;
        w->done = x;
        w->idle++;
        atomic_fetch_add_explicit(&w->n_done, 1, memory_order_release);
        pthread_mutex_unlock(&w->mu);
        pthread_mutex_lock(&w->s->mu); /* the session thread may sleep on its queue */
        pthread_cond_broadcast(&w->s->cv);
        pthread_mutex_unlock(&w->s->mu);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Queues x for a waiter thread, starting one when none is idle (w->mu held). 0 when no thread
 * could be had: the caller runs the call inline. */
static int hand_off(struct be_waits *w, struct be_wait *x)
{
    if (w->idle == 0 && w->n_threads < w->max) {
        if (pthread_create(&w->threads[w->n_threads], NULL, waiter_main, w) == 0) {
            w->n_threads++;
            w->idle++;
        }
    }
    if (w->n_threads == 0)
        return 0;
    x->next = NULL;
    *w->todo_t = x;
    w->todo_t = &x->next;
    atomic_fetch_add_explicit(&w->n_todo, 1, memory_order_release);
    pthread_cond_signal(&w->cv);
    return 1;
}

int be_waits_hand(struct be_waits *w, struct be_wait *x)
{
    pthread_mutex_lock(&w->mu);
    int ok = hand_off(w, x);
    pthread_mutex_unlock(&w->mu);
    if (!ok) {
        if (x->own_ev)
            w->s->api->cuEventDestroy_v2(x->ev);
        free(x);
        return 0;
    }
    w->outstanding++;
    x->all_next = w->all;
    w->all = x;
    return 1;
}

void be_waiters_stop(struct be_waits *w)
{
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (unsigned i = 0; i < w->n_threads; i++)
        pthread_join(w->threads[i], NULL);
    w->n_threads = 0;
}
