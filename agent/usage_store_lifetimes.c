/* The usage store's lifetimes: spans during which an instance ran here (usage_store.h). */
#include <stdlib.h>
#include <string.h>

#include "usage_store_internal.h"

/* ------------------------------------------------------------------------------ lifetimes */

/* Extends the instance's latest lifetime or starts one. */
static sl_code beat(ag_usage_store *s, const ag_usage_alive *a, int64_t now_ns, sl_error *e)
{
    sqlite3_stmt *st;
    sl_code rc = prep(s,
                      "SELECT start_ns, end_ns FROM lifetimes WHERE instance = ?1 "
                      "ORDER BY start_ns DESC LIMIT 1",
                      &st, e);
    if (rc != SL_OK)
        return rc;
    text(st, 1, a->instance);
    int r = sqlite3_step(st);
    int extend = 0;
    int64_t start = now_ns;
    if (r == SQLITE_ROW) {
        int64_t end = sqlite3_column_int64(st, 1);
        if (end >= now_ns - (int64_t)AG_USAGE_LIFE_GAP_S * 1000000000LL) {
            extend = 1;
            start = sqlite3_column_int64(st, 0);
        }
    } else if (r != SQLITE_DONE) {
        sqlite3_finalize(st);
        return db_fail(s, e, "reading a lifetime");
    }
    sqlite3_finalize(st);
    rc = prep(s,
              extend ? "UPDATE lifetimes SET end_ns = max(end_ns, ?3), open = 1, project = ?4, "
                       "name = ?5, domain = ?6, flavor = ?7, sla_tier = ?8, gpu_share = ?9 "
                       "WHERE instance = ?1 AND start_ns = ?2"
                     : "INSERT OR REPLACE INTO lifetimes(instance, start_ns, end_ns, open, "
                       "project, name, domain, flavor, sla_tier, gpu_share) "
                       "VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, ?7, ?8, ?9)",
              &st, e);
    if (rc != SL_OK)
        return rc;
    text(st, 1, a->instance);
    sqlite3_bind_int64(st, 2, start);
    sqlite3_bind_int64(st, 3, now_ns);
    text(st, 4, a->project);
    text(st, 5, a->name);
    text(st, 6, a->domain);
    text(st, 7, a->flavor);
    text(st, 8, a->tier);
    sqlite3_bind_double(st, 9, a->gpu_share);
    r = sqlite3_step(st);
    sqlite3_finalize(st);
    return r == SQLITE_DONE ? SL_OK : db_fail(s, e, "writing a lifetime");
}

sl_code ag_usage_store_heartbeat(ag_usage_store *s, const ag_usage_alive *a, size_t n,
                                 int64_t now_ns, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    sl_code rc = exec1(s, "BEGIN IMMEDIATE", e);
    for (size_t i = 0; rc == SL_OK && i < n; i++)
        rc = beat(s, &a[i], now_ns, e);
    if (rc == SL_OK) {
        sqlite3_stmt *st;
        rc = prep(s,
                  "UPDATE lifetimes SET open = 0, end_ns = CASE WHEN end_ns >= ?2 THEN ?1 ELSE "
                  "end_ns END WHERE open = 1 AND end_ns < ?1",
                  &st, e);
        if (rc == SL_OK) {
            sqlite3_bind_int64(st, 1, now_ns);
            sqlite3_bind_int64(st, 2, now_ns - (int64_t)AG_USAGE_LIFE_RECENT_S * 1000000000LL);
            if (sqlite3_step(st) != SQLITE_DONE)
                rc = db_fail(s, e, "closing lifetimes");
            sqlite3_finalize(st);
        }
    }
    if (rc == SL_OK)
        rc = exec1(s, "COMMIT", e);
    if (rc != SL_OK)
        exec1(s, "ROLLBACK", NULL);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

sl_code ag_usage_store_lives(ag_usage_store *s, int64_t from_ns, int64_t to_ns, const char *project,
                             ag_usage_life_cb cb, void *ud, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    sqlite3_stmt *st;
    sl_code rc = prep(s,
                      "SELECT instance, project, name, flavor, sla_tier, domain, gpu_share, "
                      "start_ns, end_ns, open FROM lifetimes WHERE end_ns >= ?1 AND start_ns < ?2 "
                      "AND (?3 IS NULL OR project = ?3) ORDER BY instance, start_ns",
                      &st, e);
    if (rc == SL_OK) {
        sqlite3_bind_int64(st, 1, from_ns);
        sqlite3_bind_int64(st, 2, to_ns);
        if (project)
            text(st, 3, project);
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW) {
            sl_usage_life l = {col(st, 0),
                               col(st, 1),
                               col(st, 2),
                               col(st, 3),
                               col(st, 4),
                               col(st, 5),
                               sqlite3_column_double(st, 6),
                               sqlite3_column_int64(st, 7),
                               sqlite3_column_int64(st, 8),
                               sqlite3_column_int(st, 9)};
            if (cb(&l, ud) != 0) {
                r = SQLITE_DONE;
                break;
            }
        }
        if (r != SQLITE_DONE)
            rc = db_fail(s, e, "reading lifetimes");
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

sl_code ag_usage_store_info(ag_usage_store *s, const char *instance, ag_usage_info *out, int *found,
                            sl_error *e)
{
    *found = 0;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    sqlite3_stmt *st;
    sl_code rc = prep(s,
                      "SELECT name, domain, flavor, sla_tier, gpu_share FROM lifetimes "
                      "WHERE instance = ?1 ORDER BY start_ns DESC LIMIT 1",
                      &st, e);
    if (rc == SL_OK) {
        text(st, 1, instance);
        int r = sqlite3_step(st);
        if (r == SQLITE_ROW) {
            copy(out->name, sizeof out->name, col(st, 0));
            copy(out->domain, sizeof out->domain, col(st, 1));
            copy(out->flavor, sizeof out->flavor, col(st, 2));
            copy(out->tier, sizeof out->tier, col(st, 3));
            out->gpu_share = sqlite3_column_double(st, 4);
            *found = 1;
        } else if (r != SQLITE_DONE) {
            rc = db_fail(s, e, "reading a lifetime");
        }
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}
