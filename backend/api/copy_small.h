/* Small synchronous device-to-host copies through the context's page-locked staging buffer
 * (copy_small.c; docs/remoting.md, "Small device-to-host copies"). */
#ifndef SLUICE_BE_API_COPY_SMALL_H
#define SLUICE_BE_API_COPY_SMALL_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "api/copy_wait.h"
#include "sluice/backend_dispatch.h"

/* For the handlers of synchronous device-to-host copies (st NULL: the legacy stream, or the
 * per-thread one when the call has per_thread_stream; cuMemcpyDtoHAsync_v2's st: the call's
 * stream), after their checks: queues the copy of n bytes (queue, into the staging buffer) in
 * st's order, then copies them into dst once it is done. 1 when it took the copy (*rc is its
 * result: the driver's answer, exactly as a synchronization of st gives it), 0 when the caller
 * must copy the way it did before (over BE_STAGE_BYTES, no staging buffer, a capture on st or a
 * query refused, a driver without the calls). */
int be_small_dtoh(struct sl_be_call *c, void *dst, size_t n, CUstream st, be_copy_queue queue,
                  void *u, CUresult *rc);
#endif
