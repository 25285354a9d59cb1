/* Texture and surface objects. The descriptors travel as pods (array handles are ids, device
 * pointers real addresses; the backend translates and checks them). The object the guest gets
 * is the driver's value itself, not an id: kernels receive it in their parameters. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdint.h>
#include <string.h>

#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

CUresult cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                           const CUDA_TEXTURE_DESC *pTexDesc,
                           const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
    if (!pTexObject || !pResDesc || !pTexDesc)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuTexObjectCreateRequest rq = SLUICE__CUDA__CU_TEX_OBJECT_CREATE_REQUEST__INIT;
    rq.p_res_desc.data = (uint8_t *)pResDesc;
    rq.p_res_desc.len = sizeof *pResDesc;
    rq.p_tex_desc.data = (uint8_t *)pTexDesc;
    rq.p_tex_desc.len = sizeof *pTexDesc;
    if (pResViewDesc) {
        rq.p_res_view_desc.data = (uint8_t *)pResViewDesc;
        rq.p_res_view_desc.len = sizeof *pResViewDesc;
    }
    SL_FE_SET(cuTexObjectCreate, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            if (SL_FE_REPLY(cuTexObjectCreate, rep))
                *pTexObject = (CUtexObject)rep->cu_tex_object_create->p_tex_object;
            else
                rc = CUDA_ERROR_UNKNOWN;
        }
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
    if (!pSurfObject || !pResDesc)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuSurfObjectCreateRequest rq = SLUICE__CUDA__CU_SURF_OBJECT_CREATE_REQUEST__INIT;
    rq.p_res_desc.data = (uint8_t *)pResDesc;
    rq.p_res_desc.len = sizeof *pResDesc;
    SL_FE_SET(cuSurfObjectCreate, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            if (SL_FE_REPLY(cuSurfObjectCreate, rep))
                *pSurfObject = (CUsurfObject)rep->cu_surf_object_create->p_surf_object;
            else
                rc = CUDA_ERROR_UNKNOWN;
        }
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult cuTexObjectDestroy(CUtexObject texObject)
{
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuTexObjectDestroyRequest rq = SLUICE__CUDA__CU_TEX_OBJECT_DESTROY_REQUEST__INIT;
    rq.tex_object = texObject;
    SL_FE_SET(cuTexObjectDestroy, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    return sl_fe_reply_result(rc, rep);
}

CUresult cuSurfObjectDestroy(CUsurfObject surfObject)
{
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuSurfObjectDestroyRequest rq =
        SLUICE__CUDA__CU_SURF_OBJECT_DESTROY_REQUEST__INIT;
    rq.surf_object = surfObject;
    SL_FE_SET(cuSurfObjectDestroy, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    return sl_fe_reply_result(rc, rep);
}

CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject)
{
    if (!pTexDesc)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuTexObjectGetTextureDescRequest rq =
        SLUICE__CUDA__CU_TEX_OBJECT_GET_TEXTURE_DESC_REQUEST__INIT;
    rq.tex_object = texObject;
    SL_FE_SET(cuTexObjectGetTextureDesc, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        rc = sl_fe_pod_out(rc,
                           SL_FE_REPLY(cuTexObjectGetTextureDesc, rep)
                               ? &rep->cu_tex_object_get_texture_desc->p_tex_desc
                               : NULL,
                           pTexDesc, sizeof *pTexDesc);
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *pResViewDesc,
                                        CUtexObject texObject)
{
    if (!pResViewDesc)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuTexObjectGetResourceViewDescRequest rq =
        SLUICE__CUDA__CU_TEX_OBJECT_GET_RESOURCE_VIEW_DESC_REQUEST__INIT;
    rq.tex_object = texObject;
    SL_FE_SET(cuTexObjectGetResourceViewDesc, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            if (SL_FE_REPLY(cuTexObjectGetResourceViewDesc, rep) &&
                rep->cu_tex_object_get_resource_view_desc->p_res_view_desc.len ==
                    sizeof *pResViewDesc)
                memcpy(pResViewDesc,
                       rep->cu_tex_object_get_resource_view_desc->p_res_view_desc.data,
                       sizeof *pResViewDesc);
            else
                rc = CUDA_ERROR_UNKNOWN;
        }
        sl_fe_reply_free(rep);
    }
    return rc;
}

static CUresult res_desc(int surf, CUDA_RESOURCE_DESC *out, unsigned long long v)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuTexObjectGetResourceDescRequest rt =
        SLUICE__CUDA__CU_TEX_OBJECT_GET_RESOURCE_DESC_REQUEST__INIT;
    Sluice__Cuda__CuSurfObjectGetResourceDescRequest rs =
        SLUICE__CUDA__CU_SURF_OBJECT_GET_RESOURCE_DESC_REQUEST__INIT;
    if (surf) {
        rs.surf_object = v;
        SL_FE_SET(cuSurfObjectGetResourceDesc, &call, &rs);
    } else {
        rt.tex_object = v;
        SL_FE_SET(cuTexObjectGetResourceDesc, &call, &rt);
    }
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            const ProtobufCBinaryData *d = NULL;
            if (surf && SL_FE_REPLY(cuSurfObjectGetResourceDesc, rep))
                d = &rep->cu_surf_object_get_resource_desc->p_res_desc;
            else if (!surf && SL_FE_REPLY(cuTexObjectGetResourceDesc, rep))
                d = &rep->cu_tex_object_get_resource_desc->p_res_desc;
            if (d && d->len == sizeof *out)
                memcpy(out, d->data, sizeof *out);
            else
                rc = CUDA_ERROR_UNKNOWN;
        }
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject)
{
    return res_desc(0, pResDesc, texObject);
}

CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUsurfObject surfObject)
{
    return res_desc(1, pResDesc, surfObject);
}

/* Texture references' border colour: RGBA, four floats, sent (set) or received (get) as 16
 * bytes of bulk (proto/api/cuda_driver.api, call 378). */
CUresult cuTexRefSetBorderColor(CUtexref hTexRef, float *pBorderColor)
{
    if (!pBorderColor)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuTexRefSetBorderColorRequest rq =
        SLUICE__CUDA__CU_TEX_REF_SET_BORDER_COLOR_REQUEST__INIT;
    rq.h_tex_ref = (uint64_t)(uintptr_t)hTexRef;
    SL_FE_SET(cuTexRefSetBorderColor, &call, &rq);
    struct iovec iov = {pBorderColor, 4 * sizeof(float)};
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call_bulk(&call, &iov, 1, NULL, 0, NULL, &rep);
    return sl_fe_reply_result(rc, rep);
}

CUresult cuTexRefGetBorderColor(float *pBorderColor, CUtexref hTexRef)
{
    if (!pBorderColor)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuTexRefGetBorderColorRequest rq =
        SLUICE__CUDA__CU_TEX_REF_GET_BORDER_COLOR_REQUEST__INIT;
    rq.h_tex_ref = (uint64_t)(uintptr_t)hTexRef;
    SL_FE_SET(cuTexRefGetBorderColor, &call, &rq);
    float rgba[4];
    size_t got = 0;
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call_bulk(&call, NULL, 0, rgba, sizeof rgba, &got, &rep);
    rc = sl_fe_reply_result(rc, rep);
    if (rc == CUDA_SUCCESS && got != sizeof rgba)
        rc = CUDA_ERROR_UNKNOWN; /* a backend that sent no colour */
    if (rc == CUDA_SUCCESS)
        memcpy(pBorderColor, rgba, sizeof rgba);
    return rc;
}
