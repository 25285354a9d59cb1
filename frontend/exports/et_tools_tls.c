/* TOOLS_TLS 42d85a81...: 3 slots on 580 (not 4), needed by cudart init and cuBLASLt. */
#include "exports/et_tools_tls.h"
#include "call/contexts.h"

static struct sl_fe_et_site tls = {.table = "TOOLS_TLS"};

/* [2] (void **out): the current context, NULL if none; cuBLASLt passes it to 21318c60[4]. */
static CUresult get_current_context(void **out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = (void *)sl_fe_current_context();
    return CUDA_SUCCESS;
}

SL_FE_ET_STUB(tls, 1, 1)

static const sl_fe_slot TABLE[3] = {
    SL_FE_ET_SIZE(3),
    SL_FE_ET_STUB_REF(tls, 1),
    SL_FE_ET_FN(get_current_context),
};

const sl_fe_slot *sl_fe_et_tools_tls(void)
{
    return TABLE;
}
