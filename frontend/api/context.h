/* Contexts (context.c): the CUDA calls on contexts and primary contexts; the stack and the
 * known contexts they work on are call/contexts.c's. */
#ifndef SLUICE_FRONTEND_API_CONTEXT_H
#define SLUICE_FRONTEND_API_CONTEXT_H

/* Test helper: clears the calling thread's stack, the known contexts and the primary
 * contexts' counts and flags. */
void sl_fe_ctx_reset(void);

#endif
