/* TOOLS_RUNTIME_CALLBACK_HOOKS a094798c...: 7 slots, needed by cudart init. We answer "no
 * profiler": buffers for [2] and [6], success for the rest. */
#include <stddef.h>

#include "exports/et_tools_hooks.h"

static struct sl_fe_et_site hooks = {.table = "TOOLS_RUNTIME_CALLBACK_HOOKS"};

/* [2]: 580 reports 1024; ZLUDA treats it as 1024 u32, so the buffer holds 4096 bytes. */
static _Alignas(64) unsigned char g_buffer2[4096];
/* [6]: 580 reports 14. */
static _Alignas(64) unsigned char g_buffer6[64];

static CUresult get_buffer2(void **ptr, size_t *size)
{
    if (!ptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    *ptr = g_buffer2;
    *size = 1024;
    return CUDA_SUCCESS;
}

static CUresult get_buffer6(void **ptr, size_t *size)
{
    if (!ptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    *ptr = g_buffer6;
    *size = 14;
    return CUDA_SUCCESS;
}

/* [1], [3]-[5]: unknown, never called by cudart 13.0; LUPINE returns 0 and works. */
SL_FE_ET_STUB_RC(hooks, 1, 1, CUDA_SUCCESS)
SL_FE_ET_STUB_RC(hooks, 3, 3, CUDA_SUCCESS)
SL_FE_ET_STUB_RC(hooks, 4, 4, CUDA_SUCCESS)
SL_FE_ET_STUB_RC(hooks, 5, 5, CUDA_SUCCESS)

static const sl_fe_slot TABLE[7] = {
    SL_FE_ET_SIZE(7),
    SL_FE_ET_STUB_REF(hooks, 1),
    SL_FE_ET_FN(get_buffer2),
    SL_FE_ET_STUB_REF(hooks, 3),
    SL_FE_ET_STUB_REF(hooks, 4),
    SL_FE_ET_STUB_REF(hooks, 5),
    SL_FE_ET_FN(get_buffer6),
};

const sl_fe_slot *sl_fe_et_tools_hooks(void)
{
    return TABLE;
}
