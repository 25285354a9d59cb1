/* CONTEXT_CHECKS 263e8860...: 15 slots on 580, needed by cudart init (and cuBLAS: LUPINE PR
 * #197 grew its table for it). The same functions are f8cff951[22..36], which we refuse. */
#include <stdint.h>

#include "exports/et_context_checks.h"

static struct sl_fe_et_site checks = {.table = "CONTEXT_CHECKS"};

/* [2] context_check(ctx, uint32_t *out1, const void **out2): *out1 = 0, out2 not written. */
static CUresult context_check(CUcontext ctx, uint32_t *out1, const void **out2)
{
    (void)ctx;
    (void)out2;
    if (out1)
        *out1 = 0;
    return CUDA_SUCCESS;
}

/* [3] returns 0 and ignores its arguments; each cudart instance calls it once at init. */
static CUresult context_checks_init(void)
{
    return CUDA_SUCCESS;
}

SL_FE_ET_STUB(checks, 1, 1)
SL_FE_ET_STUB(checks, 4, 4)
SL_FE_ET_STUB(checks, 5, 5)
SL_FE_ET_STUB(checks, 6, 6)
SL_FE_ET_STUB(checks, 7, 7)
SL_FE_ET_STUB(checks, 8, 8)
SL_FE_ET_STUB(checks, 9, 9)
SL_FE_ET_STUB(checks, 10, 10)
SL_FE_ET_STUB(checks, 11, 11)
SL_FE_ET_STUB(checks, 12, 12)
SL_FE_ET_STUB(checks, 13, 13)
SL_FE_ET_STUB(checks, 14, 14)

static const sl_fe_slot TABLE[15] = {
    SL_FE_ET_SIZE(15),
    SL_FE_ET_STUB_REF(checks, 1),
    SL_FE_ET_FN(context_check),
    SL_FE_ET_FN(context_checks_init),
    SL_FE_ET_STUB_REF(checks, 4),
    SL_FE_ET_STUB_REF(checks, 5),
    SL_FE_ET_STUB_REF(checks, 6),
    SL_FE_ET_STUB_REF(checks, 7),
    SL_FE_ET_STUB_REF(checks, 8),
    SL_FE_ET_STUB_REF(checks, 9),
    SL_FE_ET_STUB_REF(checks, 10),
    SL_FE_ET_STUB_REF(checks, 11),
    SL_FE_ET_STUB_REF(checks, 12),
    SL_FE_ET_STUB_REF(checks, 13),
    SL_FE_ET_STUB_REF(checks, 14),
};

const sl_fe_slot *sl_fe_et_context_checks(void)
{
    return TABLE;
}
