/* The page-locked staging buffer of a context: BE_STAGE_BYTES of cuMemHostAlloc memory,
 * allocated at the context's first small synchronous device-to-host copy and kept until the
 * context is destroyed or reset or the session ends (api/context.c, session.c free it first).
 * Page-locked memory belongs to the context it was allocated in (the driver frees it with that
 * context), hence one per context and not one per session. At most BE_MAX_CONTEXTS of them:
 * 4 MiB of page-locked host memory per session at worst, one 64 KiB buffer in the usual one.
 * Allocated and freed in relaxed capture mode: the first small copy may come while another
 * stream captures in global mode, where the allocation is a potentially unsafe call that would
 * invalidate that capture (sluice-driver-facts, run 23) and the copy itself is not. */
#include "session/staging.h"

#include "session/contexts.h"
#include "session/deferred.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/log.h"

void *be_stage_get(sl_be_session *s, struct be_ctx *cx)
{
    if (!cx || !cx->ctx)
        return NULL;
    if (cx->stage || cx->stage_refused)
        return cx->stage;
    void *p = NULL;
    CUstreamCaptureMode mode = be_capture_relax(s);
    CUresult rc = s->api->cuMemHostAlloc ? s->api->cuMemHostAlloc(&p, BE_STAGE_BYTES, 0)
                                         : CUDA_ERROR_NOT_SUPPORTED;
    be_capture_restore(s, mode);
    if (rc != CUDA_SUCCESS && be_is_sticky(rc))
        return NULL; /* the context failed: the driver's own copy answers that */
    if (rc != CUDA_SUCCESS || !p) {
        cx->stage_refused = 1;
        sl_log(SL_LOG_INFO, BE_COMPONENT,
               "session %llu: context %llx: no page-locked staging buffer (cuMemHostAlloc of "
               "%zu bytes -> %d); its small device-to-host copies go the pageable way",
               (unsigned long long)s->id, (unsigned long long)cx->id, BE_STAGE_BYTES, (int)rc);
        return NULL;
    }
    cx->stage = p;
    return p;
}

/* Frees p, a buffer of cx's, with cx current (a sticky error refuses it, or no context: the
 * context's end frees it with everything else it held). */
static void free_in(sl_be_session *s, struct be_ctx *cx, void *p)
{
    if (!cx || !cx->ctx || !s->api->cuMemFreeHost || !s->api->cuCtxSetCurrent)
        return;
    if (s->api->cuCtxSetCurrent(cx->ctx) == CUDA_SUCCESS) {
        CUstreamCaptureMode mode = be_capture_relax(s);
        s->api->cuMemFreeHost(p);
        be_capture_restore(s, mode);
    }
    s->cur_ctx = UINT64_MAX;
}

void be_stage_free(sl_be_session *s, struct be_ctx *cx)
{
    if (!cx)
        return;
    cx->stage_refused = 0;
    void *p = cx->stage;
    cx->stage = NULL;
    if (p)
        free_in(s, cx, p);
}

void be_stage_give_back(sl_be_session *s, struct be_ctx *cx, void *p, int keep)
{
    if (!p)
        return;
    if (cx && keep && !cx->stage && !cx->stage_refused)
        cx->stage = p;
    else
        free_in(s, cx, p);
}
