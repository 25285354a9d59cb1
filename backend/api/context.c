/* The context family's hand handlers: primary contexts (flags, state, reset), cuCtxCreate_v4 and
 * cuCtxDestroy_v2 on the session's context ids (session/contexts.c), and slFence. */
#include <stdlib.h>

#include "accounting/timing.h"
#include "api/mapped.h"
#include "api/reply.h"
#include "session/contexts.h"
#include "session/devices.h"
#include "session/staging.h"
#include "session/state.h"
#include "session/waits.h"
#include "sluice/backend_handlers.h"

/* Destroys the real context behind c (primary ids stay, to be re-created lazily). */
static CUresult ctx_destroy(sl_be_session *s, struct be_ctx *c)
{
    CUresult rc = CUDA_SUCCESS;
    be_waits_drain(s->waits);       /* waits.c: no waiter thread uses a context that goes */
    be_mapped_settle_pending(s, 1); /* mapped.c: nor a pending settle's event */
    if (c->ctx) {
        be_acct_ctx_gone(s, c->ctx); /* accounting/timing.c: its timed work is measured first */
        if (s->api->cuCtxSynchronize_v2)
            s->api->cuCtxSynchronize_v2(c->ctx);
        be_stage_free(s, c); /* session/staging.c: its small copies' page-locked buffer */
        rc = s->api->cuCtxDestroy_v2 ? s->api->cuCtxDestroy_v2(c->ctx) : CUDA_ERROR_NOT_SUPPORTED;
        if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_CONTEXT_IS_DESTROYED)
            return rc;
        rc = CUDA_SUCCESS;
    }
    c->ctx = NULL;
    c->sticky = CUDA_SUCCESS;
    be_ctx_drop_objects(s, c->id);
    s->cur_ctx = UINT64_MAX;
    return rc;
}

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
