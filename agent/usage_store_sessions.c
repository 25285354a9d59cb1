/* The usage store's open sessions (usage_store.h): a row per session a backend reported opened
 * or sent records of, gone with its final record. When a backend ends, the agent closes the
 * rows left of it with a record marked closed_by_agent (usage_ingest.c). Session ids are the
 * backend's counter, so a later backend of the project uses them again: a record ending before
 * that session's final record (a late copy) never opens the row again. */
#include <stdlib.h>
#include <string.h>

#include "usage_store_internal.h"

sl_code ag_usage_store_session_record(sl_db *db, const Sluice__Control__UsageRecord *r, sl_error *e)
{
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(
        db,
        r->final ? "DELETE FROM open_sessions WHERE project = ?1 AND session_id = ?2"
                 : "INSERT INTO open_sessions(project, session_id, instance, flavor, gpu_uuid, "
                   "opened_ns, last_end_ns) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE NOT EXISTS "
                   "(SELECT 1 FROM records WHERE project = ?1 AND session_id = ?2 AND final = 1 "
                   "AND end_ns >= ?7) ON CONFLICT(project, session_id) DO UPDATE SET "
                   "instance = ?3, flavor = ?4, gpu_uuid = ?5, last_end_ns = max(last_end_ns, ?7)",
        &st, e);
    if (rc != SL_OK)
        return rc;
    ag_usage_store_bind_text(st, 1, r->project_id);
    sl_db_bind_i64(st, 2, (int64_t)r->session_id);
    if (!r->final) {
        ag_usage_store_bind_text(st, 3, r->instance_uuid);
        ag_usage_store_bind_text(st, 4, r->flavor);
        ag_usage_store_bind_text(st, 5, r->gpu_uuid);
        sl_db_bind_i64(st, 6, r->interval_start_ns);
        sl_db_bind_i64(st, 7, r->interval_end_ns);
    }
    rc = sl_db_run(st, "keeping a session open", e);
    sl_db_finalize(st);
    return rc;
}

typedef struct opened_args {
    const char *project, *instance;
    uint64_t session_id;
    int64_t now_ns;
} opened_args;

static sl_code opened_txn(sl_db *db, void *ud, sl_error *e)
{
    opened_args *a = ud;
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db,
                               "INSERT INTO open_sessions(project, session_id, instance, flavor, "
                               "gpu_uuid, opened_ns, last_end_ns) VALUES (?1, ?2, ?3, '', '', ?4, "
                               "0) ON CONFLICT(project, session_id) DO NOTHING",
                               &st, e);
    if (rc != SL_OK)
        return rc;
    ag_usage_store_bind_text(st, 1, a->project);
    sl_db_bind_i64(st, 2, (int64_t)a->session_id);
    ag_usage_store_bind_text(st, 3, a->instance);
    sl_db_bind_i64(st, 4, a->now_ns);
    rc = sl_db_run(st, "recording an open session", e);
    sl_db_finalize(st);
    return rc;
}

sl_code ag_usage_store_session_opened(ag_usage_store *s, const char *project, uint64_t session_id,
                                      const char *instance, int64_t now_ns, sl_error *e)
{
    opened_args a = {project, instance, session_id, now_ns};
    return ag_usage_store_txn(s, SL_DB_TXN_WRITE, opened_txn, &a, e);
}

typedef struct open_cb {
    ag_usage_open_cb cb;
    void *ud;
} open_cb;

static int on_open(sl_db_stmt *st, void *ud)
{
    open_cb *c = ud;
    ag_usage_open o = {sl_db_col_text(st, 0), sl_db_col_text(st, 2), sl_db_col_text(st, 3),
                       sl_db_col_text(st, 4), sl_db_col_u64(st, 1),  sl_db_col_i64(st, 5),
                       sl_db_col_i64(st, 6)};
    return c->cb(&o, c->ud);
}

typedef struct open_args {
    const char *project;
    open_cb c;
} open_args;

static sl_code open_sessions_txn(sl_db *db, void *ud, sl_error *e)
{
    open_args *a = ud;
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db,
                               "SELECT project, session_id, instance, flavor, gpu_uuid, opened_ns, "
                               "last_end_ns FROM open_sessions WHERE ?1 IS NULL OR project = ?1 "
                               "ORDER BY project, session_id",
                               &st, e);
    if (rc != SL_OK)
        return rc;
    sl_db_bind_text(st, 1, a->project);
    rc = sl_db_each(st, "reading the open sessions", on_open, &a->c, e);
    sl_db_finalize(st);
    return rc;
}

sl_code ag_usage_store_open_sessions(ag_usage_store *s, const char *project, ag_usage_open_cb cb,
                                     void *ud, sl_error *e)
{
    open_args a = {project, {cb, ud}};
    return ag_usage_store_txn(s, SL_DB_TXN_ONCE, open_sessions_txn, &a, e);
}
