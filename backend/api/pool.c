/* Memory pools: the hand-written calls (cuMemPoolCreate, cuMemPoolSetAttribute,
 * cuMemPoolGetAttribute, cuMemPoolGetAccess). Pools live on a device of the session: the
 * CUmemLocation's id is a device ordinal (translated); host and NUMA locations are refused (that
 * memory would be the backend host's, not the guest's), and so are shareable handle types other
 * than POSIX file descriptors (those travel as tokens: api/shareable.c, docs/security.md).
 * Attribute values travel as bulk: 4 bytes for the REUSE_* flags, 8 for the others. Allocations
 * from pools (cuMemAllocAsync, cuMemAllocFromPoolAsync) are generated and registered with their
 * size (@span). */
#include <stdlib.h>
#include <string.h>

#include "api/reply.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

static CUresult location(sl_be_session *s, Sluice__Wire__Reply *reply, CUmemLocation *loc)
{
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE) {
        sl_be_detail(reply, "memory pool location type %d is not supported", (int)loc->type);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    CUdevice dev;
    CUresult rc = sl_be_device_get(s, loc->id, &dev);
    if (rc == CUDA_SUCCESS)
        loc->id = (int)dev;
    return rc;
}

CUresult be_h_cuMemPoolCreate(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemPoolCreateRequest *rq = call->cu_mem_pool_create;
    CUmemPoolProps props;
    if (rq->pool_props.len != sizeof props) {
        sl_be_detail(reply, "CUmemPoolProps of %zu bytes", rq->pool_props.len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&props, rq->pool_props.data, sizeof props);
    props.win32SecurityAttributes = NULL;
    if (props.handleTypes != CU_MEM_HANDLE_TYPE_NONE &&
        props.handleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        sl_be_detail(reply, "memory pool handle types %u: only POSIX file descriptors (1) travel",
                     (unsigned)props.handleTypes);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    CUresult rc = location(s, reply, &props.location);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuMemPoolCreate)
        return CUDA_ERROR_NOT_SUPPORTED;
    Sluice__Cuda__CuMemPoolCreateReply *rp =
        BE_REPLY(reply, cu_mem_pool_create, SLUICE__WIRE__REPLY__OUT_CU_MEM_POOL_CREATE,
                 Sluice__Cuda__CuMemPoolCreateReply, sluice__cuda__cu_mem_pool_create_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUmemoryPool pool = NULL;
    rc = api->cuMemPoolCreate(&pool, &props);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = sl_be_handle_put(s, SL_H_MEMPOOL, pool, 0, &rp->pool);
    if (rc != CUDA_SUCCESS && api->cuMemPoolDestroy)
        api->cuMemPoolDestroy(pool);
    return rc;
}

static uint64_t attr_size(uint32_t attr)
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

static CUresult pool_of(sl_be_session *s, uint64_t id, CUmemoryPool *p)
{
    void *n = NULL;
    if (!id)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult rc = sl_be_handle_get(s, SL_H_MEMPOOL, id, &n);
    *p = (CUmemoryPool)n;
    return rc;
}

CUresult be_h_cuMemPoolSetAttribute(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemPoolSetAttributeRequest *rq = call->cu_mem_pool_set_attribute;
    uint64_t n = attr_size(rq->attr);
    if (!n || rq->value != n || c->in_len != n) {
        sl_be_detail(reply, "pool attribute %u with %llu bytes", rq->attr,
                     (unsigned long long)c->in_len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUmemoryPool pool;
    CUresult rc = pool_of(s, rq->pool, &pool);
    if (rc != CUDA_SUCCESS)
        return rc;
    cuuint64_t v = 0; /* aligned copy of the value */
    memcpy(&v, c->in, n);
    return api->cuMemPoolSetAttribute
               ? api->cuMemPoolSetAttribute(pool, (CUmemPool_attribute)rq->attr, &v)
               : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult be_h_cuMemPoolGetAttribute(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemPoolGetAttributeRequest *rq = call->cu_mem_pool_get_attribute;
    uint64_t n = attr_size(rq->attr);
    if (!n || rq->value != n || c->in_len) {
        sl_be_detail(reply, "pool attribute %u of %llu bytes", rq->attr,
                     (unsigned long long)rq->value);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUmemoryPool pool;
    CUresult rc = pool_of(s, rq->pool, &pool);
    if (rc != CUDA_SUCCESS)
        return rc;
    cuuint64_t v = 0;
    rc = api->cuMemPoolGetAttribute
             ? api->cuMemPoolGetAttribute(pool, (CUmemPool_attribute)rq->attr, &v)
             : CUDA_ERROR_NOT_SUPPORTED;
    if (rc != CUDA_SUCCESS)
        return rc;
    uint8_t *buf = malloc(n);
    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(buf, &v, n);
    c->out = buf;
    c->out_len = n;
    return CUDA_SUCCESS;
}

CUresult be_h_cuMemPoolGetAccess(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemPoolGetAccessRequest *rq = call->cu_mem_pool_get_access;
    CUmemLocation loc;
    if (rq->location.len != sizeof loc) {
        sl_be_detail(reply, "CUmemLocation of %zu bytes", rq->location.len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&loc, rq->location.data, sizeof loc);
    CUmemoryPool pool;
    CUresult rc = pool_of(s, rq->mem_pool, &pool);
    if (rc == CUDA_SUCCESS)
        rc = location(s, reply, &loc);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuMemPoolGetAccess)
        return CUDA_ERROR_NOT_SUPPORTED;
    Sluice__Cuda__CuMemPoolGetAccessReply *rp = BE_REPLY(
        reply, cu_mem_pool_get_access, SLUICE__WIRE__REPLY__OUT_CU_MEM_POOL_GET_ACCESS,
        Sluice__Cuda__CuMemPoolGetAccessReply, sluice__cuda__cu_mem_pool_get_access_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    rc = api->cuMemPoolGetAccess(&f, pool, &loc);
    rp->flags = (uint32_t)f;
    return rc;
}
