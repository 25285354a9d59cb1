/* The usage store's open sessions (usage_store.h): a row per session a backend reported opened
 * or sent records of, gone with its final record. When a backend ends, the agent closes the
 * rows left of it with a record marked closed_by_agent (usage_ingest.c). Session ids are the
 * backend's counter, so a later backend of the project uses them again: a record ending before
 * that session's final record (a late copy) never opens the row again. */
#include <stdlib.h>
#include <string.h>

#include "usage_store_internal.h"

sl_code ag_us_session_record(ag_usage_store *s, const Sluice__Control__UsageRecord *r, sl_error *e)
{
    sqlite3_stmt *st;
    sl_code rc = prep(
        s,
        r->final ? "DELETE FROM open_sessions WHERE project = ?1 AND session_id = ?2"
                 : "INSERT INTO open_sessions(project, session_id, instance, flavor, gpu_uuid, "
                   "opened_ns, last_end_ns) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE NOT EXISTS "
                   "(SELECT 1 FROM records WHERE project = ?1 AND session_id = ?2 AND final = 1 "
                   "AND end_ns >= ?7) ON CONFLICT(project, session_id) DO UPDATE SET "
                   "instance = ?3, flavor = ?4, gpu_uuid = ?5, last_end_ns = max(last_end_ns, ?7)",
        &st, e);
    if (rc != SL_OK)
        return rc;
    text(st, 1, r->project_id);
    sqlite3_bind_int64(st, 2, (int64_t)r->session_id);
    if (!r->final) {
        text(st, 3, r->instance_uuid);
        text(st, 4, r->flavor);
        text(st, 5, r->gpu_uuid);
        sqlite3_bind_int64(st, 6, r->interval_start_ns);
        sqlite3_bind_int64(st, 7, r->interval_end_ns);
    }
    int step = sqlite3_step(st);
    sqlite3_finalize(st);
    return step == SQLITE_DONE ? SL_OK : db_fail(s, e, "keeping a session open");
}

sl_code ag_usage_store_session_opened(ag_usage_store *s, const char *project, uint64_t session_id,
                                      const char *instance, int64_t now_ns, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    sqlite3_stmt *st;
    sl_code rc = prep(s,
                      "INSERT INTO open_sessions(project, session_id, instance, flavor, gpu_uuid, "
                      "opened_ns, last_end_ns) VALUES (?1, ?2, ?3, '', '', ?4, 0) "
                      "ON CONFLICT(project, session_id) DO NOTHING",
                      &st, e);
    if (rc == SL_OK) {
        text(st, 1, project);
        sqlite3_bind_int64(st, 2, (int64_t)session_id);
        text(st, 3, instance);
        sqlite3_bind_int64(st, 4, now_ns);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = db_fail(s, e, "recording an open session");
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

sl_code ag_usage_store_open_sessions(ag_usage_store *s, const char *project, ag_usage_open_cb cb,
                                     void *ud, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    sqlite3_stmt *st;
    sl_code rc = prep(s,
                      "SELECT project, session_id, instance, flavor, gpu_uuid, opened_ns, "
                      "last_end_ns FROM open_sessions WHERE ?1 IS NULL OR project = ?1 "
                      "ORDER BY project, session_id",
                      &st, e);
    if (rc == SL_OK) {
        if (project)
            text(st, 1, project);
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW) {
            ag_usage_open o = {col(st, 0),
                               col(st, 2),
                               col(st, 3),
                               col(st, 4),
                               u64(st, 1),
                               sqlite3_column_int64(st, 5),
                               sqlite3_column_int64(st, 6)};
            if (cb(&o, ud) != 0) {
                r = SQLITE_DONE;
                break;
            }
        }
        if (r != SQLITE_DONE)
            rc = db_fail(s, e, "reading the open sessions");
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}
