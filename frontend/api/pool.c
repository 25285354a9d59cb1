/* Memory pools (hand-written half: the calls the table marks hand=both). cuMemPoolCreate sends
 * the CUmemPoolProps pod with win32SecurityAttributes cleared (a guest pointer, meaningless on
 * the backend). cuMemPoolSetAttribute / GetAttribute: the value's size follows from the
 * attribute (int for the REUSE_* flags, cuuint64_t for the others); it travels as the call's
 * bulk (set) or the reply's bulk (get). cuMemPoolGetAccess sends the CUmemLocation pod.
 * Stream-ordered allocation itself (cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync,
 * pool handles) is generated. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdint.h>
#include <string.h>

#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

/* Size of a pool attribute's value; 0 for an attribute we do not know. */
static size_t attr_size(CUmemPool_attribute attr)
{
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        return sizeof(int);
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        return sizeof(cuuint64_t);
    default:
        return 0;
    }
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    if (!pool || !poolProps)
        return CUDA_ERROR_INVALID_VALUE;
    CUmemPoolProps props = *poolProps;
    props.win32SecurityAttributes = NULL;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuMemPoolCreateRequest rq = SLUICE__CUDA__CU_MEM_POOL_CREATE_REQUEST__INIT;
    rq.pool_props.data = (uint8_t *)&props;
    rq.pool_props.len = sizeof props;
    SL_FE_SET(cuMemPoolCreate, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            if (SL_FE_REPLY(cuMemPoolCreate, rep))
                *pool = (CUmemoryPool)(uintptr_t)rep->cu_mem_pool_create->pool;
            else
                rc = CUDA_ERROR_UNKNOWN;
        }
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    size_t n = attr_size(attr);
    if (!value || !n)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuMemPoolSetAttributeRequest rq =
        SLUICE__CUDA__CU_MEM_POOL_SET_ATTRIBUTE_REQUEST__INIT;
    rq.pool = (uint64_t)(uintptr_t)pool;
    rq.attr = (uint32_t)attr;
    rq.value = n;
    SL_FE_SET(cuMemPoolSetAttribute, &call, &rq);
    struct iovec iov = {value, n};
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call_bulk(&call, &iov, 1, NULL, 0, NULL, &rep);
    return sl_fe_reply_result(rc, rep);
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    size_t n = attr_size(attr);
    if (!value || !n)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuMemPoolGetAttributeRequest rq =
        SLUICE__CUDA__CU_MEM_POOL_GET_ATTRIBUTE_REQUEST__INIT;
    rq.pool = (uint64_t)(uintptr_t)pool;
    rq.attr = (uint32_t)attr;
    rq.value = n;
    SL_FE_SET(cuMemPoolGetAttribute, &call, &rq);
    uint8_t buf[sizeof(cuuint64_t)];
    size_t got = 0;
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call_bulk(&call, NULL, 0, buf, n, &got, &rep);
    rc = sl_fe_reply_result(rc, rep);
    if (rc == CUDA_SUCCESS && got != n)
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        memcpy(value, buf, n);
    return rc;
}

CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
    if (!flags || !location)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuMemPoolGetAccessRequest rq = SLUICE__CUDA__CU_MEM_POOL_GET_ACCESS_REQUEST__INIT;
    rq.mem_pool = (uint64_t)(uintptr_t)memPool;
    rq.location.data = (uint8_t *)location;
    rq.location.len = sizeof *location;
    SL_FE_SET(cuMemPoolGetAccess, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            if (SL_FE_REPLY(cuMemPoolGetAccess, rep))
                *flags = (CUmemAccess_flags)rep->cu_mem_pool_get_access->flags;
            else
                rc = CUDA_ERROR_UNKNOWN;
        }
        sl_fe_reply_free(rep);
    }
    return rc;
}
