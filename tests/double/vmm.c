/* Virtual memory management on real virtual memory.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "core.h"

#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device.h"

/* Real virtual memory: a reservation is an inaccessible mapping of the double's process, a
 * physical allocation a memfd, cuMemMap maps the memfd over the reservation, cuMemUnmap makes it
 * inaccessible again. Mapped ranges are device memory for copies and kernels (allocations of
 * kind A_REGISTERED, which the double never frees itself; adjacent mappings are one range).
 * Granularity: 2 MiB. A POSIX file descriptor shareable handle is a copy of the memfd
 * (cuMemExportToShareableHandle); cuMemImportFromShareableHandle takes a descriptor of such a
 * memfd only (its name says so) and makes a handle of the same memory, as another process of one
 * GPU would. */
#define DBL_VMM_GRAN ((size_t)2 << 20)

struct dbl_vres {
    struct dbl_vres *next;
    uintptr_t base;
    size_t size;
};

struct dbl_vmem {
    struct dbl_vmem *next;
    int fd;
    size_t size;
    CUmemAllocationProp prop;
};

struct dbl_vmap {
    struct dbl_vmap *next;
    uintptr_t base;
    size_t size;
};

static struct dbl_vres *vres;

static struct dbl_vmem *vmems;

static struct dbl_vmap *vmaps;

static struct dbl_ctx vmm_owner; /* marks the allocation entries of mapped ranges */

static CUresult vmm_prop(const CUmemAllocationProp *p)
{
    if (!p || p->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->location.type != CU_MEM_LOCATION_TYPE_DEVICE || check_dev(p->location.id))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option)
{
    (void)option;
    if (!granularity || vmm_prop(prop))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = DBL_VMM_GRAN;
    return CUDA_SUCCESS;
}

static CUresult vmm_reserve(CUdeviceptr *ptr, size_t size, size_t align)
{
    if (!ptr || !size || size % DBL_VMM_GRAN || (align && align % DBL_VMM_GRAN))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_vres *r = calloc(1, sizeof *r);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->base = (uintptr_t)p;
    r->size = size;
    r->next = vres;
    vres = r;
    *ptr = (CUdeviceptr)r->base;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags)
{
    (void)addr, (void)flags;
    LOCKED(vmm_reserve(ptr, size, alignment));
}

static struct dbl_vres *vres_of(uintptr_t p, size_t n)
{
    for (struct dbl_vres *r = vres; r; r = r->next)
        if (p >= r->base && p - r->base <= r->size && n <= r->size - (p - r->base))
            return r;
    return NULL;
}

/* The allocation entries of the mapped ranges: adjacent mappings are one range (a copy or a
 * kernel may cross from one into the next). */
static CUresult vmm_sync(void)
{
    alloc_release_owner(&vmm_owner);
    for (struct dbl_vmap *m = vmaps; m; m = m->next) {
        bool starts = true;
        for (struct dbl_vmap *o = vmaps; o; o = o->next)
            if (o->base + o->size == m->base)
                starts = false;
        if (!starts)
            continue;
        size_t size = m->size;
        for (bool grew = true; grew;) {
            grew = false;
            for (struct dbl_vmap *o = vmaps; o; o = o->next)
                if (o->base == m->base + size) {
                    size += o->size;
                    grew = true;
                }
        }
        CUresult rc = alloc_add(m->base, size, A_REGISTERED, &vmm_owner);
        if (rc)
            return rc;
    }
    return CUDA_SUCCESS;
}

/* Forgets the mappings inside [p, p + n). */
static CUresult vmm_forget(uintptr_t p, size_t n)
{
    for (struct dbl_vmap **pp = &vmaps; *pp;) {
        if ((*pp)->base >= p && (*pp)->base - p < n) {
            struct dbl_vmap *m = *pp;
            *pp = m->next;
            free(m);
        } else {
            pp = &(*pp)->next;
        }
    }
    return vmm_sync();
}

static CUresult vmm_free(CUdeviceptr ptr, size_t size)
{
    for (struct dbl_vres **pp = &vres; *pp; pp = &(*pp)->next)
        if ((*pp)->base == ptr && (*pp)->size == size) {
            struct dbl_vres *r = *pp;
            (void)vmm_forget(r->base, r->size);
            munmap((void *)r->base, r->size);
            *pp = r->next;
            free(r);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    LOCKED(vmm_free(ptr, size));
}

static CUresult vmm_create(CUmemGenericAllocationHandle *h, size_t size,
                           const CUmemAllocationProp *prop)
{
    if (!h || !size || size % DBL_VMM_GRAN || vmm_prop(prop))
        return CUDA_ERROR_INVALID_VALUE;
    if (size > dbl_mem_total() - dbl_mem_used())
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct dbl_vmem *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->fd = memfd_create("sluice-double-vmm", MFD_CLOEXEC);
    if (m->fd < 0 || ftruncate(m->fd, (off_t)size) != 0) {
        if (m->fd >= 0)
            close(m->fd);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->size = size;
    m->prop = *prop;
    m->next = vmems;
    vmems = m;
    *h = (CUmemGenericAllocationHandle)(uintptr_t)m;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(vmm_create(handle, size, prop));
}

static struct dbl_vmem *vmem_of(CUmemGenericAllocationHandle h)
{
    for (struct dbl_vmem *m = vmems; m; m = m->next)
        if ((uintptr_t)m == h)
            return m;
    return NULL;
}

static CUresult vmm_release(CUmemGenericAllocationHandle h)
{
    for (struct dbl_vmem **pp = &vmems; *pp; pp = &(*pp)->next)
        if ((uintptr_t)*pp == h) {
            struct dbl_vmem *m = *pp;
            close(m->fd); /* mappings keep the memory */
            *pp = m->next;
            free(m);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    LOCKED(vmm_release(handle));
}

#define VMM_FD_NAME "/memfd:sluice-double-vmm"

static CUresult vmm_export(void *out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType t,
                           unsigned long long flags)
{
    struct dbl_vmem *m = vmem_of(h);
    if (!m)
        return CUDA_ERROR_INVALID_VALUE;
    if (!out || flags || t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        !(m->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_INVALID_VALUE;
    int fd = dup(m->fd);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)out = fd;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle,
                                             CUmemGenericAllocationHandle handle,
                                             CUmemAllocationHandleType handleType,
                                             unsigned long long flags)
{
    LOCKED(vmm_export(shareableHandle, handle, handleType, flags));
}

static CUresult vmm_import(CUmemGenericAllocationHandle *h, void *os, CUmemAllocationHandleType t)
{
    intptr_t fd = (intptr_t)os;
    char path[64], target[64] = "";
    snprintf(path, sizeof path, "/proc/self/fd/%d", (int)fd);
    struct stat st;
    if (!h || t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || fd < 0 || fd > INT32_MAX ||
        readlink(path, target, sizeof target - 1) < 0 ||
        strncmp(target, VMM_FD_NAME, strlen(VMM_FD_NAME)) || fstat((int)fd, &st) != 0 ||
        st.st_size <= 0 || (size_t)st.st_size % DBL_VMM_GRAN)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_vmem *m = calloc(1, sizeof *m);
    if (!m || (m->fd = fcntl((int)fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->size = (size_t)st.st_size;
    m->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    m->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    m->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    m->next = vmems;
    vmems = m;
    *h = (CUmemGenericAllocationHandle)(uintptr_t)m;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                               CUmemAllocationHandleType shHandleType)
{
    LOCKED(vmm_import(handle, osHandle, shHandleType));
}

static CUresult vmm_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h)
{
    struct dbl_vmem *m = vmem_of(h);
    if (!m || !size || size % DBL_VMM_GRAN || offset % DBL_VMM_GRAN || offset > m->size ||
        size > m->size - offset || !vres_of(ptr, size) || alloc_find(ptr, 1) ||
        alloc_find(ptr + size - 1, 1))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_vmap *v = calloc(1, sizeof *v);
    if (!v)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                   m->fd, (off_t)offset);
    if (p == MAP_FAILED) {
        free(v);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    v->base = ptr;
    v->size = size;
    v->next = vmaps;
    vmaps = v;
    return vmm_sync();
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(vmm_map(ptr, size, offset, handle));
}

static CUresult vmm_unmap(CUdeviceptr ptr, size_t size)
{
    if (!size || !vres_of(ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = vmm_forget(ptr, size);
    if (rc)
        return rc;
    void *p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return p == MAP_FAILED ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    LOCKED(vmm_unmap(ptr, size));
}

static CUresult vmm_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *d, size_t n)
{
    if (!d || !n || !vres_of(ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++)
        if (d[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || check_dev(d[i].location.id))
            return CUDA_ERROR_INVALID_DEVICE;
    for (size_t off = 0; off < size; off += DBL_VMM_GRAN)
        if (!alloc_find(ptr + off, 1))
            return CUDA_ERROR_INVALID_VALUE; /* not mapped */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                               size_t count)
{
    LOCKED(vmm_set_access(ptr, size, desc, count));
}

static CUresult vmm_get_access(unsigned long long *flags, const CUmemLocation *loc, CUdeviceptr ptr)
{
    if (!flags || !loc || loc->type != CU_MEM_LOCATION_TYPE_DEVICE || check_dev(loc->id) ||
        !vres_of(ptr, 1))
        return CUDA_ERROR_INVALID_VALUE;
    *flags =
        alloc_find(ptr, 1) ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                               CUdeviceptr ptr)
{
    LOCKED(vmm_get_access(flags, location, ptr));
}

static CUresult vmm_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h)
{
    struct dbl_vmem *m = vmem_of(h);
    if (!m || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    *prop = m->prop;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                       CUmemGenericAllocationHandle handle)
{
    LOCKED(vmm_props(prop, handle));
}
