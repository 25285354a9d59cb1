/* The agent's usage store on sluice_db (SQLite): prepared statements with bound parameters
 * only, every change in one transaction. Unsigned counters are stored as INTEGER (checked below
 * 2^50 on the way in; session ids as their two's complement). */
#include "usage_store.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/db_schema.h"
#include "usage_store_internal.h"

#define OPEN_SESSIONS                                                                              \
    "CREATE TABLE open_sessions ("                                                                 \
    " project TEXT NOT NULL,"                                                                      \
    " session_id INTEGER NOT NULL,"                                                                \
    " instance TEXT NOT NULL,"                                                                     \
    " flavor TEXT NOT NULL,"                                                                       \
    " gpu_uuid TEXT NOT NULL,"                                                                     \
    " opened_ns INTEGER NOT NULL,"                                                                 \
    " last_end_ns INTEGER NOT NULL,"                                                               \
    " PRIMARY KEY (project, session_id))"

/* Version 3's additions: each record's busy intervals (written with the record, so they are
 * durable when it is acknowledged), the shared GPU time apportioned to it so far, and how far
 * each GPU's time is apportioned (usage_store_shared.c). */
#define SHARED_V3                                                                                  \
    "ALTER TABLE records ADD COLUMN gpu_shared_ns INTEGER NOT NULL DEFAULT 0",                     \
        "ALTER TABLE totals ADD COLUMN gpu_shared_ns INTEGER NOT NULL DEFAULT 0",                  \
        "CREATE TABLE busy ("                                                                      \
        " record_id TEXT NOT NULL,"                                                                \
        " gpu_uuid TEXT NOT NULL,"                                                                 \
        " start_ns INTEGER NOT NULL,"                                                              \
        " end_ns INTEGER NOT NULL)",                                                               \
        "CREATE INDEX busy_gpu_end ON busy(gpu_uuid, end_ns)",                                     \
        "CREATE TABLE settled (gpu_uuid TEXT PRIMARY KEY NOT NULL, until_ns INTEGER NOT NULL)"

/* Version 3 from nothing (version 1 had neither closed_by_agent nor open_sessions, version 2
 * no shared time). */
static const char *const create_v3[] = {
    "CREATE TABLE records ("
    " record_id TEXT PRIMARY KEY NOT NULL,"
    " instance TEXT NOT NULL,"
    " project TEXT NOT NULL,"
    " flavor TEXT NOT NULL,"
    " gpu_uuid TEXT NOT NULL,"
    " session_id INTEGER NOT NULL,"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL,"
    " gpu_busy_ns INTEGER NOT NULL,"
    " kernel_ns INTEGER NOT NULL,"
    " kernels INTEGER NOT NULL,"
    " bytes_htod INTEGER NOT NULL,"
    " bytes_dtoh INTEGER NOT NULL,"
    " memory_high_water INTEGER NOT NULL,"
    " calls INTEGER NOT NULL,"
    " errors INTEGER NOT NULL,"
    " throttled_ns INTEGER NOT NULL,"
    " quota_refusals INTEGER NOT NULL,"
    " measurement TEXT NOT NULL,"
    " final INTEGER NOT NULL,"
    " instance_name TEXT NOT NULL,"
    " domain TEXT NOT NULL,"
    " sla_tier TEXT NOT NULL,"
    " gpu_share REAL NOT NULL,"
    " received INTEGER NOT NULL,"
    " forwarded INTEGER NOT NULL DEFAULT 0,"
    " closed_by_agent INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX records_end ON records(end_ns)",
    "CREATE INDEX records_pending ON records(received) WHERE forwarded = 0",
    "CREATE TABLE lifetimes ("
    " instance TEXT NOT NULL,"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL,"
    " open INTEGER NOT NULL,"
    " project TEXT NOT NULL,"
    " name TEXT NOT NULL,"
    " domain TEXT NOT NULL,"
    " flavor TEXT NOT NULL,"
    " sla_tier TEXT NOT NULL,"
    " gpu_share REAL NOT NULL,"
    " PRIMARY KEY (instance, start_ns))",
    "CREATE INDEX lifetimes_open ON lifetimes(open)",
    /* running sums per metrics series, kept in the records' transaction: the agent's metrics
     * start from them instead of reading every record */
    "CREATE TABLE totals ("
    " project TEXT NOT NULL,"
    " instance TEXT NOT NULL,"
    " domain TEXT NOT NULL,"
    " gpu_uuid TEXT NOT NULL,"
    " gpu_busy_ns INTEGER NOT NULL,"
    " kernel_ns INTEGER NOT NULL,"
    " kernels INTEGER NOT NULL,"
    " bytes_htod INTEGER NOT NULL,"
    " bytes_dtoh INTEGER NOT NULL,"
    " memory_high_water INTEGER NOT NULL,"
    " throttled_ns INTEGER NOT NULL,"
    " quota_refusals INTEGER NOT NULL,"
    " records INTEGER NOT NULL,"
    " PRIMARY KEY (project, instance, domain, gpu_uuid))",
    OPEN_SESSIONS,
    SHARED_V3,
    NULL,
};

/* Version 1 to 2: records the agent wrote to close a session whose backend ended without its
 * final record, and the sessions open now (usage_store_sessions.c). */
static const char *const upgrade_v1[] = {
    "ALTER TABLE records ADD COLUMN closed_by_agent INTEGER NOT NULL DEFAULT 0",
    OPEN_SESSIONS,
    NULL,
};

/* Version 2 to 3: shared GPU time. */
static const char *const upgrade_v2[] = {
    SHARED_V3,
    NULL,
};

static const char *const *const upgrades[] = {upgrade_v1, upgrade_v2};

static const sl_db_schema schema = {
    "usage",
    AG_USAGE_STORE_SCHEMA,
    create_v3,
    upgrades,
    1,
    0,
    "start sluice-agent once to create it (is this an agent usage database?)",
};

sl_code ag_usage_store_open(const char *path, int readonly, ag_usage_store **out, sl_error *e)
{
    if (!path || !*path)
        return sl_fail(e, SL_ERR_INVALID, WHO ": no database path");
    ag_usage_store *s = calloc(1, sizeof *s);
    if (!s)
        return sl_fail(e, SL_ERR_NOMEM, WHO ": out of memory");
    pthread_mutex_init(&s->mu, NULL);
    sl_code rc = sl_db_open(path, readonly ? SL_DB_READONLY : 0, WHO, &s->db, e);
    if (rc == SL_OK)
        rc = readonly ? sl_db_schema_check(s->db, &schema, e)
                      : sl_db_schema_sync(s->db, &schema, NULL, e);
    if (rc != SL_OK) {
        ag_usage_store_close(s);
        return rc;
    }
    *out = s;
    return SL_OK;
}

void ag_usage_store_close(ag_usage_store *s)
{
    if (!s)
        return;
    sl_db_close(s->db);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

sl_code ag_usage_store_txn(ag_usage_store *s, int flags, sl_db_txn_fn fn, void *ud, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    sl_code rc = sl_db_transaction(s->db, flags, fn, ud, e);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void ag_usage_store_bind_text(sl_db_stmt *st, int i, const char *v)
{
    sl_db_bind_text(st, i, v ? v : "");
}

/* ------------------------------------------------------------------------------ records */

#define RECORD_COLS                                                                                \
    "record_id, instance, project, flavor, gpu_uuid, session_id, start_ns, end_ns, gpu_busy_ns, "  \
    "kernel_ns, kernels, bytes_htod, bytes_dtoh, memory_high_water, calls, errors, throttled_ns, " \
    "quota_refusals, measurement, final, instance_name, domain, sla_tier, gpu_share, "             \
    "closed_by_agent, gpu_shared_ns"

static void bind_record(sl_db_stmt *st, const Sluice__Control__UsageRecord *r, int64_t now_s)
{
    ag_usage_store_bind_text(st, 1, r->record_id);
    ag_usage_store_bind_text(st, 2, r->instance_uuid);
    ag_usage_store_bind_text(st, 3, r->project_id);
    ag_usage_store_bind_text(st, 4, r->flavor);
    ag_usage_store_bind_text(st, 5, r->gpu_uuid);
    sl_db_bind_i64(st, 6, (int64_t)r->session_id);
    sl_db_bind_i64(st, 7, r->interval_start_ns);
    sl_db_bind_i64(st, 8, r->interval_end_ns);
    const uint64_t v[] = {r->gpu_busy_ns,  r->kernel_ns,
                          r->kernels,      r->bytes_htod,
                          r->bytes_dtoh,   r->memory_high_water,
                          r->calls,        r->errors,
                          r->throttled_ns, (uint64_t)r->quota_refusals};
    for (int i = 0; i < 10; i++)
        sl_db_bind_i64(st, 9 + i, (int64_t)v[i]);
    ag_usage_store_bind_text(st, 19, r->measurement);
    sl_db_bind_i64(st, 20, r->final ? 1 : 0);
    ag_usage_store_bind_text(st, 21, r->instance_name);
    ag_usage_store_bind_text(st, 22, r->domain_name);
    ag_usage_store_bind_text(st, 23, r->sla_tier);
    sl_db_bind_double(st, 24, r->gpu_share);
    sl_db_bind_i64(st, 25, r->closed_by_agent ? 1 : 0);
    sl_db_bind_i64(st, 26, 0); /* gpu_shared_ns: apportioned later (usage_store_shared.c) */
    sl_db_bind_i64(st, 27, now_s);
}

/* Adds a new record to its series' running sums. */
static void bind_total(sl_db_stmt *st, const Sluice__Control__UsageRecord *r)
{
    ag_usage_store_bind_text(st, 1, r->project_id);
    ag_usage_store_bind_text(st, 2, r->instance_uuid);
    ag_usage_store_bind_text(st, 3, r->domain_name);
    ag_usage_store_bind_text(st, 4, r->gpu_uuid);
    const uint64_t v[] = {
        r->gpu_busy_ns, r->kernel_ns,         r->kernels,      r->bytes_htod,
        r->bytes_dtoh,  r->memory_high_water, r->throttled_ns, (uint64_t)r->quota_refusals};
    for (int i = 0; i < 8; i++)
        sl_db_bind_i64(st, 5 + i, (int64_t)v[i]);
}

typedef struct put_args {
    const Sluice__Control__UsageRecord *const *recs;
    size_t n;
    int64_t now_s;
    unsigned char *is_new;
} put_args;

static sl_code put_txn(sl_db *db, void *ud, sl_error *e)
{
    put_args *a = ud;
    sl_db_stmt *st = NULL, *tot = NULL;
    if (a->is_new)
        memset(a->is_new, 0, a->n);
    sl_code rc = sl_db_prepare(db,
                               "INSERT OR IGNORE INTO records(" RECORD_COLS ", received) VALUES "
                               "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
                               "?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27)",
                               &st, e);
    if (rc == SL_OK)
        rc = sl_db_prepare(
            db,
            "INSERT INTO totals VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 1, 0) "
            "ON CONFLICT(project, instance, domain, gpu_uuid) DO UPDATE SET gpu_busy_ns = "
            "gpu_busy_ns + ?5, kernel_ns = kernel_ns + ?6, kernels = kernels + ?7, bytes_htod = "
            "bytes_htod + ?8, bytes_dtoh = bytes_dtoh + ?9, memory_high_water = "
            "max(memory_high_water, ?10), throttled_ns = throttled_ns + ?11, quota_refusals = "
            "quota_refusals + ?12, records = records + 1",
            &tot, e);
    for (size_t i = 0; rc == SL_OK && i < a->n; i++) {
        sl_db_reset(st);
        bind_record(st, a->recs[i], a->now_s);
        rc = sl_db_run(st, "storing a usage record", e);
        int added = rc == SL_OK && sl_db_changes(st) > 0;
        if (added) {
            sl_db_reset(tot);
            bind_total(tot, a->recs[i]);
            rc = sl_db_run(tot, "adding to the usage totals", e);
            if (rc == SL_OK)
                rc = ag_usage_store_session_record(db, a->recs[i], e);
            if (rc == SL_OK)
                rc = ag_usage_store_busy_put(db, a->recs[i], e);
        }
        if (a->is_new)
            a->is_new[i] = (unsigned char)added;
    }
    sl_db_finalize(st);
    sl_db_finalize(tot);
    return rc;
}

sl_code ag_usage_store_put(ag_usage_store *s, const Sluice__Control__UsageRecord *const *recs,
                           size_t n, int64_t now_s, unsigned char *is_new, sl_error *e)
{
    if (!n)
        return SL_OK;
    put_args a = {recs, n, now_s, is_new};
    sl_code rc = ag_usage_store_txn(s, SL_DB_TXN_WRITE, put_txn, &a, e); /* durable on return */
    if (rc != SL_OK && is_new)
        memset(is_new, 0, n);
    return rc;
}

static void row_of(sl_db_stmt *st, sl_usage_rec *r)
{
    memset(r, 0, sizeof *r);
    r->record_id = sl_db_col_text(st, 0);
    r->instance = sl_db_col_text(st, 1);
    r->project = sl_db_col_text(st, 2);
    r->flavor = sl_db_col_text(st, 3);
    r->gpu_uuid = sl_db_col_text(st, 4);
    r->start_ns = sl_db_col_i64(st, 6);
    r->end_ns = sl_db_col_i64(st, 7);
    uint64_t *v[] = {&r->gpu_busy_ns,  &r->kernel_ns,         &r->kernels, &r->bytes_htod,
                     &r->bytes_dtoh,   &r->memory_high_water, &r->calls,   &r->errors,
                     &r->throttled_ns, &r->quota_refusals};
    for (int i = 0; i < 10; i++)
        *v[i] = sl_db_col_u64(st, 8 + i);
    r->name = sl_db_col_text(st, 20);
    r->domain = sl_db_col_text(st, 21);
    r->tier = sl_db_col_text(st, 22);
    r->gpu_share = sl_db_col_double(st, 23);
    r->closed_by_agent = sl_db_col_i64(st, 24) != 0;
    r->gpu_shared_ns = sl_db_col_u64(st, 25);
}

typedef struct walk {
    const char *sql, *what;
    const ag_usage_period *period;
    sl_db_row_fn row;
    void *ud;
} walk;

static sl_code walk_txn(sl_db *db, void *ud, sl_error *e)
{
    walk *w = ud;
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db, w->sql, &st, e);
    if (rc != SL_OK)
        return rc;
    if (w->period) {
        sl_db_bind_i64(st, 1, w->period->from_ns);
        sl_db_bind_i64(st, 2, w->period->to_ns);
        sl_db_bind_text(st, 3, w->period->project);
    }
    rc = sl_db_each(st, w->what, w->row, w->ud, e);
    sl_db_finalize(st);
    return rc;
}

sl_code ag_usage_store_walk(ag_usage_store *s, const char *sql, const char *what,
                            const ag_usage_period *p, sl_db_row_fn row, void *ud, sl_error *e)
{
    walk w = {sql, what, p, row, ud};
    return ag_usage_store_txn(s, SL_DB_TXN_ONCE, walk_txn, &w, e);
}

typedef struct rec_cb {
    ag_usage_rec_cb cb;
    void *ud;
} rec_cb;

static int on_record(sl_db_stmt *st, void *ud)
{
    rec_cb *c = ud;
    sl_usage_rec row;
    row_of(st, &row);
    return c->cb(&row, c->ud);
}

sl_code ag_usage_store_records(ag_usage_store *s, int64_t from_ns, int64_t to_ns,
                               const char *project, ag_usage_rec_cb cb, void *ud, sl_error *e)
{
    rec_cb c = {cb, ud};
    ag_usage_period p = {from_ns, to_ns, project};
    return ag_usage_store_walk(s,
                               "SELECT " RECORD_COLS " FROM records WHERE end_ns >= ?1 AND "
                               "start_ns < ?2 AND (?3 IS NULL OR project = ?3) "
                               "ORDER BY end_ns, record_id",
                               "reading usage records", &p, on_record, &c, e);
}

typedef struct total_cb {
    ag_usage_total_cb cb;
    void *ud;
} total_cb;

static int on_total(sl_db_stmt *st, void *ud)
{
    total_cb *c = ud;
    sl_usage_rec t = {0};
    t.project = sl_db_col_text(st, 0);
    t.instance = sl_db_col_text(st, 1);
    t.domain = sl_db_col_text(st, 2);
    t.gpu_uuid = sl_db_col_text(st, 3);
    uint64_t *v[] = {&t.gpu_busy_ns, &t.kernel_ns,         &t.kernels,      &t.bytes_htod,
                     &t.bytes_dtoh,  &t.memory_high_water, &t.throttled_ns, &t.quota_refusals};
    for (int i = 0; i < 8; i++)
        *v[i] = sl_db_col_u64(st, 4 + i);
    t.gpu_shared_ns = sl_db_col_u64(st, 13);
    return c->cb(&t, sl_db_col_u64(st, 12), c->ud);
}

sl_code ag_usage_store_totals(ag_usage_store *s, ag_usage_total_cb cb, void *ud, sl_error *e)
{
    total_cb c = {cb, ud};
    return ag_usage_store_walk(s,
                               "SELECT project, instance, domain, gpu_uuid, gpu_busy_ns, "
                               "kernel_ns, kernels, bytes_htod, bytes_dtoh, memory_high_water, "
                               "throttled_ns, quota_refusals, records, gpu_shared_ns FROM totals "
                               "ORDER BY 1, 2, 3, 4",
                               "reading the usage totals", NULL, on_total, &c, e);
}

/* ------------------------------------------------------------------------------ forwarding */

static char *sdup(const char *s, int *oom)
{
    char *d = strdup(s ? s : "");
    *oom |= !d;
    return d;
}

static void free_rec(Sluice__Control__UsageRecord *r)
{
    if (!r)
        return;
    char *strs[] = {r->record_id,   r->instance_uuid, r->project_id,  r->flavor,  r->gpu_uuid,
                    r->measurement, r->instance_name, r->domain_name, r->sla_tier};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
        if (strs[i] != protobuf_c_empty_string)
            free(strs[i]);
    free(r);
}

static Sluice__Control__UsageRecord *rec_of(sl_db_stmt *st)
{
    Sluice__Control__UsageRecord *r = malloc(sizeof *r);
    if (!r)
        return NULL;
    sluice__control__usage_record__init(r);
    int oom = 0;
    r->record_id = sdup(sl_db_col_text(st, 0), &oom);
    r->instance_uuid = sdup(sl_db_col_text(st, 1), &oom);
    r->project_id = sdup(sl_db_col_text(st, 2), &oom);
    r->flavor = sdup(sl_db_col_text(st, 3), &oom);
    r->gpu_uuid = sdup(sl_db_col_text(st, 4), &oom);
    r->session_id = sl_db_col_u64(st, 5);
    r->interval_start_ns = sl_db_col_i64(st, 6);
    r->interval_end_ns = sl_db_col_i64(st, 7);
    r->gpu_busy_ns = sl_db_col_u64(st, 8);
    r->kernel_ns = sl_db_col_u64(st, 9);
    r->kernels = sl_db_col_u64(st, 10);
    r->bytes_htod = sl_db_col_u64(st, 11);
    r->bytes_dtoh = sl_db_col_u64(st, 12);
    r->memory_high_water = sl_db_col_u64(st, 13);
    r->calls = sl_db_col_u64(st, 14);
    r->errors = sl_db_col_u64(st, 15);
    r->throttled_ns = sl_db_col_u64(st, 16);
    r->quota_refusals = (uint32_t)sl_db_col_u64(st, 17);
    r->measurement = sdup(sl_db_col_text(st, 18), &oom);
    r->final = sl_db_col_i64(st, 19) != 0;
    r->instance_name = sdup(sl_db_col_text(st, 20), &oom);
    r->domain_name = sdup(sl_db_col_text(st, 21), &oom);
    r->sla_tier = sdup(sl_db_col_text(st, 22), &oom);
    r->gpu_share = sl_db_col_double(st, 23);
    r->closed_by_agent = sl_db_col_i64(st, 24) != 0;
    if (oom) {
        free_rec(r);
        return NULL;
    }
    return r;
}

void ag_usage_batch_free(ag_usage_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        free_rec(b->recs[i]);
    free(b->recs);
    b->recs = NULL;
    b->n = 0;
}

typedef struct batch_args {
    ag_usage_batch *b;
    size_t max;
    int oom;
} batch_args;

static int on_unforwarded(sl_db_stmt *st, void *ud)
{
    batch_args *a = ud;
    if (a->b->n >= a->max)
        return 1;
    if (!(a->b->recs[a->b->n] = rec_of(st))) {
        a->oom = 1;
        return 1;
    }
    a->b->n++;
    return 0;
}

static sl_code unforwarded_txn(sl_db *db, void *ud, sl_error *e)
{
    batch_args *a = ud;
    for (size_t i = 0; i < a->b->n; i++)
        free_rec(a->b->recs[i]);
    a->b->n = 0;
    a->oom = 0;
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db,
                               "SELECT " RECORD_COLS " FROM records WHERE forwarded = 0 "
                               "ORDER BY received, rowid LIMIT ?1",
                               &st, e);
    if (rc != SL_OK)
        return rc;
    sl_db_bind_i64(st, 1, (int64_t)a->max);
    rc = sl_db_each(st, "reading records to forward", on_unforwarded, a, e);
    sl_db_finalize(st);
    if (rc == SL_OK && a->oom)
        rc = sl_fail(e, SL_ERR_NOMEM, WHO ": out of memory");
    return rc;
}

sl_code ag_usage_store_unforwarded(ag_usage_store *s, size_t max, ag_usage_batch *b, sl_error *e)
{
    b->recs = NULL;
    b->n = 0;
    if (!max)
        return SL_OK;
    if (!(b->recs = calloc(max, sizeof *b->recs)))
        return sl_fail(e, SL_ERR_NOMEM, WHO ": out of memory");
    batch_args a = {b, max, 0};
    sl_code rc = ag_usage_store_txn(s, 0, unforwarded_txn, &a, e);
    if (rc != SL_OK)
        ag_usage_batch_free(b);
    return rc;
}

typedef struct mark_args {
    char *const *ids;
    size_t n;
    int64_t now_s;
    size_t count;
} mark_args;

static sl_code mark_txn(sl_db *db, void *ud, sl_error *e)
{
    mark_args *a = ud;
    a->count = 0;
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(
        db, "UPDATE records SET forwarded = ?2 WHERE record_id = ?1 AND forwarded = 0", &st, e);
    for (size_t i = 0; rc == SL_OK && i < a->n; i++) {
        sl_db_reset(st);
        ag_usage_store_bind_text(st, 1, a->ids[i]);
        sl_db_bind_i64(st, 2, a->now_s > 0 ? a->now_s : 1);
        if ((rc = sl_db_run(st, "marking records forwarded", e)) == SL_OK)
            a->count += (size_t)sl_db_changes(st);
    }
    sl_db_finalize(st);
    return rc;
}

sl_code ag_usage_store_mark_forwarded(ag_usage_store *s, char *const *ids, size_t n, int64_t now_s,
                                      size_t *marked, sl_error *e)
{
    mark_args a = {ids, n, now_s, 0};
    sl_code rc = ag_usage_store_txn(s, SL_DB_TXN_WRITE, mark_txn, &a, e);
    if (marked)
        *marked = rc == SL_OK ? a.count : 0;
    return rc;
}

typedef struct count_args {
    const char *sql;
    uint64_t n;
} count_args;

static sl_code count_txn(sl_db *db, void *ud, sl_error *e)
{
    count_args *a = ud;
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db, a->sql, &st, e);
    int row = 0;
    if (rc == SL_OK && (rc = sl_db_step(st, "counting records", &row, e)) == SL_OK)
        a->n = row ? sl_db_col_u64(st, 0) : 0;
    sl_db_finalize(st);
    return rc;
}

static sl_code count_where(ag_usage_store *s, const char *sql, uint64_t *n, sl_error *e)
{
    count_args a = {sql, 0};
    sl_code rc = ag_usage_store_txn(s, 0, count_txn, &a, e);
    if (rc == SL_OK)
        *n = a.n;
    return rc;
}

sl_code ag_usage_store_pending(ag_usage_store *s, uint64_t *n, sl_error *e)
{
    return count_where(s, "SELECT count(*) FROM records WHERE forwarded = 0", n, e);
}

sl_code ag_usage_store_count(ag_usage_store *s, uint64_t *n, sl_error *e)
{
    return count_where(s, "SELECT count(*) FROM records", n, e);
}
