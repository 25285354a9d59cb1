/* Module images (module.c), which the JIT linker's inputs are checked with too. */
#ifndef SLUICE_BE_API_MODULE_H
#define SLUICE_BE_API_MODULE_H

#include <cuda.h>
#include <stdint.h>

#include "session/state.h"
#include "sluice/backend_dispatch.h"

struct be_image;

#define BE_IMAGE_JIT_MAX 64 /* scalar JIT options of one load */

/* Checks that an image of format (1 fatbin behind a rebuilt wrapper, 2 fatbin, 3 ELF, 4 PTX)
 * is entirely inside its len bytes, so the driver never reads past it. */
CUresult be_image_validate(const uint8_t *p, uint64_t len, uint32_t format);
/* The same bounds checks for a cuLinkAddData_v2 input of CUjitInputType type: cubin and
 * object ELF, PTX NUL-terminated, fatbin, ar archive of ELF objects; NVVM IR is refused
 * (CUDA_ERROR_NOT_SUPPORTED), an unknown type is CUDA_ERROR_INVALID_VALUE. */
CUresult be_link_input_validate(const uint8_t *p, uint64_t len, uint32_t type);

/* The scalar JIT options of a load (call names it in the reply's detail), in the driver's form:
 * CUDA_ERROR_INVALID_VALUE for unpaired or too many, CUDA_ERROR_NOT_SUPPORTED for a buffer
 * option. */
CUresult be_image_jit(Sluice__Wire__Reply *reply, const char *call, size_t n_opts,
                      const uint32_t *in_opts, size_t n_vals, const uint64_t *in_vals,
                      CUjit_option opts[BE_IMAGE_JIT_MAX], void *vals[BE_IMAGE_JIT_MAX]);
/* The image a load names (a reference in *out): the call's bulk, checked against sha and its
 * format and kept (cache, and the tenant's store later), or without bulk the copy the worker
 * or the store holds (CUDA_ERROR_FILE_NOT_FOUND when neither does). */
CUresult be_image_take(struct sl_be_call *c, const char *call, const ProtobufCBinaryData *sha,
                       uint64_t size, uint32_t target, uint32_t format, struct be_image **out);
/* Loads img as a module (target 1) or library (2) with the driver: *native. */
CUresult be_image_load(sl_be_session *s, const struct be_image *img, uint32_t target,
                       uint32_t format, unsigned n, CUjit_option *opts, void **vals, void **native);
void be_image_unload(sl_be_session *s, uint32_t target, void *native);

#endif
