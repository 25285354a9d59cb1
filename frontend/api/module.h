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

/* Asked by exports/ (cudart's private tables) too: each may be called before cuInit and from
 * any thread, and never calls back into cuGetProcAddress or cuGetExportTable. The unit tests
 * of exports/ link doubles of them (tests/unit/frontend/fe_test_hooks.c). */

/* Loads a module image the way cuModuleLoadData does (the caller has already checked which
 * image form the slot accepts: a __fatBinC_Wrapper_t or a raw fatbin). */
CUresult sl_fe_module_load_image(CUmodule *module, const void *image);

/* The functions of a module as cuModuleGetFunctionCount and cuModuleEnumerateFunctions answer
 * them: *fns (malloc'd, the caller frees; NULL when none) and their number. */
CUresult sl_fe_module_functions(CUmodule module, CUfunction **fns, unsigned *count);

/* cuFuncGetName: a string that lives as long as the library (answers are kept per handle). */
CUresult sl_fe_function_name(CUfunction fn, const char **name);

#endif
