/* The frontend runtime as the generated stubs (frontend_stubs.c) see it.
 *
 * The stubs build a Call on their stack and hand it to one of these hooks; the runtime assigns
 * `seq`, serializes the call before returning (the stack memory dies with the stub), sends it
 * and, for sl_fe_call, waits for the matching Reply. The real runtime lives in frontend/ (a
 * later issue); tests provide their own. */
#ifndef SLUICE_STUB_RUNTIME_H
#define SLUICE_STUB_RUNTIME_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice_session.pb-c.h"

/* A synchronous call. On return *reply is the server's Reply (result, outputs), or NULL when
 * the call never got one (then the returned CUresult says why, e.g. the channel died). A
 * non-NULL *reply is released with sl_fe_reply_free. Earlier deferred failures are reported
 * by the runtime through the result, as CUDA does at synchronizing calls. */
CUresult sl_fe_call(Sluice__Wire__Call *call, Sluice__Wire__Reply **reply);

void sl_fe_reply_free(Sluice__Wire__Reply *reply);

/* An async call: queued (and coalesced with the next ones) without waiting. Returns
 * CUDA_SUCCESS, or an error the runtime already knows of (a failed earlier deferred call). */
CUresult sl_fe_enqueue_async(Sluice__Wire__Call *call);

/* A nowait call (a free): 1 when the address it releases is the base of a live allocation the
 * runtime saw made (it is forgotten now: the call then goes as an async one), 0 when it must
 * go synchronously. */
int sl_fe_nowait_take(const Sluice__Wire__Call *call);

/* A `layout` call answered function or kernel f: given, its parameter layout came with the
 * answer (n offsets and sizes, as slParamLayout's reply has them), which the runtime checks and
 * keeps for f's launches; else (or when it does not check out) the first launch asks. */
void sl_fe_layout_seed(uint64_t f, int given, size_t n_offsets, const uint64_t *offsets,
                       size_t n_sizes, const uint64_t *sizes);

/* A form of a call Sluice does not forward (e.g. cuCtxCreate_v3 with affinity parameters):
 * returns CUDA_ERROR_NOT_SUPPORTED and logs one line naming it, once per name. Implemented by
 * the frontend runtime; tests provide one. */
CUresult sl_fe_unsupported(const char *name);
/* A call the table refuses (refuse="reason"): as sl_fe_unsupported, the line gives the reason.
 * The generated frontend_refused.c answers every refused call with it. */
CUresult sl_fe_refused(const char *name, const char *reason);

#endif
