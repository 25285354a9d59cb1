/* CUDA IPC between the processes of one guest (issue 20; docs/security.md, "IPC handles"). A
 * real IPC handle never reaches the guest: it names device memory of the host's GPU that any
 * process could open with it. The exporting session registers the real handle with the backend's
 * parent (api/ipc_broker.c, daemon/broker.c to daemon/ipc_tokens.c) and hands the guest the random
 * token it gets back, of the handle's size; an importing session asks the parent to resolve the
 * token, which it does only for a session of the exporter's instance and as the kind it was
 * registered as, then opens the real handle. A token of another instance or tenant (another
 * backend: unknown here), a forged one or one whose exporter ended is answered
 * CUDA_ERROR_INVALID_VALUE, as the driver answers an invalid handle; the parent logs why. Opened
 * memory joins the session's allocation table uncounted (it is the exporter's, counted there) until
 * cuIpcCloseMemHandle (generated: a @release) or the session's end; opened events are the session's
 * handles. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "api/reply.h"
#include "api/ipc_broker.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

static CUresult token_reply(ProtobufCBinaryData *out, const uint8_t token[BE_IPC_TOKEN_BYTES])
{
    out->data = malloc(BE_IPC_TOKEN_BYTES);
    if (!out->data)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(out->data, token, BE_IPC_TOKEN_BYTES);
    out->len = BE_IPC_TOKEN_BYTES;
    return CUDA_SUCCESS;
}

CUresult be_h_cuIpcGetMemHandle(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuIpcGetMemHandleRequest *rq = c->call->cu_ipc_get_mem_handle;
    if (!rq || !rq->dptr || sl_be_devptr_check(s, rq->dptr, 0) != CUDA_SUCCESS) {
        sl_be_detail(reply, "0x%llx is not in the session's device memory",
                     (unsigned long long)(rq ? rq->dptr : 0));
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuIpcGetMemHandle)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUipcMemHandle real;
    CUresult rc = api->cuIpcGetMemHandle(&real, (CUdeviceptr)rq->dptr);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint8_t token[BE_IPC_TOKEN_BYTES];
    rc = be_ipc_export(s, reply, BE_TOKEN_MEM, &real, sizeof real, -1, token);
    OPENSSL_cleanse(&real, sizeof real);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuIpcGetMemHandleReply *rp = BE_REPLY(
        reply, cu_ipc_get_mem_handle, SLUICE__WIRE__REPLY__OUT_CU_IPC_GET_MEM_HANDLE,
        Sluice__Cuda__CuIpcGetMemHandleReply, sluice__cuda__cu_ipc_get_mem_handle_reply__init);
    return rp ? token_reply(&rp->p_handle, token) : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult be_h_cuIpcOpenMemHandle_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuIpcOpenMemHandleV2Request *rq = c->call->cu_ipc_open_mem_handle_v2;
    if (!rq)
        return CUDA_ERROR_INVALID_VALUE;
    if (!api->cuIpcOpenMemHandle_v2 || !api->cuIpcCloseMemHandle)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUipcMemHandle real;
    CUresult rc = be_ipc_import(s, reply, BE_TOKEN_MEM, rq->handle.data, rq->handle.len, &real,
                                sizeof real, NULL);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuIpcOpenMemHandleV2Reply *rp = BE_REPLY(
        reply, cu_ipc_open_mem_handle_v2, SLUICE__WIRE__REPLY__OUT_CU_IPC_OPEN_MEM_HANDLE_V2,
        Sluice__Cuda__CuIpcOpenMemHandleV2Reply,
        sluice__cuda__cu_ipc_open_mem_handle_v2_reply__init);
    CUdeviceptr p = 0;
    rc = rp ? api->cuIpcOpenMemHandle_v2(&p, real, rq->flags) : CUDA_ERROR_OUT_OF_MEMORY;
    OPENSSL_cleanse(&real, sizeof real);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* its size from the driver; not counted: the memory is the exporter's */
    rc = sl_be_devptr_add(s, c->call->call_id, (uint64_t)p, 0);
    if (rc != CUDA_SUCCESS) {
        api->cuIpcCloseMemHandle(p);
        sl_be_detail(reply, "the opened IPC memory at 0x%llx cannot be bounded",
                     (unsigned long long)p);
        return rc;
    }
    rp->pdptr = (uint64_t)p;
    return CUDA_SUCCESS;
}

CUresult be_h_cuIpcGetEventHandle(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuIpcGetEventHandleRequest *rq = c->call->cu_ipc_get_event_handle;
    if (!rq)
        return CUDA_ERROR_INVALID_VALUE;
    void *ev = NULL;
    CUresult rc = sl_be_handle_get(s, SL_H_EVENT, rq->event, &ev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuIpcGetEventHandle)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUipcEventHandle real;
    rc = api->cuIpcGetEventHandle(&real, (CUevent)ev);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint8_t token[BE_IPC_TOKEN_BYTES];
    rc = be_ipc_export(s, reply, BE_TOKEN_EVENT, &real, sizeof real, -1, token);
    OPENSSL_cleanse(&real, sizeof real);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuIpcGetEventHandleReply *rp = BE_REPLY(
        reply, cu_ipc_get_event_handle, SLUICE__WIRE__REPLY__OUT_CU_IPC_GET_EVENT_HANDLE,
        Sluice__Cuda__CuIpcGetEventHandleReply, sluice__cuda__cu_ipc_get_event_handle_reply__init);
    return rp ? token_reply(&rp->p_handle, token) : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult be_h_cuIpcOpenEventHandle(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuIpcOpenEventHandleRequest *rq = c->call->cu_ipc_open_event_handle;
    if (!rq)
        return CUDA_ERROR_INVALID_VALUE;
    if (!api->cuIpcOpenEventHandle || !api->cuEventDestroy_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUipcEventHandle real;
    CUresult rc = be_ipc_import(s, reply, BE_TOKEN_EVENT, rq->handle.data, rq->handle.len, &real,
                                sizeof real, NULL);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuIpcOpenEventHandleReply *rp =
        BE_REPLY(reply, cu_ipc_open_event_handle, SLUICE__WIRE__REPLY__OUT_CU_IPC_OPEN_EVENT_HANDLE,
                 Sluice__Cuda__CuIpcOpenEventHandleReply,
                 sluice__cuda__cu_ipc_open_event_handle_reply__init);
    CUevent ev = NULL;
    rc = rp ? api->cuIpcOpenEventHandle(&ev, real) : CUDA_ERROR_OUT_OF_MEMORY;
    OPENSSL_cleanse(&real, sizeof real);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = sl_be_handle_put(s, SL_H_EVENT, ev, 0, &rp->ph_event);
    if (rc != CUDA_SUCCESS)
        api->cuEventDestroy_v2(ev);
    return rc;
}
