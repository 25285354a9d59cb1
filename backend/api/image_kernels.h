/* A small library's kernels listed with its load (image_kernels.c). */
#ifndef SLUICE_BE_API_IMAGE_KERNELS_H
#define SLUICE_BE_API_IMAGE_KERNELS_H

#include <cuda.h>
#include <stdint.h>

#include "session/state.h"
#include "sluice_cuda.pb-c.h"

/* Fills rp's kernel_* fields with every kernel of library lib (handle lib_id): each one's id
 * (as cuLibraryGetKernel answers it), name and parameter layout. Nothing when no context is
 * current, the library holds more than SL_WIRE_MAX_IMAGE_KERNELS kernels or the driver cannot
 * list them: the guest then asks for each kernel as before. */
void be_image_kernels_out(sl_be_session *s, uint64_t lib_id, CUlibrary lib,
                          Sluice__Cuda__SlLoadImageReply *rp);

#endif
