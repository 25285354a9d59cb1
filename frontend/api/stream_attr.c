/* Stream attributes: the CUstreamAttrValue pod travels as it is (the access policy window names
 * device memory, checked by the backend: backend/stream_attr.c). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdbool.h>
#include <string.h>

#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

static CUresult set_attr(bool pt, CUstream s, CUstreamAttrID attr, const CUstreamAttrValue *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuStreamSetAttributeRequest rq =
        SLUICE__CUDA__CU_STREAM_SET_ATTRIBUTE_REQUEST__INIT;
    rq.h_stream = (uint64_t)(uintptr_t)s;
    rq.attr = (uint32_t)attr;
    rq.value = (ProtobufCBinaryData){sizeof *v, (uint8_t *)v};
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.per_thread_stream = pt;
    SL_FE_SET(cuStreamSetAttribute, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    return rc;
}

static CUresult get_attr(bool pt, CUstream s, CUstreamAttrID attr, CUstreamAttrValue *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuStreamGetAttributeRequest rq =
        SLUICE__CUDA__CU_STREAM_GET_ATTRIBUTE_REQUEST__INIT;
    rq.h_stream = (uint64_t)(uintptr_t)s;
    rq.attr = (uint32_t)attr;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.per_thread_stream = pt;
    SL_FE_SET(cuStreamGetAttribute, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    rc = sl_fe_pod_out(
        rc,
        SL_FE_REPLY(cuStreamGetAttribute, rep) ? &rep->cu_stream_get_attribute->value_out : NULL, v,
        sizeof *v);
    sl_fe_reply_free(rep);
    return rc;
}

CUresult cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr, const CUstreamAttrValue *value)
{
    return set_attr(false, hStream, attr, value);
}

CUresult cuStreamSetAttribute_ptsz(CUstream hStream, CUstreamAttrID attr,
                                   const CUstreamAttrValue *value)
{
    return set_attr(true, hStream, attr, value);
}

CUresult cuStreamGetAttribute(CUstream hStream, CUstreamAttrID attr, CUstreamAttrValue *value_out)
{
    return get_attr(false, hStream, attr, value_out);
}

CUresult cuStreamGetAttribute_ptsz(CUstream hStream, CUstreamAttrID attr,
                                   CUstreamAttrValue *value_out)
{
    return get_attr(true, hStream, attr, value_out);
}
