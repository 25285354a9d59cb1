/* The context-id table 21318c60...: 93 slots on 580. cuBLASLt calls [4]; refusing the table
 * makes PyTorch's GEMM fail with CUBLAS_STATUS_NOT_SUPPORTED. */
#include <stdint.h>

#include "et_internal.h"
#include "hooks.h"

static struct sl_fe_et_site ctxid = {.table = "CONTEXT_ID(21318c60)"};

/* [4] (CUcontext, uint64_t *id): cuCtxGetId; a NULL context gives rc 0 and id 0 (580). */
static CUresult context_get_id(CUcontext ctx, uint64_t *id)
{
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx) {
        *id = 0;
        return CUDA_SUCCESS;
    }
    return sl_fe_context_id(ctx, id);
}

/* Stubs 00..99 (unused ones are discarded); slots 1-3 and 5-92 use them. */
#define DECADE(d)                                                                                  \
    SL_FE_ET_STUB(ctxid, d##0, d * 10 + 0)                                                         \
    SL_FE_ET_STUB(ctxid, d##1, d * 10 + 1)                                                         \
    SL_FE_ET_STUB(ctxid, d##2, d * 10 + 2)                                                         \
    SL_FE_ET_STUB(ctxid, d##3, d * 10 + 3)                                                         \
    SL_FE_ET_STUB(ctxid, d##4, d * 10 + 4)                                                         \
    SL_FE_ET_STUB(ctxid, d##5, d * 10 + 5)                                                         \
    SL_FE_ET_STUB(ctxid, d##6, d * 10 + 6)                                                         \
    SL_FE_ET_STUB(ctxid, d##7, d * 10 + 7)                                                         \
    SL_FE_ET_STUB(ctxid, d##8, d * 10 + 8)                                                         \
    SL_FE_ET_STUB(ctxid, d##9, d * 10 + 9)
DECADE(0)
DECADE(1)
DECADE(2)
DECADE(3)
DECADE(4)
DECADE(5)
DECADE(6)
DECADE(7)
DECADE(8)
DECADE(9)

#define S(id) SL_FE_ET_STUB_REF(ctxid, id)
#define REFS(d)                                                                                    \
    S(d##0), S(d##1), S(d##2), S(d##3), S(d##4), S(d##5), S(d##6), S(d##7), S(d##8), S(d##9)

static const sl_fe_slot TABLE[93] = {
    SL_FE_ET_SIZE(93),
    S(01),
    S(02),
    S(03),
    SL_FE_ET_FN(context_get_id),
    S(05),
    S(06),
    S(07),
    S(08),
    S(09),
    REFS(1),
    REFS(2),
    REFS(3),
    REFS(4),
    REFS(5),
    REFS(6),
    REFS(7),
    REFS(8),
    S(90),
    S(91),
    S(92),
};

_Static_assert(sizeof TABLE == 93 * sizeof(void *), "21318c60 has 93 slots");

const sl_fe_slot *sl_fe_et_context_id(void)
{
    return TABLE;
}
