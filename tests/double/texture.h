/* What the other files of the double use of texture.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_TEXTURE_H
#define SLUICE_DOUBLE_TEXTURE_H

#include "core.h"

/* An array is host memory of width * element size * height * depth bytes (rows packed). 2D/3D
 * copies reach it as host memory after a bounds check. Texture and surface objects are numbers
 * handed out from a counter and remembered, so destroying an unknown one fails. */
struct dbl_array {
    struct dbl_obj hdr;
    CUDA_ARRAY3D_DESCRIPTOR d;
    size_t pitch, height, depth;
    unsigned char *data;
};

CUresult array_side(CUmemorytype *type, const void **host, CUarray arr, size_t x, size_t y,
                    size_t *pitch, size_t w, size_t h, size_t z);

#endif
