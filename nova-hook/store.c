/* The registry store on SQLite: WAL, synchronous=FULL, foreign keys, prepared statements with
 * bound parameters only. Schema version in PRAGMA user_version. Unsigned 64-bit counters of
 * usage records are stored as their two's-complement INTEGER and read back as uint64. */
#include "store.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/db.h"

struct nh_store {
    sqlite3 *db;
    pthread_mutex_t mu;
    int readonly;
};

static const char *const schema_v1[] = {
    "CREATE TABLE agents ("
    " host TEXT PRIMARY KEY NOT NULL,"
    " endpoint TEXT NOT NULL,"
    " slots INTEGER NOT NULL,"
    " gpus TEXT NOT NULL,"
    " version TEXT NOT NULL,"
    " ca_pem TEXT,"
    " registered INTEGER NOT NULL,"
    " last_seen INTEGER NOT NULL)",
    "CREATE TABLE placements ("
    " instance TEXT PRIMARY KEY NOT NULL,"
    " project TEXT NOT NULL,"
    " flavor TEXT NOT NULL,"
    " host TEXT NOT NULL REFERENCES agents(host) ON DELETE CASCADE,"
    " since INTEGER NOT NULL)",
    "CREATE INDEX placements_host ON placements(host)",
    "CREATE INDEX placements_project ON placements(project)",
    "CREATE TABLE usage ("
    " record_id TEXT PRIMARY KEY NOT NULL,"
    " host TEXT NOT NULL,"
    " instance TEXT NOT NULL,"
    " project TEXT NOT NULL,"
    " flavor TEXT NOT NULL,"
    " gpu_uuid TEXT NOT NULL,"
    " session_id INTEGER NOT NULL,"
    " interval_start_ns INTEGER NOT NULL,"
    " interval_end_ns INTEGER NOT NULL,"
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
    " received INTEGER NOT NULL)",
    "CREATE INDEX usage_project ON usage(project, interval_start_ns)",
    "PRAGMA user_version = 1",
    NULL,
};

/* Version 2 (usage reports): what the agent adds to a record, and the placement history. */
static const char *const schema_v2[] = {
    "ALTER TABLE usage ADD COLUMN instance_name TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE usage ADD COLUMN domain_name TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE usage ADD COLUMN sla_tier TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE usage ADD COLUMN gpu_share REAL NOT NULL DEFAULT 0",
    "CREATE INDEX usage_end ON usage(interval_end_ns)",
    "CREATE TABLE placement_history ("
    " instance TEXT NOT NULL,"
    " project TEXT NOT NULL,"
    " flavor TEXT NOT NULL,"
    " host TEXT NOT NULL,"
    " since INTEGER NOT NULL,"
    " until INTEGER," /* NULL: still placed there */
    " PRIMARY KEY (instance, host, since))",
    "CREATE INDEX placement_history_project ON placement_history(project)",
    "INSERT INTO placement_history SELECT instance, project, flavor, host, since, NULL "
    "FROM placements",
    "PRAGMA user_version = 2",
    NULL,
};

/* Version 3: records an agent wrote to close a session whose backend ended first. */
static const char *const schema_v3[] = {
    "ALTER TABLE usage ADD COLUMN closed_by_agent INTEGER NOT NULL DEFAULT 0",
    "PRAGMA user_version = 3",
    NULL,
};

static sl_code db_fail(nh_store *s, sl_error *e, const char *what)
{
    return sl_fail(e, SL_ERR_IO, "registry store: %s: %s", what, sqlite3_errmsg(s->db));
}

/* Runs one constant statement (no parameters, no rows wanted). */
static sl_code exec1(nh_store *s, const char *sql, sl_error *e)
{
    return sl_db_exec(s->db, "registry store", sql, e);
}

static sl_code migrate(nh_store *s, sl_error *e)
{
    int v;
    sl_code rc = sl_db_user_version(s->db, "registry store", &v, e);
    if (rc != SL_OK)
        return rc;
    if (v == NH_STORE_SCHEMA_VERSION)
        return SL_OK;
    if (v > NH_STORE_SCHEMA_VERSION)
        return sl_fail(e, SL_ERR_CONFIG, "registry store: schema version %d is newer than %d", v,
                       NH_STORE_SCHEMA_VERSION);
    if (s->readonly && v > 0)
        return sl_fail(e, SL_ERR_CONFIG,
                       "registry store: schema version %d is older than %d: start "
                       "sluice-novahook once to migrate it",
                       v, NH_STORE_SCHEMA_VERSION);
    if (s->readonly)
        return sl_fail(e, SL_ERR_CONFIG, "registry store: no registry schema (version %d)", v);
    static const char *const *const steps[] = {schema_v1, schema_v2, schema_v3};
    return sl_db_migrate(s->db, "registry store", v, steps, 3, e);
}

sl_code nh_store_open(const char *path, int readonly, nh_store **out, sl_error *e)
{
    if (!path || !*path || !out)
        return sl_fail(e, SL_ERR_INVALID, "registry store: no database path");
    nh_store *s = calloc(1, sizeof *s);
    if (!s)
        return sl_fail(e, SL_ERR_NOMEM, "registry store: out of memory");
    s->readonly = readonly;
    pthread_mutex_init(&s->mu, NULL);
    sl_code rc = sl_db_open(path, readonly, "registry store", &s->db, e);
    if (rc != SL_OK)
        goto fail;
    if ((rc = exec1(s, "PRAGMA foreign_keys = ON", e)) != SL_OK || (rc = migrate(s, e)) != SL_OK)
        goto fail;
    *out = s;
    return SL_OK;
fail:
    nh_store_close(s);
    return rc;
}

void nh_store_close(nh_store *s)
{
    if (!s)
        return;
    sqlite3_close(s->db);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ------------------------------------------------------------------------------ helpers */

typedef struct stmt {
    nh_store *s;
    sqlite3_stmt *st;
} stmt;

static sl_code prep(nh_store *s, const char *sql, stmt *out, sl_error *e)
{
    out->s = s;
    if (sqlite3_prepare_v2(s->db, sql, -1, &out->st, NULL) != SQLITE_OK)
        return db_fail(s, e, "preparing a statement");
    return SL_OK;
}

static void text(stmt *t, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(t->st, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(t->st, i);
}

static void i64(stmt *t, int i, int64_t v)
{
    sqlite3_bind_int64(t->st, i, v);
}

/* Steps a statement that returns no row; finalizes it. */
static sl_code run(stmt *t, const char *what, sl_error *e)
{
    int rc = sqlite3_step(t->st);
    sl_code out = SL_OK;
    if (rc != SQLITE_DONE)
        out = (rc & 0xff) == SQLITE_CONSTRAINT
                  ? sl_fail(e, SL_ERR_REFUSED, "registry store: %s: %s", what,
                            sqlite3_errmsg(t->s->db))
                  : db_fail(t->s, e, what);
    sqlite3_finalize(t->st);
    return out;
}

static const char *col(sqlite3_stmt *st, int i)
{
    return sl_db_text(st, i);
}

static void copy(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ------------------------------------------------------------------------------- agents */

sl_code nh_store_register(nh_store *s, const nh_agent_in *a, int64_t now, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    stmt t;
    sl_code rc = prep(s,
                      "INSERT INTO agents(host, endpoint, slots, gpus, version, ca_pem, "
                      "registered, last_seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7) "
                      "ON CONFLICT(host) DO UPDATE SET endpoint = ?2, slots = ?3, gpus = ?4, "
                      "version = ?5, ca_pem = ?6, registered = ?7, last_seen = ?7",
                      &t, e);
    if (rc == SL_OK) {
        text(&t, 1, a->host);
        text(&t, 2, a->endpoint);
        i64(&t, 3, a->slots);
        text(&t, 4, a->gpus_json ? a->gpus_json : "[]");
        text(&t, 5, a->version ? a->version : "");
        text(&t, 6, a->ca_pem && *a->ca_pem ? a->ca_pem : NULL);
        i64(&t, 7, now);
        rc = run(&t, "registering an agent", e);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Closes the open placement history rows of host (and of instance, when not NULL) at t. */
static sl_code history_close(nh_store *s, const char *host, const char *instance, int64_t t,
                             sl_error *e)
{
    stmt h;
    sl_code rc = prep(s,
                      "UPDATE placement_history SET until = max(since, ?3) WHERE host = ?1 AND "
                      "(?2 IS NULL OR instance = ?2) AND until IS NULL",
                      &h, e);
    if (rc == SL_OK) {
        text(&h, 1, host);
        text(&h, 2, instance);
        i64(&h, 3, t);
        rc = run(&h, "closing placement history", e);
    }
    return rc;
}

sl_code nh_store_unregister(nh_store *s, const char *host, int *existed, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    stmt t;
    sl_code rc = exec1(s, "BEGIN IMMEDIATE", e);
    if (rc == SL_OK)
        rc = prep(s, "DELETE FROM agents WHERE host = ?1", &t, e);
    if (rc == SL_OK) {
        text(&t, 1, host);
        rc = run(&t, "unregistering an agent", e);
        if (existed)
            *existed = rc == SL_OK && sqlite3_changes(s->db) > 0;
    }
    if (rc == SL_OK)
        rc = history_close(s, host, NULL, (int64_t)time(NULL), e);
    if (rc == SL_OK)
        rc = exec1(s, "COMMIT", e);
    else
        exec1(s, "ROLLBACK", NULL);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

sl_code nh_store_touch(nh_store *s, const char *host, int64_t now, int *known, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    stmt t;
    sl_code rc = prep(s, "UPDATE agents SET last_seen = ?2 WHERE host = ?1", &t, e);
    if (rc == SL_OK) {
        text(&t, 1, host);
        i64(&t, 2, now);
        rc = run(&t, "updating last_seen", e);
        if (known)
            *known = rc == SL_OK && sqlite3_changes(s->db) > 0;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---------------------------------------------------------------------------- placements */

sl_code nh_store_place(nh_store *s, const char *instance, const char *project, const char *flavor,
                       const char *host, int64_t since, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    stmt t;
    sl_code rc = exec1(s, "BEGIN IMMEDIATE", e);
    if (rc == SL_OK)
        rc = prep(s,
                  "INSERT INTO placements(instance, project, flavor, host, since) "
                  "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(instance) DO UPDATE SET "
                  "project = ?2, flavor = ?3, host = ?4, since = ?5",
                  &t, e);
    if (rc == SL_OK) {
        text(&t, 1, instance);
        text(&t, 2, project);
        text(&t, 3, flavor);
        text(&t, 4, host);
        i64(&t, 5, since);
        rc = run(&t, "placing an instance", e);
        if (rc == SL_ERR_REFUSED)
            rc = sl_fail(e, SL_ERR_REFUSED, "host %s is not a registered agent", host);
    }
    /* history: a move ends the stay on the old host; a stay already open here goes on */
    if (rc == SL_OK)
        rc = prep(s,
                  "UPDATE placement_history SET until = max(since, ?2) WHERE instance = ?1 AND "
                  "host != ?3 AND until IS NULL",
                  &t, e);
    if (rc == SL_OK) {
        text(&t, 1, instance);
        i64(&t, 2, since);
        text(&t, 3, host);
        rc = run(&t, "closing placement history", e);
    }
    if (rc == SL_OK)
        rc = prep(s,
                  "INSERT OR IGNORE INTO placement_history(instance, project, flavor, host, "
                  "since, until) SELECT ?1, ?2, ?3, ?4, ?5, NULL WHERE NOT EXISTS (SELECT 1 "
                  "FROM placement_history WHERE instance = ?1 AND host = ?4 AND until IS NULL)",
                  &t, e);
    if (rc == SL_OK) {
        text(&t, 1, instance);
        text(&t, 2, project);
        text(&t, 3, flavor);
        text(&t, 4, host);
        i64(&t, 5, since);
        rc = run(&t, "recording placement history", e);
    }
    if (rc == SL_OK)
        rc = exec1(s, "COMMIT", e);
    else
        exec1(s, "ROLLBACK", NULL);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

sl_code nh_store_unplace(nh_store *s, const char *instance, const char *host, int *removed,
                         sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    stmt t;
    sl_code rc = exec1(s, "BEGIN IMMEDIATE", e);
    if (rc == SL_OK)
        rc = prep(s, "DELETE FROM placements WHERE instance = ?1 AND host = ?2", &t, e);
    if (rc == SL_OK) {
        text(&t, 1, instance);
        text(&t, 2, host);
        rc = run(&t, "removing a placement", e);
        if (removed)
            *removed = rc == SL_OK && sqlite3_changes(s->db) > 0;
    }
    if (rc == SL_OK)
        rc = history_close(s, host, instance, (int64_t)time(NULL), e);
    if (rc == SL_OK)
        rc = exec1(s, "COMMIT", e);
    else
        exec1(s, "ROLLBACK", NULL);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

sl_code nh_store_lookup(nh_store *s, const char *instance, nh_target *out, int *found, sl_error *e)
{
    *found = 0;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    stmt t;
    sl_code rc = prep(s,
                      "SELECT p.host, p.project, a.endpoint, a.ca_pem FROM placements p "
                      "JOIN agents a ON a.host = p.host WHERE p.instance = ?1",
                      &t, e);
    if (rc == SL_OK) {
        text(&t, 1, instance);
        int r = sqlite3_step(t.st);
        if (r == SQLITE_ROW) {
            copy(out->host, sizeof out->host, col(t.st, 0));
            copy(out->project, sizeof out->project, col(t.st, 1));
            copy(out->endpoint, sizeof out->endpoint, col(t.st, 2));
            if (sqlite3_column_type(t.st, 3) != SQLITE_NULL) {
                out->ca_pem = strdup(col(t.st, 3));
                if (!out->ca_pem)
                    rc = sl_fail(e, SL_ERR_NOMEM, "registry store: out of memory");
            }
            *found = rc == SL_OK;
        } else if (r != SQLITE_DONE) {
            rc = db_fail(s, e, "looking up an instance");
        }
        sqlite3_finalize(t.st);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* --------------------------------------------------------------------------------- usage */

static sl_code insert_record(nh_store *s, const char *host, const Sluice__Control__UsageRecord *r,
                             int64_t now, size_t *inserted, sl_error *e)
{
    stmt t;
    sl_code rc = prep(
        s,
        "INSERT OR IGNORE INTO usage(record_id, host, instance, project, flavor, gpu_uuid, "
        "session_id, interval_start_ns, interval_end_ns, gpu_busy_ns, kernel_ns, kernels, "
        "bytes_htod, bytes_dtoh, memory_high_water, calls, errors, throttled_ns, quota_refusals, "
        "measurement, final, received, instance_name, domain_name, sla_tier, gpu_share, "
        "closed_by_agent) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
        "?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27)",
        &t, e);
    if (rc != SL_OK)
        return rc;
    text(&t, 1, r->record_id);
    text(&t, 2, host);
    text(&t, 3, r->instance_uuid);
    text(&t, 4, r->project_id);
    text(&t, 5, r->flavor ? r->flavor : "");
    text(&t, 6, r->gpu_uuid ? r->gpu_uuid : "");
    i64(&t, 7, (int64_t)r->session_id);
    i64(&t, 8, r->interval_start_ns);
    i64(&t, 9, r->interval_end_ns);
    i64(&t, 10, (int64_t)r->gpu_busy_ns);
    i64(&t, 11, (int64_t)r->kernel_ns);
    i64(&t, 12, (int64_t)r->kernels);
    i64(&t, 13, (int64_t)r->bytes_htod);
    i64(&t, 14, (int64_t)r->bytes_dtoh);
    i64(&t, 15, (int64_t)r->memory_high_water);
    i64(&t, 16, (int64_t)r->calls);
    i64(&t, 17, (int64_t)r->errors);
    i64(&t, 18, (int64_t)r->throttled_ns);
    i64(&t, 19, r->quota_refusals);
    text(&t, 20, r->measurement ? r->measurement : "");
    i64(&t, 21, r->final ? 1 : 0);
    i64(&t, 22, now);
    text(&t, 23, r->instance_name ? r->instance_name : "");
    text(&t, 24, r->domain_name ? r->domain_name : "");
    text(&t, 25, r->sla_tier ? r->sla_tier : "");
    sqlite3_bind_double(t.st, 26, r->gpu_share);
    i64(&t, 27, r->closed_by_agent ? 1 : 0);
    rc = run(&t, "storing a usage record", e);
    if (rc == SL_OK && sqlite3_changes(s->db) > 0)
        (*inserted)++;
    return rc;
}

sl_code nh_store_usage_insert(nh_store *s, const char *host,
                              Sluice__Control__UsageRecord *const *records, size_t n, int64_t now,
                              size_t *inserted, sl_error *e)
{
    size_t added = 0;
    pthread_mutex_lock(&s->mu);
    sl_code rc = exec1(s, "BEGIN IMMEDIATE", e);
    for (size_t i = 0; rc == SL_OK && i < n; i++)
        rc = insert_record(s, host, records[i], now, &added, e);
    if (rc == SL_OK)
        rc = exec1(s, "COMMIT", e); /* durable on return: WAL + synchronous=FULL */
    if (rc != SL_OK) {
        exec1(s, "ROLLBACK", NULL);
        added = 0;
    }
    pthread_mutex_unlock(&s->mu);
    if (inserted)
        *inserted = added;
    return rc;
}

sl_code nh_store_usage_count(nh_store *s, int64_t *count, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    stmt t;
    sl_code rc = prep(s, "SELECT count(*) FROM usage", &t, e);
    if (rc == SL_OK) {
        if (sqlite3_step(t.st) == SQLITE_ROW)
            *count = sqlite3_column_int64(t.st, 0);
        else
            rc = db_fail(s, e, "counting usage records");
        sqlite3_finalize(t.st);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

sl_code nh_store_usage_records(nh_store *s, int64_t from_ns, int64_t to_ns, const char *project,
                               nh_usage_cb cb, void *ud, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    stmt t;
    sl_code rc =
        prep(s,
             "SELECT record_id, instance, project, flavor, gpu_uuid, instance_name, "
             "domain_name, sla_tier, gpu_share, interval_start_ns, interval_end_ns, "
             "gpu_busy_ns, kernel_ns, kernels, bytes_htod, bytes_dtoh, memory_high_water, "
             "calls, errors, throttled_ns, quota_refusals, closed_by_agent FROM usage WHERE "
             "interval_end_ns >= ?1 AND interval_start_ns < ?2 AND (?3 IS NULL OR "
             "project = ?3) ORDER BY interval_end_ns, record_id",
             &t, e);
    if (rc == SL_OK) {
        i64(&t, 1, from_ns);
        i64(&t, 2, to_ns);
        text(&t, 3, project);
        int r;
        while ((r = sqlite3_step(t.st)) == SQLITE_ROW) {
            sl_usage_rec u = {0};
            u.record_id = col(t.st, 0);
            u.instance = col(t.st, 1);
            u.project = col(t.st, 2);
            u.flavor = col(t.st, 3);
            u.gpu_uuid = col(t.st, 4);
            u.name = col(t.st, 5);
            u.domain = col(t.st, 6);
            u.tier = col(t.st, 7);
            u.gpu_share = sqlite3_column_double(t.st, 8);
            u.start_ns = sqlite3_column_int64(t.st, 9);
            u.end_ns = sqlite3_column_int64(t.st, 10);
            uint64_t *v[] = {&u.gpu_busy_ns,  &u.kernel_ns,         &u.kernels, &u.bytes_htod,
                             &u.bytes_dtoh,   &u.memory_high_water, &u.calls,   &u.errors,
                             &u.throttled_ns, &u.quota_refusals};
            for (int i = 0; i < 10; i++)
                *v[i] = (uint64_t)sqlite3_column_int64(t.st, 11 + i);
            u.closed_by_agent = sqlite3_column_int(t.st, 21);
            if (cb(&u, ud) != 0) {
                r = SQLITE_DONE;
                break;
            }
        }
        if (r != SQLITE_DONE)
            rc = db_fail(s, e, "reading usage records");
        sqlite3_finalize(t.st);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

sl_code nh_store_lifetimes(nh_store *s, int64_t from_ns, int64_t to_ns, const char *project,
                           int64_t now_ns, nh_life_cb cb, void *ud, sl_error *e)
{
    const int64_t ns = 1000000000LL;
    pthread_mutex_lock(&s->mu);
    stmt t;
    sl_code rc = prep(s,
                      "SELECT instance, project, flavor, since, until FROM placement_history "
                      "WHERE (until IS NULL OR until * ?4 >= ?1) AND since * ?4 < ?2 AND "
                      "(?3 IS NULL OR project = ?3) ORDER BY instance, since",
                      &t, e);
    if (rc == SL_OK) {
        i64(&t, 1, from_ns);
        i64(&t, 2, to_ns);
        text(&t, 3, project);
        i64(&t, 4, ns);
        int r;
        while ((r = sqlite3_step(t.st)) == SQLITE_ROW) {
            int open = sqlite3_column_type(t.st, 4) == SQLITE_NULL;
            int64_t a = sqlite3_column_int64(t.st, 3) * ns;
            int64_t b = open ? now_ns : sqlite3_column_int64(t.st, 4) * ns;
            sl_usage_life l = {col(t.st, 0),  col(t.st, 1), "", col(t.st, 2), "", "", 0, a,
                               b < a ? a : b, open};
            if (cb(&l, ud) != 0) {
                r = SQLITE_DONE;
                break;
            }
        }
        if (r != SQLITE_DONE)
            rc = db_fail(s, e, "reading placement history");
        sqlite3_finalize(t.st);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ------------------------------------------------------------------------------- queries */

sl_code nh_store_hosts(nh_store *s, int64_t seen_before, nh_host_cb cb, void *ud, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    stmt t;
    sl_code rc = prep(s,
                      "SELECT a.host, a.endpoint, a.gpus, a.version, a.slots, "
                      "(SELECT count(*) FROM placements p WHERE p.host = a.host), a.registered, "
                      "a.last_seen FROM agents a WHERE ?1 <= 0 OR a.last_seen < ?1 ORDER BY a.host",
                      &t, e);
    if (rc == SL_OK) {
        i64(&t, 1, seen_before);
        int r;
        while ((r = sqlite3_step(t.st)) == SQLITE_ROW) {
            nh_host_row row = {col(t.st, 0),
                               col(t.st, 1),
                               col(t.st, 2),
                               col(t.st, 3),
                               sqlite3_column_int64(t.st, 4),
                               sqlite3_column_int64(t.st, 5),
                               sqlite3_column_int64(t.st, 6),
                               sqlite3_column_int64(t.st, 7)};
            if (cb(&row, ud) != 0) {
                r = SQLITE_DONE;
                break;
            }
        }
        if (r != SQLITE_DONE)
            rc = db_fail(s, e, "listing hosts");
        sqlite3_finalize(t.st);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

sl_code nh_store_instances(nh_store *s, const char *host, const char *project, nh_instance_cb cb,
                           void *ud, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    stmt t;
    sl_code rc = prep(s,
                      "SELECT instance, project, flavor, host, since FROM placements "
                      "WHERE (?1 IS NULL OR host = ?1) AND (?2 IS NULL OR project = ?2) "
                      "ORDER BY host, project, instance",
                      &t, e);
    if (rc == SL_OK) {
        text(&t, 1, host);
        text(&t, 2, project);
        int r;
        while ((r = sqlite3_step(t.st)) == SQLITE_ROW) {
            nh_instance_row row = {col(t.st, 0), col(t.st, 1), col(t.st, 2), col(t.st, 3),
                                   sqlite3_column_int64(t.st, 4)};
            if (cb(&row, ud) != 0) {
                r = SQLITE_DONE;
                break;
            }
        }
        if (r != SQLITE_DONE)
            rc = db_fail(s, e, "listing instances");
        sqlite3_finalize(t.st);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}
