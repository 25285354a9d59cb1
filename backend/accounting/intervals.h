/* The union of device intervals (intervals.c): a session's busy time counts overlapping work on
 * several streams once. Pure functions. */
#ifndef SLUICE_BE_ACCOUNTING_INTERVALS_H
#define SLUICE_BE_ACCOUNTING_INTERVALS_H

#include <stddef.h>
#include <stdint.h>

struct be_iv {
    int64_t a, b; /* [a, b), nanoseconds */
};
/* Clips v[0..n) to [lo, hi), sorts and merges overlapping or touching intervals in place;
 * returns how many are left and their total length in *total. */
size_t be_iv_union(struct be_iv *v, size_t n, int64_t lo, int64_t hi, uint64_t *total);
/* The same union, incrementally: v[0..merged) is already a union (sorted, disjoint, of length
 * *total) and v[merged..n) came since. Costs what the new intervals cost while they come in
 * order, as timed runs mostly do, and what the union's tail from the earliest of them costs
 * when one comes late; returns the new count and updates *total. */
size_t be_iv_union_more(struct be_iv *v, size_t merged, size_t n, uint64_t *total);
/* Keeps a union v[0..n) (sorted, disjoint) within max intervals (max >= 1) by merging the
 * smallest gaps between neighbours (the earlier gap first among equal ones); returns the new
 * count and the total length of the merged gaps in *widened (what the union grew by). */
size_t be_iv_cap(struct be_iv *v, size_t n, size_t max, uint64_t *widened);

#endif
