/* CUDART_INTERFACE 6bd5fb6c...: 13 slots, needed by cudart 12/13 init. */
#include <stddef.h>
#include <stdint.h>

#include "exports/et_cudart.h"
#include "api/context.h"
#include "api/module.h"

#define FATBIN_WRAPPER_MAGIC 0x466243b1u /* __fatBinC_Wrapper_t.magic */
#define FATBIN_MAGIC         0xba55ed50u /* fatbin header magic */

static struct sl_fe_et_site cudart = {.table = "CUDART_INTERFACE"};

static uint32_t magic_of(const void *image)
{
    uint32_t m;
    __builtin_memcpy(&m, image, sizeof m);
    return m;
}

/* [1] get_module_from_cubin(CUmodule *, const __fatBinC_Wrapper_t *): wrappers only (a raw
 * fatbin gives 1 on 580). */
static CUresult get_module_from_cubin(CUmodule *module, const void *wrapper)
{
    if (!module || !wrapper || magic_of(wrapper) != FATBIN_WRAPPER_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    return sl_fe_module_load_image(module, wrapper);
}

/* [2] get_primary_context(CUcontext *, CUdevice): the handle without activating it. */
static CUresult get_primary_context(CUcontext *pctx, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    return sl_fe_primary_ctx_handle(dev, pctx);
}

/* [6] ext1(CUmodule *, wrapper *, void *, void *, unsigned): as [1] when the extras are 0. */
static CUresult get_module_from_cubin_ext1(CUmodule *module, const void *wrapper, void *arg3,
                                           void *arg4, unsigned arg5)
{
    if (arg3 || arg4 || arg5)
        return CUDA_ERROR_NOT_SUPPORTED;
    return get_module_from_cubin(module, wrapper);
}

/* [7] fn7(size_t): a no-op. */
static void cudart_fn7(size_t arg)
{
    (void)arg;
}

/* [8] ext2(const fatbin header *, CUmodule *, void *, void *, unsigned): raw fatbins only (a
 * wrapper gives CUDA_ERROR_INVALID_IMAGE on 580). Note the argument order. */
static CUresult get_module_from_cubin_ext2(const void *fatbin, CUmodule *module, void *arg3,
                                           void *arg4, unsigned arg5)
{
    if (arg3 || arg4 || arg5)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!module || !fatbin)
        return CUDA_ERROR_INVALID_VALUE;
    if (magic_of(fatbin) != FATBIN_MAGIC)
        return CUDA_ERROR_INVALID_IMAGE;
    return sl_fe_module_load_image(module, fatbin);
}

/* [12] load_compilers(): the real driver loads ptxjit/nvvm here; the host does that for us. */
static CUresult load_compilers(void)
{
    return CUDA_SUCCESS;
}

SL_FE_ET_STUB(cudart, 3, 3)
SL_FE_ET_STUB(cudart, 4, 4)
SL_FE_ET_STUB(cudart, 5, 5)
SL_FE_ET_STUB(cudart, 9, 9)
SL_FE_ET_STUB(cudart, 10, 10)
SL_FE_ET_STUB(cudart, 11, 11)

static const sl_fe_slot TABLE[13] = {
    SL_FE_ET_SIZE(13),
    SL_FE_ET_FN(get_module_from_cubin),
    SL_FE_ET_FN(get_primary_context),
    SL_FE_ET_STUB_REF(cudart, 3),
    SL_FE_ET_STUB_REF(cudart, 4),
    SL_FE_ET_STUB_REF(cudart, 5),
    SL_FE_ET_FN(get_module_from_cubin_ext1),
    SL_FE_ET_FN(cudart_fn7),
    SL_FE_ET_FN(get_module_from_cubin_ext2),
    SL_FE_ET_STUB_REF(cudart, 9),
    SL_FE_ET_STUB_REF(cudart, 10),
    SL_FE_ET_STUB_REF(cudart, 11),
    SL_FE_ET_FN(load_compilers),
};

const sl_fe_slot *sl_fe_et_cudart_interface(void)
{
    return TABLE;
}
