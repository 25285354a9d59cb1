/* Memory pools and stream-ordered allocation: bookkeeping over ordinary allocations.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "core.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "context.h"
#include "copy.h"
#include "graph_mem.h"
#include "ipc.h"

/* A pool is bookkeeping: its allocations are ordinary allocations (execution is synchronous,
 * so "stream order" is call order). Attributes are stored and answered back; the used-memory
 * counters follow the pool's allocations. */
struct dbl_pool {
    struct dbl_obj hdr;
    cuuint64_t threshold, used, used_high;
    int reuse[3];
    unsigned handle_types; /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: exportable */
    int imported;          /* cuMemPoolImportFromShareableHandle: pointers are imported into it */
};

static struct dbl_pool default_pool, *current_pool;

static bool default_pool_made;

static struct dbl_pool *pool_default(void)
{
    if (!default_pool_made) {
        default_pool.hdr.kind = K_POOL;
        default_pool.reuse[0] = default_pool.reuse[1] = default_pool.reuse[2] = 1;
        obj_add(&default_pool);
        default_pool_made = true;
    }
    return &default_pool;
}

/* Which pool an allocation came from (base -> pool), so frees update the counters. */
struct dbl_pool_alloc {
    uintptr_t base;
    size_t size;
    struct dbl_pool *pool;
};

static struct dbl_pool_alloc *pallocs;

static size_t npallocs, cappallocs;

static CUresult dev_check(CUdevice dev)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    dbl_lock();
    CUresult rc = dev_check(dev);
    if (!rc && !pool_out)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *pool_out = (CUmemoryPool)pool_default();
    dbl_unlock();
    return rc;
}

EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    dbl_lock();
    CUresult rc = dev_check(dev);
    if (!rc && !pool)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *pool = (CUmemoryPool)(current_pool ? current_pool : pool_default());
    dbl_unlock();
    return rc;
}

EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    dbl_lock();
    CUresult rc = dev_check(dev);
    if (!rc && !obj_get(pool, K_POOL))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc)
        current_pool = (struct dbl_pool *)pool;
    dbl_unlock();
    return rc;
}

static CUresult pool_create(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->location.id != 0 ||
        (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE &&
         props->handleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_pool *p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->hdr.kind = K_POOL;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    p->handle_types = (unsigned)props->handleTypes;
    obj_add(p);
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    LOCKED(pool_create(pool, poolProps));
}

static CUresult pool_destroy(CUmemoryPool pool)
{
    struct dbl_pool *p = obj_get(pool, K_POOL);
    if (!p || p == &default_pool)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < npallocs;) /* the driver frees what is left in it */
        if (pallocs[i].pool == p) {
            alloc_free(pallocs[i].base, p->imported ? A_IPC : A_DEVICE);
            pallocs[i] = pallocs[--npallocs];
        } else {
            i++;
        }
    if (current_pool == p)
        current_pool = NULL;
    obj_del(p);
    free(p);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    LOCKED(pool_destroy(pool));
}

EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    (void)minBytesToKeep;
    LOCKED(obj_get(pool, K_POOL) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

static CUresult pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value, int set)
{
    struct dbl_pool *p = obj_get(pool, K_POOL);
    if (!p || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: {
        int *r = &p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
        if (set)
            *r = *(int *)value != 0;
        else
            *(int *)value = *r;
        return CUDA_SUCCESS;
    }
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        if (set)
            p->threshold = *(cuuint64_t *)value;
        else
            *(cuuint64_t *)value = p->threshold;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
        if (set)
            return CUDA_ERROR_INVALID_VALUE;
        *(cuuint64_t *)value = p->used;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (set) { /* only 0 may be set: resets the high watermark */
            if (*(cuuint64_t *)value != 0)
                return CUDA_ERROR_INVALID_VALUE;
            p->used_high = p->used;
        } else {
            *(cuuint64_t *)value = p->used_high;
        }
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    LOCKED(pool_attr(pool, attr, value, 1));
}

EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    LOCKED(pool_attr(pool, attr, value, 0));
}

EXPORT CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool,
                                   CUmemLocation *location)
{
    dbl_lock();
    CUresult rc = obj_get(memPool, K_POOL) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (!rc &&
        (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE || location->id != 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    dbl_unlock();
    return rc;
}

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t size, struct dbl_pool *p, CUstream s)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if ((rc = check_stream(s)))
        return rc;
    if (!dptr || !p)
        return CUDA_ERROR_INVALID_VALUE;
    if (npallocs == cappallocs) {
        size_t cap = cappallocs ? cappallocs * 2 : 64;
        struct dbl_pool_alloc *n = realloc(pallocs, cap * sizeof *n);
        if (!n)
            return CUDA_ERROR_OUT_OF_MEMORY;
        pallocs = n;
        cappallocs = cap;
    }
    uintptr_t out;
    if ((rc = alloc_new(size, A_DEVICE, c, &out)))
        return rc;
    pallocs[npallocs++] = (struct dbl_pool_alloc){out, size, p};
    p->used += size;
    if (p->used > p->used_high)
        p->used_high = p->used;
    *dptr = (CUdeviceptr)out;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    dbl_lock();
    struct dbl_pool *p = dbl_initialized() ? (current_pool ? current_pool : pool_default()) : NULL;
    CUresult rc = p ? alloc_from_pool(dptr, bytesize, p, hStream) : CUDA_ERROR_NOT_INITIALIZED;
    dbl_unlock();
    return rc;
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream hStream)
{
    dbl_lock();
    struct dbl_pool *p = obj_get(pool, K_POOL);
    CUresult rc = p ? alloc_from_pool(dptr, bytesize, p, hStream) : CUDA_ERROR_INVALID_VALUE;
    dbl_unlock();
    return rc;
}

static CUresult free_async(CUdeviceptr dptr, CUstream s)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if ((rc = check_stream(s)))
        return rc;
    for (size_t i = 0; i < npallocs; i++)
        if (pallocs[i].base == (uintptr_t)dptr) {
            struct dbl_pool *p = pallocs[i].pool;
            p->used -= pallocs[i].size;
            pallocs[i] = pallocs[--npallocs];
            return alloc_free((uintptr_t)dptr, p->imported ? A_IPC : A_DEVICE);
        }
    int g = graph_alloc_free((uintptr_t)dptr);
    if (g >= 0)
        return (CUresult)g;
    return alloc_free((uintptr_t)dptr, A_DEVICE);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    LOCKED(free_async(dptr, hStream));
}

/* ---------------------------------------------------------------- sharing between processes */

/* A pool's POSIX file descriptor handle is a memfd of this name (it holds nothing: importing
 * makes a pool of this process into which pointers are imported); a pointer's export data is an
 * IPC description of its allocation (ipc.c), mapped by the importer. */
#define POOL_FD_NAME "/memfd:sluice-double-pool"
static const char PTR_MAGIC[8] = "SLDBLPPT";

static CUresult pool_export(void *out, CUmemoryPool pool, CUmemAllocationHandleType t,
                            unsigned long long flags)
{
    struct dbl_pool *p = obj_get(pool, K_POOL);
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (!out || flags || t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        !(p->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_INVALID_VALUE;
    int fd = memfd_create(POOL_FD_NAME + 7, 0);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)out = fd;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                                 CUmemAllocationHandleType handleType,
                                                 unsigned long long flags)
{
    LOCKED(pool_export(handle_out, pool, handleType, flags));
}

static CUresult pool_import(CUmemoryPool *out, void *os, CUmemAllocationHandleType t,
                            unsigned long long flags)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    intptr_t fd = (intptr_t)os;
    char path[64], target[64] = "";
    snprintf(path, sizeof path, "/proc/self/fd/%d", (int)fd);
    if (!out || flags || t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || fd < 0 ||
        fd > INT32_MAX || readlink(path, target, sizeof target - 1) < 0 ||
        strncmp(target, POOL_FD_NAME, strlen(POOL_FD_NAME)))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_pool *p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->hdr.kind = K_POOL;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    p->handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    p->imported = 1;
    obj_add(p);
    *out = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                                   CUmemAllocationHandleType handleType,
                                                   unsigned long long flags)
{
    LOCKED(pool_import(pool_out, handle, handleType, flags));
}

static CUresult export_ptr(CUmemPoolPtrExportData *out, CUdeviceptr ptr)
{
    for (size_t i = 0; i < npallocs; i++)
        if (pallocs[i].base == (uintptr_t)ptr) {
            const struct dbl_pool *p = pallocs[i].pool;
            if (!out || p->imported ||
                !(p->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
                return CUDA_ERROR_INVALID_VALUE;
            return dbl_ipc_export(ptr, PTR_MAGIC, out);
        }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
    LOCKED(export_ptr(shareData_out, ptr));
}

static CUresult import_ptr(CUdeviceptr *out, CUmemoryPool pool, const CUmemPoolPtrExportData *d)
{
    struct dbl_pool *p = obj_get(pool, K_POOL);
    if (!p || !p->imported || !out || !d)
        return CUDA_ERROR_INVALID_VALUE;
    if (npallocs == cappallocs) {
        size_t cap = cappallocs ? cappallocs * 2 : 64;
        struct dbl_pool_alloc *n = realloc(pallocs, cap * sizeof *n);
        if (!n)
            return CUDA_ERROR_OUT_OF_MEMORY;
        pallocs = n;
        cappallocs = cap;
    }
    CUdeviceptr ptr = 0;
    CUresult rc = dbl_ipc_open(d, PTR_MAGIC, &ptr);
    if (rc)
        return rc;
    pallocs[npallocs++] = (struct dbl_pool_alloc){(uintptr_t)ptr, 0, p};
    *out = ptr;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
                                       CUmemPoolPtrExportData *shareData)
{
    LOCKED(import_ptr(ptr_out, pool, shareData));
}
