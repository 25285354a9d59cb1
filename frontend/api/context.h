/* Contexts as the guest sees them (context.c): each thread's current-context stack, the
 * contexts known and their devices. */
#ifndef SLUICE_FRONTEND_API_CONTEXT_H
#define SLUICE_FRONTEND_API_CONTEXT_H

#include <stdint.h>

#include <cuda.h>

/* The calling thread's current context id (0 = none), what goes into Call.context. */
uint64_t sl_fe_current_ctx_id(void);
/* Pushes ctx (a context just created) on the calling thread's stack. */
void sl_fe_ctx_push(CUcontext ctx);
/* The device of a context handle; -1 if unknown. */
int sl_fe_ctx_device(CUcontext ctx);
void sl_fe_ctx_remember(CUcontext ctx, int device);
void sl_fe_ctx_forget(CUcontext ctx);
/* Test helper: clears the calling thread's stack and the tables. */
void sl_fe_ctx_reset(void);

#endif
