/* What the other files of the double use of context.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_CONTEXT_H
#define SLUICE_DOUBLE_CONTEXT_H

#include "core.h"

struct dbl_ctx *cur(void);

/* The current context, checked; under the lock. */
CUresult need_ctx(struct dbl_ctx **out);

#endif
