/* The contexts this process knows (their devices) and each thread's current-context stack,
 * which never travels: every Call carries the current context's id (contexts.c). The CUDA
 * calls on contexts are api/context.c's. */
#ifndef SLUICE_FRONTEND_CALL_CONTEXTS_H
#define SLUICE_FRONTEND_CALL_CONTEXTS_H

#include <stdint.h>

#include <cuda.h>

/* The calling thread's current context, NULL when none. exports/ asks it too (before cuInit,
 * from any thread); its unit tests link a double (tests/unit/frontend/fe_test_hooks.c). */
CUcontext sl_fe_current_context(void);
/* The calling thread's current context id (0 = none), what goes into Call.context. */
uint64_t sl_fe_current_ctx_id(void);
/* 1 when the calling thread's stack has no room for one more context. */
int sl_fe_ctx_stack_full(void);
/* Pushes ctx on the calling thread's stack (nothing when it is full). */
void sl_fe_ctx_push(CUcontext ctx);
/* Pops the calling thread's current context into *ctx; 0 when the stack was empty. */
int sl_fe_ctx_pop(CUcontext *ctx);
/* cuCtxSetCurrent on the calling thread's stack: ctx replaces the current context (is pushed
 * on an empty stack); NULL pops the current one. */
void sl_fe_ctx_set_current(CUcontext ctx);
/* Pops ctx if it is the calling thread's current context. */
void sl_fe_ctx_pop_if_current(CUcontext ctx);
/* The device of a context handle; -1 if unknown. */
int sl_fe_ctx_device(CUcontext ctx);
void sl_fe_ctx_remember(CUcontext ctx, int device);
/* The context is no longer known (its entries on the calling thread's stack stay). */
void sl_fe_ctx_drop(CUcontext ctx);
/* As sl_fe_ctx_drop, and its entries on the calling thread's stack become NULL. */
void sl_fe_ctx_forget(CUcontext ctx);
/* Test helper: clears the calling thread's stack and the known contexts. */
void sl_fe_contexts_reset(void);

#endif
