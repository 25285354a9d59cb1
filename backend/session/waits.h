/* Blocking waits completed off the session's call path (waits.c): a cuStreamSynchronize,
 * cuEventSynchronize or cuCtxSynchronize whose GPU work is still running is handed to a waiter
 * thread, so that the calls of the guest's other threads go on meanwhile; its reply follows
 * when the work is done (the API table's blocks= fact). */
#ifndef SLUICE_BE_SESSION_WAITS_H
#define SLUICE_BE_SESSION_WAITS_H

#include <cuda.h>
#include <stdint.h>

#include "sluice/backend_dispatch.h"
#include "sluice/wire.h"

struct be_ctx;
struct be_waits;

#define BE_MAX_WAITERS     16u /* waiter threads per session */
#define BE_MAX_WATCHES     4u  /* busy streams watched at once (each holds a waiter thread) */
#define BE_MAX_LENT_STAGES 16u /* small copies waiting with a staging buffer each, at once */

/* The waits of one session (no thread yet: waiter threads start on demand, at most max);
 * spin_ns: how long a thread polls before it blocks or sleeps. NULL when out of memory. */
struct be_waits *be_waits_new(sl_be_session *s, unsigned max, uint64_t spin_ns);
/* Finishes every wait (each waits for its GPU work), stops the threads, frees. */
void be_waits_free(struct be_waits *w);

/* On the session thread, for a call with a blocks= fact, after its context is current and
 * before its handler: 1 when the wait was handed off (the reply follows from be_waits_finish;
 * the caller sends nothing now), 0 when the call runs inline as before (its work is done
 * already, or it could not be handed off: the handler then says what is wrong). */
int be_waits_defer(struct be_waits *w, struct sl_be_call *c, const struct sl_call_info *ci,
                   struct be_ctx *cur);
/* On the session thread, for a synchronous device-to-host copy queued on st into page-locked
 * buf (n bytes) while st is still busy: a waiter waits for the copy (a private event recorded
 * on st now) and the reply, buf's bytes as its bulk, follows when it is done (be_waits_finish),
 * so that the guest's other threads are not held meanwhile. stage: buf is the context's
 * staging buffer, lent (given back to the context, or freed, then); else buf is the reply's
 * own (a slot), freed with the reply. 1 when handed off (c->deferred set), 0 when not (the
 * caller waits inline and keeps buf): no thread, or BE_MAX_LENT_STAGES staging buffers out
 * already (each lent one makes the context allocate another: a guest that pipelines copies
 * must not pin host memory without bound). */
int be_waits_defer_copy(struct be_waits *w, struct sl_be_call *c, CUstream st, void *buf,
                        uint64_t n, int stage);
/* On the session thread, after a stream or event query that asked to be watched (Call.watch)
 * answered CUDA_ERROR_NOT_READY: a waiter thread waits for what the stream had queued (a
 * private event recorded now) or for the event, and then the session thread sends
 * StreamDone{the query's seq} (docs/remoting.md "Busy streams"). 1 when watched (the reply then
 * says Reply.watched), 0 when not (BE_MAX_WATCHES reached, no thread). */
int be_waits_watch(struct be_waits *w, const struct sl_be_call *c, const struct sl_call_info *ci,
                   struct be_ctx *cur);
/* On the session thread, before any reply: the StreamDone of every watched stream whose work
 * is done goes first, so that no reply the guest reads after (a wait on an event recorded
 * after that work) finds the stream still known busy there. */
void be_waits_push_watched(struct be_waits *w);
/* On the session thread, before a call that releases handle: 1 when waits on that guest event
 * are outstanding (another guest thread's cuEventSynchronize, a watched query). They keep the
 * driver's event, which the last of them destroys when it ends (the driver, too, frees an
 * event destroyed before it completed at its completion); the caller drops the handle without
 * destroying the event, and no other call waits. 0: nothing waits on it. */
int be_waits_adopt(struct be_waits *w, uint64_t handle);
/* Completed waits are waiting for be_waits_finish (any thread; lock-free). */
int be_waits_ready(const struct be_waits *w);
/* On the session thread: sends the replies of the completed waits. */
void be_waits_finish(struct be_waits *w);
/* On the session thread: waits until every handed-off wait completed and sends their
 * replies (before a context is destroyed, and at the session's end). */
void be_waits_drain(struct be_waits *w);
/* Waits handed off and not finished yet. */
unsigned be_waits_outstanding(const struct be_waits *w);

#endif
