/* Device allocations and their frees (docs/remoting.md "Frees without a round trip",
 * "Allocations without a round trip"). cuMemAlloc_v2 is served from the cache of freed
 * allocations when one of its size and context is there (call/allocs.c), asked of the backend
 * otherwise (the call layer releases the cache and asks once more when the backend refuses it
 * for memory, rpc.c). cuMemFree_v2 of a managed base also unmaps its guest pages
 * (api/managed.c); of a live allocation's base it goes into the cache or without waiting; of
 * anything else synchronously, with the driver's answer. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdbool.h>
#include <stdint.h>

#include "api/managed.h"
#include "call/allocs.h"
#include "call/contexts.h"
#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t base = 0;
    if (bytesize && sl_fe_allocs_reuse(sl_fe_current_ctx_id(), bytesize, &base)) {
        *dptr = (CUdeviceptr)base;
        return CUDA_SUCCESS;
    }
    Sluice__Cuda__CuMemAllocV2Request req = SLUICE__CUDA__CU_MEM_ALLOC_V2_REQUEST__INIT;
    req.bytesize = bytesize;
    Sluice__Wire__Call call = SL_FE_CALL(cuMemAlloc_v2, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        const Sluice__Cuda__CuMemAllocV2Reply *o = SL_FE_REPLY(cuMemAlloc_v2, rep);
        if (rc == CUDA_SUCCESS && !o)
            rc = CUDA_ERROR_UNKNOWN;
        if (rc == CUDA_SUCCESS) {
            *dptr = (CUdeviceptr)o->dptr;
            sl_fe_allocs_cacheable(o->dptr, bytesize);
        }
        sl_fe_reply_free(rep);
    }
    return rc;
}

/* The driver's answer for the address, as if the cache never held it. */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    sl_fe_allocs_asking(dptr);
    Sluice__Cuda__CuMemGetAddressRangeV2Request req =
        SLUICE__CUDA__CU_MEM_GET_ADDRESS_RANGE_V2_REQUEST__INIT;
    req.dptr = dptr;
    Sluice__Wire__Call call = SL_FE_CALL(cuMemGetAddressRange_v2, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        const Sluice__Cuda__CuMemGetAddressRangeV2Reply *o =
            SL_FE_REPLY(cuMemGetAddressRange_v2, rep);
        if (rc == CUDA_SUCCESS && !o)
            rc = CUDA_ERROR_UNKNOWN;
        if (rc == CUDA_SUCCESS && pbase)
            *pbase = (CUdeviceptr)o->pbase;
        if (rc == CUDA_SUCCESS && psize)
            *psize = (size_t)o->psize;
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult rc = CUDA_SUCCESS;
    if (sl_fe_managed_free(dptr, &rc))
        return rc;
    Sluice__Cuda__CuMemFreeV2Request req = SLUICE__CUDA__CU_MEM_FREE_V2_REQUEST__INIT;
    req.dptr = dptr;
    Sluice__Wire__Call call = SL_FE_CALL(cuMemFree_v2, &req);
    switch (sl_fe_allocs_free(dptr, sl_fe_current_ctx_id())) {
    case SL_FE_FREE_CACHED:
        return CUDA_SUCCESS;
    case SL_FE_FREE_NOWAIT:
        call.no_reply = true;
        return sl_fe_enqueue_async(&call);
    case SL_FE_FREE_SYNC:
        break;
    }
    Sluice__Wire__Reply *rep = NULL;
    rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    return rc;
}
