/* Stream attributes (cuStreamSetAttribute / cuStreamGetAttribute and their _ptsz twins): the
 * CUstreamAttrValue pod travels as it is. Only the attributes a stream has are accepted:
 * the access policy window (its base_ptr..+num_bytes must be the session's memory, unless
 * num_bytes is 0, which clears the window), the synchronization policy, the priority and the
 * memory synchronization domain and its map; anything else is CUDA_ERROR_INVALID_VALUE before
 * the driver sees it. */
#include <stdlib.h>
#include <string.h>

#include "api/reply.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

static int stream_attr(uint32_t a)
{
    switch (a) {
    case CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW:
    case CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY:
    case CU_STREAM_ATTRIBUTE_PRIORITY:
    case CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN:
        return 1;
    default:
        return 0;
    }
}

CUresult be_h_cuStreamSetAttribute(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuStreamSetAttributeRequest *rq = call->cu_stream_set_attribute;
    CUstreamAttrValue v;
    if (rq->value.len != sizeof v) {
        sl_be_detail(reply, "CUstreamAttrValue of %zu bytes", rq->value.len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!stream_attr(rq->attr)) {
        sl_be_detail(reply, "stream attribute %u is not one a stream has", rq->attr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&v, rq->value.data, sizeof v);
    if (rq->attr == CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW && v.accessPolicyWindow.num_bytes) {
        CUresult rc = sl_be_devptr_check(s, (uint64_t)(uintptr_t)v.accessPolicyWindow.base_ptr,
                                         v.accessPolicyWindow.num_bytes);
        if (rc != CUDA_SUCCESS) {
            sl_be_detail(reply, "access policy window outside the session's memory");
            return rc;
        }
    }
    CUresult (*fn)(CUstream, CUstreamAttrID, const CUstreamAttrValue *) =
        call->per_thread_stream && api->cuStreamSetAttribute_ptsz ? api->cuStreamSetAttribute_ptsz
                                                                  : api->cuStreamSetAttribute;
    if (!fn)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUstream st;
    CUresult rc = be_stream(s, rq->h_stream, &st);
    return rc == CUDA_SUCCESS ? fn(st, (CUstreamAttrID)rq->attr, &v) : rc;
}

CUresult be_h_cuStreamGetAttribute(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuStreamGetAttributeRequest *rq = call->cu_stream_get_attribute;
    if (!stream_attr(rq->attr)) {
        sl_be_detail(reply, "stream attribute %u is not one a stream has", rq->attr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult (*fn)(CUstream, CUstreamAttrID, CUstreamAttrValue *) =
        call->per_thread_stream && api->cuStreamGetAttribute_ptsz ? api->cuStreamGetAttribute_ptsz
                                                                  : api->cuStreamGetAttribute;
    if (!fn)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUstream st;
    CUresult rc = be_stream(s, rq->h_stream, &st);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuStreamGetAttributeReply *rp = BE_REPLY(
        reply, cu_stream_get_attribute, SLUICE__WIRE__REPLY__OUT_CU_STREAM_GET_ATTRIBUTE,
        Sluice__Cuda__CuStreamGetAttributeReply, sluice__cuda__cu_stream_get_attribute_reply__init);
    CUstreamAttrValue *v = rp ? calloc(1, sizeof *v) : NULL;
    if (!v)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->value_out.data = (uint8_t *)v; /* freed with the reply */
    rp->value_out.len = sizeof *v;
    return fn(st, (CUstreamAttrID)rq->attr, v);
}
