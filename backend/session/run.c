/* One call on the session's worker: the switch to the call's context, the context's sticky error,
 * the printf lock around the calls that print, then the layers around the handler
 * (accounting/layers.c); the call is counted (session.c logs it at debug level). */
#include "session/run.h"

#include "accounting/layers.h"
#include "bounds.h"
#include "session/contexts.h"
#include "session/deferred.h"
#include "session/printf.h"
#include "session/state.h"
#include "session/waits.h"
#include "sluice/call_facts.h"
#include "sluice/backend_dispatch.h"
#include "sluice/log.h"

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
    if (rc == CUDA_SUCCESS && cur && cur->sticky && !(ci && (ci->flags & SL_CALL_UNSTICKY))) {
        rc = cur->sticky;
        /* the output of the work that failed (a device-side assert's message) is still due */
        if (be_printf_active() && ci && (ci->flags & SL_CALL_PRINTS)) {
            be_printf_lock();
            be_printf_unlock_drain(s);
        }
    }
    uint64_t gone =
        rc == CUDA_SUCCESS && ci && be_waits_outstanding(s->waits) ? sl_call_released(call) : 0;
    if (gone && be_waits_adopt(s->waits, gone)) {
        /* another guest thread waits on the event it destroys: the handle goes now, the
         * driver's event when those waits end (waits.c), and this call does not wait */
        sl_be_handle_drop(s, SL_H_EVENT, gone);
        reply->result = CUDA_SUCCESS;
        s->calls++;
        return CUDA_SUCCESS;
    }
    if (rc == CUDA_SUCCESS && ci && ci->blocks && be_waits_defer(s->waits, c, ci, cur)) {
        c->deferred = 1; /* another thread's calls go on while the GPU works (waits.c) */
        return CUDA_SUCCESS;
    }
    if (rc == CUDA_SUCCESS) {
        /* after these CUDA promises device printf output: they run under the printf lock and
         * drain the pipe (launches also flush earlier kernels' output: printf.c's watcher) */
        int lock = be_printf_active() && ci && (ci->flags & SL_CALL_PRINTS);
        if (lock)
            be_printf_lock();
        rc = be_layers_run(c, ci); /* accounting and quota around the handler (accounting/) */
        if (lock)
            be_printf_unlock_drain(s);
        if (cur && sl_call_is_async(ci, call))
            cur->async_seq = call->seq;
        else if (cur && ci && ci->blocks == SL_BLOCKS_CTX && rc == CUDA_SUCCESS &&
                 !sl_call_context_arg(call))
            cur->synced_seq = call->seq;
        if (cur && be_is_sticky(rc) && be_ctx_find(s, call->context) == cur)
            cur->sticky = rc;
        /* a busy stream or event the guest would otherwise ask about again and again */
        if (rc == CUDA_ERROR_NOT_READY && call->watch && ci &&
            (ci->idle == SL_IDLE_QUERY_STREAM || ci->idle == SL_IDLE_QUERY_EVENT))
            reply->watched = be_waits_watch(s->waits, c, ci, cur); /* waits.c */
    }
    reply->result = (int32_t)rc;
    s->calls++;
    /* slLoadImage by hash alone answers FILE_NOT_FOUND when the image is not cached yet: the
     * guest then sends it (frontend/module.c); that is the protocol, not a failed call (the
     * table's answers= fact of slLoadImage, the only call that has one) */
    int miss = ci && ci->answers && rc == (CUresult)ci->answers && !c->in;
    if (rc != CUDA_SUCCESS && !miss)
        s->errors++;
    return rc;
}
