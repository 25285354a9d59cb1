/* Module images (module.c), which the JIT linker's inputs are checked with too. */
#ifndef SLUICE_BE_API_MODULE_H
#define SLUICE_BE_API_MODULE_H

#include <cuda.h>
#include <stdint.h>

/* Checks that an image of format (1 fatbin behind a rebuilt wrapper, 2 fatbin, 3 ELF, 4 PTX)
 * is entirely inside its len bytes, so the driver never reads past it. */
CUresult be_image_validate(const uint8_t *p, uint64_t len, uint32_t format);
/* The same bounds checks for a cuLinkAddData_v2 input of CUjitInputType type: cubin and
 * object ELF, PTX NUL-terminated, fatbin, ar archive of ELF objects; NVVM IR is refused
 * (CUDA_ERROR_NOT_SUPPORTED), an unknown type is CUDA_ERROR_INVALID_VALUE. */
CUresult be_link_input_validate(const uint8_t *p, uint64_t len, uint32_t type);

#endif
