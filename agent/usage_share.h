/* Shared GPU time (usage_share.c): the busy intervals of every session on one GPU, from every
 * backend, apportioned over a window so that the sessions' shares add up to the GPU's busy time
 * exactly. The rule (docs/accounting.md, "Shared GPU time"): the window is cut into elementary
 * segments at every interval's start and end; a segment during which k sessions are busy is
 * shared equally among those k (a session with several overlapping intervals of its own counts
 * once); the nanoseconds a division leaves over go one each to the busy sessions in turn, so
 * the sum is exact. Pure functions. */
#ifndef AG_USAGE_SHARE_H
#define AG_USAGE_SHARE_H

#include <stddef.h>
#include <stdint.h>

/* One busy interval [a, b) (CLOCK_REALTIME ns) of session `who` (an index < the caller's
 * session count). */
typedef struct ag_share_iv {
    int64_t a, b;
    size_t who;
} ag_share_iv;

/* Apportions [lo, hi) among nwho sessions: adds each session's share to shared[who] (nwho
 * entries) and sets *busy to the length of the union of the intervals within [lo, hi) (the
 * GPU's busy time): the shares added sum to *busy exactly. The intervals may come in any
 * order and overlap; those with who >= nwho are ignored. -1 when out of memory (nothing
 * added), else 0. */
int ag_share_apportion(const ag_share_iv *iv, size_t n, size_t nwho, int64_t lo, int64_t hi,
                       uint64_t *shared, uint64_t *busy);

#endif
