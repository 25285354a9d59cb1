/* The module-functions table 6e163fbe... (id bytes 6e 16 3f be b9 58 44 4d 83 5c e1 82 af f1
 * 99 1e): 99 slots on 580. cuFFT 12 (CUDA 13) asks for it at its first plan and calls [7] to
 * get the one kernel of each module it loads without naming it; refused, every plan fails
 * with CUFFT_INTERNAL_ERROR (torch.fft through Sluice, docs/pytorch.md).
 *
 * [7] is (context, module, visitor, opaque): the visitor gets (opaque, function, name) for
 * each function of the module, and the slot returns how many it visited (the real driver,
 * tests/gpu/probe_private_tables.py: the functions cuModuleEnumerateFunctions lists, in its
 * order, the third argument pointing at the function's name, a NULL context accepted). cuFFT's
 * visitor keeps the function and cuFFT checks that exactly one was visited. Sluice lists them
 * with cuModuleGetFunctionCount / cuModuleEnumerateFunctions and names them with cuFuncGetName,
 * all remoted, so the functions are ordinary Sluice handles. The other slots answer "not
 * supported". */
#include <stdint.h>
#include <stdlib.h>

#include "exports/et_module_functions.h"
#include "api/module.h"
#include "sluice/log.h"

static struct sl_fe_et_site modfn = {.table = "MODULE_FUNCTIONS(6e163fbe)"};

typedef void (*function_visitor)(void *opaque, CUfunction function, const char *name);

/* [7]: 0 visited when the module has no functions or cannot be listed (logged). */
static uint64_t module_functions(CUcontext ctx, CUmodule module, function_visitor visit,
                                 void *opaque)
{
    (void)ctx; /* a module's functions are those of the context it was loaded in */
    CUfunction *fns = NULL;
    unsigned n = 0;
    CUresult rc = sl_fe_module_functions(module, &fns, &n);
    if (rc != CUDA_SUCCESS) {
        sl_log(SL_LOG_WARNING, "frontend",
               "MODULE_FUNCTIONS[7]: the functions of module %#llx could not be listed: %d",
               (unsigned long long)(uintptr_t)module, (int)rc);
        return 0;
    }
    const char **names = visit && n ? calloc(n, sizeof *names) : NULL;
    for (unsigned i = 0; names && i < n && rc == CUDA_SUCCESS; i++)
        rc = sl_fe_function_name(fns[i], &names[i]);
    if (visit && n && (!names || rc != CUDA_SUCCESS)) {
        sl_log(SL_LOG_WARNING, "frontend",
               "MODULE_FUNCTIONS[7]: the functions of module %#llx could not be named: %d",
               (unsigned long long)(uintptr_t)module, names ? (int)rc : CUDA_ERROR_OUT_OF_MEMORY);
        n = 0;
    }
    for (unsigned i = 0; visit && i < n; i++)
        visit(opaque, fns[i], names[i]);
    free(names);
    free(fns);
    return n;
}

/* Stubs 00..99 (unused ones are discarded); slots 1-6 and 8-98 use them. */
SL_FE_ET_STUB_DECADE(modfn, 0)
SL_FE_ET_STUB_DECADE(modfn, 1)
SL_FE_ET_STUB_DECADE(modfn, 2)
SL_FE_ET_STUB_DECADE(modfn, 3)
SL_FE_ET_STUB_DECADE(modfn, 4)
SL_FE_ET_STUB_DECADE(modfn, 5)
SL_FE_ET_STUB_DECADE(modfn, 6)
SL_FE_ET_STUB_DECADE(modfn, 7)
SL_FE_ET_STUB_DECADE(modfn, 8)
SL_FE_ET_STUB_DECADE(modfn, 9)

#define S(id)   SL_FE_ET_STUB_REF(modfn, id)
#define REFS(d) SL_FE_ET_STUB_REFS(modfn, d)

static const sl_fe_slot TABLE[99] = {
    SL_FE_ET_SIZE(99),
    S(01),
    S(02),
    S(03),
    S(04),
    S(05),
    S(06),
    SL_FE_ET_FN(module_functions),
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
    S(93),
    S(94),
    S(95),
    S(96),
    S(97),
    S(98),
};

_Static_assert(sizeof TABLE == 99 * sizeof(void *), "6e163fbe has 99 slots");

const sl_fe_slot *sl_fe_et_module_functions(void)
{
    return TABLE;
}
