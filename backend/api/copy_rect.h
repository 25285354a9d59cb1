/* One side of a rectangle copy's pod (copy_rect.c), shared with the memcpy nodes of graphs
 * (graph_host.c). */
#ifndef SLUICE_BE_API_COPY_RECT_H
#define SLUICE_BE_API_COPY_RECT_H

#include <cuda.h>
#include <stddef.h>

#include "sluice/backend_dispatch.h"

/* Pointers into a CUDA_MEMCPY2D or CUDA_MEMCPY3D: its source's fields or its destination's (z
 * and height NULL for 2D). */
struct be_rect_side {
    CUmemorytype *type;
    const void **host;
    CUdeviceptr *dev;
    CUarray *arr;
    size_t *x, *y, *z, *pitch, *height;
};

/* A side that is no host memory, of a copy of w bytes x h rows x depth slices: device memory
 * (DEVICE, or UNIFIED at a device address) checked against the session's memory, an array's
 * handle translated in place (for the driver). what: the copy, for the reply's detail ("a
 * rectangle copy", "a memcpy node"). */
CUresult be_rect_side_check(sl_be_session *s, Sluice__Wire__Reply *reply, struct be_rect_side d,
                            size_t w, size_t h, size_t depth, int is_src, const char *what);

#endif
