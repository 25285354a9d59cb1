/* The GPU-time share of an instance (Grant.sla.gpu_share < 1): a token bucket in the tenant's
 * accounting page (quota.c), shared by the instance's session workers. Tokens are nanoseconds
 * of device time; they accrue at share x wall time, up to share x BE_SHARE_WINDOW_NS (the
 * sliding window), and the busy time each worker measures consumes them. A worker whose
 * instance is in debt holds its next frame back (accounting.c: work is delayed, never dropped)
 * until the balance is back to zero, and counts the wait as throttled time. */
#include "accounting/share.h"

void be_bucket_init(struct be_bucket *b, double share, int64_t now)
{
    b->share = share > 0 && share <= 1 ? share : 1;
    b->tokens = 0; /* starts empty: a new instance gets no burst before it has waited */
    b->last = now;
}

void be_bucket_accrue(struct be_bucket *b, int64_t now)
{
    if (now <= b->last)
        return;
    double cap = b->share * (double)BE_SHARE_WINDOW_NS;
    b->tokens += b->share * (double)(now - b->last);
    if (b->tokens > cap)
        b->tokens = cap;
    b->last = now;
}

void be_bucket_charge(struct be_bucket *b, uint64_t busy_ns, int64_t now)
{
    be_bucket_accrue(b, now);
    b->tokens -= (double)busy_ns;
}

int64_t be_bucket_wait_ns(const struct be_bucket *b)
{
    if (b->tokens >= 0 || b->share <= 0)
        return 0;
    return (int64_t)(-b->tokens / b->share) + 1;
}
