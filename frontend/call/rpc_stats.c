/* The call layer's statistics (SLUICE_STATS=1, tests): counts of calls, frames, fences and
 * answers, and the calls most made synchronously, that emptied the memo, that made the frontend
 * forget an idle context. Counted with the call layer's lock held. */
#include <pthread.h>
#include <string.h>

#include "call/idle.h"
#include "call/memo.h"
#include "call/rpc_state.h"
#include "call/rpc_stats.h"
#include "sluice/wire.h"

static uint32_t g_sync_by_call[SL_CALL_ID_MAX + 1]; /* synchronous calls made, per call id */

void sl_fe_rpc_count_sync(uint32_t call_id)
{
    if (call_id <= SL_CALL_ID_MAX)
        g_sync_by_call[call_id]++;
}

void sl_fe_rpc_stats_reset(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    memset(&rs->stats, 0, sizeof rs->stats);
    memset(g_sync_by_call, 0, sizeof g_sync_by_call);
}

void sl_fe_rpc_stats(struct sl_fe_rpc_stats *st)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    pthread_mutex_lock(&rs->io);
    *st = rs->stats;
    pthread_mutex_unlock(&rs->io);
}

static size_t top_of(const uint32_t *table, uint32_t *ids, uint64_t *counts, size_t max)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    size_t n = 0;
    pthread_mutex_lock(&rs->io);
    for (uint32_t id = 0; id <= SL_CALL_ID_MAX; id++) {
        uint64_t c = table[id];
        if (!c)
            continue;
        size_t at = n < max ? n++ : max; /* insertion into the top max, largest first */
        while (at > 0 && counts[at - 1] < c) {
            if (at < max) {
                ids[at] = ids[at - 1];
                counts[at] = counts[at - 1];
            }
            at--;
        }
        if (at < max) {
            ids[at] = id;
            counts[at] = c;
        }
    }
    pthread_mutex_unlock(&rs->io);
    return n;
}

size_t sl_fe_rpc_top_sync(uint32_t *ids, uint64_t *counts, size_t max)
{
    return top_of(g_sync_by_call, ids, counts, max);
}

size_t sl_fe_rpc_top_forget(uint32_t *ids, uint64_t *counts, size_t max)
{
    return top_of(sl_fe_memo_forget_counts(), ids, counts, max);
}

size_t sl_fe_rpc_top_unclean(uint32_t *ids, uint64_t *counts, size_t max)
{
    return top_of(sl_fe_idle_unclean_counts(), ids, counts, max);
}
