/* SLA accounting in sluice-backend (docs/accounting.md): GPU-time measurement of each session
 * (accounting.c, intervals.c), the tenant's shared accounting page with the memory quota
 * (quota.c) and the GPU-share token bucket (share.c), usage records (usage.c) and the server's
 * queue of records the agent has not acknowledged yet (usage_queue.c). Included by backend.h
 * (after cuda.h and the wire headers), never on its own. */
#ifndef SLUICE_BE_ACCOUNTING_H
#define SLUICE_BE_ACCOUNTING_H

#ifndef SLUICE_BACKEND_H
#error "include backend.h"
#endif

#include "sluice_control.pb-c.h"

#define BE_USAGE_INTERVAL_S     10           /* default --usage-interval */
#define BE_USAGE_RESEND_S       30           /* default --usage-resend: unacknowledged records */
#define BE_USAGE_QUEUE_MAX      4096         /* unacknowledged records kept; the oldest go first */
#define BE_SHARE_WINDOW_NS      1000000000LL /* the GPU share's sliding window (bucket depth) */
#define BE_ACCT_MAX_PAIRS       1024         /* timed runs waiting to be measured, per session */
#define BE_ACCT_MAX_RUNS        64           /* streams with an open run, per session */
#define BE_ACCT_FRAMES_OPEN_MAX 64           /* frames back to back that leave the runs open */
#define BE_ACCT_CAPPED_PAIRS    8            /* runs of a capped session in flight, unmeasured */
#define BE_ACCT_MAX_INST        1024         /* instances in the tenant's accounting page */
#define BE_ACCT_MAX_SLOTS       4096     /* session workers in it (= the --max-sessions bound) */
#define BE_ACCT_MEASUREMENT     "events" /* UsageRecord.measurement */

/* ---------------------------------------------------------------- intervals.c */
struct be_iv {
    int64_t a, b; /* [a, b), nanoseconds */
};
/* Clips v[0..n) to [lo, hi), sorts and merges overlapping or touching intervals in place;
 * returns how many are left and their total length in *total. */
size_t be_iv_union(struct be_iv *v, size_t n, int64_t lo, int64_t hi, uint64_t *total);
/* The same union, incrementally: v[0..merged) is already a union (sorted, disjoint, of length
 * *total) and v[merged..n) came since. Costs what the new intervals cost while they come in
 * order, as timed runs mostly do; returns the new count and updates *total. */
size_t be_iv_union_more(struct be_iv *v, size_t merged, size_t n, uint64_t *total);

/* ---------------------------------------------------------------- share.c: token bucket */
/* Tokens are nanoseconds of device time; they accrue at share x wall time up to share x the
 * window, measured busy time consumes them (the balance may go negative: a debt). */
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

/* ---------------------------------------------------------------- quota.c: the shared page */
/* What the agent's Grant says for an instance (Grant.sla). */
struct be_sla {
    char flavor[256];
    double share;          /* (0, 1]; 1 = uncapped */
    uint64_t quota;        /* device memory bytes per instance; 0 = none */
    uint32_t max_sessions; /* per instance; 0 = unlimited */
};

struct be_acct_inst {
    char uuid[64]; /* "" = free entry */
    struct be_sla sla;
    struct be_bucket bucket; /* the instance's GPU share, under mu */
    int bucket_set;
};

struct be_acct_slot {
    uint32_t inst; /* instance entry + 1; 0 = free slot */
    int32_t pid;
    _Atomic uint64_t bytes; /* device memory the worker holds (and reserves) */
};

/* One memfd per backend (tenant), made by the server before it starts workers and inherited by
 * them (like the socketpair): one slot per session worker, one entry per instance. The server
 * writes instance entries and takes/frees slots; workers write their slot's bytes and their
 * instance's bucket. Admission (quota check + reservation) and the buckets are under mu, a
 * process-shared robust mutex (a worker that dies holding it does not block the others). */
struct be_acct_shm {
    uint32_t magic, version;
    pthread_mutex_t mu;
    struct be_acct_inst inst[BE_ACCT_MAX_INST];
    struct be_acct_slot slot[BE_ACCT_MAX_SLOTS];
};

sl_code be_acct_shm_create(struct be_acct_shm **out, int *fd, sl_error *e);
sl_code be_acct_shm_attach(int fd, struct be_acct_shm **out, sl_error *e);
void be_acct_shm_unmap(struct be_acct_shm *m);
void be_acct_lock(struct be_acct_shm *m);
void be_acct_unlock(struct be_acct_shm *m);
/* Server: the entry of instance uuid (made, or updated to sla); -1 when the page is full. */
int be_acct_inst_set(struct be_acct_shm *m, const char *uuid, const struct be_sla *sla);
/* Server: a slot for a new worker of instance entry inst; -1 when none is free. */
int be_acct_slot_take(struct be_acct_shm *m, int inst);
void be_acct_slot_set_pid(struct be_acct_shm *m, int slot, int pid);
/* Server: the worker is gone: its memory is free again. */
void be_acct_slot_release(struct be_acct_shm *m, int slot);
/* Device memory held by every worker of instance entry inst (under mu). */
uint64_t be_acct_inst_bytes(struct be_acct_shm *m, int inst);

/* Quota arithmetic: 1 if want more bytes fit (quota 0 = none). */
int be_quota_fits(uint64_t quota, uint64_t used, uint64_t want);
/* cuMemGetInfo under a quota: total = quota, free = min(device free, quota - used). */
void be_quota_meminfo(uint64_t quota, uint64_t used, uint64_t *free_, uint64_t *total);

/* ---------------------------------------------------------------- accounting.c (worker) */
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
sl_code be_acct_attach(sl_be_session *s, const struct be_acct_cfg *cfg, sl_error *e);
/* The final record (after measuring everything still pending), then frees the state. Called by
 * the session's worker thread before it frees the session's contexts. */
void be_acct_finish(sl_be_session *s);
/* The per-call hooks (session.c, be_run_call): work calls open or continue a timed run on their
 * stream, every other call closes the open runs first; _end counts kernels and bytes. */
void be_acct_call_begin(sl_be_session *s, const Sluice__Wire__Call *call);
void be_acct_call_end(sl_be_session *s, const Sluice__Wire__Call *call, CUresult rc);
/* Around each frame (a job): the GPU-share admission (holds the frame back while the bucket is
 * in debt) and, after it, closing the runs and measuring what has finished; more: another
 * frame is queued already (then the runs stay open, up to BE_ACCT_FRAMES_OPEN_MAX frames). */
void be_acct_frame_begin(sl_be_session *s);
void be_acct_frame_end(sl_be_session *s, int more);
/* A context is about to be destroyed: measure its runs, drop its events. */
void be_acct_ctx_gone(sl_be_session *s, CUcontext ctx);
/* Milliseconds until the next record is due (the worker thread waits at most that), and the
 * record itself when it is. */
int64_t be_acct_ms_to_tick(sl_be_session *s);
void be_acct_tick(sl_be_session *s);
/* The quota hooks (quota.c): a new allocation of want bytes (0 on success; else fills why and
 * counts a refusal), the session's memory after a call, cuMemGetInfo's figures. */
int be_acct_mem_admit(sl_be_session *s, uint64_t want, char *why, size_t n);
/* The bytes a CUDA array of these dimensions counts for (quota.c; UINT64_MAX on overflow). */
void be_acct_mem_publish(sl_be_session *s);
void be_acct_meminfo(sl_be_session *s, uint64_t *free_, uint64_t *total);
/* Device memory the guest is told it has (SessionAccept: min(device, quota)). */
uint64_t be_acct_total_mem(const sl_be_session *s, uint64_t device_total);
/* The quota layer (quota.c) around a call the table marks quota=: before the handler admits
 * what an allocation asks (*asked: its bytes), after it publishes what the session holds,
 * takes back a padded allocation over the quota, holds or releases an array's bytes, or
 * answers cuMemGetInfo within the quota. Both return the call's result. */
CUresult be_quota_before(struct sl_be_call *c, const struct sl_call_info *ci, uint64_t *asked);
CUresult be_quota_after(struct sl_be_call *c, const struct sl_call_info *ci, uint64_t asked,
                        CUresult rc);

/* ---------------------------------------------------------------- usage.c */
/* The figures of one record, as accounting.c gathers them. */
struct be_usage {
    const char *instance, *project, *flavor, *gpu_uuid, *measurement;
    uint64_t session_id;
    int64_t start_ns, end_ns; /* CLOCK_REALTIME */
    uint64_t busy_ns, kernel_ns, kernels, bytes_htod, bytes_dtoh, memory_high_water, calls, errors,
        throttled_ns;
    uint32_t quota_refusals;
    double gpu_share; /* the SLA's share, 0 = unknown */
    int final;
};
/* A fresh record id (UUID version 4, lower case) into out[37]. */
sl_code be_usage_uuid(char out[37], sl_error *e);
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" as nvidia-smi prints a device UUID; out[41]. */
void be_usage_gpu_uuid(const uint8_t uuid[16], char out[41]);
/* An encoded UsageRecord with a fresh record id (malloc'd). */
sl_code be_usage_encode(const struct be_usage *u, uint8_t **buf, size_t *len, sl_error *e);
/* One log line for a record (the backend without --control logs its records at info). */
void be_usage_log(const Sluice__Control__UsageRecord *r);

/* ---------------------------------------------------------------- usage_queue.c (server) */
struct be_uq;
struct be_uq *be_uq_new(size_t max);
void be_uq_free(struct be_uq *q);
/* Takes an encoded UsageRecord; the oldest is dropped (with an error log) past the bound.
 * -1 when rec does not decode or has no id. */
int be_uq_add(struct be_uq *q, const uint8_t *rec, size_t len);
/* Drops the acknowledged records; returns how many were found. */
size_t be_uq_ack(struct be_uq *q, char *const *ids, size_t n);
size_t be_uq_len(const struct be_uq *q);
/* Calls send for each record never sent, sent resend_ms ago or more, or (all) every one; stops
 * at the first send that fails (returns nonzero: the socket is full), which goes again after
 * resend_ms. */
void be_uq_due(struct be_uq *q, int64_t now_ms, int64_t resend_ms, int all,
               int (*send)(void *user, const Sluice__Control__UsageRecord *r), void *user);

#endif
