/* Managed memory in the guest (managed.c): the page tracker that keeps the guest's copy of each
 * managed allocation coherent with the device's copy (docs/remoting.md "Managed memory").
 *
 * Each allocation is an anonymous shared mapping at the device address (the program's view),
 * with a second view of the same pages that only the frontend uses and that never faults. Pages
 * start not present (PROT_NONE): a read fault fetches the page's 64 KiB block from the device and
 * maps it read-only, a write fault on a present page marks it dirty and makes it writable. Before
 * calls leave, dirty pages are pushed; after device work, present pages are invalidated. */
#ifndef SLUICE_FRONTEND_CALL_MANAGED_H
#define SLUICE_FRONTEND_CALL_MANAGED_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

/* Bytes fetched together on a read fault (a block aligned to the allocation's pages). */
#define SL_FE_MANAGED_BLOCK ((size_t)64 << 10)

/* Fills len bytes at dst from device address src (a synchronous copy); called without any lock
 * of the tracker. */
typedef CUresult (*sl_fe_managed_fetch_fn)(void *dst, uint64_t src, size_t len);
/* Queues the copy of len bytes at data to device address dst, in order before the call that is
 * about to leave; called with the call layer's lock held. */
typedef CUresult (*sl_fe_managed_push_fn)(uint64_t dst, const void *data, size_t len);

void sl_fe_managed_set_fetch(sl_fe_managed_fetch_fn fetch);

/* Maps len bytes at device address addr in the guest, not present; 0, or -1 with *why set. */
int sl_fe_managed_map(uint64_t addr, size_t len, const char **why);
/* Forgets the allocation at addr and unmaps the pages no other allocation shares: 1, or 0 when
 * addr starts no managed allocation. */
int sl_fe_managed_unmap(uint64_t addr);
/* 1 while the program has managed memory. */
int sl_fe_managed_any(void);
/* 1 and the allocation holding p (base, length) when p lies in managed memory. */
int sl_fe_managed_find(uint64_t p, uint64_t *base, size_t *len);
/* Makes [p, p + n) present in the guest (fetching what is not): cuMemPrefetchAsync to the CPU,
 * and the frontend's own reads of managed memory. Without the call layer's lock. */
CUresult sl_fe_managed_fetch_range(uint64_t p, size_t n);
/* With the call layer's lock held: pushes every dirty page (through push) and maps it read-only
 * again; also restores the fault handler if the program replaced it. */
CUresult sl_fe_managed_sync_out(sl_fe_managed_push_fn push);
/* Device work may have written managed memory: every present page becomes not present. */
void sl_fe_managed_invalidate(void);
/* The fault handler's work for a fault at addr: 1 when addr is managed memory (handled: the
 * access may be retried), 0 otherwise. */
int sl_fe_managed_fault(void *addr);
/* Counters (tests, statistics): fetches and bytes fetched, pushed bytes, invalidations. */
struct sl_fe_managed_stats {
    uint64_t fetches, fetched_bytes, pushed_bytes, invalidations, write_faults;
};
void sl_fe_managed_stats(struct sl_fe_managed_stats *out);
/* Unmaps everything (the session ended, or tests). */
void sl_fe_managed_reset(void);

#endif
