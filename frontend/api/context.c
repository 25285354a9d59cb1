/* Contexts as the guest sees them (docs/remoting.md "Handles and pointers"): the CUDA calls on
 * contexts, over each thread's current-context stack (call/contexts.c). The primary context of
 * device N is DeviceInfo.primary_context, a context the backend made for this session;
 * retain/release only count locally. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api/context.h"
#include "api/device.h"
#include "call/allocs.h"
#include "call/connection.h"
#include "call/contexts.h"
#include "call/rpc_session.h"
#include "exports/et_cls.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

static pthread_mutex_t g_primary_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_primary_refs[64];
static unsigned g_primary_flags[64]; /* as the backend reported or we set them */
static unsigned char g_primary_flags_known[64];

void sl_fe_ctx_reset(void)
{
    sl_fe_contexts_reset();
    pthread_mutex_lock(&g_primary_lock);
    memset(g_primary_refs, 0, sizeof g_primary_refs);
    memset(g_primary_flags_known, 0, sizeof g_primary_flags_known);
    pthread_mutex_unlock(&g_primary_lock);
}

/* Before cuInit the driver answers the context calls CUDA_ERROR_NOT_INITIALIZED and writes no
 * out parameter (recorded on the GPU machine: docs/measurements/2026-11-26-run11), also after
 * cuDriverGetVersion, which opens the session (run 22). */
#define NEED_INIT()                                                                                \
    do {                                                                                           \
        if (!sl_fe_init_done())                                                                    \
            return CUDA_ERROR_NOT_INITIALIZED;                                                     \
    } while (0)

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    NEED_INIT();
    sl_fe_ctx_set_current(ctx);
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    NEED_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = sl_fe_current_context();
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    NEED_INIT();
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (sl_fe_ctx_stack_full())
        return CUDA_ERROR_OUT_OF_MEMORY;
    sl_fe_ctx_push(ctx);
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
    return cuCtxPushCurrent_v2(ctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    NEED_INIT();
    CUcontext c;
    if (!sl_fe_ctx_pop(&c))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx)
        *pctx = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    return cuCtxPopCurrent_v2(pctx);
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    NEED_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx)
        ctx = sl_fe_current_context();
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    int d = sl_fe_ctx_device(ctx);
    if (d < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = d;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    return cuCtxGetDevice_v2(device, NULL);
}

CUresult sl_fe_context_id(CUcontext ctx, uint64_t *id)
{
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    /* the backend's ids: kind in the top 8 bits, a per-session counter below (from 1) */
    *id = (uint64_t)(uintptr_t)ctx & ((UINT64_C(1) << 56) - 1);
    return CUDA_SUCCESS;
}

CUresult sl_fe_stream_id(CUcontext ctx, CUstream stream, uint64_t *id)
{
    unsigned long long v = 0;
    CUresult rc;
    if (!ctx) {
        rc = cuStreamGetId(stream, &v);
    } else {
        if ((rc = cuCtxPushCurrent_v2(ctx)) != CUDA_SUCCESS)
            return rc;
        rc = cuStreamGetId(stream, &v);
        CUcontext popped;
        cuCtxPopCurrent_v2(&popped);
    }
    if (rc == CUDA_SUCCESS)
        *id = v;
    return rc;
}

CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    if (!ctxId)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx)
        ctx = sl_fe_current_context();
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    uint64_t id;
    CUresult rc = sl_fe_context_id(ctx, &id);
    if (rc == CUDA_SUCCESS)
        *ctxId = id;
    return rc;
}

CUresult sl_fe_primary_ctx_handle(CUdevice dev, CUcontext *pctx)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sl_fe_ensure_session();
    if (rc != CUDA_SUCCESS)
        return rc;
    const struct sl_fe_device *d = sl_fe_session_device(dev);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    *pctx = (CUcontext)(uintptr_t)d->primary_context;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult rc = sl_fe_primary_ctx_handle(dev, pctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_primary_lock);
    if (dev < 64)
        g_primary_refs[dev]++;
    pthread_mutex_unlock(&g_primary_lock);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult rc = sl_fe_ensure_session();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!sl_fe_session_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_primary_lock);
    if (g_primary_refs[dev] > 0)
        g_primary_refs[dev]--;
    else
        rc = CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_unlock(&g_primary_lock);
    return rc;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return cuDevicePrimaryCtxRelease_v2(dev);
}

/* The primary context's state is answered here: cudart asks it before most runtime calls
 * (over a thousand times per PyTorch training step), and only this process changes it. Active
 * means retained, as natively; the flags are the backend's until this process sets them. */
static CUresult primary_flags_fetch(CUdevice dev, unsigned *flags)
{
    Sluice__Cuda__CuDevicePrimaryCtxGetStateRequest req =
        SLUICE__CUDA__CU_DEVICE_PRIMARY_CTX_GET_STATE_REQUEST__INIT;
    req.dev = dev;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuDevicePrimaryCtxGetState, &call, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS && SL_FE_REPLY(cuDevicePrimaryCtxGetState, rep))
            *flags = rep->cu_device_primary_ctx_get_state->flags;
        else if (rc == CUDA_SUCCESS)
            rc = CUDA_ERROR_UNKNOWN;
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sl_fe_ensure_session();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!sl_fe_session_device(dev) || dev >= 64)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_primary_lock);
    int known = g_primary_flags_known[dev];
    unsigned f = g_primary_flags[dev];
    pthread_mutex_unlock(&g_primary_lock);
    if (!known && (rc = primary_flags_fetch(dev, &f)) != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_primary_lock);
    g_primary_flags[dev] = f;
    g_primary_flags_known[dev] = 1;
    *flags = f;
    *active = g_primary_refs[dev] > 0;
    pthread_mutex_unlock(&g_primary_lock);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    CUresult rc = sl_fe_ensure_session();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!sl_fe_session_device(dev) || dev >= 64)
        return CUDA_ERROR_INVALID_DEVICE;
    Sluice__Cuda__CuDevicePrimaryCtxSetFlagsV2Request req =
        SLUICE__CUDA__CU_DEVICE_PRIMARY_CTX_SET_FLAGS_V2_REQUEST__INIT;
    req.dev = dev;
    req.flags = flags;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuDevicePrimaryCtxSetFlags_v2, &call, &req);
    Sluice__Wire__Reply *rep = NULL;
    rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    pthread_mutex_lock(&g_primary_lock);
    g_primary_flags[dev] = flags;
    g_primary_flags_known[dev] = rc == CUDA_SUCCESS; /* else ask again */
    pthread_mutex_unlock(&g_primary_lock);
    return rc;
}

CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CUcontext pc = NULL;
    CUresult rc = sl_fe_primary_ctx_handle(dev, &pc);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuDevicePrimaryCtxResetV2Request req =
        SLUICE__CUDA__CU_DEVICE_PRIMARY_CTX_RESET_V2_REQUEST__INIT;
    req.dev = dev;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuDevicePrimaryCtxReset_v2, &call, &req);
    sl_fe_allocs_context_gone(); /* the cache freed first; later frees go synchronously */
    Sluice__Wire__Reply *rep = NULL;
    rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    if (rc == CUDA_SUCCESS)
        sl_fe_cls_on_ctx_reset(pc); /* a reset drops context-local storage without dtors */
    if (dev >= 0 && dev < 64) {
        pthread_mutex_lock(&g_primary_lock);
        g_primary_flags_known[dev] = 0; /* ask the backend what the reset left */
        pthread_mutex_unlock(&g_primary_lock);
    }
    return rc;
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    return cuDevicePrimaryCtxReset_v2(dev);
}

/* ------------------------------------------------------------------ explicit contexts */
static int sl_fe_is_primary_ctx(CUcontext ctx)
{
    int n = sl_fe_session_device_count();
    for (int i = 0; i < n; i++) {
        const struct sl_fe_device *d = sl_fe_session_device(i);
        if (d && d->primary_context == (uint64_t)(uintptr_t)ctx)
            return 1;
    }
    return 0;
}

/* cuCtxCreate (every version) is cuCtxCreate_v4 on the wire: the backend creates a real context
 * for the session (owned by it, destroyed with it) and answers its id. As in CUDA, the new
 * context becomes current: it is pushed on the calling thread's stack. Execution affinity and
 * CIG parameters cannot be honoured remotely: CUDA_ERROR_NOT_SUPPORTED. */
CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                        CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (ctxCreateParams) {
        if (ctxCreateParams->numExecAffinityParams < 0 ||
            (ctxCreateParams->numExecAffinityParams > 0 && !ctxCreateParams->execAffinityParams))
            return CUDA_ERROR_INVALID_VALUE;
        if (ctxCreateParams->numExecAffinityParams > 0 || ctxCreateParams->cigParams)
            return sl_fe_unsupported("cuCtxCreate_v4 with execution affinity or CIG parameters");
    }
    CUresult rc = sl_fe_ensure_session();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!sl_fe_session_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (sl_fe_ctx_stack_full())
        return CUDA_ERROR_OUT_OF_MEMORY;
    Sluice__Cuda__CuCtxCreateV4Request req = SLUICE__CUDA__CU_CTX_CREATE_V4_REQUEST__INIT;
    req.flags = flags;
    req.dev = dev;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuCtxCreate_v4, &call, &req);
    Sluice__Wire__Reply *rep = NULL;
    uint64_t id = 0;
    rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            if (SL_FE_REPLY(cuCtxCreate_v4, rep) && rep->cu_ctx_create_v4)
                id = rep->cu_ctx_create_v4->pctx;
            if (!id)
                rc = CUDA_ERROR_UNKNOWN;
        }
        sl_fe_reply_free(rep);
    }
    if (rc != CUDA_SUCCESS)
        return rc;
    CUcontext ctx = (CUcontext)(uintptr_t)id;
    sl_fe_ctx_remember(ctx, dev);
    sl_fe_ctx_push(ctx);
    *pctx = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev)
{
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    if (numParams > 0)
        return sl_fe_unsupported("cuCtxCreate_v3 with execution affinity parameters");
    return cuCtxCreate_v4(pctx, NULL, flags, dev);
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return cuCtxCreate_v4(pctx, NULL, flags, dev);
}

CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return cuCtxCreate_v4(pctx, NULL, flags, dev);
}

/* CUDA: "If ctx is current to the calling thread then ctx will also be popped from the current
 * thread's context stack. If ctx is current to other threads, then ctx will remain current to
 * those threads" (their calls then fail: the backend no longer knows the id, which is never
 * reused). Context-local storage destructors run first, while the context still exists. */
CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (sl_fe_ctx_device(ctx) < 0 && !sl_fe_is_primary_ctx(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    sl_fe_cls_on_ctx_destroy(ctx);
    Sluice__Cuda__CuCtxDestroyV2Request req = SLUICE__CUDA__CU_CTX_DESTROY_V2_REQUEST__INIT;
    req.ctx = (uint64_t)(uintptr_t)ctx;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuCtxDestroy_v2, &call, &req);
    sl_fe_allocs_context_gone(); /* the cache freed first; later frees go synchronously */
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    if (rc != CUDA_SUCCESS)
        return rc;
    sl_fe_ctx_pop_if_current(ctx);
    if (!sl_fe_is_primary_ctx(ctx))
        sl_fe_ctx_drop(ctx);
    return CUDA_SUCCESS;
}

CUresult cuCtxDestroy(CUcontext ctx)
{
    return cuCtxDestroy_v2(ctx);
}
