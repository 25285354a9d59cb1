/* A session's context ids: its contexts are created lazily on the session's worker (never the
 * process's real primary context); primary contexts have pre-assigned ids, one per device.
 * Forgetting a context drops the handles made while it was current and its ranges. */
#include "session/contexts.h"

#include <stdlib.h>

#include "bounds.h"
#include "session/handles.h"
#include "session/ranges.h"
#include "session/state.h"
#include "sluice/backend_hooks.h"
#include "sluice/log.h"

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
void be_ctx_drop_objects(sl_be_session *s, uint64_t id)
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
        be_ctx_drop_objects(s, id);
        be_handles_del(&s->h, id);
        free(s->ctxs[i]);
        s->ctxs[i] = s->ctxs[--s->n_ctxs];
        if (s->cur_ctx == id)
            s->cur_ctx = UINT64_MAX;
        return;
    }
}
