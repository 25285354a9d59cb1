/* A library's kernels, a module's functions, as its load's answer lists them
 * (image_kernels.c). */
#ifndef SLUICE_FRONTEND_API_IMAGE_KERNELS_H
#define SLUICE_FRONTEND_API_IMAGE_KERNELS_H

#include <stdint.h>

#include "sluice_cuda.pb-c.h"

/* Keeps, for the library (library: 1) or module image, each listed kernel or function as
 * cuLibraryGetKernel's (cuModuleGetFunction's) answer in the current context (the memo) and its
 * parameter layout; a list that does not add up is ignored (they are then asked for). */
void sl_fe_image_kernels_keep(uint64_t image, int library, const Sluice__Cuda__SlLoadImageReply *o);

#endif
