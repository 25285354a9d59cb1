/* Synchronous copies behind busy work, waited for off the call path (copy_wait.c). */
#ifndef SLUICE_BE_API_COPY_WAIT_H
#define SLUICE_BE_API_COPY_WAIT_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/backend_dispatch.h"

/* The asynchronous form of a synchronous copy with a host side, queued on st with that side at
 * host (a destination's page-locked buffer, or the call's bulk for a source), as u (the
 * handler's) describes it, in the call's stream semantics (the _ptsz call with
 * per_thread_stream): cuMemcpyDtoHAsync, cuMemcpy2DAsync, cuMemcpyAtoHAsync... */
typedef CUresult (*be_copy_queue)(struct sl_be_call *c, void *u, void *host, CUstream st);
/* The driver's function for the call's stream semantics (a queue's async call, the query and
 * synchronization after it): the _ptsz one with per_thread_stream, NULL when the driver has none
 * (the copy then goes the old way). */
#define BE_PTSZ(api, name, call) ((call)->per_thread_stream ? (api)->name##_ptsz : (api)->name)

/* A synchronous copy just queued on st (NULL with the call's per_thread_stream: the session
 * thread's per-thread stream), into page-locked buf (n bytes: the reply's) or with no reply
 * bytes (buf NULL): 1 when st stays busy past the poll and the wait was handed to a waiter
 * thread (c->deferred set; stage: buf is the context's staging buffer, lent), 0 when the poll
 * saw st done (the caller's synchronization returns at once), -1 when the caller waits as
 * before (no waiter could take it, no reply is awaited). */
int be_copy_off_path(struct sl_be_call *c, CUstream st, void *buf, size_t n, int stage);
/* 1 when st (as the call names it: the _ptsz query with per_thread_stream) is capturing, or the
 * driver cannot say (the legacy stream beside a capture: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT):
 * the copy is then left to the driver's own call, which answers what it answers there. */
int be_copy_capturing(const struct sl_be_call *c, CUstream st);
/* For the handlers of device-to-host copies over 64 KiB whose reply buffer is slot
 * (session/bulk_pool.c): when slot is page-locked, queues the copy into it (queue) and waits
 * for it (*rc: a synchronization's answer), or hands the wait off (c->deferred: the slot is
 * the wait's). 0 when the caller must copy the way it did before (slot not page-locked, a
 * capture on st). */
int be_dtoh_slot(struct sl_be_call *c, void *slot, size_t n, CUstream st, be_copy_queue queue,
                 void *u, CUresult *rc);
/* For the synchronous host-to-device copies (the legacy stream, or the per-thread one), after
 * their checks: queues the copy of n bytes from the call's bulk (queue: a slot is held until
 * the copy read it) and waits for it, or hands the wait off as above (the reply carries no
 * bytes). 0 when the caller must copy the way it did before (a capture, nothing to copy). */
int be_htod_queued(struct sl_be_call *c, size_t n, be_copy_queue queue, void *u, CUresult *rc);

/* A synchronous device-to-host copy of n bytes into *out (the reply's buffer, malloc'd or a
 * slot) queued as its async form and waited for as above: up to 64 KiB through the context's
 * staging buffer (api/copy_small.c), up to 16 MiB in a page-locked slot, which then becomes *out.
 * 0: the caller copies as before. */
int be_dtoh_queued(struct sl_be_call *c, be_copy_queue queue, void *u, size_t n, uint8_t **out,
                   CUresult *rc);
/* A device-to-host handler's answer: buf becomes the reply's n bytes, unless the copy failed
 * (buf freed) or its wait went off the call path (the reply follows; buf freed unless it is
 * the slot the wait holds). */
CUresult be_dtoh_answer(struct sl_be_call *c, uint8_t *buf, uint64_t n, CUresult rc);

#endif
