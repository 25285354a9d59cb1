/* Host functions and stream callbacks (docs/remoting.md "Host callbacks and printf"):
 * cuLaunchHostFunc and cuStreamAddCallback register (fn, userData) with the call layer
 * (call/callbacks.c) under a callback id, which is all the backend gets; the call layer runs the
 * function when the backend asks. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdbool.h>

#include "api/capture.h"
#include "call/callbacks.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

static CUresult host_func(bool pt, CUstream s, CUhostFn fn, void *user)
{
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    if (sl_fe_capturing(pt, s)) /* a host node of the capture's graph (api/capture.c) */
        return sl_fe_capture_host_func(pt, s, fn, user);
    uint64_t id = sl_fe_callback_register(0, (void (*)(void))fn, user, s);
    if (!id)
        return CUDA_ERROR_OUT_OF_MEMORY;
    Sluice__Cuda__CuLaunchHostFuncRequest req = SLUICE__CUDA__CU_LAUNCH_HOST_FUNC_REQUEST__INIT;
    req.h_stream = (uint64_t)(uintptr_t)s;
    req.fn = id;
    req.user_data = 0; /* stays in the guest */
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.per_thread_stream = pt;
    SL_FE_SET(cuLaunchHostFunc, &call, &req);
    CUresult rc = sl_fe_enqueue_async(&call);
    if (rc != CUDA_SUCCESS)
        sl_fe_callback_forget(id);
    return rc;
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    return host_func(false, hStream, fn, userData);
}

CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    return host_func(true, hStream, fn, userData);
}

static CUresult add_callback(bool pt, CUstream s, CUstreamCallback cb, void *user, unsigned flags)
{
    if (!cb || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t id = sl_fe_callback_register(1, (void (*)(void))cb, user, s);
    if (!id)
        return CUDA_ERROR_OUT_OF_MEMORY;
    Sluice__Cuda__CuStreamAddCallbackRequest req =
        SLUICE__CUDA__CU_STREAM_ADD_CALLBACK_REQUEST__INIT;
    req.h_stream = (uint64_t)(uintptr_t)s;
    req.callback = id;
    req.user_data = 0;
    req.flags = flags;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.per_thread_stream = pt;
    SL_FE_SET(cuStreamAddCallback, &call, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    if (rc != CUDA_SUCCESS)
        sl_fe_callback_forget(id);
    return rc;
}

CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
                             unsigned int flags)
{
    return add_callback(false, hStream, callback, userData, flags);
}

CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData,
                                  unsigned int flags)
{
    return add_callback(true, hStream, callback, userData, flags);
}
