/* Module images (module.c), which the JIT linker's inputs are checked with too. */
#ifndef SLUICE_BE_API_MODULE_H
#define SLUICE_BE_API_MODULE_H

#include <cuda.h>
#include <stdint.h>

/* Checks that an image of format (1 fatbin behind a rebuilt wrapper, 2 fatbin, 3 ELF, 4 PTX)
 * is entirely inside its len bytes, so the driver never reads past it. */
CUresult be_image_validate(const uint8_t *p, uint64_t len, uint32_t format);

#endif
