/* The registry store (store.h): opening and the schema, agents, placements, lookups and the
 * CLI's queries. The SQL is portable (SQLite and MariaDB): an upsert is an UPDATE and, when it
 * matched nothing, an INSERT (both engines count matched rows for UPDATE). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_internal.h"

sl_code nh_store_txn(nh_store *s, int flags, sl_db_txn_fn fn, void *ud, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    sl_code rc = sl_db_transaction(s->db, flags, fn, ud, e);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

sl_code nh_store_run(sl_db *db, const char *sql, nh_binder bind, const void *ud, const char *what,
                     int64_t *changes, sl_error *e)
{
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db, sql, &st, e);
    if (rc != SL_OK)
        return rc;
    if (bind)
        bind(st, ud);
    rc = sl_db_run(st, what, e);
    if (changes)
        *changes = rc == SL_OK ? sl_db_changes(st) : 0;
    sl_db_finalize(st);
    return rc;
}

sl_code nh_store_open(const char *url, nh_store_mode mode, nh_store **out, sl_error *e)
{
    if (!url || !*url || !out)
        return sl_fail(e, SL_ERR_INVALID, WHO ": no database");
    nh_store *s = calloc(1, sizeof *s);
    if (!s)
        return sl_fail(e, SL_ERR_NOMEM, WHO ": out of memory");
    pthread_mutex_init(&s->mu, NULL);
    sl_code rc = sl_db_open(url, mode == NH_STORE_READ ? SL_DB_READONLY : 0, WHO, &s->db, e);
    int sync = mode == NH_STORE_SYNC ||
               (mode == NH_STORE_SERVE && rc == SL_OK && sl_db_engine_of(s->db) == SL_DB_SQLITE);
    if (rc == SL_OK && sync)
        rc = sl_db_schema_sync(s->db, &nh_registry_schema, &s->version, e);
    else if (rc == SL_OK && (rc = sl_db_schema_check(s->db, &nh_registry_schema, e)) == SL_OK)
        s->version = NH_STORE_SCHEMA_VERSION;
    if (rc != SL_OK) {
        nh_store_close(s);
        return rc;
    }
    *out = s;
    return SL_OK;
}

void nh_store_close(nh_store *s)
{
    if (!s)
        return;
    sl_db_close(s->db);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int nh_store_found_version(const nh_store *s)
{
    return s->version;
}

const char *nh_store_where(const nh_store *s)
{
    return sl_db_where(s->db);
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

typedef struct reg_args {
    const nh_agent_in *a;
    int64_t now;
} reg_args;

static void bind_agent(sl_db_stmt *st, const void *ud)
{
    const reg_args *r = ud;
    sl_db_bind_text(st, 1, r->a->host);
    sl_db_bind_text(st, 2, r->a->endpoint);
    sl_db_bind_i64(st, 3, r->a->slots);
    sl_db_bind_text(st, 4, r->a->gpus_json ? r->a->gpus_json : "[]");
    sl_db_bind_text(st, 5, r->a->version ? r->a->version : "");
    sl_db_bind_text(st, 6, r->a->ca_pem && *r->a->ca_pem ? r->a->ca_pem : NULL);
    sl_db_bind_i64(st, 7, r->now);
}

static sl_code register_txn(sl_db *db, void *ud, sl_error *e)
{
    int64_t n = 0;
    sl_code rc = nh_store_run(db,
                              "UPDATE agents SET endpoint = ?2, slots = ?3, gpus = ?4, "
                              "version = ?5, ca_pem = ?6, registered = ?7, last_seen = ?7 "
                              "WHERE host = ?1",
                              bind_agent, ud, "registering an agent", &n, e);
    if (rc != SL_OK || n > 0)
        return rc;
    return nh_store_run(db,
                        "INSERT INTO agents (host, endpoint, slots, gpus, version, ca_pem, "
                        "registered, last_seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
                        bind_agent, ud, "registering an agent", NULL, e);
}

sl_code nh_store_register(nh_store *s, const nh_agent_in *a, int64_t now, sl_error *e)
{
    reg_args r = {a, now};
    sl_code rc = nh_store_txn(s, SL_DB_TXN_WRITE, register_txn, &r, e);
    if (rc == SL_ERR_REFUSED && sl_db_last_failure(s->db) == SL_DB_FAIL_DUPLICATE) /* a race */
        rc = nh_store_txn(s, SL_DB_TXN_WRITE, register_txn, &r, e);
    return rc;
}

/* host, instance (NULL: every one of the host), t: closes open placement history rows. */
typedef struct host_args {
    const char *host, *instance;
    int64_t t;
    int64_t changed;
} host_args;

static void bind_host_args(sl_db_stmt *st, const void *ud)
{
    const host_args *h = ud;
    sl_db_bind_text(st, 1, h->host);
    sl_db_bind_text(st, 2, h->instance);
    sl_db_bind_i64(st, 3, h->t);
}

static sl_code history_close(sl_db *db, host_args *h, sl_error *e)
{
    return nh_store_run(db,
                        "UPDATE placement_history SET until = CASE WHEN since > ?3 THEN since "
                        "ELSE ?3 END WHERE host = ?1 AND (?2 IS NULL OR instance = ?2) AND "
                        "until IS NULL",
                        bind_host_args, h, "closing placement history", NULL, e);
}

static sl_code unregister_txn(sl_db *db, void *ud, sl_error *e)
{
    host_args *h = ud;
    sl_code rc = nh_store_run(db, "DELETE FROM agents WHERE host = ?1", bind_host_args, h,
                              "unregistering an agent", &h->changed, e);
    return rc == SL_OK ? history_close(db, h, e) : rc;
}

sl_code nh_store_unregister(nh_store *s, const char *host, int *existed, sl_error *e)
{
    host_args h = {host, NULL, (int64_t)time(NULL), 0};
    sl_code rc = nh_store_txn(s, SL_DB_TXN_WRITE, unregister_txn, &h, e);
    if (existed)
        *existed = rc == SL_OK && h.changed > 0;
    return rc;
}

static sl_code touch_txn(sl_db *db, void *ud, sl_error *e)
{
    host_args *h = ud;
    return nh_store_run(db, "UPDATE agents SET last_seen = ?3 WHERE host = ?1", bind_host_args, h,
                        "updating last_seen", &h->changed, e);
}

sl_code nh_store_touch(nh_store *s, const char *host, int64_t now, int *known, sl_error *e)
{
    host_args h = {host, NULL, now, 0};
    sl_code rc = nh_store_txn(s, SL_DB_TXN_WRITE, touch_txn, &h, e);
    if (known)
        *known = rc == SL_OK && h.changed > 0;
    return rc;
}

/* ---------------------------------------------------------------------------- placements */

typedef struct place_args {
    const char *instance, *project, *flavor, *host;
    int64_t since;
} place_args;

static void bind_place(sl_db_stmt *st, const void *ud)
{
    const place_args *p = ud;
    sl_db_bind_text(st, 1, p->instance);
    sl_db_bind_text(st, 2, p->project);
    sl_db_bind_text(st, 3, p->flavor);
    sl_db_bind_text(st, 4, p->host);
    sl_db_bind_i64(st, 5, p->since);
}

static sl_code place_txn(sl_db *db, void *ud, sl_error *e)
{
    int64_t n = 0;
    sl_code rc = nh_store_run(db,
                              "UPDATE placements SET project = ?2, flavor = ?3, host = ?4, "
                              "since = ?5 WHERE instance = ?1",
                              bind_place, ud, "placing an instance", &n, e);
    if (rc == SL_OK && n == 0)
        rc = nh_store_run(db,
                          "INSERT INTO placements (instance, project, flavor, host, since) "
                          "VALUES (?1, ?2, ?3, ?4, ?5)",
                          bind_place, ud, "placing an instance", NULL, e);
    /* history: a move ends the stay on the old host; a stay already open here goes on */
    if (rc == SL_OK)
        rc = nh_store_run(db,
                          "UPDATE placement_history SET until = CASE WHEN since > ?5 THEN since "
                          "ELSE ?5 END WHERE instance = ?1 AND host <> ?4 AND until IS NULL",
                          bind_place, ud, "closing placement history", NULL, e);
    int64_t open_here = 0;
    if (rc == SL_OK) {
        sl_db_stmt *st;
        int row = 0;
        if ((rc = sl_db_prepare(db,
                                "SELECT count(*) FROM placement_history WHERE instance = ?1 AND "
                                "host = ?2 AND until IS NULL",
                                &st, e)) == SL_OK) {
            const place_args *p = ud;
            sl_db_bind_text(st, 1, p->instance);
            sl_db_bind_text(st, 2, p->host);
            if ((rc = sl_db_step(st, "reading placement history", &row, e)) == SL_OK && row)
                open_here = sl_db_col_i64(st, 0);
            sl_db_finalize(st);
        }
    }
    if (rc == SL_OK && open_here == 0) {
        rc = nh_store_run(db,
                          "INSERT INTO placement_history (instance, project, flavor, host, since, "
                          "until) VALUES (?1, ?2, ?3, ?4, ?5, NULL)",
                          bind_place, ud, "recording placement history", NULL, e);
        if (rc == SL_ERR_REFUSED && sl_db_last_failure(db) == SL_DB_FAIL_DUPLICATE)
            rc = SL_OK; /* the same stay, recorded already */
    }
    return rc;
}

sl_code nh_store_place(nh_store *s, const char *instance, const char *project, const char *flavor,
                       const char *host, int64_t since, sl_error *e)
{
    place_args p = {instance, project, flavor, host, since};
    sl_code rc = nh_store_txn(s, SL_DB_TXN_WRITE, place_txn, &p, e);
    if (rc == SL_ERR_REFUSED && sl_db_last_failure(s->db) == SL_DB_FAIL_DUPLICATE) /* a race */
        rc = nh_store_txn(s, SL_DB_TXN_WRITE, place_txn, &p, e);
    if (rc == SL_ERR_REFUSED && sl_db_last_failure(s->db) == SL_DB_FAIL_FOREIGN_KEY)
        return sl_fail(e, SL_ERR_REFUSED, "host %s is not a registered agent", host);
    return rc;
}

static sl_code unplace_txn(sl_db *db, void *ud, sl_error *e)
{
    host_args *h = ud;
    sl_code rc = nh_store_run(db, "DELETE FROM placements WHERE instance = ?2 AND host = ?1",
                              bind_host_args, h, "removing a placement", &h->changed, e);
    return rc == SL_OK ? history_close(db, h, e) : rc;
}

sl_code nh_store_unplace(nh_store *s, const char *instance, const char *host, int *removed,
                         sl_error *e)
{
    host_args h = {host, instance, (int64_t)time(NULL), 0};
    sl_code rc = nh_store_txn(s, SL_DB_TXN_WRITE, unplace_txn, &h, e);
    if (removed)
        *removed = rc == SL_OK && h.changed > 0;
    return rc;
}

typedef struct lookup_args {
    const char *instance;
    nh_target *out;
    int found;
} lookup_args;

static sl_code lookup_txn(sl_db *db, void *ud, sl_error *e)
{
    lookup_args *a = ud;
    free(a->out->ca_pem);
    memset(a->out, 0, sizeof *a->out);
    a->found = 0;
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db,
                               "SELECT p.host, p.project, a.endpoint, a.ca_pem FROM placements p "
                               "JOIN agents a ON a.host = p.host WHERE p.instance = ?1",
                               &st, e);
    if (rc != SL_OK)
        return rc;
    sl_db_bind_text(st, 1, a->instance);
    int row = 0;
    if ((rc = sl_db_step(st, "looking up an instance", &row, e)) == SL_OK && row) {
        copy(a->out->host, sizeof a->out->host, sl_db_col_text(st, 0));
        copy(a->out->project, sizeof a->out->project, sl_db_col_text(st, 1));
        copy(a->out->endpoint, sizeof a->out->endpoint, sl_db_col_text(st, 2));
        if (!sl_db_col_null(st, 3) && !(a->out->ca_pem = strdup(sl_db_col_text(st, 3))))
            rc = sl_fail(e, SL_ERR_NOMEM, WHO ": out of memory");
        a->found = rc == SL_OK;
    }
    sl_db_finalize(st);
    return rc;
}

sl_code nh_store_lookup(nh_store *s, const char *instance, nh_target *out, int *found, sl_error *e)
{
    memset(out, 0, sizeof *out);
    lookup_args a = {instance, out, 0};
    sl_code rc = nh_store_txn(s, 0, lookup_txn, &a, e);
    *found = rc == SL_OK && a.found;
    if (rc != SL_OK) {
        free(out->ca_pem);
        out->ca_pem = NULL;
    }
    return rc;
}

/* ------------------------------------------------------------------------------- queries */

typedef struct query_args {
    const char *sql, *what;
    const char *t1, *t2;
    int64_t i3;
    sl_db_row_fn row;
    void *ud;
} query_args;

static sl_code query_txn(sl_db *db, void *ud, sl_error *e)
{
    query_args *q = ud;
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db, q->sql, &st, e);
    if (rc != SL_OK)
        return rc;
    sl_db_bind_text(st, 1, q->t1);
    sl_db_bind_text(st, 2, q->t2);
    sl_db_bind_i64(st, 3, q->i3);
    rc = sl_db_each(st, q->what, q->row, q->ud, e);
    sl_db_finalize(st);
    return rc;
}

typedef struct host_cb_args {
    nh_host_cb cb;
    void *ud;
} host_cb_args;

static int on_host(sl_db_stmt *st, void *ud)
{
    host_cb_args *a = ud;
    nh_host_row row = {sl_db_col_text(st, 0), sl_db_col_text(st, 1), sl_db_col_text(st, 2),
                       sl_db_col_text(st, 3), sl_db_col_i64(st, 4),  sl_db_col_i64(st, 5),
                       sl_db_col_i64(st, 6),  sl_db_col_i64(st, 7)};
    return a->cb(&row, a->ud);
}

sl_code nh_store_hosts(nh_store *s, int64_t seen_before, nh_host_cb cb, void *ud, sl_error *e)
{
    host_cb_args a = {cb, ud};
    query_args q = {"SELECT a.host, a.endpoint, a.gpus, a.version, a.slots, (SELECT count(*) "
                    "FROM placements p WHERE p.host = a.host), a.registered, a.last_seen FROM "
                    "agents a WHERE (?3 <= 0 OR a.last_seen < ?3) "
                    "ORDER BY a.host",
                    "listing hosts",
                    NULL,
                    NULL,
                    seen_before,
                    on_host,
                    &a};
    return nh_store_txn(s, SL_DB_TXN_ONCE, query_txn, &q, e);
}

typedef struct inst_cb_args {
    nh_instance_cb cb;
    void *ud;
} inst_cb_args;

static int on_instance(sl_db_stmt *st, void *ud)
{
    inst_cb_args *a = ud;
    nh_instance_row row = {sl_db_col_text(st, 0), sl_db_col_text(st, 1), sl_db_col_text(st, 2),
                           sl_db_col_text(st, 3), sl_db_col_i64(st, 4)};
    return a->cb(&row, a->ud);
}

sl_code nh_store_instances(nh_store *s, const char *host, const char *project, nh_instance_cb cb,
                           void *ud, sl_error *e)
{
    inst_cb_args a = {cb, ud};
    query_args q = {"SELECT instance, project, flavor, host, since FROM placements WHERE "
                    "(?1 IS NULL OR host = ?1) AND (?2 IS NULL OR project = ?2) "
                    "ORDER BY host, project, instance",
                    "listing instances",
                    host,
                    project,
                    0,
                    on_instance,
                    &a};
    return nh_store_txn(s, SL_DB_TXN_ONCE, query_txn, &q, e);
}
