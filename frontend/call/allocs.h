/* The live device allocations of this session the guest saw made (allocs.c), so that a free of
 * one needs no round trip: the table's `nowait` calls (cuMemFree_v2) go as async calls when they
 * release the base of one, synchronously otherwise (docs/remoting.md "Frees without a round
 * trip"). Its own lock: the stubs ask it without the call layer's. */
#ifndef SLUICE_FRONTEND_CALL_ALLOCS_H
#define SLUICE_FRONTEND_CALL_ALLOCS_H

#include <stdint.h>

#include "sluice_session.pb-c.h"

/* A synchronous allocation succeeded (the filters' answered hook): its base is live. Calls
 * that work on a stream (cuMemAllocAsync, ...) and any other call are ignored. */
void sl_fe_allocs_answered(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *reply);
/* A call releases something (the filters' before hook): an address it releases is not live. */
void sl_fe_allocs_before(const Sluice__Wire__Call *call, uint32_t flags, uint64_t seq_now);
/* 1 and forgets base when it is live; 0 when it is not known. */
int sl_fe_allocs_take(uint64_t base);
/* Forgets every allocation (a context destroyed or reset, a new session, the tests). */
void sl_fe_allocs_clear(void);
/* How many are live (tests). */
size_t sl_fe_allocs_count(void);

#endif
