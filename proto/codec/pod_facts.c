/* The struct parameters the generated fact accessors read (sluice/pod_facts.h). */
#define __CUDA_API_VERSION_INTERNAL 1
#include "sluice/pod_facts.h"

int sl_pod_stream_CUlaunchConfig(const CUlaunchConfig *p, uint64_t *stream)
{
    *stream = (uint64_t)(uintptr_t)p->hStream;
    return 1;
}

static enum sl_call_dir direction(CUmemorytype src, CUmemorytype dst)
{
    int from_host = src == CU_MEMORYTYPE_HOST, to_host = dst == CU_MEMORYTYPE_HOST;
    return from_host && !to_host ? SL_DIR_HTOD : to_host && !from_host ? SL_DIR_DTOH : SL_DIR_NONE;
}

uint64_t sl_pod_copy_CUDA_MEMCPY2D(const CUDA_MEMCPY2D *p, enum sl_call_dir *dir)
{
    *dir = direction(p->srcMemoryType, p->dstMemoryType);
    return (uint64_t)p->WidthInBytes * p->Height;
}

uint64_t sl_pod_copy_CUDA_MEMCPY3D(const CUDA_MEMCPY3D *p, enum sl_call_dir *dir)
{
    *dir = direction(p->srcMemoryType, p->dstMemoryType);
    return (uint64_t)p->WidthInBytes * p->Height * p->Depth;
}

static size_t device_sides(CUmemorytype st, CUdeviceptr s, CUmemorytype dt, CUdeviceptr d,
                           uint64_t out[2])
{
    size_t n = 0;
    if (st == CU_MEMORYTYPE_DEVICE || st == CU_MEMORYTYPE_UNIFIED)
        out[n++] = s;
    if (dt == CU_MEMORYTYPE_DEVICE || dt == CU_MEMORYTYPE_UNIFIED)
        out[n++] = d;
    return n;
}

size_t sl_pod_devptrs_CUDA_MEMCPY2D(const CUDA_MEMCPY2D *p, uint64_t out[2])
{
    return device_sides(p->srcMemoryType, p->srcDevice, p->dstMemoryType, p->dstDevice, out);
}

size_t sl_pod_devptrs_CUDA_MEMCPY3D(const CUDA_MEMCPY3D *p, uint64_t out[2])
{
    return device_sides(p->srcMemoryType, p->srcDevice, p->dstMemoryType, p->dstDevice, out);
}

size_t sl_array_format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 0;
    }
}

uint64_t sl_array_bytes(uint64_t w, uint64_t h, uint64_t d, unsigned format, unsigned channels)
{
    size_t fb = sl_array_format_bytes((CUarray_format)format);
    uint64_t dims[] = {w, h ? h : 1, d ? d : 1, channels ? channels : 1, fb ? fb : 4};
    uint64_t b = 1;
    for (size_t i = 0; i < sizeof dims / sizeof *dims; i++) {
        if (dims[i] && b > UINT64_MAX / dims[i])
            return UINT64_MAX;
        b *= dims[i];
    }
    return b;
}

uint64_t sl_pod_quota_CUDA_ARRAY_DESCRIPTOR(const CUDA_ARRAY_DESCRIPTOR *p)
{
    return sl_array_bytes(p->Width, p->Height, 1, p->Format, p->NumChannels);
}

uint64_t sl_pod_quota_CUDA_ARRAY3D_DESCRIPTOR(const CUDA_ARRAY3D_DESCRIPTOR *p)
{
    return sl_array_bytes(p->Width, p->Height, p->Depth, p->Format, p->NumChannels);
}
