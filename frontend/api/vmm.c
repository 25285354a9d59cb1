/* Virtual memory management: the hand-written calls (cuMemCreate, cuMemSetAccess with its array
 * of descriptors, cuMemGetAllocationGranularity, cuMemGetAllocationPropertiesFromHandle). The
 * others (reserve, free, map, unmap, release, get access) are generated; the backend checks all
 * of them against the session's reservations and mappings (backend/vmm.c). Shareable handles
 * are refused: cuMemExportToShareableHandle and cuMemImportFromShareableHandle stay
 * CUDA_ERROR_NOT_SUPPORTED, and so does an allocation that asks for a handle type. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <string.h>

#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define MAX_ACCESS_DESCS 64

static CUresult result(CUresult rc, Sluice__Wire__Reply *rep)
{
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (!handle || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuMemCreateRequest rq = SLUICE__CUDA__CU_MEM_CREATE_REQUEST__INIT;
    rq.size = size;
    rq.prop = (ProtobufCBinaryData){sizeof *prop, (uint8_t *)prop};
    rq.flags = flags;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuMemCreate, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    if (rc == CUDA_SUCCESS) {
        if (SL_FE_REPLY(cuMemCreate, rep) && rep->cu_mem_create->handle)
            *handle = rep->cu_mem_create->handle;
        else
            rc = CUDA_ERROR_UNKNOWN;
    }
    sl_fe_reply_free(rep);
    return rc;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    if (!desc || !count || count > MAX_ACCESS_DESCS)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuMemSetAccessRequest rq = SLUICE__CUDA__CU_MEM_SET_ACCESS_REQUEST__INIT;
    rq.ptr = ptr;
    rq.size = size;
    rq.desc = (ProtobufCBinaryData){count * sizeof *desc, (uint8_t *)desc};
    rq.count = count;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuMemSetAccess, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    return result(rc, rep);
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    if (!granularity || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuMemGetAllocationGranularityRequest rq =
        SLUICE__CUDA__CU_MEM_GET_ALLOCATION_GRANULARITY_REQUEST__INIT;
    rq.prop = (ProtobufCBinaryData){sizeof *prop, (uint8_t *)prop};
    rq.option = (uint32_t)option;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuMemGetAllocationGranularity, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    if (rc == CUDA_SUCCESS) {
        if (SL_FE_REPLY(cuMemGetAllocationGranularity, rep))
            *granularity = (size_t)rep->cu_mem_get_allocation_granularity->granularity;
        else
            rc = CUDA_ERROR_UNKNOWN;
    }
    sl_fe_reply_free(rep);
    return rc;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                CUmemGenericAllocationHandle handle)
{
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuMemGetAllocationPropertiesFromHandleRequest rq =
        SLUICE__CUDA__CU_MEM_GET_ALLOCATION_PROPERTIES_FROM_HANDLE_REQUEST__INIT;
    rq.handle = handle;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuMemGetAllocationPropertiesFromHandle, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = sl_fe_pod_out((CUresult)rep->result,
                       SL_FE_REPLY(cuMemGetAllocationPropertiesFromHandle, rep)
                           ? &rep->cu_mem_get_allocation_properties_from_handle->prop
                           : NULL,
                       prop, sizeof *prop);
    sl_fe_reply_free(rep);
    return rc;
}
