/* Per source address token buckets for failed enrollment attempts: each failure takes a token,
 * tokens come back at a steady rate, an address with an empty bucket is refused (RATE_LIMITED)
 * before anything else is checked. Successes cost nothing. The table is bounded: when full, the
 * entry that has been full (idle) longest is reused. */
#ifndef SLUICE_AGENT_RATELIMIT_H
#define SLUICE_AGENT_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

#define AG_RL_ADDR_MAX 64

typedef struct ag_ratelimit ag_ratelimit;

typedef struct ag_ratelimit_opts {
    int burst;          /* failures allowed at once (bucket size); default 5 */
    int per_minute;     /* tokens returned per minute; default 5 */
    size_t max_entries; /* addresses tracked; default 4096 */
} ag_ratelimit_opts;

ag_ratelimit *ag_ratelimit_new(const ag_ratelimit_opts *o); /* NULL opts: defaults */
void ag_ratelimit_free(ag_ratelimit *rl);

/* 1 when addr may try now (its bucket holds at least one token). now_ms: a monotonic clock. */
int ag_ratelimit_allow(ag_ratelimit *rl, const char *addr, int64_t now_ms);
/* Takes a token for a failure from addr; returns the tokens left (0: the next try is refused). */
int ag_ratelimit_fail(ag_ratelimit *rl, const char *addr, int64_t now_ms);
/* Seconds until addr may try again (0: now). */
int ag_ratelimit_retry_after(ag_ratelimit *rl, const char *addr, int64_t now_ms);

#endif
