/* Contexts: the calling thread's context stack, created and primary contexts, their
 * properties and synchronization.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "context.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "timing.h"

static unsigned long long next_ctx_id = 1;

/* The primary context: its constant fields from the start, the rest from its retain. */
static struct dbl_ctx primary_ctx = {.hdr.kind = K_CTX, .primary = true};

static unsigned primary_refs;

static __thread struct dbl_ctx *ctx_stack[32];

static __thread int ctx_depth;

struct dbl_ctx *cur(void)
{
    return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
}

CUresult need_ctx(struct dbl_ctx **out)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    struct dbl_ctx *c = cur();
    if (!c || !obj_get(c, K_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (c->sticky != CUDA_SUCCESS)
        return c->sticky;
    *out = c;
    return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult rc = check_dev(dev);
    if (rc)
        return rc;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->hdr.kind = K_CTX;
    c->dev = dev;
    c->flags = flags;
    c->id = next_ctx_id++;
    obj_add(c);
    if (ctx_depth < (int)(sizeof ctx_stack / sizeof ctx_stack[0]))
        ctx_stack[ctx_depth++] = c; /* a new context is pushed on the calling thread */
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    LOCKED(ctx_create(pctx, flags, dev));
}

EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                               unsigned int flags, CUdevice dev)
{
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(ctx_create(pctx, flags, dev));
}

EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                               unsigned int flags, CUdevice dev)
{
    if (ctxCreateParams && (ctxCreateParams->numExecAffinityParams || ctxCreateParams->cigParams))
        return CUDA_ERROR_NOT_SUPPORTED;
    LOCKED(ctx_create(pctx, flags, dev));
}

static CUresult ctx_destroy(CUcontext ctx)
{
    struct dbl_ctx *c = obj_get(ctx, K_CTX);
    if (!c || c->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_drop_resources(c);
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] == c) {
            memmove(&ctx_stack[i], &ctx_stack[i + 1],
                    (size_t)(ctx_depth - i - 1) * sizeof ctx_stack[0]);
            ctx_depth--;
            i--;
        }
    obj_del(c);
    free(c);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    LOCKED(ctx_destroy(ctx));
}

static CUresult ctx_valid_or_null(CUcontext ctx)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    return (!ctx || obj_get(ctx, K_CTX)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult set_current(CUcontext ctx)
{
    CUresult rc = ctx_valid_or_null(ctx);
    if (rc)
        return rc;
    if (ctx_depth == 0) {
        if (ctx)
            ctx_stack[ctx_depth++] = (struct dbl_ctx *)ctx;
    } else if (ctx) {
        ctx_stack[ctx_depth - 1] = (struct dbl_ctx *)ctx;
    } else {
        ctx_depth--;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    LOCKED(set_current(ctx));
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)cur();
    return CUDA_SUCCESS;
}

static CUresult push_current(CUcontext ctx)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!obj_get(ctx, K_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth >= (int)(sizeof ctx_stack / sizeof ctx_stack[0]))
        return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = (struct dbl_ctx *)ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    LOCKED(push_current(ctx));
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct dbl_ctx *c = ctx_stack[--ctx_depth];
    if (pctx)
        *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

static CUresult ctx_get_device(CUdevice *device)
{
    struct dbl_ctx *c;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = need_ctx(&c);
    if (rc && rc != CUDA_ERROR_ILLEGAL_ADDRESS)
        return rc;
    *device = cur()->dev;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    LOCKED(ctx_get_device(device));
}

static CUresult ctx_sync(void)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc == CUDA_SUCCESS && dbl_capture_forbid_ctx_sync())
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* a capture runs (capture.c) */
    return rc;
}

EXPORT CUresult cuCtxSynchronize(void)
{
    LOCKED_THEN_SLEEP(ctx_sync(), dbl_time_ctx_end(cur()));
}

static CUresult ctx_sync_v2(CUcontext ctx)
{
    if (!ctx)
        return ctx_sync();
    struct dbl_ctx *c = obj_get(ctx, K_CTX);
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (dbl_capture_forbid_ctx_sync())
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return c->sticky;
}

EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    LOCKED_THEN_SLEEP(ctx_sync_v2(ctx), dbl_time_ctx_end(ctx ? (const void *)ctx : cur()));
}

static CUresult ctx_get_id(CUcontext ctx, unsigned long long *ctxId)
{
    if (!ctxId)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_ctx *c = ctx ? obj_get(ctx, K_CTX) : cur();
    if (!c || (!ctx && !obj_get(c, K_CTX)))
        return CUDA_ERROR_INVALID_CONTEXT;
    *ctxId = c->id;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    LOCKED(ctx_get_id(ctx, ctxId));
}

static CUresult ctx_get_flags(unsigned int *flags)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = c->flags;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetFlags(unsigned int *flags)
{
    LOCKED(ctx_get_flags(flags));
}

EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    (void)ctx;
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 3020;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return CUDA_SUCCESS;
}

static CUresult primary_retain(CUcontext *pctx, CUdevice dev)
{
    CUresult rc = check_dev(dev);
    if (rc)
        return rc;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (primary_refs++ == 0) {
        primary_ctx.id = next_ctx_id++;
        if (!obj_get(&primary_ctx, K_CTX))
            obj_add(&primary_ctx);
    }
    *pctx = (CUcontext)&primary_ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    LOCKED(primary_retain(pctx, dev));
}

static CUresult primary_release(CUdevice dev, bool reset)
{
    CUresult rc = check_dev(dev);
    if (rc)
        return rc;
    if (!reset && primary_refs == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (reset || --primary_refs == 0) {
        ctx_drop_resources(&primary_ctx);
        if (!reset)
            obj_del(&primary_ctx);
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    LOCKED(primary_release(dev, false));
}

EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    LOCKED(primary_release(dev, true));
}

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult rc = check_dev(dev);
    if (rc)
        return rc;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = primary_ctx.flags;
    *active = primary_refs > 0;
    return CUDA_SUCCESS;
}
