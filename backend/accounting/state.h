/* The accounting state of one session (struct be_acct, header only): what timing.c measures,
 * records.c reports and quota.c holds against the instance's quota; and what the agent's Grant
 * says of an instance (struct be_sla). docs/accounting.md is the design. */
#ifndef SLUICE_BE_ACCOUNTING_STATE_H
#define SLUICE_BE_ACCOUNTING_STATE_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "bounds.h"

#define BE_ACCT_MAX_PAIRS       1024 /* timed runs waiting to be measured, per session */
#define BE_ACCT_MAX_RUNS        64   /* streams with an open run, per session */
#define BE_ACCT_FRAMES_OPEN_MAX 64   /* frames back to back that leave the runs open */
#define BE_ACCT_CAPPED_PAIRS    8    /* runs of a capped session in flight, unmeasured */

/* What the agent's Grant says for an instance (Grant.sla). */
struct be_sla {
    char flavor[256];
    double share;          /* (0, 1]; 1 = uncapped */
    uint64_t quota;        /* device memory bytes per instance; 0 = none */
    uint32_t max_sessions; /* per instance; 0 = unlimited */
};

struct be_acct_shm; /* accounting/quota.h: the tenant's accounting page */
struct be_iv;       /* accounting/intervals.h */

struct be_acct_cfg {
    int64_t interval_ns;     /* usage record period */
    int no_timing;           /* --measure none: counters only, no timing events */
    struct be_acct_shm *shm; /* NULL: no quota, no share (unit tests) */
    int slot, inst;          /* this worker's slot and instance entry in shm */
    /* where records go: an encoded UsageRecord (the server's queue, through the worker's
     * socket or the in-process outbox) */
    void (*emit)(void *user, const uint8_t *rec, size_t len);
    void *user;
};
/* Timing state of one of the session's contexts: a private stream for the reference event
 * that maps event times to CLOCK_REALTIME (re-recorded every interval, so cuEventElapsedTime's
 * float milliseconds stay precise), and a pool of reusable timing events. */
struct be_acct_ctx {
    CUcontext ctx;
    int ordinal;
    int broken; /* events could not be made here: its work is counted, not timed */
    CUstream priv;
    CUevent ref;
    int64_t ref_ns;
    CUevent *pool;
    size_t npool, cap;
};
/* An open run: consecutive kernels (or copies/memsets) on one stream since `start`. */
struct be_acct_run {
    struct be_acct_ctx *c;
    CUstream st;
    int kind;
    CUevent start;
};
/* A closed run waiting for its end event. */
struct be_acct_pair {
    struct be_acct_ctx *c;
    CUevent a, b;
    int kind;
    CUstream st; /* the pair's stream: its pairs complete in the order they were recorded */
};
/* One device's figures in the current interval. */
struct be_acct_dev {
    struct be_iv *iv; /* measured intervals (merged as they come) */
    size_t niv, cap;
    uint64_t merged_total; /* length of iv[0..merged), a union (be_iv_union_more) */
    size_t merged;
    uint64_t kernel_ns, kernels, htod, dtoh;
};
struct be_acct {
    struct be_acct_cfg cfg;
    int timing; /* the driver has what the events method needs */
    struct be_acct_ctx *ctxs[BE_MAX_CONTEXTS];
    size_t nctx;
    struct be_acct_run runs[BE_ACCT_MAX_RUNS];
    size_t nruns;
    struct be_acct_pair *pairs;
    size_t npairs;
    struct be_acct_dev *dev;
    int ndev;
    int64_t start_ns;  /* the interval's start, CLOCK_REALTIME */
    int64_t next_tick; /* CLOCK_MONOTONIC ns */
    uint64_t calls0, errors0, throttled_ns, untimed;
    uint32_t quota_refusals;
    uint64_t mem, mem_high; /* the session's device memory (published) and its high-water */
    struct be_sla sla;      /* a copy of the instance's entry, refreshed every interval */
    /* The run the last work call continued (context id, stream id, kind, per-thread flag): the
     * next call of the same kind on the same stream needs no lookups. Cleared by run_close. */
    struct {
        uint64_t ctx, stream;
        int kind, per_thread, valid;
    } hot;
    unsigned frames_open; /* frames ended since the runs were last closed */
};

#endif
