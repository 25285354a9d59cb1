/* Virtual memory management: cuMemAddressReserve/Free, cuMemCreate/Release, cuMemMap/Unmap,
 * cuMemSetAccess/GetAccess, cuMemGetAllocationGranularity, cuMemGetAllocationPropertiesFromHandle.
 *
 * The session keeps its reservations (address ranges the driver reserved for it), the size of
 * each physical allocation handle it created, and its mappings. A mapping must lie inside one
 * reservation, not overlap another mapping, and stay inside its handle's size; an unmap or a
 * free must lie inside a reservation. The mapped ranges, runs of adjacent mappings merged, are
 * the session's memory in its allocation table (kind BE_R_OTHER, parent BE_VMM_PARENT), so that
 * copies, kernels' launches checks and memsets across adjacent mappings work and nothing
 * reserved but unmapped passes. Allocation properties and access descriptors name devices by the
 * guest's ordinals (translated both ways). Of the shareable handle types only POSIX file
 * descriptors are allowed (api/shareable.c exports and imports them); an imported handle is the
 * exporter's memory, not counted here, and an exported one's token is forgotten when it is
 * released (the parent's descriptor would keep the memory alive past the quota's count). */
#include "api/vmm.h"

#include <stdlib.h>
#include <string.h>

#include "accounting/quota.h"
#include "api/ipc_broker.h"
#include "api/reply.h"
#include "session/handles.h"
#include "session/ranges.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

#define BE_VMM_PARENT ((uint64_t)SL_H_MEMHANDLE << BE_ID_KIND_SHIFT) /* counter 0: never an id */
#define BE_VMM_MAX    65536u

struct be_vrange {
    uint64_t base, size;
};

struct be_vhandle {
    uint64_t id, size;
    int exported; /* a shareable handle of it went to the parent (api/shareable.c) */
    int imported; /* the exporter's memory: not counted here */
};

struct be_vmm {
    struct be_vrange *res, *maps;
    size_t n_res, cap_res, n_maps, cap_maps;
    struct be_vhandle *hs;
    size_t n_hs, cap_hs;
};

static struct be_vmm *vmm(sl_be_session *s)
{
    if (!s->vmm)
        s->vmm = calloc(1, sizeof *s->vmm);
    return s->vmm;
}

void be_vmm_release(sl_be_session *s)
{
    if (!s->vmm)
        return;
    free(s->vmm->res);
    free(s->vmm->maps);
    free(s->vmm->hs);
    free(s->vmm);
    s->vmm = NULL;
}

static int grow(void **a, size_t *cap, size_t n, size_t sz)
{
    if (n >= BE_VMM_MAX)
        return -1;
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*a, c * sz);
    if (!p)
        return -1;
    *a = p;
    *cap = c;
    return 0;
}

static int inside(const struct be_vrange *r, uint64_t p, uint64_t n)
{
    return n && p >= r->base && p - r->base <= r->size && n <= r->size - (p - r->base);
}

static const struct be_vrange *reservation(const struct be_vmm *v, uint64_t p, uint64_t n)
{
    for (size_t i = 0; v && i < v->n_res; i++)
        if (inside(&v->res[i], p, n))
            return &v->res[i];
    return NULL;
}

static int cmp_range(const void *a, const void *b)
{
    const struct be_vrange *x = a, *y = b;
    return x->base < y->base ? -1 : x->base > y->base;
}

/* The allocation table's view of the mappings: merged runs. */
static CUresult sync_table(sl_be_session *s)
{
    struct be_vmm *v = s->vmm;
    be_mem_remove_parent(&s->mem, BE_VMM_PARENT);
    if (!v || !v->n_maps)
        return CUDA_SUCCESS;
    qsort(v->maps, v->n_maps, sizeof *v->maps, cmp_range);
    CUresult rc = CUDA_SUCCESS;
    for (size_t i = 0; i < v->n_maps && rc == CUDA_SUCCESS;) {
        uint64_t base = v->maps[i].base, end = base + v->maps[i].size;
        size_t j = i + 1;
        while (j < v->n_maps && v->maps[j].base == end)
            end += v->maps[j++].size;
        rc = be_mem_add(&s->mem, base, end - base, BE_R_OTHER, 0, BE_VMM_PARENT);
        i = j;
    }
    return rc;
}

static void drop_maps(struct be_vmm *v, uint64_t p, uint64_t n)
{
    for (size_t i = 0; v && i < v->n_maps;) {
        if (v->maps[i].base >= p && v->maps[i].base - p < n)
            v->maps[i] = v->maps[--v->n_maps];
        else
            i++;
    }
}

static CUresult location_in(sl_be_session *s, Sluice__Wire__Reply *reply, CUmemLocation *loc)
{
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE) {
        sl_be_detail(reply, "memory location type %d is not supported", (int)loc->type);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    CUdevice dev;
    CUresult rc = sl_be_device_get(s, loc->id, &dev);
    if (rc == CUDA_SUCCESS)
        loc->id = (int)dev;
    return rc;
}

static CUresult prop_in(sl_be_session *s, Sluice__Wire__Reply *reply,
                        const ProtobufCBinaryData *pod, CUmemAllocationProp *p)
{
    if (pod->len != sizeof *p) {
        sl_be_detail(reply, "CUmemAllocationProp of %zu bytes", pod->len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(p, pod->data, sizeof *p);
    if ((p->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
         p->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
        p->win32HandleMetaData) {
        sl_be_detail(reply, "shareable handle types %u: only POSIX file descriptors (1) travel",
                     (unsigned)p->requestedHandleTypes);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return location_in(s, reply, &p->location);
}

static struct be_vhandle *vhandle(sl_be_session *s, uint64_t id)
{
    for (size_t i = 0; s->vmm && i < s->vmm->n_hs; i++)
        if (s->vmm->hs[i].id == id)
            return &s->vmm->hs[i];
    return NULL;
}

int be_vmm_handle_size(sl_be_session *s, uint64_t id, uint64_t *size)
{
    const struct be_vhandle *h = vhandle(s, id);
    if (!h)
        return -1;
    *size = h->size;
    return 0;
}

void be_vmm_handle_exported(sl_be_session *s, uint64_t id)
{
    struct be_vhandle *h = vhandle(s, id);
    if (h)
        h->exported = 1;
}

int be_vmm_handle_imported(sl_be_session *s, uint64_t id, uint64_t size)
{
    struct be_vmm *v = vmm(s);
    if (!v || grow((void **)&v->hs, &v->cap_hs, v->n_hs, sizeof *v->hs))
        return -1;
    v->hs[v->n_hs++] = (struct be_vhandle){id, size, 0, 1};
    return 0;
}

/* ---------------------------------------------------------------- handlers */

CUresult be_h_cuMemAddressReserve(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemAddressReserveRequest *rq = call->cu_mem_address_reserve;
    struct be_vmm *v = vmm(s);
    if (!api->cuMemAddressReserve)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!v || grow((void **)&v->res, &v->cap_res, v->n_res, sizeof *v->res))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!rq->size)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuMemAddressReserveReply *rp = BE_REPLY(
        reply, cu_mem_address_reserve, SLUICE__WIRE__REPLY__OUT_CU_MEM_ADDRESS_RESERVE,
        Sluice__Cuda__CuMemAddressReserveReply, sluice__cuda__cu_mem_address_reserve_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUdeviceptr p = 0;
    CUresult rc = api->cuMemAddressReserve(&p, (size_t)rq->size, (size_t)rq->alignment,
                                           (CUdeviceptr)rq->addr, rq->flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    v->res[v->n_res++] = (struct be_vrange){p, rq->size};
    rp->ptr = p;
    return CUDA_SUCCESS;
}

CUresult be_h_cuMemAddressFree(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemAddressFreeRequest *rq = call->cu_mem_address_free;
    struct be_vmm *v = s->vmm;
    size_t i = 0;
    while (v && i < v->n_res && (v->res[i].base != rq->ptr || v->res[i].size != rq->size))
        i++;
    if (!v || i == v->n_res) {
        sl_be_detail(reply, "0x%llx+%llu is not an address range the session reserved",
                     (unsigned long long)rq->ptr, (unsigned long long)rq->size);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuMemAddressFree)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = api->cuMemAddressFree((CUdeviceptr)rq->ptr, (size_t)rq->size);
    if (rc != CUDA_SUCCESS)
        return rc;
    drop_maps(v, rq->ptr, rq->size);
    v->res[i] = v->res[--v->n_res];
    return sync_table(s);
}

CUresult be_h_cuMemCreate(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemCreateRequest *rq = call->cu_mem_create;
    CUmemAllocationProp p;
    CUresult rc = prop_in(s, reply, &rq->prop, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct be_vmm *v = vmm(s);
    if (!api->cuMemCreate)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!v || grow((void **)&v->hs, &v->cap_hs, v->n_hs, sizeof *v->hs))
        return CUDA_ERROR_OUT_OF_MEMORY;
    Sluice__Cuda__CuMemCreateReply *rp =
        BE_REPLY(reply, cu_mem_create, SLUICE__WIRE__REPLY__OUT_CU_MEM_CREATE,
                 Sluice__Cuda__CuMemCreateReply, sluice__cuda__cu_mem_create_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    char why[200]; /* physical memory counts against the instance's quota (quota.c) */
    if (be_acct_mem_admit(s, rq->size, why, sizeof why) != 0) {
        sl_be_detail(reply, "%s", why);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUmemGenericAllocationHandle h = 0;
    rc = api->cuMemCreate(&h, (size_t)rq->size, &p, rq->flags);
    if (rc == CUDA_SUCCESS) {
        rc = sl_be_handle_put(s, SL_H_MEMHANDLE, (void *)(uintptr_t)h, 0, &rp->handle);
        if (rc != CUDA_SUCCESS && api->cuMemRelease)
            api->cuMemRelease(h);
    }
    if (rc == CUDA_SUCCESS) {
        v->hs[v->n_hs++] = (struct be_vhandle){rp->handle, rq->size, 0, 0};
        s->mem.counted_vmm += rq->size;
    }
    be_acct_mem_publish(s); /* what is held now replaces the reservation */
    return rc;
}

CUresult be_h_cuMemRelease(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    uint64_t id = call->cu_mem_release->handle;
    void *h = NULL;
    CUresult rc = id ? sl_be_handle_get(s, SL_H_MEMHANDLE, id, &h) : CUDA_ERROR_INVALID_HANDLE;
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuMemRelease)
        return CUDA_ERROR_NOT_SUPPORTED;
    rc = api->cuMemRelease((CUmemGenericAllocationHandle)(uintptr_t)h);
    if (rc != CUDA_SUCCESS)
        return rc;
    sl_be_handle_drop(s, SL_H_MEMHANDLE, id);
    struct be_vmm *v = s->vmm;
    for (size_t i = 0; v && i < v->n_hs; i++)
        if (v->hs[i].id == id) {
            if (!v->hs[i].imported)
                s->mem.counted_vmm -= v->hs[i].size;
            if (v->hs[i].exported) { /* the parent's descriptor would keep it alive, uncounted */
                uint64_t real[2] = {(uint64_t)(uintptr_t)h, v->hs[i].size};
                be_ipc_forget(s, BE_TOKEN_ALLOC, real, sizeof real);
            }
            v->hs[i] = v->hs[--v->n_hs];
            break;
        }
    be_acct_mem_publish(s);
    return CUDA_SUCCESS;
}

CUresult be_h_cuMemMap(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemMapRequest *rq = call->cu_mem_map;
    struct be_vmm *v = s->vmm;
    if (!reservation(v, rq->ptr, rq->size)) {
        sl_be_detail(reply, "0x%llx+%llu is not inside an address range the session reserved",
                     (unsigned long long)rq->ptr, (unsigned long long)rq->size);
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < v->n_maps; i++)
        if (rq->ptr < v->maps[i].base + v->maps[i].size && v->maps[i].base < rq->ptr + rq->size) {
            sl_be_detail(reply, "0x%llx+%llu overlaps a mapping", (unsigned long long)rq->ptr,
                         (unsigned long long)rq->size);
            return CUDA_ERROR_INVALID_VALUE;
        }
    void *h = NULL;
    CUresult rc = rq->handle ? sl_be_handle_get(s, SL_H_MEMHANDLE, rq->handle, &h)
                             : CUDA_ERROR_INVALID_HANDLE;
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t hsize = 0;
    for (size_t i = 0; i < v->n_hs; i++)
        if (v->hs[i].id == rq->handle)
            hsize = v->hs[i].size;
    if (rq->offset > hsize || rq->size > hsize - rq->offset) {
        sl_be_detail(reply, "bytes %llu+%llu of an allocation of %llu",
                     (unsigned long long)rq->offset, (unsigned long long)rq->size,
                     (unsigned long long)hsize);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuMemMap)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (grow((void **)&v->maps, &v->cap_maps, v->n_maps, sizeof *v->maps))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = api->cuMemMap((CUdeviceptr)rq->ptr, (size_t)rq->size, (size_t)rq->offset,
                       (CUmemGenericAllocationHandle)(uintptr_t)h, rq->flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    v->maps[v->n_maps++] = (struct be_vrange){rq->ptr, rq->size};
    return sync_table(s);
}

CUresult be_h_cuMemUnmap(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemUnmapRequest *rq = call->cu_mem_unmap;
    struct be_vmm *v = s->vmm;
    if (!reservation(v, rq->ptr, rq->size)) {
        sl_be_detail(reply, "0x%llx+%llu is not inside an address range the session reserved",
                     (unsigned long long)rq->ptr, (unsigned long long)rq->size);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuMemUnmap)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = api->cuMemUnmap((CUdeviceptr)rq->ptr, (size_t)rq->size);
    if (rc != CUDA_SUCCESS)
        return rc;
    drop_maps(v, rq->ptr, rq->size);
    return sync_table(s);
}

CUresult be_h_cuMemSetAccess(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemSetAccessRequest *rq = call->cu_mem_set_access;
    if (!rq->count || rq->count > 64 || rq->desc.len != rq->count * sizeof(CUmemAccessDesc)) {
        sl_be_detail(reply, "%llu access descriptors in %zu bytes", (unsigned long long)rq->count,
                     rq->desc.len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!be_mem_contains(&s->mem, rq->ptr, rq->size) || !reservation(s->vmm, rq->ptr, rq->size)) {
        sl_be_detail(reply, "0x%llx+%llu is not mapped memory of the session",
                     (unsigned long long)rq->ptr, (unsigned long long)rq->size);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuMemSetAccess)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUmemAccessDesc *d = malloc(rq->desc.len);
    if (!d)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(d, rq->desc.data, rq->desc.len);
    CUresult rc = CUDA_SUCCESS;
    for (size_t i = 0; i < rq->count && rc == CUDA_SUCCESS; i++)
        rc = location_in(s, reply, &d[i].location);
    if (rc == CUDA_SUCCESS)
        rc = api->cuMemSetAccess((CUdeviceptr)rq->ptr, (size_t)rq->size, d, (size_t)rq->count);
    free(d);
    return rc;
}

CUresult be_h_cuMemGetAccess(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemGetAccessRequest *rq = call->cu_mem_get_access;
    CUmemLocation loc;
    if (rq->location.len != sizeof loc) {
        sl_be_detail(reply, "CUmemLocation of %zu bytes", rq->location.len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&loc, rq->location.data, sizeof loc);
    CUresult rc = location_in(s, reply, &loc);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!reservation(s->vmm, rq->ptr, 1)) {
        sl_be_detail(reply, "0x%llx is not inside an address range the session reserved",
                     (unsigned long long)rq->ptr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuMemGetAccess)
        return CUDA_ERROR_NOT_SUPPORTED;
    Sluice__Cuda__CuMemGetAccessReply *rp =
        BE_REPLY(reply, cu_mem_get_access, SLUICE__WIRE__REPLY__OUT_CU_MEM_GET_ACCESS,
                 Sluice__Cuda__CuMemGetAccessReply, sluice__cuda__cu_mem_get_access_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    unsigned long long f = 0;
    rc = api->cuMemGetAccess(&f, &loc, (CUdeviceptr)rq->ptr);
    rp->flags = f;
    return rc;
}

CUresult be_h_cuMemGetAllocationGranularity(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuMemGetAllocationGranularityRequest *rq =
        call->cu_mem_get_allocation_granularity;
    CUmemAllocationProp p;
    CUresult rc = prop_in(s, reply, &rq->prop, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuMemGetAllocationGranularity)
        return CUDA_ERROR_NOT_SUPPORTED;
    Sluice__Cuda__CuMemGetAllocationGranularityReply *rp =
        BE_REPLY(reply, cu_mem_get_allocation_granularity,
                 SLUICE__WIRE__REPLY__OUT_CU_MEM_GET_ALLOCATION_GRANULARITY,
                 Sluice__Cuda__CuMemGetAllocationGranularityReply,
                 sluice__cuda__cu_mem_get_allocation_granularity_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t g = 0;
    rc = api->cuMemGetAllocationGranularity(&g, &p, (CUmemAllocationGranularity_flags)rq->option);
    rp->granularity = g;
    return rc;
}

CUresult be_h_cuMemGetAllocationPropertiesFromHandle(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    uint64_t id = call->cu_mem_get_allocation_properties_from_handle->handle;
    void *h = NULL;
    CUresult rc = id ? sl_be_handle_get(s, SL_H_MEMHANDLE, id, &h) : CUDA_ERROR_INVALID_HANDLE;
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuMemGetAllocationPropertiesFromHandle)
        return CUDA_ERROR_NOT_SUPPORTED;
    Sluice__Cuda__CuMemGetAllocationPropertiesFromHandleReply *rp =
        BE_REPLY(reply, cu_mem_get_allocation_properties_from_handle,
                 SLUICE__WIRE__REPLY__OUT_CU_MEM_GET_ALLOCATION_PROPERTIES_FROM_HANDLE,
                 Sluice__Cuda__CuMemGetAllocationPropertiesFromHandleReply,
                 sluice__cuda__cu_mem_get_allocation_properties_from_handle_reply__init);
    CUmemAllocationProp *p = rp ? calloc(1, sizeof *p) : NULL;
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->prop.data = (uint8_t *)p; /* freed with the reply */
    rp->prop.len = sizeof *p;
    rc = api->cuMemGetAllocationPropertiesFromHandle(p, (CUmemGenericAllocationHandle)(uintptr_t)h);
    if (rc != CUDA_SUCCESS)
        return rc;
    p->win32HandleMetaData = NULL;
    if (p->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        int32_t ord = 0;
        rc = sl_be_device_put(s, (CUdevice)p->location.id, &ord);
        p->location.id = ord;
    }
    return rc;
}
