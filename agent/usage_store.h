/* The agent's usage store: SQLite (file: config key usage_db, default STATE_DIR/usage.db) in
 * WAL mode with synchronous=FULL, so a committed transaction is on disk (fsync'd) when a call
 * returns SL_OK; the agent acknowledges records to the backend only after that.
 *   records:   one row per UsageRecord, stored once (INSERT OR IGNORE by record_id), with what
 *              the agent adds (instance name, domain, SLA tier and share) and a "forwarded"
 *              mark (the unix time the registry acknowledged it; 0 = not yet).
 *   lifetimes: spans during which an instance ran here (the SLA entitlement's wall time),
 *              kept by a heartbeat from the instance table;
 *   totals:    running sums per (project, instance, domain, gpu_uuid), updated in the same
 *              transaction as the records: the metrics' starting point;
 *   open_sessions: the sessions a backend reported opened (or sent records of) and whose final
 *              record has not come: what the agent closes when that backend ends.
 * Schema version in PRAGMA user_version (sluice/db_schema.h). Every change is one transaction
 * (sluice/db.h); thread-safe: every call takes the store's mutex. The functions are in
 * usage_store.c (records, totals, forwarding), usage_store_lifetimes.c (lifetimes, retention)
 * and usage_store_sessions.c (open sessions).
 * Reference: docs/usage.md. */
#ifndef AG_USAGE_STORE_H
#define AG_USAGE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/error.h"
#include "sluice/usage_report.h"
#include "sluice_control.pb-c.h"

#define AG_USAGE_STORE_SCHEMA 3
/* A lifetime whose last heartbeat is older than this is not extended: a new one starts. */
#define AG_USAGE_LIFE_GAP_S 300
/* An open lifetime whose instance is no longer alive ends at the closing heartbeat when its
 * last heartbeat is this recent (it was beating until now), else at its last heartbeat (left
 * open by an agent that stopped). Twice the agent's heartbeat interval. */
#define AG_USAGE_LIFE_RECENT_S 60

typedef struct ag_usage_store ag_usage_store;

/* Opens (creating and migrating unless readonly) the database at path. */
sl_code ag_usage_store_open(const char *path, int readonly, ag_usage_store **out, sl_error *e);
void ag_usage_store_close(ag_usage_store *s);

/* Stores the records in one transaction; is_new[i] (may be NULL) = 1 when record i was not
 * stored before (a record given twice in recs is new once). SL_OK: all of them are durable. */
sl_code ag_usage_store_put(ag_usage_store *s, const Sluice__Control__UsageRecord *const *recs,
                           size_t n, int64_t now_s, unsigned char *is_new, sl_error *e);

/* Rows are valid during the callback only; a non-zero return stops the walk. */
typedef int (*ag_usage_rec_cb)(const sl_usage_rec *r, void *ud);
typedef int (*ag_usage_life_cb)(const sl_usage_life *l, void *ud);

/* Records whose interval touches [from_ns, to_ns) (start < to and end >= from); project NULL:
 * every project. Ordered by end. */
sl_code ag_usage_store_records(ag_usage_store *s, int64_t from_ns, int64_t to_ns,
                               const char *project, ag_usage_rec_cb cb, void *ud, sl_error *e);
/* The running sums per series: *sum holds the sums (memory_high_water: the largest), records
 * their count. */
typedef int (*ag_usage_total_cb)(const sl_usage_rec *sum, uint64_t records, void *ud);
sl_code ag_usage_store_totals(ag_usage_store *s, ag_usage_total_cb cb, void *ud, sl_error *e);

/* Lifetimes touching [from_ns, to_ns). */
sl_code ag_usage_store_lives(ag_usage_store *s, int64_t from_ns, int64_t to_ns, const char *project,
                             ag_usage_life_cb cb, void *ud, sl_error *e);

/* ---- forwarding to the registry */
typedef struct ag_usage_batch {
    Sluice__Control__UsageRecord **recs;
    size_t n;
} ag_usage_batch;

/* Up to max records not forwarded yet, oldest first (free with ag_usage_batch_free). */
sl_code ag_usage_store_unforwarded(ag_usage_store *s, size_t max, ag_usage_batch *b, sl_error *e);
void ag_usage_batch_free(ag_usage_batch *b);
/* Marks these records forwarded (now_s); *marked counts rows changed (may be NULL). */
sl_code ag_usage_store_mark_forwarded(ag_usage_store *s, char *const *ids, size_t n, int64_t now_s,
                                      size_t *marked, sl_error *e);
/* Records not forwarded yet; all records. */
sl_code ag_usage_store_pending(ag_usage_store *s, uint64_t *n, sl_error *e);
sl_code ag_usage_store_count(ag_usage_store *s, uint64_t *n, sl_error *e);

/* ---- lifetimes */
typedef struct ag_usage_alive {
    const char *instance, *project, *name, *domain, *flavor, *tier;
    double gpu_share;
} ag_usage_alive;

/* One transaction: each alive instance's latest lifetime is extended to now_ns (or a new one
 * starts when there is none ending within AG_USAGE_LIFE_GAP_S); every other open lifetime is
 * closed: at now_ns when its last heartbeat is within AG_USAGE_LIFE_RECENT_S, else there. */
sl_code ag_usage_store_heartbeat(ag_usage_store *s, const ag_usage_alive *a, size_t n,
                                 int64_t now_ns, sl_error *e);

/* ---- open sessions (the agent closes them when their backend ends: docs/usage.md) */
typedef struct ag_usage_open {
    const char *project, *instance, *flavor, *gpu_uuid;
    uint64_t session_id;
    int64_t opened_ns, last_end_ns; /* last_end_ns: the end of its latest record, 0 if none */
} ag_usage_open;
/* A backend reported the session opened (kept as it is when already known). */
sl_code ag_usage_store_session_opened(ag_usage_store *s, const char *project, uint64_t session_id,
                                      const char *instance, int64_t now_ns, sl_error *e);
/* The open sessions (project NULL: all), ordered by project and session; rows are valid during
 * the callback only. */
typedef int (*ag_usage_open_cb)(const ag_usage_open *o, void *ud);
sl_code ag_usage_store_open_sessions(ag_usage_store *s, const char *project, ag_usage_open_cb cb,
                                     void *ud, sl_error *e);

/* What the latest lifetime says about an instance (for records of instances that are gone). */
typedef struct ag_usage_info {
    char name[256], domain[256], flavor[256], tier[33];
    double gpu_share;
} ag_usage_info;
sl_code ag_usage_store_info(ag_usage_store *s, const char *instance, ag_usage_info *out, int *found,
                            sl_error *e);

/* ---- shared GPU time (docs/accounting.md, "Shared GPU time"; usage_store_shared.c) */
typedef struct ag_usage_settle_opts {
    int64_t window_ns;    /* apportioned window by window, aligned to multiples of this */
    int64_t grace_ns;     /* a window is settled this long after its end at the earliest, */
    int64_t max_delay_ns; /* and once every open session reported past its end or this long
                           * after its end, whichever comes first */
    size_t max_windows;   /* at most this many windows per call (one transaction) */
} ag_usage_settle_opts;
typedef struct ag_usage_settled {
    uint64_t windows; /* windows apportioned by this call */
    uint64_t busy_ns; /* the GPUs' busy time in them (the shares added sum to it) */
} ag_usage_settled;
/* One transaction: apportions every GPU's settled windows past its mark among the records
 * whose busy intervals fall in them, adding each record's share to records.gpu_shared_ns and
 * its series' totals, and moves the marks. Intervals of a window already settled when they
 * arrive are not shared (their records keep their raw figures). */
sl_code ag_usage_store_settle(ag_usage_store *s, const ag_usage_settle_opts *o, int64_t now_ns,
                              ag_usage_settled *out, sl_error *e);

/* ---- retention (usage_retention_days, docs/usage.md) */
typedef struct ag_usage_pruned {
    uint64_t records, lifetimes;
} ag_usage_pruned;
/* One transaction: deletes the records whose interval ended before before_ns and the closed
 * lifetimes that ended before it. keep_unforwarded: records the registry has not acknowledged
 * yet stay whatever their age (they are still owed to it). The running totals and the open
 * sessions stay: the metrics' counters never go down. */
sl_code ag_usage_store_prune(ag_usage_store *s, int64_t before_ns, int keep_unforwarded,
                             ag_usage_pruned *out, sl_error *e);

#endif
