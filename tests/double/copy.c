/* Copies and memsets: 1D, 2D and 3D copies (any sides: device, host, array), array copies
 * (HtoA/AtoH) and memsets, with their per-thread-stream variants; every range checked first.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "copy.h"

#include <string.h>

#include "context.h"
#include "timing.h"

CUresult array_side(CUmemorytype *type, const void **host, CUarray arr, size_t x, size_t y,
                    size_t *pitch, size_t w, size_t h, size_t z)
{
    struct dbl_array *a = obj_get(arr, K_ARRAY);
    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    if (x > a->pitch || w > a->pitch - x || y > a->height || h > a->height - y || z >= a->depth)
        return CUDA_ERROR_INVALID_VALUE;
    *type = CU_MEMORYTYPE_HOST;
    *host = a->data + z * a->pitch * a->height;
    *pitch = a->pitch;
    return CUDA_SUCCESS;
}

void *dev_range(CUdeviceptr p, size_t n)
{
    struct dbl_alloc *a = alloc_find(p, n);
    return a ? (void *)(uintptr_t)p : NULL;
}

CUresult check_stream(CUstream s)
{
    if ((uintptr_t)s <= 2) /* 0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD */
        return CUDA_SUCCESS;
    return obj_get(s, K_STREAM) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Simulated time of a copy or memset on stream s (timing.c): 2 us + 20 GB/s. */
static void advance_copy(struct dbl_ctx *c, CUstream s, size_t n)
{
    dbl_time_work(c, s, 2.0 + (double)n / 20000.0);
}

static CUresult copy(void *dst, const void *src, size_t n, CUdeviceptr ddst, CUdeviceptr dsrc,
                     CUstream s)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if ((rc = check_stream(s)))
        return rc;
    if (dbl_capture_of(s)) /* not modelled (capture.c) */
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (ddst && !(dst = dev_range(ddst, n)))
        return CUDA_ERROR_INVALID_VALUE;
    if (dsrc && !(src = dev_range(dsrc, n)))
        return CUDA_ERROR_INVALID_VALUE;
    if (!dst || !src)
        return CUDA_ERROR_INVALID_VALUE;
    int64_t h = dbl_time_host_begin(); /* not device time (timing.c) */
    if (n)
        memmove(dst, src, n);
    dbl_time_host_end(h);
    advance_copy(c, s, n);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    LOCKED(copy(NULL, srcHost, ByteCount, DEVPTR(dstDevice), 0, 0));
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    LOCKED(copy(dstHost, NULL, ByteCount, 0, DEVPTR(srcDevice), 0));
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    LOCKED(copy(NULL, NULL, ByteCount, DEVPTR(dstDevice), DEVPTR(srcDevice), 0));
}

/* Unified copies: the backend sends only device addresses (its checks place both ends in the
 * session's memory: allocations, managed memory, mapped twins), so device to device here. */
EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    LOCKED(copy(NULL, NULL, ByteCount, DEVPTR(dst), DEVPTR(src), 0));
}

EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    LOCKED(copy(NULL, NULL, ByteCount, DEVPTR(dst), DEVPTR(src), hStream));
}

EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return cuMemcpy(dst, src, ByteCount);
}

EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                   CUstream hStream)
{
    return cuMemcpyAsync(dst, src, ByteCount, hStream);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                     CUstream hStream)
{
    LOCKED(copy(NULL, srcHost, ByteCount, DEVPTR(dstDevice), 0, hStream));
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                     CUstream hStream)
{
    LOCKED(copy(dstHost, NULL, ByteCount, 0, DEVPTR(srcDevice), hStream));
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                     CUstream hStream)
{
    LOCKED(copy(NULL, NULL, ByteCount, DEVPTR(dstDevice), DEVPTR(srcDevice), hStream));
}

CUresult memset_n(CUdeviceptr dst, unsigned v, size_t width, size_t n, CUstream s)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if ((rc = check_stream(s)))
        return rc;
    if (dbl_capture_of(s)) /* not modelled (capture.c) */
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (n > SIZE_MAX / width || (dst & (width - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned char *p = dev_range(DEVPTR(dst), n * width);
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    int64_t hb = dbl_time_host_begin(); /* not device time (timing.c) */
    for (size_t i = 0; i < n; i++) {
        if (width == 1)
            p[i] = (unsigned char)v;
        else if (width == 2) {
            uint16_t x = (uint16_t)v;
            memcpy(p + 2 * i, &x, 2);
        } else {
            uint32_t x = v;
            memcpy(p + 4 * i, &x, 4);
        }
    }
    dbl_time_host_end(hb);
    advance_copy(c, s, n * width);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    LOCKED(memset_n(dstDevice, uc, 1, N, 0));
}

EXPORT CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    LOCKED(memset_n(dstDevice, us, 2, N, 0));
}

EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    LOCKED(memset_n(dstDevice, ui, 4, N, 0));
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream s)
{
    LOCKED(memset_n(dstDevice, uc, 1, N, s));
}

EXPORT CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream s)
{
    LOCKED(memset_n(dstDevice, us, 2, N, s));
}

EXPORT CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream s)
{
    LOCKED(memset_n(dstDevice, ui, 4, N, s));
}

/* One side of a 2D copy as a host pointer to its first byte, or NULL. */
static unsigned char *side2d(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x,
                             size_t y, size_t pitch, size_t width, size_t height)
{
    if (height == 0 || width == 0)
        return (unsigned char *)(uintptr_t)1; /* nothing to touch */
    if (pitch < width + x && height > 1)
        return NULL;
    size_t off = y * pitch + x;
    size_t extent = (height - 1) * pitch + width;
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        return host ? (unsigned char *)host + off : NULL;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
        return dev_range(DEVPTR(dev + off), extent);
    default:
        return NULL;
    }
}

static CUresult copy2d(const CUDA_MEMCPY2D *pin, CUstream s)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if ((rc = check_stream(s)))
        return rc;
    if (!pin)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY2D q = *pin, *p = &q;
    if (q.srcMemoryType == CU_MEMORYTYPE_ARRAY &&
        (rc = array_side(&q.srcMemoryType, &q.srcHost, q.srcArray, q.srcXInBytes, q.srcY,
                         &q.srcPitch, q.WidthInBytes, q.Height, 0)))
        return rc;
    if (q.dstMemoryType == CU_MEMORYTYPE_ARRAY &&
        (rc = array_side(&q.dstMemoryType, (const void **)&q.dstHost, q.dstArray, q.dstXInBytes,
                         q.dstY, &q.dstPitch, q.WidthInBytes, q.Height, 0)))
        return rc;
    size_t w = p->WidthInBytes, h = p->Height;
    size_t sp = p->srcPitch ? p->srcPitch : w, dp = p->dstPitch ? p->dstPitch : w;
    unsigned char *src =
        side2d(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, sp, w, h);
    unsigned char *dst =
        side2d(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, dp, w, h);
    if (!src || !dst)
        return CUDA_ERROR_INVALID_VALUE;
    int64_t hb = dbl_time_host_begin(); /* not device time (timing.c) */
    for (size_t r = 0; r < h; r++)
        memmove(dst + r * dp, src + r * sp, w);
    dbl_time_host_end(hb);
    advance_copy(c, s, w * h);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    LOCKED(copy2d(pCopy, 0));
}

EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
    LOCKED(copy2d(pCopy, 0));
}

EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    LOCKED(copy2d(pCopy, hStream));
}

/* Per-thread default stream variants: identical here (execution is synchronous). */

EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *s, size_t n)
{
    return cuMemcpyHtoD_v2(d, s, n);
}

EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *d, CUdeviceptr s, size_t n)
{
    return cuMemcpyDtoH_v2(d, s, n);
}

EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n)
{
    return cuMemcpyDtoD_v2(d, s, n);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream h)
{
    return cuMemcpyHtoDAsync_v2(d, s, n, h);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *d, CUdeviceptr s, size_t n, CUstream h)
{
    return cuMemcpyDtoHAsync_v2(d, s, n, h);
}

EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{
    return cuMemcpyDtoDAsync_v2(d, s, n, h);
}

CUresult copy3d(const CUDA_MEMCPY3D *p, CUstream s)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    size_t depth = p->Depth ? p->Depth : 1;
    for (size_t z = 0; z < depth; z++) {
        CUDA_MEMCPY2D q;
        memset(&q, 0, sizeof q);
        q.WidthInBytes = p->WidthInBytes;
        q.Height = p->Height;
        q.srcMemoryType = p->srcMemoryType;
        q.srcXInBytes = p->srcXInBytes;
        q.srcY = p->srcY;
        q.srcPitch = p->srcPitch;
        size_t sstep = (p->srcPitch ? p->srcPitch : p->WidthInBytes) *
                       (p->srcHeight ? p->srcHeight : p->Height) * (p->srcZ + z);
        size_t dstep = (p->dstPitch ? p->dstPitch : p->WidthInBytes) *
                       (p->dstHeight ? p->dstHeight : p->Height) * (p->dstZ + z);
        q.srcHost = p->srcHost ? (const char *)p->srcHost + sstep : NULL;
        q.srcDevice = p->srcDevice ? p->srcDevice + sstep : 0;
        q.dstMemoryType = p->dstMemoryType;
        q.dstXInBytes = p->dstXInBytes;
        q.dstY = p->dstY;
        q.dstPitch = p->dstPitch;
        q.dstHost = p->dstHost ? (char *)p->dstHost + dstep : NULL;
        q.dstDevice = p->dstDevice ? p->dstDevice + dstep : 0;
        CUresult rc;
        if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY &&
            (rc = array_side(&q.srcMemoryType, &q.srcHost, p->srcArray, p->srcXInBytes, p->srcY,
                             &q.srcPitch, p->WidthInBytes, p->Height, p->srcZ + z)))
            return rc;
        if (p->dstMemoryType == CU_MEMORYTYPE_ARRAY &&
            (rc = array_side(&q.dstMemoryType, (const void **)&q.dstHost, p->dstArray,
                             p->dstXInBytes, p->dstY, &q.dstPitch, p->WidthInBytes, p->Height,
                             p->dstZ + z)))
            return rc;
        if ((rc = copy2d(&q, s)))
            return rc;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
    LOCKED(copy3d(pCopy, 0));
}

EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    LOCKED(copy3d(pCopy, hStream));
}

static CUresult array_bytes(CUarray h, size_t off, size_t n, unsigned char **p)
{
    struct dbl_array *a = obj_get(h, K_ARRAY);
    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    size_t total = a->pitch * a->height * a->depth;
    if (off > total || n > total - off)
        return CUDA_ERROR_INVALID_VALUE;
    *p = a->data + off;
    return CUDA_SUCCESS;
}

static CUresult htoa(CUarray h, size_t off, const void *src, size_t n)
{
    unsigned char *p;
    CUresult rc = array_bytes(h, off, n, &p);
    if (!rc && n && !src)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && n)
        memcpy(p, src, n);
    return rc;
}

static CUresult atoh(void *dst, CUarray h, size_t off, size_t n)
{
    unsigned char *p;
    CUresult rc = array_bytes(h, off, n, &p);
    if (!rc && n && !dst)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && n)
        memcpy(dst, p, n);
    return rc;
}

EXPORT CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost,
                                size_t ByteCount)
{
    LOCKED(htoa(dstArray, dstOffset, srcHost, ByteCount));
}

EXPORT CUresult cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
    LOCKED(atoh(dstHost, srcArray, srcOffset, ByteCount));
}
