/* The call layer's statistics (rpc_stats.c). */
#ifndef SLUICE_FRONTEND_CALL_RPC_STATS_H
#define SLUICE_FRONTEND_CALL_RPC_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Statistics for tests. */
struct sl_fe_rpc_stats {
    uint64_t frames_sent, calls_sent, fences, callbacks_run, deferred_errors, memo_hits;
    uint64_t sync_calls, async_calls, wait_ns; /* wait_ns: time sync calls waited for replies */
    uint64_t frames_handed;                    /* frames sent by the sender thread */
    uint64_t frames_joined; /* outbox frames a synchronous call took along in its own */
};
void sl_fe_rpc_stats(struct sl_fe_rpc_stats *st);
/* The max call ids made most often as synchronous calls, with their counts, most first;
 * returns how many there are (at most max). */
size_t sl_fe_rpc_top_sync(uint32_t *ids, uint64_t *counts, size_t max);
/* The same for the calls that emptied the memo (unmemo calls, and answers with an error). */
size_t sl_fe_rpc_top_forget(uint32_t *ids, uint64_t *counts, size_t max);
/* The same for the calls that made the frontend forget that the context was idle (work whose
 * stream it cannot tell, in another context, on too many streams, or an error). */
size_t sl_fe_rpc_top_unclean(uint32_t *ids, uint64_t *counts, size_t max);

/* With the lock held: one more synchronous call of call_id; back to zero (tests). */
void sl_fe_rpc_count_sync(uint32_t call_id);
void sl_fe_rpc_stats_reset(void);

#endif
