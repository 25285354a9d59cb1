/* Host callbacks (docs/remoting.md "Host callbacks and printf"): (fn, userData) stay here under
 * a callback id; the backend's own host function on the stream sends ServerMessage{callback}
 * and the frontend runs the function when it reads it (rpc.c), then answers callback_done. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "fe.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

struct cb {
    struct cb *next;
    uint64_t id;
    int kind;
    void (*fn)(void);
    void *user;
    CUstream stream;
};

static struct cb *g_cbs;
static uint64_t g_next_id = 1;
static pthread_mutex_t g_cb_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t sl_fe_callback_register(int kind, void (*fn)(void), void *user, CUstream stream)
{
    struct cb *c = malloc(sizeof *c);
    if (!c)
        return 0;
    c->kind = kind;
    c->fn = fn;
    c->user = user;
    c->stream = stream;
    pthread_mutex_lock(&g_cb_lock);
    c->id = g_next_id++;
    c->next = g_cbs;
    g_cbs = c;
    pthread_mutex_unlock(&g_cb_lock);
    return c->id;
}

static struct cb *take(uint64_t id)
{
    pthread_mutex_lock(&g_cb_lock);
    struct cb *found = NULL;
    for (struct cb **pp = &g_cbs; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            found = *pp;
            *pp = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&g_cb_lock);
    return found;
}

void sl_fe_callback_forget(uint64_t id)
{
    free(take(id));
}

int sl_fe_callback_run(uint64_t id)
{
    if (!id)
        return 0;
    struct cb *c = take(id);
    if (!c)
        return 0;
    if (c->kind == 0)
        ((CUhostFn)(void (*)(void))c->fn)(c->user);
    else
        ((CUstreamCallback)(void (*)(void))c->fn)(c->stream, CUDA_SUCCESS, c->user);
    free(c);
    return 1;
}

static CUresult host_func(bool pt, CUstream s, CUhostFn fn, void *user)
{
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
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
