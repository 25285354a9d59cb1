/* The GPU-share token bucket (share.c). Tokens are nanoseconds of device time; they accrue at
 * share x wall time up to share x the window, measured busy time consumes them (the balance may
 * go negative: a debt). */
#ifndef SLUICE_BE_ACCOUNTING_SHARE_H
#define SLUICE_BE_ACCOUNTING_SHARE_H

#include <stdint.h>

#define BE_SHARE_WINDOW_NS 1000000000LL /* the GPU share's sliding window (bucket depth) */

struct be_bucket {
    double share;  /* (0, 1] */
    double tokens; /* ns */
    int64_t last;  /* CLOCK_MONOTONIC ns of the last accrual */
};
void be_bucket_init(struct be_bucket *b, double share, int64_t now);
void be_bucket_accrue(struct be_bucket *b, int64_t now);
void be_bucket_charge(struct be_bucket *b, uint64_t busy_ns, int64_t now);
/* How long to hold work back until the balance is no longer negative (0: go). */
int64_t be_bucket_wait_ns(const struct be_bucket *b);

#endif
