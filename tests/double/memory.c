/* Device and host memory: allocation, registered host memory, memory information,
 * pointer attributes and address ranges.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "core.h"

#include "capture.h"
#include "context.h"
#include "device.h"
#include "graph_mem.h"

EXPORT CUresult cuMemGetInfo_v2(size_t *free_, size_t *total)
{
    struct dbl_ctx *c;
    dbl_lock();
    CUresult rc = need_ctx(&c);
    if (!rc && (!free_ || !total))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        *free_ = dbl_mem_total() - dbl_mem_used();
        *total = dbl_mem_total();
    }
    dbl_unlock();
    return rc;
}

static CUresult mem_alloc(uintptr_t *out, size_t size, enum alloc_kind kind)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned long long id = capture_prohibiting(); /* a potentially unsafe call (capture.c) */
    if (id) {
        capture_invalidate(id);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return alloc_new(size, kind, c, out);
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    LOCKED(mem_alloc((uintptr_t *)dptr, bytesize, A_DEVICE));
}

static CUresult mem_free(uintptr_t p, enum alloc_kind kind)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if (!p)
        return CUDA_SUCCESS;
    if (kind == A_DEVICE && alloc_free(p, A_MANAGED) == CUDA_SUCCESS)
        return CUDA_SUCCESS; /* cuMemFree frees managed memory too */
    int g = kind == A_DEVICE ? graph_alloc_free(p) : -1;
    if (g >= 0)
        return (CUresult)g;
    return alloc_free(p, kind);
}

/* Managed memory: device memory whose pages the host may read (the double's device memory is
 * host memory anyway); prefetch, advice and stream attachment are checked and change nothing. */
static CUresult alloc_managed(CUdeviceptr *dptr, size_t bytesize, unsigned flags)
{
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return mem_alloc((uintptr_t *)dptr, bytesize, A_MANAGED);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    LOCKED(alloc_managed(dptr, bytesize, flags));
}

static CUresult managed_range(CUdeviceptr p, size_t n)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    struct dbl_alloc *a = n ? alloc_find(p, n) : NULL;
    return a && a->kind == A_MANAGED ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static int stream_known(CUstream s)
{
    return !s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || obj_get(s, K_STREAM);
}

static CUresult location_ok(CUmemLocation loc)
{
    if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE)
        return loc.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    return loc.type == CU_MEM_LOCATION_TYPE_HOST ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult prefetch(CUdeviceptr p, size_t n, CUmemLocation loc, CUstream s)
{
    CUresult rc = managed_range(p, n);
    if (!rc)
        rc = location_ok(loc);
    if (!rc && !stream_known(s))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc)
        alloc_find(p, n)->last_prefetch = loc;
    return rc;
}

EXPORT CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                      unsigned int flags, CUstream hStream)
{
    LOCKED(flags ? CUDA_ERROR_INVALID_VALUE : prefetch(devPtr, count, location, hStream));
}

EXPORT CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                   CUstream hStream)
{
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dstDevice};
    if (dstDevice == CU_DEVICE_CPU)
        loc.type = CU_MEM_LOCATION_TYPE_HOST;
    LOCKED(prefetch(devPtr, count, loc, hStream));
}

static CUresult advise(CUdeviceptr p, size_t n, CUmem_advise advice, CUmemLocation loc)
{
    CUresult rc = managed_range(p, n);
    if (!rc && (advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && advice != CU_MEM_ADVISE_SET_READ_MOSTLY && advice != CU_MEM_ADVISE_UNSET_READ_MOSTLY)
        rc = location_ok(loc);
    if (rc)
        return rc;
    struct dbl_alloc *a = alloc_find(p, n);
    unsigned bit = loc.type == CU_MEM_LOCATION_TYPE_HOST ? 1u : 2u;
    switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY:
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
        a->read_mostly = advice == CU_MEM_ADVISE_SET_READ_MOSTLY;
        break;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
        a->preferred = loc;
        break;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
        a->preferred = (CUmemLocation){0};
        break;
    case CU_MEM_ADVISE_SET_ACCESSED_BY:
        a->accessed_by |= bit;
        break;
    default:
        a->accessed_by &= ~bit;
        break;
    }
    return CUDA_SUCCESS;
}

/* A location as the device-number attributes give it: a device, CU_DEVICE_CPU, or none. */
static int location_device(CUmemLocation loc)
{
    if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE)
        return loc.id;
    return loc.type == CU_MEM_LOCATION_TYPE_HOST ? CU_DEVICE_CPU : CU_DEVICE_INVALID;
}

static CUresult range_attr(void *data, size_t size, CUmem_range_attribute attr, CUdeviceptr p,
                           size_t n)
{
    CUresult rc = managed_range(p, n);
    if (rc)
        return rc;
    const struct dbl_alloc *a = alloc_find(p, n);
    if (!data || !size || size % 4 || (attr != CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY && size != 4))
        return CUDA_ERROR_INVALID_VALUE;
    int *v = data;
    switch (attr) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
        *v = a->read_mostly;
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
        *v = location_device(a->preferred);
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
        *v = location_device(a->last_prefetch);
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
        *v = a->preferred.type;
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
        *v = a->preferred.id;
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
        *v = a->last_prefetch.type;
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
        *v = a->last_prefetch.id;
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
        size_t k = 0;
        for (size_t i = 0; i < size / 4; i++)
            v[i] = CU_DEVICE_INVALID;
        if ((a->accessed_by & 2u) && k < size / 4)
            v[k++] = 0;
        if ((a->accessed_by & 1u) && k < size / 4)
            v[k++] = CU_DEVICE_CPU;
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute,
                                       CUdeviceptr devPtr, size_t count)
{
    LOCKED(range_attr(data, dataSize, attribute, devPtr, count));
}

EXPORT CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                               CUmemLocation location)
{
    LOCKED(advise(devPtr, count, advice, location));
}

static CUresult attach(CUstream s, CUdeviceptr p, size_t n, unsigned flags)
{
    CUresult rc = managed_range(p, n ? n : 1);
    if (!rc && flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST &&
        flags != CU_MEM_ATTACH_SINGLE)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && !stream_known(s))
        rc = CUDA_ERROR_INVALID_HANDLE;
    return rc;
}

EXPORT CUresult cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length,
                                       unsigned int flags)
{
    LOCKED(attach(hStream, dptr, length, flags));
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    LOCKED(mem_free(dptr, A_DEVICE));
}

/* Registered host memory (the backend's twins of a guest's mapped memory): host kernels reach
 * it directly, so its device address is its host address, as under unified addressing. */
static CUresult host_register(void *p, size_t n)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if (!p || !n)
        return CUDA_ERROR_INVALID_VALUE;
    if (alloc_find((uintptr_t)p, 1))
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    return alloc_add((uintptr_t)p, n, A_REGISTERED, c);
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    (void)Flags;
    LOCKED(host_register(p, bytesize));
}

static CUresult host_unregister(void *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_free((uintptr_t)p, A_REGISTERED) == CUDA_SUCCESS
               ? CUDA_SUCCESS
               : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
    LOCKED(host_unregister(p));
}

static CUresult host_device_pointer(CUdeviceptr *pd, void *p, unsigned flags)
{
    struct dbl_alloc *a = alloc_find((uintptr_t)p, 0);
    if (!pd || flags || !a || a->kind != A_REGISTERED)
        return CUDA_ERROR_INVALID_VALUE;
    *pd = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    LOCKED(host_device_pointer(pdptr, p, Flags));
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    LOCKED(mem_alloc((uintptr_t *)pp, bytesize, A_HOST));
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    (void)Flags;
    LOCKED(mem_alloc((uintptr_t *)pp, bytesize, A_HOST));
}

EXPORT CUresult cuMemFreeHost(void *p)
{
    LOCKED(mem_free((uintptr_t)p, A_HOST));
}

static CUresult pointer_attr(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_alloc *a = alloc_find(ptr, 0);
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = (CUcontext)a->ctx;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: /* managed memory: DEVICE, as the driver says */
        *(unsigned *)data = a->kind == A_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (a->kind != A_HOST && a->kind != A_MANAGED)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)ptr;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = a->kind == A_HOST ? 1 : 0;
        if (attribute == CU_POINTER_ATTRIBUTE_IS_MANAGED)
            *(int *)data = a->kind == A_MANAGED;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = a->base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = a->size;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = (unsigned long long)a->base;
        break;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    LOCKED(pointer_attr(data, attribute, ptr));
}

static CUresult address_range(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    const struct dbl_alloc *a = alloc_containing(dptr);
    if (!a)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = a->base;
    if (psize)
        *psize = a->size;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    LOCKED(address_range(pbase, psize, dptr));
}

/* Pitched allocations: rows padded to 512 bytes. */
static CUresult alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t w, size_t h, unsigned es)
{
    if (!dptr || !pitch || !w || !h || (es != 4 && es != 8 && es != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (w + 511) & ~(size_t)511;
    if (p < w || h > SIZE_MAX / p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = mem_alloc((uintptr_t *)dptr, p * h, A_DEVICE);
    if (!rc)
        *pitch = p;
    return rc;
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                   size_t Height, unsigned int ElementSizeBytes)
{
    LOCKED(alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
}
