/* What every private table file uses (et_stub.c): the slot type and macros, and stubs for
 * slots whose signature is unknown. Internal. */
#ifndef SLUICE_FRONTEND_ET_STUB_H
#define SLUICE_FRONTEND_ET_STUB_H

#include <stdatomic.h>
#include <stdint.h>

#include <cuda.h>

/* Each table is an array of pointer-sized slots; slot 0 holds the byte size of the table
 * (except CONTEXT_LOCAL_STORAGE). */
typedef const void *sl_fe_slot;
#define SL_FE_ET_SIZE(n_slots) ((sl_fe_slot)(uintptr_t)((n_slots) * sizeof(void *)))
#define SL_FE_ET_FN(fn)        ((sl_fe_slot)(fn))

/* Stubs for slots whose signature is unknown. The caller may pass any integer or pointer
 * arguments; a function taking none ignores them under the x86-64 and AArch64 C ABIs. The
 * first call of each (table, slot) is logged. */
#define SL_FE_ET_MAX_SLOTS 128
struct sl_fe_et_site {
    const char *table;
    atomic_uchar seen[SL_FE_ET_MAX_SLOTS];
};

CUresult sl_fe_et_stub_called(struct sl_fe_et_site *site, unsigned slot, CUresult rc);

#define SL_FE_ET_STUB_RC(site, id, slot, rc)                                                       \
    __attribute__((unused)) static CUresult site##_stub_##id(void)                                 \
    {                                                                                              \
        return sl_fe_et_stub_called(&site, (slot), (rc));                                          \
    }
#define SL_FE_ET_STUB(site, id, slot) SL_FE_ET_STUB_RC(site, id, slot, CUDA_ERROR_NOT_SUPPORTED)
#define SL_FE_ET_STUB_REF(site, id)   SL_FE_ET_FN(site##_stub_##id)

/* Stubs d0..d9 of a site, and references to them (tables with many unknown slots). */
#define SL_FE_ET_STUB_DECADE(site, d)                                                              \
    SL_FE_ET_STUB(site, d##0, d * 10 + 0)                                                          \
    SL_FE_ET_STUB(site, d##1, d * 10 + 1)                                                          \
    SL_FE_ET_STUB(site, d##2, d * 10 + 2)                                                          \
    SL_FE_ET_STUB(site, d##3, d * 10 + 3)                                                          \
    SL_FE_ET_STUB(site, d##4, d * 10 + 4)                                                          \
    SL_FE_ET_STUB(site, d##5, d * 10 + 5)                                                          \
    SL_FE_ET_STUB(site, d##6, d * 10 + 6)                                                          \
    SL_FE_ET_STUB(site, d##7, d * 10 + 7)                                                          \
    SL_FE_ET_STUB(site, d##8, d * 10 + 8)                                                          \
    SL_FE_ET_STUB(site, d##9, d * 10 + 9)
#define SL_FE_ET_STUB_REFS(site, d)                                                                \
    SL_FE_ET_STUB_REF(site, d##0), SL_FE_ET_STUB_REF(site, d##1), SL_FE_ET_STUB_REF(site, d##2),   \
        SL_FE_ET_STUB_REF(site, d##3), SL_FE_ET_STUB_REF(site, d##4),                              \
        SL_FE_ET_STUB_REF(site, d##5), SL_FE_ET_STUB_REF(site, d##6),                              \
        SL_FE_ET_STUB_REF(site, d##7), SL_FE_ET_STUB_REF(site, d##8),                              \
        SL_FE_ET_STUB_REF(site, d##9)

#endif
