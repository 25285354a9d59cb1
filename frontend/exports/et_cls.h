/* The private table CONTEXT_LOCAL_STORAGE (et_cls.c). */
#ifndef SLUICE_FRONTEND_ET_CLS_H
#define SLUICE_FRONTEND_ET_CLS_H

#include <cuda.h>

#include "exports/et_stub.h"

const sl_fe_slot *sl_fe_et_context_local_storage(void);

/* The table's lifecycle, called by the context calls (api/context.c):
 * on cuCtxDestroy: every entry of ctx is removed and its dtor(ctx, key, value) called (outside
 * any lock); on cuDevicePrimaryCtxReset: the entries of ctx are dropped without dtor calls. */
void sl_fe_cls_on_ctx_destroy(CUcontext ctx);
void sl_fe_cls_on_ctx_reset(CUcontext ctx);
/* Drops every entry without dtor calls and frees the storage (tests, library unload). */
void sl_fe_cls_clear_all(void);

#endif
