/* The usage store's lifetimes (heartbeat, walks, what is known of an instance) and its
 * retention (usage_store.h). */
#include <stdlib.h>
#include <string.h>

#include "usage_store_internal.h"

#define NS 1000000000LL

static void copy(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Extends the instance's latest lifetime or starts one. */
static sl_code beat(sl_db *db, const ag_usage_alive *a, int64_t now_ns, sl_error *e)
{
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db,
                               "SELECT start_ns, end_ns FROM lifetimes WHERE instance = ?1 "
                               "ORDER BY start_ns DESC LIMIT 1",
                               &st, e);
    if (rc != SL_OK)
        return rc;
    ag_usage_store_bind_text(st, 1, a->instance);
    int row = 0, extend = 0;
    int64_t start = now_ns;
    rc = sl_db_step(st, "reading a lifetime", &row, e);
    if (rc == SL_OK && row && sl_db_col_i64(st, 1) >= now_ns - (int64_t)AG_USAGE_LIFE_GAP_S * NS) {
        extend = 1;
        start = sl_db_col_i64(st, 0);
    }
    sl_db_finalize(st);
    if (rc != SL_OK)
        return rc;
    rc = sl_db_prepare(db,
                       extend ? "UPDATE lifetimes SET end_ns = max(end_ns, ?3), open = 1, "
                                "project = ?4, name = ?5, domain = ?6, flavor = ?7, "
                                "sla_tier = ?8, gpu_share = ?9 WHERE instance = ?1 AND "
                                "start_ns = ?2"
                              : "INSERT OR REPLACE INTO lifetimes(instance, start_ns, end_ns, "
                                "open, project, name, domain, flavor, sla_tier, gpu_share) "
                                "VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, ?7, ?8, ?9)",
                       &st, e);
    if (rc != SL_OK)
        return rc;
    const char *t[] = {a->instance, NULL, NULL, a->project, a->name, a->domain, a->flavor, a->tier};
    for (int i = 0; i < 8; i++)
        if (i != 1 && i != 2)
            ag_usage_store_bind_text(st, i + 1, t[i]);
    sl_db_bind_i64(st, 2, start);
    sl_db_bind_i64(st, 3, now_ns);
    sl_db_bind_double(st, 9, a->gpu_share);
    rc = sl_db_run(st, "writing a lifetime", e);
    sl_db_finalize(st);
    return rc;
}

typedef struct beat_args {
    const ag_usage_alive *a;
    size_t n;
    int64_t now_ns;
} beat_args;

static sl_code heartbeat_txn(sl_db *db, void *ud, sl_error *e)
{
    beat_args *b = ud;
    sl_code rc = SL_OK;
    for (size_t i = 0; rc == SL_OK && i < b->n; i++)
        rc = beat(db, &b->a[i], b->now_ns, e);
    if (rc != SL_OK)
        return rc;
    sl_db_stmt *st;
    rc = sl_db_prepare(db,
                       "UPDATE lifetimes SET open = 0, end_ns = CASE WHEN end_ns >= ?2 THEN ?1 "
                       "ELSE end_ns END WHERE open = 1 AND end_ns < ?1",
                       &st, e);
    if (rc != SL_OK)
        return rc;
    sl_db_bind_i64(st, 1, b->now_ns);
    sl_db_bind_i64(st, 2, b->now_ns - (int64_t)AG_USAGE_LIFE_RECENT_S * NS);
    rc = sl_db_run(st, "closing lifetimes", e);
    sl_db_finalize(st);
    return rc;
}

sl_code ag_usage_store_heartbeat(ag_usage_store *s, const ag_usage_alive *a, size_t n,
                                 int64_t now_ns, sl_error *e)
{
    beat_args b = {a, n, now_ns};
    return ag_usage_store_txn(s, SL_DB_TXN_WRITE, heartbeat_txn, &b, e);
}

typedef struct life_cb {
    ag_usage_life_cb cb;
    void *ud;
} life_cb;

static int on_life(sl_db_stmt *st, void *ud)
{
    life_cb *c = ud;
    sl_usage_life l = {sl_db_col_text(st, 0),    sl_db_col_text(st, 1), sl_db_col_text(st, 2),
                       sl_db_col_text(st, 3),    sl_db_col_text(st, 4), sl_db_col_text(st, 5),
                       sl_db_col_double(st, 6),  sl_db_col_i64(st, 7),  sl_db_col_i64(st, 8),
                       (int)sl_db_col_i64(st, 9)};
    return c->cb(&l, c->ud);
}

sl_code ag_usage_store_lives(ag_usage_store *s, int64_t from_ns, int64_t to_ns, const char *project,
                             ag_usage_life_cb cb, void *ud, sl_error *e)
{
    life_cb c = {cb, ud};
    ag_usage_period p = {from_ns, to_ns, project};
    return ag_usage_store_walk(s,
                               "SELECT instance, project, name, flavor, sla_tier, domain, "
                               "gpu_share, start_ns, end_ns, open FROM lifetimes WHERE end_ns >= "
                               "?1 AND start_ns < ?2 AND (?3 IS NULL OR project = ?3) "
                               "ORDER BY instance, start_ns",
                               "reading lifetimes", &p, on_life, &c, e);
}

typedef struct info_args {
    const char *instance;
    ag_usage_info *out;
    int found;
} info_args;

static sl_code info_txn(sl_db *db, void *ud, sl_error *e)
{
    info_args *a = ud;
    a->found = 0;
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db,
                               "SELECT name, domain, flavor, sla_tier, gpu_share FROM lifetimes "
                               "WHERE instance = ?1 ORDER BY start_ns DESC LIMIT 1",
                               &st, e);
    if (rc != SL_OK)
        return rc;
    ag_usage_store_bind_text(st, 1, a->instance);
    int row = 0;
    if ((rc = sl_db_step(st, "reading a lifetime", &row, e)) == SL_OK && row) {
        copy(a->out->name, sizeof a->out->name, sl_db_col_text(st, 0));
        copy(a->out->domain, sizeof a->out->domain, sl_db_col_text(st, 1));
        copy(a->out->flavor, sizeof a->out->flavor, sl_db_col_text(st, 2));
        copy(a->out->tier, sizeof a->out->tier, sl_db_col_text(st, 3));
        a->out->gpu_share = sl_db_col_double(st, 4);
        a->found = 1;
    }
    sl_db_finalize(st);
    return rc;
}

sl_code ag_usage_store_info(ag_usage_store *s, const char *instance, ag_usage_info *out, int *found,
                            sl_error *e)
{
    memset(out, 0, sizeof *out);
    info_args a = {instance, out, 0};
    sl_code rc = ag_usage_store_txn(s, 0, info_txn, &a, e);
    *found = rc == SL_OK && a.found;
    return rc;
}

/* ------------------------------------------------------------------------------ retention */

typedef struct prune_args {
    int64_t before_ns;
    int keep_unforwarded;
    ag_usage_pruned out;
} prune_args;

static sl_code prune_txn(sl_db *db, void *ud, sl_error *e)
{
    prune_args *a = ud;
    memset(&a->out, 0, sizeof a->out);
    static const char *const sql[] = {
        "DELETE FROM records WHERE end_ns < ?1 AND (?2 = 0 OR forwarded != 0)",
        "DELETE FROM lifetimes WHERE open = 0 AND end_ns < ?1",
    };
    uint64_t *count[] = {&a->out.records, &a->out.lifetimes};
    sl_code rc = SL_OK;
    for (int i = 0; rc == SL_OK && i < 2; i++) {
        sl_db_stmt *st;
        if ((rc = sl_db_prepare(db, sql[i], &st, e)) != SL_OK)
            break;
        sl_db_bind_i64(st, 1, a->before_ns);
        sl_db_bind_i64(st, 2, a->keep_unforwarded ? 1 : 0);
        if ((rc = sl_db_run(st, "pruning old usage", e)) == SL_OK)
            *count[i] = (uint64_t)sl_db_changes(st);
        sl_db_finalize(st);
    }
    return rc;
}

sl_code ag_usage_store_prune(ag_usage_store *s, int64_t before_ns, int keep_unforwarded,
                             ag_usage_pruned *out, sl_error *e)
{
    prune_args a = {before_ns, keep_unforwarded, {0, 0}};
    sl_code rc = ag_usage_store_txn(s, SL_DB_TXN_WRITE, prune_txn, &a, e);
    if (out)
        *out = rc == SL_OK ? a.out : (ag_usage_pruned){0, 0};
    return rc;
}
