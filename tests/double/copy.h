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

#endif
