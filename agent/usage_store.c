/* The agent's usage store on SQLite: WAL, synchronous=FULL, prepared statements with bound
 * parameters only. Unsigned counters are stored as INTEGER (checked below 2^50 on the way in;
 * session ids as their two's complement). */
#include "usage_store.h"

#include <stdlib.h>
#include <string.h>

#include "usage_store_internal.h"

static const char *const schema_v1[] = {
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
    " forwarded INTEGER NOT NULL DEFAULT 0)",
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
    "PRAGMA user_version = 1",
    NULL,
};

/* Version 2: records the agent wrote to close a session whose backend ended without its final
 * record, and the sessions open now (usage_store_sessions.c). */
static const char *const schema_v2[] = {
    "ALTER TABLE records ADD COLUMN closed_by_agent INTEGER NOT NULL DEFAULT 0",
    "CREATE TABLE open_sessions ("
    " project TEXT NOT NULL,"
    " session_id INTEGER NOT NULL,"
    " instance TEXT NOT NULL,"
    " flavor TEXT NOT NULL,"
    " gpu_uuid TEXT NOT NULL,"
    " opened_ns INTEGER NOT NULL,"
    " last_end_ns INTEGER NOT NULL,"
    " PRIMARY KEY (project, session_id))",
    "PRAGMA user_version = 2",
    NULL,
};

static sl_code migrate(ag_usage_store *s, sl_error *e)
{
    int v;
    sl_code rc = sl_db_user_version(s->db, "usage store", &v, e);
    if (rc != SL_OK || v == AG_USAGE_STORE_SCHEMA)
        return rc;
    if (v > AG_USAGE_STORE_SCHEMA)
        return sl_fail(e, SL_ERR_CONFIG, "usage store: schema version %d is newer than %d", v,
                       AG_USAGE_STORE_SCHEMA);
    if (s->readonly)
        return sl_fail(e, SL_ERR_CONFIG, "usage store: no usage schema (not an agent usage db?)");
    static const char *const *const steps[] = {schema_v1, schema_v2};
    return sl_db_migrate(s->db, "usage store", v, steps, 2, e);
}

sl_code ag_usage_store_open(const char *path, int readonly, ag_usage_store **out, sl_error *e)
{
    if (!path || !*path)
        return sl_fail(e, SL_ERR_INVALID, "usage store: no database path");
    ag_usage_store *s = calloc(1, sizeof *s);
    if (!s)
        return sl_fail(e, SL_ERR_NOMEM, "usage store: out of memory");
    s->readonly = readonly;
    pthread_mutex_init(&s->mu, NULL);
    sl_code rc = sl_db_open(path, readonly, "usage store", &s->db, e);
    if (rc != SL_OK)
        goto fail;
    if ((rc = migrate(s, e)) != SL_OK) {
        char msg[SL_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", e ? e->msg : "");
        rc = sl_fail(e, rc, "%s: %s", path, msg);
        goto fail;
    }
    *out = s;
    return SL_OK;
fail:
    ag_usage_store_close(s);
    return rc;
}

void ag_usage_store_close(ag_usage_store *s)
{
    if (!s)
        return;
    sqlite3_close(s->db);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ------------------------------------------------------------------------------ records */

#define RECORD_COLS                                                                                \
    "record_id, instance, project, flavor, gpu_uuid, session_id, start_ns, end_ns, gpu_busy_ns, "  \
    "kernel_ns, kernels, bytes_htod, bytes_dtoh, memory_high_water, calls, errors, throttled_ns, " \
    "quota_refusals, measurement, final, instance_name, domain, sla_tier, gpu_share, "             \
    "closed_by_agent"

static sl_code insert(ag_usage_store *s, sqlite3_stmt *st, const Sluice__Control__UsageRecord *r,
                      int64_t now_s, int *added, sl_error *e)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    text(st, 1, r->record_id);
    text(st, 2, r->instance_uuid);
    text(st, 3, r->project_id);
    text(st, 4, r->flavor);
    text(st, 5, r->gpu_uuid);
    sqlite3_bind_int64(st, 6, (int64_t)r->session_id);
    sqlite3_bind_int64(st, 7, r->interval_start_ns);
    sqlite3_bind_int64(st, 8, r->interval_end_ns);
    const uint64_t v[] = {r->gpu_busy_ns,  r->kernel_ns,
                          r->kernels,      r->bytes_htod,
                          r->bytes_dtoh,   r->memory_high_water,
                          r->calls,        r->errors,
                          r->throttled_ns, (uint64_t)r->quota_refusals};
    for (int i = 0; i < 10; i++)
        sqlite3_bind_int64(st, 9 + i, (int64_t)v[i]);
    text(st, 19, r->measurement);
    sqlite3_bind_int(st, 20, r->final ? 1 : 0);
    text(st, 21, r->instance_name);
    text(st, 22, r->domain_name);
    text(st, 23, r->sla_tier);
    sqlite3_bind_double(st, 24, r->gpu_share);
    sqlite3_bind_int(st, 25, r->closed_by_agent ? 1 : 0);
    sqlite3_bind_int64(st, 26, now_s);
    if (sqlite3_step(st) != SQLITE_DONE)
        return db_fail(s, e, "storing a usage record");
    *added = sqlite3_changes(s->db) > 0;
    return SL_OK;
}

/* Adds a new record to its series' running sums. */
static sl_code add_total(ag_usage_store *s, sqlite3_stmt *st, const Sluice__Control__UsageRecord *r,
                         sl_error *e)
{
    sqlite3_reset(st);
    text(st, 1, r->project_id);
    text(st, 2, r->instance_uuid);
    text(st, 3, r->domain_name);
    text(st, 4, r->gpu_uuid);
    const uint64_t v[] = {
        r->gpu_busy_ns, r->kernel_ns,         r->kernels,      r->bytes_htod,
        r->bytes_dtoh,  r->memory_high_water, r->throttled_ns, (uint64_t)r->quota_refusals};
    for (int i = 0; i < 8; i++)
        sqlite3_bind_int64(st, 5 + i, (int64_t)v[i]);
    if (sqlite3_step(st) != SQLITE_DONE)
        return db_fail(s, e, "adding to the usage totals");
    return SL_OK;
}

sl_code ag_usage_store_put(ag_usage_store *s, const Sluice__Control__UsageRecord *const *recs,
                           size_t n, int64_t now_s, unsigned char *is_new, sl_error *e)
{
    if (!n)
        return SL_OK;
    pthread_mutex_lock(&s->mu);
    sqlite3_stmt *st = NULL, *tot = NULL;
    sl_code rc = prep(s,
                      "INSERT OR IGNORE INTO records(" RECORD_COLS ", received) VALUES (?1, ?2, "
                      "?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
                      "?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26)",
                      &st, e);
    if (rc == SL_OK)
        rc =
            prep(s,
                 "INSERT INTO totals VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 1) "
                 "ON CONFLICT(project, instance, domain, gpu_uuid) DO UPDATE SET gpu_busy_ns = "
                 "gpu_busy_ns + ?5, kernel_ns = "
                 "kernel_ns + ?6, kernels = kernels + ?7, bytes_htod = bytes_htod + ?8, "
                 "bytes_dtoh = bytes_dtoh + ?9, memory_high_water = max(memory_high_water, ?10), "
                 "throttled_ns = throttled_ns + ?11, quota_refusals = quota_refusals + ?12, "
                 "records = records + 1",
                 &tot, e);
    if (rc == SL_OK)
        rc = exec1(s, "BEGIN IMMEDIATE", e);
    for (size_t i = 0; rc == SL_OK && i < n; i++) {
        int added = 0;
        rc = insert(s, st, recs[i], now_s, &added, e);
        if (rc == SL_OK && added)
            rc = add_total(s, tot, recs[i], e);
        if (rc == SL_OK && added)
            rc = ag_us_session_record(s, recs[i], e);
        if (is_new)
            is_new[i] = (unsigned char)added;
    }
    sqlite3_finalize(st);
    sqlite3_finalize(tot);
    if (rc == SL_OK)
        rc = exec1(s, "COMMIT", e); /* durable on return: WAL + synchronous=FULL */
    if (rc != SL_OK) {
        exec1(s, "ROLLBACK", NULL);
        if (is_new)
            memset(is_new, 0, n);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static void row_of(sqlite3_stmt *st, sl_usage_rec *r)
{
    memset(r, 0, sizeof *r);
    r->record_id = col(st, 0);
    r->instance = col(st, 1);
    r->project = col(st, 2);
    r->flavor = col(st, 3);
    r->gpu_uuid = col(st, 4);
    r->start_ns = sqlite3_column_int64(st, 6);
    r->end_ns = sqlite3_column_int64(st, 7);
    r->gpu_busy_ns = u64(st, 8);
    r->kernel_ns = u64(st, 9);
    r->kernels = u64(st, 10);
    r->bytes_htod = u64(st, 11);
    r->bytes_dtoh = u64(st, 12);
    r->memory_high_water = u64(st, 13);
    r->calls = u64(st, 14);
    r->errors = u64(st, 15);
    r->throttled_ns = u64(st, 16);
    r->quota_refusals = u64(st, 17);
    r->name = col(st, 20);
    r->domain = col(st, 21);
    r->tier = col(st, 22);
    r->gpu_share = sqlite3_column_double(st, 23);
    r->closed_by_agent = sqlite3_column_int(st, 24) != 0;
}

sl_code ag_usage_store_records(ag_usage_store *s, int64_t from_ns, int64_t to_ns,
                               const char *project, ag_usage_rec_cb cb, void *ud, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    sqlite3_stmt *st;
    sl_code rc = prep(s,
                      "SELECT " RECORD_COLS " FROM records WHERE end_ns >= ?1 AND start_ns < ?2 "
                      "AND (?3 IS NULL OR project = ?3) ORDER BY end_ns, record_id",
                      &st, e);
    if (rc == SL_OK) {
        sqlite3_bind_int64(st, 1, from_ns);
        sqlite3_bind_int64(st, 2, to_ns);
        if (project)
            text(st, 3, project);
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW) {
            sl_usage_rec row;
            row_of(st, &row);
            if (cb(&row, ud) != 0) {
                r = SQLITE_DONE;
                break;
            }
        }
        if (r != SQLITE_DONE)
            rc = db_fail(s, e, "reading usage records");
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

sl_code ag_usage_store_totals(ag_usage_store *s, ag_usage_total_cb cb, void *ud, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    sqlite3_stmt *st;
    sl_code rc = prep(s,
                      "SELECT project, instance, domain, gpu_uuid, gpu_busy_ns, kernel_ns, "
                      "kernels, bytes_htod, bytes_dtoh, memory_high_water, throttled_ns, "
                      "quota_refusals, records FROM totals ORDER BY 1, 2, 3, 4",
                      &st, e);
    if (rc == SL_OK) {
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW) {
            sl_usage_rec t = {0};
            t.project = col(st, 0);
            t.instance = col(st, 1);
            t.domain = col(st, 2);
            t.gpu_uuid = col(st, 3);
            t.gpu_busy_ns = u64(st, 4);
            t.kernel_ns = u64(st, 5);
            t.kernels = u64(st, 6);
            t.bytes_htod = u64(st, 7);
            t.bytes_dtoh = u64(st, 8);
            t.memory_high_water = u64(st, 9);
            t.throttled_ns = u64(st, 10);
            t.quota_refusals = u64(st, 11);
            if (cb(&t, u64(st, 12), ud) != 0) {
                r = SQLITE_DONE;
                break;
            }
        }
        if (r != SQLITE_DONE)
            rc = db_fail(s, e, "reading the usage totals");
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
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

static Sluice__Control__UsageRecord *rec_of(sqlite3_stmt *st)
{
    Sluice__Control__UsageRecord *r = malloc(sizeof *r);
    if (!r)
        return NULL;
    sluice__control__usage_record__init(r);
    int oom = 0;
    r->record_id = sdup(col(st, 0), &oom);
    r->instance_uuid = sdup(col(st, 1), &oom);
    r->project_id = sdup(col(st, 2), &oom);
    r->flavor = sdup(col(st, 3), &oom);
    r->gpu_uuid = sdup(col(st, 4), &oom);
    r->session_id = u64(st, 5);
    r->interval_start_ns = sqlite3_column_int64(st, 6);
    r->interval_end_ns = sqlite3_column_int64(st, 7);
    r->gpu_busy_ns = u64(st, 8);
    r->kernel_ns = u64(st, 9);
    r->kernels = u64(st, 10);
    r->bytes_htod = u64(st, 11);
    r->bytes_dtoh = u64(st, 12);
    r->memory_high_water = u64(st, 13);
    r->calls = u64(st, 14);
    r->errors = u64(st, 15);
    r->throttled_ns = u64(st, 16);
    r->quota_refusals = (uint32_t)u64(st, 17);
    r->measurement = sdup(col(st, 18), &oom);
    r->final = sqlite3_column_int(st, 19) != 0;
    r->instance_name = sdup(col(st, 20), &oom);
    r->domain_name = sdup(col(st, 21), &oom);
    r->sla_tier = sdup(col(st, 22), &oom);
    r->gpu_share = sqlite3_column_double(st, 23);
    r->closed_by_agent = sqlite3_column_int(st, 24) != 0;
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

sl_code ag_usage_store_unforwarded(ag_usage_store *s, size_t max, ag_usage_batch *b, sl_error *e)
{
    b->recs = NULL;
    b->n = 0;
    if (!max)
        return SL_OK;
    if (!(b->recs = calloc(max, sizeof *b->recs)))
        return sl_fail(e, SL_ERR_NOMEM, "usage store: out of memory");
    pthread_mutex_lock(&s->mu);
    sqlite3_stmt *st;
    sl_code rc = prep(s,
                      "SELECT " RECORD_COLS " FROM records WHERE forwarded = 0 "
                      "ORDER BY received, rowid LIMIT ?1",
                      &st, e);
    if (rc == SL_OK) {
        sqlite3_bind_int64(st, 1, (int64_t)max);
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW && b->n < max) {
            if (!(b->recs[b->n] = rec_of(st))) {
                rc = sl_fail(e, SL_ERR_NOMEM, "usage store: out of memory");
                break;
            }
            b->n++;
        }
        if (rc == SL_OK && r != SQLITE_DONE && r != SQLITE_ROW)
            rc = db_fail(s, e, "reading records to forward");
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc != SL_OK)
        ag_usage_batch_free(b);
    return rc;
}

sl_code ag_usage_store_mark_forwarded(ag_usage_store *s, char *const *ids, size_t n, int64_t now_s,
                                      size_t *marked, sl_error *e)
{
    size_t count = 0;
    pthread_mutex_lock(&s->mu);
    sqlite3_stmt *st = NULL;
    sl_code rc =
        prep(s, "UPDATE records SET forwarded = ?2 WHERE record_id = ?1 AND forwarded = 0", &st, e);
    if (rc == SL_OK)
        rc = exec1(s, "BEGIN IMMEDIATE", e);
    for (size_t i = 0; rc == SL_OK && i < n; i++) {
        sqlite3_reset(st);
        text(st, 1, ids[i]);
        sqlite3_bind_int64(st, 2, now_s > 0 ? now_s : 1);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = db_fail(s, e, "marking records forwarded");
        else
            count += (size_t)sqlite3_changes(s->db);
    }
    sqlite3_finalize(st);
    if (rc == SL_OK)
        rc = exec1(s, "COMMIT", e);
    if (rc != SL_OK) {
        exec1(s, "ROLLBACK", NULL);
        count = 0;
    }
    pthread_mutex_unlock(&s->mu);
    if (marked)
        *marked = count;
    return rc;
}

static sl_code count_where(ag_usage_store *s, const char *sql, uint64_t *n, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    sqlite3_stmt *st;
    sl_code rc = prep(s, sql, &st, e);
    if (rc == SL_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            *n = u64(st, 0);
        else
            rc = db_fail(s, e, "counting records");
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->mu);
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
