/* What the other files of the double use of copy.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_COPY_H
#define SLUICE_DOUBLE_COPY_H

#include "core.h"

/* A device-side range: device allocations, module globals, and pinned host memory (which is
 * device-accessible under unified addressing). */
void *dev_range(CUdeviceptr p, size_t n);

CUresult check_stream(CUstream s);

/* A NULL CUdeviceptr is never a valid device range: passing 1 as "none" makes copy() reject it. */
#define DEVPTR(p) ((p) ? (p) : (CUdeviceptr)1)

CUresult memset_n(CUdeviceptr dst, unsigned v, size_t width, size_t n, CUstream s);

/* 3D copies: slice by slice as 2D copies (host and device sides step by pitch * height). */
CUresult copy3d(const CUDA_MEMCPY3D *p, CUstream s);

/* An array is host memory of width * element size * height * depth bytes (rows packed). 2D/3D
 * copies reach it as host memory after a bounds check. Texture and surface objects are numbers
 * handed out from a counter and remembered, so destroying an unknown one fails. */
struct dbl_array {
    struct dbl_obj hdr;
    CUDA_ARRAY3D_DESCRIPTOR d;
    size_t pitch, height, depth;
    unsigned char *data;
};

/* The host side of a region of array arr (2D/3D copies): bounds checked. */
CUresult array_side(CUmemorytype *type, const void **host, CUarray arr, size_t x, size_t y,
                    size_t *pitch, size_t w, size_t h, size_t z);

#endif
