/* Device and host memory: allocation, registered host memory, memory information,
 * pointer attributes and address ranges.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "core.h"

#include "context.h"
#include "device.h"

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
    return alloc_free(p, kind);
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
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = a->kind == A_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (a->kind != A_HOST)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)ptr;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = a->kind == A_HOST ? 1 : 0;
        if (attribute == CU_POINTER_ATTRIBUTE_IS_MANAGED)
            *(int *)data = 0;
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
