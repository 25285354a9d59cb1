/* One call on the session's worker (run.c). */
#ifndef SLUICE_BE_SESSION_RUN_H
#define SLUICE_BE_SESSION_RUN_H

#include <cuda.h>

#include "sluice/backend_dispatch.h"

/* Runs one call: context, sticky errors, printf, then be_layers_run. The caller builds c
 * (session, call, reply, bulk in) and owns the reply bulk the handler leaves in it. */
CUresult be_run_call(struct sl_be_call *c);

#endif
