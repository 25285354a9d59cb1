/* Shared GPU time in the usage store (docs/accounting.md, "Shared GPU time"): each record's
 * busy intervals are stored with it (same transaction: durable before it is acknowledged);
 * ag_usage_store_settle apportions each GPU's time window by window (usage_share.c), once the
 * window is settled, adding each record's share to records.gpu_shared_ns and to its series'
 * totals, and moves the GPU's mark (settled.until_ns), all in one transaction: a restart
 * resumes at the mark, nothing is apportioned twice. */
#include <stdlib.h>
#include <string.h>

#include "usage_share.h"
#include "usage_store.h"
#include "usage_store_internal.h"

sl_code ag_usage_store_busy_put(sl_db *db, const Sluice__Control__UsageRecord *r, sl_error *e)
{
    if (!r->n_busy || !r->gpu_uuid || !*r->gpu_uuid)
        return SL_OK;
    sl_db_stmt *st = NULL;
    sl_code rc = sl_db_prepare(db, "INSERT INTO busy VALUES (?1, ?2, ?3, ?4)", &st, e);
    for (size_t i = 0; rc == SL_OK && i < r->n_busy; i++) {
        sl_db_reset(st);
        ag_usage_store_bind_text(st, 1, r->record_id);
        ag_usage_store_bind_text(st, 2, r->gpu_uuid);
        sl_db_bind_i64(st, 3, r->busy[i]->start_ns);
        sl_db_bind_i64(st, 4, r->busy[i]->end_ns);
        rc = sl_db_run(st, "storing a record's busy intervals", e);
    }
    sl_db_finalize(st);
    return rc;
}

/* One value from a query of one row (0 when there is none or it is NULL); *found = a value.
 * Binds ?1 = gpu unless NULL, ?2 = *arg unless NULL. */
static sl_code one_i64(sl_db *db, const char *sql, const char *gpu, const int64_t *arg,
                       int64_t *out, int *found, sl_error *e)
{
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db, sql, &st, e);
    if (rc != SL_OK)
        return rc;
    if (gpu)
        sl_db_bind_text(st, 1, gpu);
    if (arg)
        sl_db_bind_i64(st, 2, *arg);
    int row = 0;
    rc = sl_db_step(st, "reading shared GPU time", &row, e);
    *found = rc == SL_OK && row && !sl_db_col_null(st, 0);
    *out = *found ? sl_db_col_i64(st, 0) : 0;
    sl_db_finalize(st);
    return rc;
}

typedef struct gpus {
    char **id;
    size_t n, cap;
    int oom;
} gpus;

static int on_gpu(sl_db_stmt *st, void *ud)
{
    gpus *g = ud;
    if (g->n == g->cap) {
        size_t c = g->cap ? 2 * g->cap : 8;
        char **p = realloc(g->id, c * sizeof *p);
        if (!p)
            return g->oom = 1;
        g->id = p;
        g->cap = c;
    }
    if (!(g->id[g->n] = strdup(sl_db_col_text(st, 0))))
        return g->oom = 1;
    g->n++;
    return 0;
}

/* The intervals of one window of one GPU, who = the record's index in ids. */
typedef struct window {
    ag_share_iv *iv;
    size_t n, cap;
    char **ids;
    size_t nid, capid;
    int oom;
} window;

static int on_busy(sl_db_stmt *st, void *ud)
{
    window *w = ud;
    const char *id = sl_db_col_text(st, 0);
    if (!w->nid || strcmp(w->ids[w->nid - 1], id)) { /* ordered by record */
        if (w->nid == w->capid) {
            size_t c = w->capid ? 2 * w->capid : 16;
            char **p = realloc(w->ids, c * sizeof *p);
            if (!p)
                return w->oom = 1;
            w->ids = p;
            w->capid = c;
        }
        if (!(w->ids[w->nid] = strdup(id)))
            return w->oom = 1;
        w->nid++;
    }
    if (w->n == w->cap) {
        size_t c = w->cap ? 2 * w->cap : 64;
        ag_share_iv *p = realloc(w->iv, c * sizeof *p);
        if (!p)
            return w->oom = 1;
        w->iv = p;
        w->cap = c;
    }
    w->iv[w->n++] = (ag_share_iv){sl_db_col_i64(st, 1), sl_db_col_i64(st, 2), w->nid - 1};
    return 0;
}

static void window_clear(window *w)
{
    for (size_t i = 0; i < w->nid; i++)
        free(w->ids[i]);
    w->n = w->nid = 0;
}

typedef struct settle_args {
    int64_t limit_ns, window_ns;
    size_t max_windows;
    ag_usage_settled out;
} settle_args;

/* Apportions [lo, lo + window) of gpu and adds the shares to the records and their totals. */
static sl_code settle_window(sl_db *db, const char *gpu, int64_t lo, int64_t hi, window *w,
                             settle_args *a, sl_error *e)
{
    window_clear(w);
    sl_db_stmt *st, *up = NULL, *tot = NULL;
    sl_code rc = sl_db_prepare(db,
                               "SELECT record_id, start_ns, end_ns FROM busy WHERE gpu_uuid = ?1 "
                               "AND end_ns > ?2 AND start_ns < ?3 ORDER BY record_id",
                               &st, e);
    if (rc != SL_OK)
        return rc;
    sl_db_bind_text(st, 1, gpu);
    sl_db_bind_i64(st, 2, lo);
    sl_db_bind_i64(st, 3, hi);
    rc = sl_db_each(st, "reading busy intervals", on_busy, w, e);
    sl_db_finalize(st);
    if (rc == SL_OK && w->oom)
        rc = sl_fail(e, SL_ERR_NOMEM, WHO ": out of memory");
    if (rc != SL_OK || !w->n)
        return rc;
    uint64_t *shared = calloc(w->nid, sizeof *shared), busy = 0;
    if (!shared || ag_share_apportion(w->iv, w->n, w->nid, lo, hi, shared, &busy) != 0) {
        free(shared);
        return sl_fail(e, SL_ERR_NOMEM, WHO ": out of memory");
    }
    rc = sl_db_prepare(
        db, "UPDATE records SET gpu_shared_ns = gpu_shared_ns + ?2 WHERE record_id = ?1", &up, e);
    if (rc == SL_OK)
        rc = sl_db_prepare(db,
                           "UPDATE totals SET gpu_shared_ns = gpu_shared_ns + ?2 WHERE "
                           "(project, instance, domain, gpu_uuid) = (SELECT project, instance, "
                           "domain, gpu_uuid FROM records WHERE record_id = ?1)",
                           &tot, e);
    for (size_t i = 0; rc == SL_OK && i < w->nid; i++) {
        if (!shared[i])
            continue;
        sl_db_stmt *both[] = {up, tot};
        for (int k = 0; rc == SL_OK && k < 2; k++) {
            sl_db_reset(both[k]);
            sl_db_bind_text(both[k], 1, w->ids[i]);
            sl_db_bind_i64(both[k], 2, (int64_t)shared[i]);
            rc = sl_db_run(both[k], "adding shared GPU time", e);
        }
    }
    sl_db_finalize(up);
    sl_db_finalize(tot);
    free(shared);
    if (rc == SL_OK) {
        a->out.windows++;
        a->out.busy_ns += busy;
    }
    return rc;
}

/* Settles gpu's windows from its mark up to the limit; returns with the mark moved. */
static sl_code settle_gpu(sl_db *db, const char *gpu, window *w, settle_args *a, sl_error *e)
{
    int64_t mark = 0, next = 0;
    int have_mark = 0, found = 0;
    sl_code rc = one_i64(db, "SELECT until_ns FROM settled WHERE gpu_uuid = ?1", gpu, NULL, &mark,
                         &have_mark, e);
    int64_t P = a->window_ns, limit = a->limit_ns / P * P; /* the last window ends here */
    while (rc == SL_OK && a->out.windows < a->max_windows) {
        /* the next window with work in it, from the mark */
        int64_t from = have_mark ? mark : INT64_MIN;
        rc = one_i64(db, "SELECT min(start_ns) FROM busy WHERE gpu_uuid = ?1 AND end_ns > ?2", gpu,
                     &from, &next, &found, e);
        if (rc != SL_OK)
            break;
        if (!found) { /* nothing more: the mark moves up to the limit */
            if (!have_mark || limit > mark)
                mark = have_mark && mark > limit ? mark : limit;
            have_mark = 1;
            break;
        }
        int64_t lo = next / P * P;
        if (next < 0 && lo != next)
            lo -= P;
        if (have_mark && lo < mark)
            lo = mark;
        if (lo + P > limit) { /* not settled yet; nothing before lo, up to the limit */
            int64_t upto = lo < limit ? lo : limit;
            if (!have_mark || upto > mark)
                mark = upto;
            have_mark = 1;
            break;
        }
        rc = settle_window(db, gpu, lo, lo + P, w, a, e);
        mark = lo + P;
        have_mark = 1;
    }
    if (rc != SL_OK || !have_mark)
        return rc;
    sl_db_stmt *st;
    rc = sl_db_prepare(db,
                       "INSERT INTO settled VALUES (?1, ?2) ON CONFLICT(gpu_uuid) DO UPDATE SET "
                       "until_ns = max(until_ns, ?2)",
                       &st, e);
    if (rc != SL_OK)
        return rc;
    sl_db_bind_text(st, 1, gpu);
    sl_db_bind_i64(st, 2, mark);
    rc = sl_db_run(st, "moving the shared-time mark", e);
    sl_db_finalize(st);
    /* what lies wholly before the mark is apportioned and never looked at again */
    if (rc == SL_OK)
        rc = sl_db_prepare(db, "DELETE FROM busy WHERE gpu_uuid = ?1 AND end_ns <= ?2", &st, e);
    if (rc == SL_OK) {
        sl_db_bind_text(st, 1, gpu);
        sl_db_bind_i64(st, 2, mark);
        rc = sl_db_run(st, "dropping apportioned busy intervals", e);
        sl_db_finalize(st);
    }
    return rc;
}

static sl_code settle_txn(sl_db *db, void *ud, sl_error *e)
{
    settle_args *a = ud;
    memset(&a->out, 0, sizeof a->out);
    gpus g = {0};
    window w = {0};
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db, "SELECT DISTINCT gpu_uuid FROM busy ORDER BY 1", &st, e);
    if (rc == SL_OK) {
        rc = sl_db_each(st, "reading the GPUs with busy time", on_gpu, &g, e);
        sl_db_finalize(st);
    }
    if (rc == SL_OK && g.oom)
        rc = sl_fail(e, SL_ERR_NOMEM, WHO ": out of memory");
    for (size_t i = 0; rc == SL_OK && i < g.n; i++)
        rc = settle_gpu(db, g.id[i], &w, a, e);
    for (size_t i = 0; i < g.n; i++)
        free(g.id[i]);
    free(g.id);
    window_clear(&w);
    free(w.iv);
    free(w.ids);
    return rc;
}

/* The earliest time some open session may still send records of: its latest record's end, or
 * its opening when none came yet. */
static sl_code open_horizon(sl_db *db, int64_t *h, int *found, sl_error *e)
{
    return one_i64(db,
                   "SELECT min(CASE WHEN last_end_ns > 0 THEN last_end_ns ELSE opened_ns END) "
                   "FROM open_sessions",
                   NULL, NULL, h, found, e);
}

static sl_code horizon_txn(sl_db *db, void *ud, sl_error *e)
{
    int64_t *h = ud, v = 0;
    int found = 0;
    sl_code rc = open_horizon(db, &v, &found, e);
    *h = rc == SL_OK && found ? v : INT64_MAX;
    return rc;
}

sl_code ag_usage_store_settle(ag_usage_store *s, const ag_usage_settle_opts *o, int64_t now_ns,
                              ag_usage_settled *out, sl_error *e)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (o->window_ns <= 0)
        return sl_fail(e, SL_ERR_INVALID, WHO ": the shared-time window must be positive");
    int64_t h = INT64_MAX;
    sl_code rc = ag_usage_store_txn(s, 0, horizon_txn, &h, e);
    if (rc != SL_OK)
        return rc;
    int64_t limit = now_ns - o->grace_ns;
    if (h < limit)
        limit = h;
    if (limit < now_ns - o->max_delay_ns) /* a session silent for that long waits no more */
        limit = now_ns - o->max_delay_ns;
    settle_args a = {limit, o->window_ns, o->max_windows ? o->max_windows : 1, {0, 0}};
    rc = ag_usage_store_txn(s, SL_DB_TXN_WRITE, settle_txn, &a, e);
    if (rc == SL_OK && out)
        *out = a.out;
    return rc;
}
