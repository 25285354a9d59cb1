/* The device allocations of this session the guest saw made (allocs.c), so that a free and an
 * allocation need no round trip (docs/remoting.md "Frees without a round trip",
 * "Allocations without a round trip"):
 * - the live set: the bases synchronous allocations answered. A free of one goes without
 *   waiting (the table's `nowait` calls: cuMemFree_v2), anything else synchronously;
 * - the cache: allocations of cuMemAlloc_v2 the guest freed but the backend still holds
 *   (bounded in bytes and entries, SLUICE_ALLOC_CACHE*). An allocation of a cached size in the
 *   same context is served from it; what the cache gives up is released by frees queued ahead
 *   of the next call that leaves (the filters' sync_out), before anything could observe the
 *   memory: cuMemGetInfo, a pointer query or a free of an address in a cached allocation, a
 *   context destroyed or reset, an allocation refused for memory (retried once, rpc.c).
 * Its own lock: the API functions ask it without the call layer's. */
#ifndef SLUICE_FRONTEND_CALL_ALLOCS_H
#define SLUICE_FRONTEND_CALL_ALLOCS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "sluice/wire.h"
#include "sluice_session.pb-c.h"

/* The defaults and bounds of the cache's limits (the environment may lower or raise them). */
#define SL_FE_ALLOC_CACHE_MB_DEFAULT      256u
#define SL_FE_ALLOC_CACHE_MB_MAX          (1u << 20)
#define SL_FE_ALLOC_CACHE_ENTRIES_DEFAULT 32u
#define SL_FE_ALLOC_CACHE_ENTRIES_MAX     1024u

/* A synchronous allocation succeeded (the filters' answered hook): its base is live.
 * Stream-ordered and managed allocations and any other call are ignored. */
void sl_fe_allocs_answered(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *reply);
/* A call is about to go (the filters' before hook): an address it releases is not live; a call
 * that could observe a cached allocation (cuMemGetInfo, a free of an address in one) releases
 * the cache first. */
void sl_fe_allocs_before(const Sluice__Wire__Call *call, uint32_t flags, uint64_t seq_now);
/* A call joined the pending frame (the filters' appended hook): device work it may leave
 * running keeps the allocations made before it out of the cache. */
void sl_fe_allocs_appended(const Sluice__Wire__Call *call, const struct sl_call_info *ci);
/* Calls are about to go (the filters' sync_out hook, the call layer's lock held): the frees of
 * what the cache gave up, each through release (in the allocation's context); the first error. */
CUresult sl_fe_allocs_sync_out(CUresult (*release)(uint64_t dptr, uint64_t ctx));

/* What cuMemFree_v2 of base does, the calling thread's current context being ctx. */
enum sl_fe_free_way {
    SL_FE_FREE_SYNC,   /* not a live base: sent, the driver's answer awaited */
    SL_FE_FREE_NOWAIT, /* a live base, forgotten: sent without waiting */
    SL_FE_FREE_CACHED, /* a live base now in the cache: nothing sent */
};
enum sl_fe_free_way sl_fe_allocs_free(uint64_t base, uint64_t ctx);
/* An allocation of size bytes in context ctx served from the cache: 1 and *base (live again),
 * 0 when none fits. */
int sl_fe_allocs_reuse(uint64_t ctx, uint64_t size, uint64_t *base);
/* The live allocation at base is a cuMemAlloc_v2 allocation of size bytes: it may be cached. */
void sl_fe_allocs_cacheable(uint64_t base, uint64_t size);
/* A pointer query of p is about to go: when p lies in a cached allocation, the cache is given up
 * first (the driver answers for a freed address). */
void sl_fe_allocs_asking(uint64_t p);
/* Gives up every cached allocation (their frees go ahead of the next call): how many. */
size_t sl_fe_allocs_release_cached(void);
/* A context is destroyed or reset: the cache is released (its frees go before that call) and
 * the live set forgotten (later frees of its addresses go synchronously). */
void sl_fe_allocs_context_gone(void);
/* Forgets everything without a call (a new session: its memory went with the old one; tests). */
void sl_fe_allocs_clear(void);

/* 1 and forgets base when it is live; 0 when it is not known. */
int sl_fe_allocs_take(uint64_t base);
/* The cache's limits: on, bytes, entries (connection.c from the environment, tests). */
void sl_fe_allocs_configure(int on, uint64_t max_bytes, unsigned max_entries);
/* How many are live, cached (and their bytes), waiting to be released (tests, statistics). */
struct sl_fe_allocs_counts {
    size_t live, cached, releasing;
    uint64_t cached_bytes;
};
struct sl_fe_allocs_counts sl_fe_allocs_counts(void);

#endif
