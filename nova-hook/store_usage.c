/* The registry store (store.h): usage records, the placement history as lifetimes, issued
 * tokens and retention. Once-only is the database's: a record id or a token id is a primary
 * key, so a second insert (a resend, another nova-hook, a race) fails on the key and is read
 * as "stored before". */
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

#define NS 1000000000LL

/* ---------------------------------------------------------------------------- usage */

typedef struct usage_args {
    const char *host;
    Sluice__Control__UsageRecord *const *records;
    size_t n;
    int64_t now;
    size_t inserted;
} usage_args;

static void bind_record(sl_db_stmt *st, const char *host, const Sluice__Control__UsageRecord *r,
                        int64_t now)
{
    sl_db_bind_text(st, 1, r->record_id);
    sl_db_bind_text(st, 2, host);
    sl_db_bind_text(st, 3, r->instance_uuid);
    sl_db_bind_text(st, 4, r->project_id);
    sl_db_bind_text(st, 5, r->flavor ? r->flavor : "");
    sl_db_bind_text(st, 6, r->gpu_uuid ? r->gpu_uuid : "");
    sl_db_bind_i64(st, 7, (int64_t)r->session_id);
    sl_db_bind_i64(st, 8, r->interval_start_ns);
    sl_db_bind_i64(st, 9, r->interval_end_ns);
    const uint64_t v[] = {r->gpu_busy_ns,  r->kernel_ns,
                          r->kernels,      r->bytes_htod,
                          r->bytes_dtoh,   r->memory_high_water,
                          r->calls,        r->errors,
                          r->throttled_ns, (uint64_t)r->quota_refusals};
    for (int i = 0; i < 10; i++)
        sl_db_bind_i64(st, 10 + i, (int64_t)v[i]);
    sl_db_bind_text(st, 20, r->measurement ? r->measurement : "");
    sl_db_bind_i64(st, 21, r->final ? 1 : 0);
    sl_db_bind_i64(st, 22, now);
    sl_db_bind_text(st, 23, r->instance_name ? r->instance_name : "");
    sl_db_bind_text(st, 24, r->domain_name ? r->domain_name : "");
    sl_db_bind_text(st, 25, r->sla_tier ? r->sla_tier : "");
    sl_db_bind_double(st, 26, r->gpu_share);
    sl_db_bind_i64(st, 27, r->closed_by_agent ? 1 : 0);
    if (r->shared) /* the agent's apportioned figure, final when sent */
        sl_db_bind_i64(st, 28, (int64_t)r->shared->gpu_shared_ns);
    else /* an agent older than the field: not reported */
        sl_db_bind_null(st, 28);
}

static sl_code usage_txn(sl_db *db, void *ud, sl_error *e)
{
    usage_args *a = ud;
    a->inserted = 0;
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(
        db,
        "INSERT INTO usage_records (record_id, host, instance, project, flavor, gpu_uuid, "
        "session_id, interval_start_ns, interval_end_ns, gpu_busy_ns, kernel_ns, kernels, "
        "bytes_htod, bytes_dtoh, memory_high_water, calls, errors, throttled_ns, quota_refusals, "
        "measurement, final, received, instance_name, domain_name, sla_tier, gpu_share, "
        "closed_by_agent, gpu_shared_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
        "?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28)",
        &st, e);
    for (size_t i = 0; rc == SL_OK && i < a->n; i++) {
        sl_db_reset(st);
        bind_record(st, a->host, a->records[i], a->now);
        rc = sl_db_run(st, "storing a usage record", e);
        if (rc == SL_OK)
            a->inserted++;
        else if (rc == SL_ERR_REFUSED && sl_db_last_failure(db) == SL_DB_FAIL_DUPLICATE)
            rc = SL_OK; /* stored before: its primary key says so */
    }
    sl_db_finalize(st);
    return rc;
}

sl_code nh_store_usage_insert(nh_store *s, const char *host,
                              Sluice__Control__UsageRecord *const *records, size_t n, int64_t now,
                              size_t *inserted, sl_error *e)
{
    usage_args a = {host, records, n, now, 0};
    sl_code rc = nh_store_txn(s, SL_DB_TXN_WRITE, usage_txn, &a, e); /* durable on return */
    if (inserted)
        *inserted = rc == SL_OK ? a.inserted : 0;
    return rc;
}

typedef struct count_args {
    const char *sql;
    int64_t n;
} count_args;

static sl_code count_txn(sl_db *db, void *ud, sl_error *e)
{
    count_args *a = ud;
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db, a->sql, &st, e);
    int row = 0;
    if (rc == SL_OK && (rc = sl_db_step(st, "counting", &row, e)) == SL_OK)
        a->n = row ? sl_db_col_i64(st, 0) : 0;
    sl_db_finalize(st);
    return rc;
}

static sl_code count(nh_store *s, const char *sql, int64_t *n, sl_error *e)
{
    count_args a = {sql, 0};
    sl_code rc = nh_store_txn(s, 0, count_txn, &a, e);
    if (rc == SL_OK)
        *n = a.n;
    return rc;
}

sl_code nh_store_usage_count(nh_store *s, int64_t *n, sl_error *e)
{
    return count(s, "SELECT count(*) FROM usage_records", n, e);
}

sl_code nh_store_token_count(nh_store *s, int64_t *n, sl_error *e)
{
    return count(s, "SELECT count(*) FROM tokens", n, e);
}

/* A period walk: ?1 from, ?2 to, ?3 project, ?4 one second in ns. */
typedef struct walk_args {
    const char *sql, *what;
    int64_t from, to;
    const char *project;
    sl_db_row_fn row;
    void *ud;
} walk_args;

static sl_code walk_txn(sl_db *db, void *ud, sl_error *e)
{
    walk_args *w = ud;
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db, w->sql, &st, e);
    if (rc != SL_OK)
        return rc;
    sl_db_bind_i64(st, 1, w->from);
    sl_db_bind_i64(st, 2, w->to);
    sl_db_bind_text(st, 3, w->project);
    sl_db_bind_i64(st, 4, NS);
    rc = sl_db_each(st, w->what, w->row, w->ud, e);
    sl_db_finalize(st);
    return rc;
}

typedef struct usage_cb_args {
    nh_usage_cb cb;
    void *ud;
} usage_cb_args;

static int on_usage(sl_db_stmt *st, void *ud)
{
    usage_cb_args *a = ud;
    sl_usage_rec u = {0};
    u.record_id = sl_db_col_text(st, 0);
    u.instance = sl_db_col_text(st, 1);
    u.project = sl_db_col_text(st, 2);
    u.flavor = sl_db_col_text(st, 3);
    u.gpu_uuid = sl_db_col_text(st, 4);
    u.name = sl_db_col_text(st, 5);
    u.domain = sl_db_col_text(st, 6);
    u.tier = sl_db_col_text(st, 7);
    u.gpu_share = sl_db_col_double(st, 8);
    u.start_ns = sl_db_col_i64(st, 9);
    u.end_ns = sl_db_col_i64(st, 10);
    uint64_t *v[] = {&u.gpu_busy_ns,  &u.kernel_ns,         &u.kernels, &u.bytes_htod,
                     &u.bytes_dtoh,   &u.memory_high_water, &u.calls,   &u.errors,
                     &u.throttled_ns, &u.quota_refusals};
    for (int i = 0; i < 10; i++)
        *v[i] = sl_db_col_u64(st, 11 + i);
    u.closed_by_agent = sl_db_col_i64(st, 21) != 0;
    u.shared_unknown = sl_db_col_null(st, 22);
    u.gpu_shared_ns = u.shared_unknown ? 0 : sl_db_col_u64(st, 22);
    return a->cb(&u, a->ud);
}

sl_code nh_store_usage_records(nh_store *s, int64_t from_ns, int64_t to_ns, const char *project,
                               nh_usage_cb cb, void *ud, sl_error *e)
{
    usage_cb_args a = {cb, ud};
    walk_args w = {
        "SELECT record_id, instance, project, flavor, gpu_uuid, instance_name, "
        "domain_name, sla_tier, gpu_share, interval_start_ns, interval_end_ns, "
        "gpu_busy_ns, kernel_ns, kernels, bytes_htod, bytes_dtoh, memory_high_water, "
        "calls, errors, throttled_ns, quota_refusals, closed_by_agent, gpu_shared_ns FROM "
        "usage_records "
        "WHERE "
        "interval_end_ns >= ?1 AND interval_start_ns < ?2 AND (?3 IS NULL OR "
        "project = ?3) ORDER BY interval_end_ns, record_id",
        "reading usage records",
        from_ns,
        to_ns,
        project,
        on_usage,
        &a};
    return nh_store_txn(s, SL_DB_TXN_ONCE, walk_txn, &w, e);
}

typedef struct life_cb_args {
    nh_life_cb cb;
    void *ud;
    int64_t now_ns;
} life_cb_args;

static int on_life(sl_db_stmt *st, void *ud)
{
    life_cb_args *a = ud;
    int open = sl_db_col_null(st, 4);
    int64_t start = sl_db_col_i64(st, 3) * NS;
    int64_t end = open ? a->now_ns : sl_db_col_i64(st, 4) * NS;
    sl_usage_life l = {sl_db_col_text(st, 0),
                       sl_db_col_text(st, 1),
                       "",
                       sl_db_col_text(st, 2),
                       "",
                       "",
                       0,
                       start,
                       end < start ? start : end,
                       open};
    return a->cb(&l, a->ud);
}

sl_code nh_store_lifetimes(nh_store *s, int64_t from_ns, int64_t to_ns, const char *project,
                           int64_t now_ns, nh_life_cb cb, void *ud, sl_error *e)
{
    life_cb_args a = {cb, ud, now_ns};
    walk_args w = {"SELECT instance, project, flavor, since, until FROM placement_history "
                   "WHERE (until IS NULL OR until * ?4 >= ?1) AND since * ?4 < ?2 AND "
                   "(?3 IS NULL OR project = ?3) ORDER BY instance, since",
                   "reading placement history",
                   from_ns,
                   to_ns,
                   project,
                   on_life,
                   &a};
    return nh_store_txn(s, SL_DB_TXN_ONCE, walk_txn, &w, e);
}

/* ---------------------------------------------------------------------------- tokens */

static void bind_token(sl_db_stmt *st, const void *ud)
{
    const nh_token_rec *t = ud;
    sl_db_bind_text(st, 1, t->jti);
    sl_db_bind_text(st, 2, t->instance);
    sl_db_bind_text(st, 3, t->project);
    sl_db_bind_text(st, 4, t->issuer_node ? t->issuer_node : "");
    sl_db_bind_text(st, 5, t->kid ? t->kid : "");
    sl_db_bind_i64(st, 6, t->issued);
    sl_db_bind_i64(st, 7, t->expires);
}

static sl_code token_txn(sl_db *db, void *ud, sl_error *e)
{
    return nh_store_run(db,
                        "INSERT INTO tokens (jti, instance, project, issuer_node, kid, issued, "
                        "expires) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                        bind_token, ud, "recording an issued token", NULL, e);
}

sl_code nh_store_token_issued(nh_store *s, const nh_token_rec *t, int *unique, sl_error *e)
{
    *unique = 0;
    sl_code rc = nh_store_txn(s, SL_DB_TXN_WRITE, token_txn, (void *)t, e);
    if (rc == SL_ERR_REFUSED && sl_db_last_failure(s->db) == SL_DB_FAIL_DUPLICATE)
        return SL_OK;
    *unique = rc == SL_OK;
    return rc;
}

/* ---------------------------------------------------------------------------- retention */

typedef struct prune_args {
    int64_t usage_before_ns, tokens_before;
    nh_pruned out;
} prune_args;

static sl_code prune_txn(sl_db *db, void *ud, sl_error *e)
{
    prune_args *a = ud;
    memset(&a->out, 0, sizeof a->out);
    struct {
        const char *sql;
        int64_t arg;
        int64_t *count;
    } steps[] = {
        {"DELETE FROM usage_records WHERE interval_end_ns < ?1", a->usage_before_ns, &a->out.usage},
        {"DELETE FROM placement_history WHERE until IS NOT NULL AND until < ?1",
         a->usage_before_ns / NS, &a->out.history},
        {"DELETE FROM tokens WHERE expires < ?1", a->tokens_before, &a->out.tokens},
    };
    sl_code rc = SL_OK;
    for (size_t i = 0; rc == SL_OK && i < sizeof steps / sizeof steps[0]; i++) {
        if (steps[i].arg <= 0)
            continue;
        sl_db_stmt *st;
        if ((rc = sl_db_prepare(db, steps[i].sql, &st, e)) != SL_OK)
            break;
        sl_db_bind_i64(st, 1, steps[i].arg);
        if ((rc = sl_db_run(st, "pruning", e)) == SL_OK)
            *steps[i].count = sl_db_changes(st);
        sl_db_finalize(st);
    }
    return rc;
}

sl_code nh_store_prune(nh_store *s, int64_t usage_before_ns, int64_t tokens_before, nh_pruned *out,
                       sl_error *e)
{
    prune_args a = {usage_before_ns, tokens_before, {0, 0, 0}};
    sl_code rc = nh_store_txn(s, SL_DB_TXN_WRITE, prune_txn, &a, e);
    if (out)
        *out = rc == SL_OK ? a.out : (nh_pruned){0, 0, 0};
    return rc;
}
