/* A small image's kernels or functions listed with its load (image_kernels.c). */
#ifndef SLUICE_BE_API_IMAGE_KERNELS_H
#define SLUICE_BE_API_IMAGE_KERNELS_H

#include <cuda.h>
#include <stdint.h>

#include "session/state.h"
#include "sluice_cuda.pb-c.h"

/* Fills rp's kernel_* fields with every kernel of library (library: 1) or function of module
 * native (handle id): each one's id (as cuLibraryGetKernel or cuModuleGetFunction answers it),
 * name and parameter layout. Nothing when no context is current, the image holds more than
 * SL_WIRE_MAX_IMAGE_KERNELS of them or the driver cannot list them: the guest then asks for
 * each as before. */
void be_image_kernels_out(sl_be_session *s, uint64_t id, void *native, int library,
                          Sluice__Cuda__SlLoadImageReply *rp);

#endif
