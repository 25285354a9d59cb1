/* Small synchronous device-to-host copies through the context's page-locked staging buffer
 * (copy_small.c; docs/remoting.md, "Small device-to-host copies"). */
#ifndef SLUICE_BE_API_COPY_SMALL_H
#define SLUICE_BE_API_COPY_SMALL_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/backend_dispatch.h"

/* For the handlers of cuMemcpyDtoH_v2 (st NULL: the legacy stream, or the per-thread one when
 * the call has per_thread_stream) and cuMemcpyDtoHAsync_v2 (st: the call's stream), after their
 * checks: copies n bytes from device address src into dst, in st's order, and returns once the
 * copy is done. 1 when it took the copy (*rc is its result: the driver's answer, exactly as a
 * synchronization of st gives it), 0 when the caller must copy the way it did before (over
 * BE_STAGE_BYTES, no staging buffer, a capture on st or a query refused, a driver without the
 * calls). */
int be_small_dtoh(struct sl_be_call *c, void *dst, CUdeviceptr src, size_t n, CUstream st,
                  CUresult *rc);
/* For the same handlers with a larger copy whose reply buffer is slot (session/bulk_pool.c): when
 * slot is page-locked, queues the copy into it (cuMemcpyDtoHAsync) and waits for it as
 * be_small_dtoh does. 1 when it took the copy (*rc as above), 0 when the caller must copy the
 * way it did before (slot not page-locked, a capture on st). Either function may leave the
 * copy's wait to a waiter thread when st is still busy after the poll (be_dtoh_off_path): it
 * then sets c->deferred, answers CUDA_SUCCESS, and the reply follows from session/waits.c with
 * the bytes; the caller then gives back dst, and slot is the wait's. */
int be_dtoh_slot(struct sl_be_call *c, void *slot, CUdeviceptr src, size_t n, CUstream st,
                 CUresult *rc);
/* A device-to-host copy into page-locked buf just queued on st (NULL with the call's
 * per_thread_stream: the session thread's per-thread stream): 1 when st stays busy past the
 * poll and the wait was handed to a waiter thread (stage: buf is the context's staging
 * buffer), 0 when the poll saw st done (the caller's synchronization returns at once), -1 when
 * the caller waits as before (no waiter could take it, or no reply is awaited). */
int be_dtoh_off_path(struct sl_be_call *c, CUstream st, void *buf, size_t n, int stage);

#endif
