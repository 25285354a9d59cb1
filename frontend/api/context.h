/* Contexts (context.c): the CUDA calls on contexts and primary contexts; the stack and the
 * known contexts they work on are call/contexts.c's. */
#ifndef SLUICE_FRONTEND_API_CONTEXT_H
#define SLUICE_FRONTEND_API_CONTEXT_H

#include <stdint.h>

#include <cuda.h>

/* Asked by exports/ (cudart's private tables) too: each may be called before cuInit and from
 * any thread, and never calls back into cuGetProcAddress or cuGetExportTable. The unit tests
 * of exports/ link doubles of them (tests/unit/frontend/fe_test_hooks.c). */

/* The primary context handle of dev WITHOUT retaining or activating it (CUDART_INTERFACE[2]).
 * The handle must be stable: the same one cuDevicePrimaryCtxRetain returns later.
 * Returns CUDA_ERROR_INVALID_DEVICE (101) for a device that does not exist. */
CUresult sl_fe_primary_ctx_handle(CUdevice dev, CUcontext *pctx);

/* cuStreamGetId of stream, with ctx current while asking when ctx is not NULL (the NULL,
 * legacy and per-thread streams are those of a context). */
CUresult sl_fe_stream_id(CUcontext ctx, CUstream stream, uint64_t *id);

/* cuCtxGetId of a non-NULL context. */
CUresult sl_fe_context_id(CUcontext ctx, uint64_t *id);

/* Test helper: clears the calling thread's stack, the known contexts and the primary
 * contexts' counts and flags. */
void sl_fe_ctx_reset(void);

#endif
