/* What the other files of the double use of texture.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_TEXTURE_H
#define SLUICE_DOUBLE_TEXTURE_H

#include "core.h"

/* The array behind texture/surface object obj (rows of *pitch bytes, *width elements of
 * *elem bytes, *height rows); NULL if obj is not an object on an array. */
unsigned char *dbl_object_array(unsigned long long obj, size_t *pitch, size_t *width,
                                size_t *height, size_t *elem);

#endif
