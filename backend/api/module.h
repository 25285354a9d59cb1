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

/* A load's request as slLoadImage and slLoadImageAs both carry it (call names the call in the
 * reply's detail). */
struct be_image_request {
    const char *call;
    const ProtobufCBinaryData *sha256;
    uint64_t size;
    uint32_t target, format; /* target 1 module, 2 library; format as slLoadImage's */
    size_t n_jit;
    const uint32_t *jit_options;
    size_t n_jit_values;
    const uint64_t *jit_values;
};
/* The part both loads share: the scalar JIT options checked (a buffer option is
 * CUDA_ERROR_NOT_SUPPORTED), the image taken (the call's bulk checked against its SHA-256 and
 * format and kept in the cache and, later, the tenant's store; without bulk the copy the
 * worker or the store holds, else CUDA_ERROR_FILE_NOT_FOUND), then loaded by the driver as a
 * module or library: *img (a reference the caller owns) and *native; *t_stored when the image
 * was taken. */
CUresult be_image_load_request(struct sl_be_call *c, const struct be_image_request *r,
                               struct be_image **img, void **native, uint64_t *t_stored);
void be_image_unload(sl_be_session *s, uint32_t target, void *native);

#endif
