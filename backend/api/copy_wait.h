/* Synchronous copies behind busy work, waited for off the call path (copy_wait.c). */
#ifndef SLUICE_BE_API_COPY_WAIT_H
#define SLUICE_BE_API_COPY_WAIT_H

#include <cuda.h>
#include <stddef.h>

#include "sluice/backend_dispatch.h"

/* A synchronous copy just queued on st (NULL with the call's per_thread_stream: the session
 * thread's per-thread stream), into page-locked buf (n bytes: the reply's) or with no reply
 * bytes (buf NULL): 1 when st stays busy past the poll and the wait was handed to a waiter
 * thread (c->deferred set; stage: buf is the context's staging buffer, lent), 0 when the poll
 * saw st done (the caller's synchronization returns at once), -1 when the caller waits as
 * before (no waiter could take it, no reply is awaited, or the reply leaves on the lanes,
 * where the guest takes the pieces of replies in the order of their calls). */
int be_copy_off_path(struct sl_be_call *c, CUstream st, void *buf, size_t n, int stage);
/* 1 when st (as the call names it: the _ptsz query with per_thread_stream) is capturing, or the
 * driver cannot say (the legacy stream beside a capture: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT):
 * the copy is then left to the driver's own call, which answers what it answers there. */
int be_copy_capturing(const struct sl_be_call *c, CUstream st);
/* For the handlers of cuMemcpyDtoH_v2 and cuMemcpyDtoHAsync_v2 with a copy of 1 MiB or more
 * whose reply buffer is slot (session/bulk_pool.c): when slot is page-locked, queues the copy
 * into it (cuMemcpyDtoHAsync) and waits for it (*rc: a synchronization's answer), or hands
 * the wait off (c->deferred: the slot is the wait's). 0 when the caller must copy the way it
 * did before (slot not page-locked, a capture on st). */
int be_dtoh_slot(struct sl_be_call *c, void *slot, CUdeviceptr src, size_t n, CUstream st,
                 CUresult *rc);
/* For cuMemcpyHtoD_v2 (the legacy stream, or the per-thread one), after its checks: queues the
 * copy from the call's bulk (cuMemcpyHtoDAsync: a slot is held until the copy read it) and
 * waits for it, or hands the wait off as above (the reply carries no bytes). 0 when the
 * caller must copy the way it did before (a capture, a driver without the calls). */
int be_htod_queued(struct sl_be_call *c, CUdeviceptr dst, size_t n, CUresult *rc);

#endif
