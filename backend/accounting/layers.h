/* The layers around the dispatch table's handler (layers.c). */
#ifndef SLUICE_BE_ACCOUNTING_LAYERS_H
#define SLUICE_BE_ACCOUNTING_LAYERS_H

#include <cuda.h>

#include "sluice/backend_dispatch.h"

/* Accounting and the quota around the dispatch table's handler, in that order. */
CUresult be_layers_run(struct sl_be_call *c, const struct sl_call_info *ci);

#endif
