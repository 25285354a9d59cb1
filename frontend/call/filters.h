/* The call filters (filters.c): what the call layer asks around every call, each filter in its
 * own file and all of them in one fixed order, the list in filters.c. Everything runs with the
 * call layer's lock held, but the host callbacks. */
#ifndef SLUICE_FRONTEND_CALL_FILTERS_H
#define SLUICE_FRONTEND_CALL_FILTERS_H

#include <stdint.h>

#include <cuda.h>

#include "call/managed.h"
#include "call/mapped_sync.h"
#include "sluice/wire.h"
#include "sluice_session.pb-c.h"

/* A synchronous call about to go (memo: it is a memo call without bulk): 1 and *reply when a
 * filter answers it here; seq_now: the last seq given out. */
int sl_fe_filters_answer(Sluice__Wire__Call *call, int memo, uint64_t seq_now,
                         Sluice__Wire__Reply **reply);
/* A call (its table flags) about to get its seq and go. */
void sl_fe_filters_before(const Sluice__Wire__Call *call, uint32_t flags, uint64_t seq_now);
/* What the call layer queues ahead of calls for the filters: the mapped ranges' changed bytes,
 * managed memory's dirty pages. */
struct sl_fe_emit {
    sl_fe_mapped_emit mapped;
    sl_fe_managed_push_fn managed;
    CUresult (*release)(uint64_t dptr, uint64_t ctx); /* a cached allocation's free (allocs.c) */
};
/* Calls about to go: what must go before them, queued through emit; the first failure. */
CUresult sl_fe_filters_sync_out(const struct sl_fe_emit *emit);
/* A call appended to the pending frame (its table entry; NULL: none). */
void sl_fe_filters_appended(const Sluice__Wire__Call *call, const struct sl_call_info *ci);
/* A reply as it is read, whichever thread waits for it. */
void sl_fe_filters_reply(const Sluice__Wire__Reply *r);
/* The reply r of a synchronous call reached its thread. */
void sl_fe_filters_answered(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *r, int memo,
                            uint64_t seq_now);
/* The reply r of one call of a batch reached its thread. */
void sl_fe_filters_answered_batch(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *r,
                                  uint64_t seq_now);
/* The backend asks for the host function registered under fn, without the lock: 1 if it ran. */
int sl_fe_filters_callback(uint64_t fn);
/* The worker's StreamDone{seq}: the work a watched stream query found queued is done. */
void sl_fe_filters_stream_done(uint64_t seq);
/* The session is new or gone. */
void sl_fe_filters_session(void);
/* Back to the initial state (tests). */
void sl_fe_filters_reset(void);

#endif
