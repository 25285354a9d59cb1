/* Modules and libraries: images, their measure and hash, slLoadImage (module.c). */
#ifndef SLUICE_FRONTEND_API_MODULE_H
#define SLUICE_FRONTEND_API_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

enum sl_fe_image_format {
    SL_FE_IMAGE_INVALID = 0,
    SL_FE_IMAGE_WRAPPER = 1,
    SL_FE_IMAGE_FATBIN = 2,
    SL_FE_IMAGE_ELF = 3,
    SL_FE_IMAGE_PTX = 4,
};
/* Measures an image: its format, the pointer to the bytes to ship (the fatbin for a wrapper)
 * and their length. max bounds how far we read for PTX (0: 1 GiB). */
enum sl_fe_image_format sl_fe_image_measure(const void *image, const void **bytes, size_t *len);
/* SHA-256 of len bytes. */
void sl_fe_sha256(const void *data, size_t len, uint8_t out[32]);
/* slLoadImage: target 1 module, 2 library. */
CUresult sl_fe_load_image(const void *image, uint32_t target, const uint32_t *jit_opts,
                          const uint64_t *jit_vals, size_t njit, uint64_t *handle);

#endif
