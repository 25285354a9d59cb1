/* GPU-time measurement with timing events (timing.c), on the session's worker thread. */
#ifndef SLUICE_BE_ACCOUNTING_TIMING_H
#define SLUICE_BE_ACCOUNTING_TIMING_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "accounting/state.h"
#include "session/state.h"
#include "sluice/driver_api.h"
#include "sluice/wire.h"

/* The per-call hooks (the accounting layer, layers.c): work calls open or continue a timed run
 * on their stream, every other call closes the open runs first; _end counts kernels and bytes. */
void be_acct_call_begin(sl_be_session *s, const Sluice__Wire__Call *call);
void be_acct_call_end(sl_be_session *s, const Sluice__Wire__Call *call, CUresult rc);
/* A context is about to be destroyed: measure its runs, drop its events. */
void be_acct_ctx_gone(sl_be_session *s, CUcontext ctx);
/* What records.c uses of timing.c: the clock, closing the open runs, measuring the closed ones
 * (waiting for the first `wait`; returns the busy time added), re-recording a context's
 * reference event, whether the driver can time, and the events' release at the end. */
int64_t be_acct_clock_ns(clockid_t id);
void be_acct_runs_close_all(sl_be_session *s);
uint64_t be_acct_measure(sl_be_session *s, size_t wait);
void be_acct_rebase(sl_be_session *s, struct be_acct_ctx *c);
int be_acct_timing_available(const struct sl_driver_api *api);
void be_acct_timing_free(sl_be_session *s);

#endif
