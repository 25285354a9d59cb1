/* Host callbacks (cuLaunchHostFunc, cuStreamAddCallback): the guest's (fn, userData) stay in the
 * guest under a callback id. The backend enqueues its own host function on the stream; when the
 * stream reaches it, it sends ServerMessage{callback: HostCallback{id, fn = the guest's callback
 * id, user_data = the request's user_data}} and blocks the stream until CallbackDone{id}
 * arrives (or the session ends). */
#include "api/callback.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/outbox.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/backend_handlers.h"
#include "sluice/error.h"
#include "sluice/log.h"

struct be_cb {
    struct be_cb *next;
    sl_be_session *s;
    uint64_t id, fn, user_data;
    int sent, done;
};

static void CUDA_CB host_fn(void *arg)
{
    struct be_cb *cb = arg;
    sl_be_session *s = cb->s;
    pthread_mutex_lock(&s->mu);
    if (!s->closing) {
        Sluice__Wire__HostCallback hc = SLUICE__WIRE__HOST_CALLBACK__INIT;
        hc.id = cb->id;
        hc.fn = cb->fn;
        hc.user_data = cb->user_data;
        Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
        m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_CALLBACK;
        m.callback = &hc;
        sl_error e;
        if (be_outbox_push_message(s->srv, s->peer, &m, &e) == SL_OK) {
            while (!cb->done && !s->closing)
                pthread_cond_wait(&s->cv, &s->mu);
        }
    }
    /* unlink and free */
    for (struct be_cb **p = &s->cbs; *p; p = &(*p)->next)
        if (*p == cb) {
            *p = cb->next;
            break;
        }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(cb);
}

void be_callback_done(sl_be_session *s, uint64_t id)
{
    pthread_mutex_lock(&s->mu);
    for (struct be_cb *cb = s->cbs; cb; cb = cb->next)
        if (cb->id == id)
            cb->done = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void be_callbacks_cancel(sl_be_session *s)
{
    pthread_mutex_lock(&s->mu);
    s->closing = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static CUresult enqueue(sl_be_session *s, const Sluice__Wire__Call *call,
                        Sluice__Wire__Reply *reply, uint64_t stream, uint64_t fn,
                        uint64_t user_data)
{
    if (fn == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUstream hs;
    CUresult rc = be_stream(s, stream, &hs);
    if (rc == CUDA_SUCCESS) /* the callback record is one-shot: a graph would replay it */
        rc = be_refuse_if_capturing(s, reply, hs, call->per_thread_stream, "a host callback");
    if (rc != CUDA_SUCCESS)
        return rc;
    CUresult (*launch)(CUstream, CUhostFn, void *) = s->api->cuLaunchHostFunc;
    if (call->per_thread_stream && s->api->cuLaunchHostFunc_ptsz)
        launch = s->api->cuLaunchHostFunc_ptsz;
    if (!launch)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct be_cb *cb = calloc(1, sizeof *cb);
    if (!cb)
        return CUDA_ERROR_OUT_OF_MEMORY;
    cb->s = s;
    cb->fn = fn;
    cb->user_data = user_data;
    pthread_mutex_lock(&s->mu);
    cb->id = s->next_cb++;
    cb->next = s->cbs;
    s->cbs = cb;
    pthread_mutex_unlock(&s->mu);
    rc = launch(hs, host_fn, cb);
    if (rc != CUDA_SUCCESS) {
        pthread_mutex_lock(&s->mu);
        for (struct be_cb **p = &s->cbs; *p; p = &(*p)->next)
            if (*p == cb) {
                *p = cb->next;
                free(cb);
                break;
            }
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

CUresult be_h_cuLaunchHostFunc(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuLaunchHostFuncRequest *rq = call->cu_launch_host_func;
    return enqueue(s, call, reply, rq->h_stream, rq->fn, rq->user_data);
}

CUresult be_h_cuStreamAddCallback(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuStreamAddCallbackRequest *rq = call->cu_stream_add_callback;
    if (rq->flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return enqueue(s, call, reply, rq->h_stream, rq->callback, rq->user_data);
}
