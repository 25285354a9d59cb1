/* SQLite helpers shared by the agent's usage store and nova-hook's registry (sluice/db.h). */
#include "sluice/db.h"

#include <stddef.h>

static sl_code fail(sqlite3 *db, const char *who, const char *what, sl_error *e)
{
    return sl_fail(e, SL_ERR_IO, "%s: %s: %s", who, what, db ? sqlite3_errmsg(db) : "no database");
}

sl_code sl_db_open(const char *path, int readonly, const char *who, sqlite3 **db, sl_error *e)
{
    *db = NULL;
    if (!path || !*path)
        return sl_fail(e, SL_ERR_INVALID, "%s: no database path", who);
    int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path, db, flags | SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
        sl_code rc = sl_db_check_path(path, readonly, who, e);
        if (rc == SL_OK)
            rc = sl_fail(e, SL_ERR_IO, "%s %s: %s", who, path,
                         *db ? sqlite3_errmsg(*db) : "cannot open");
        sqlite3_close(*db);
        *db = NULL;
        return rc;
    }
    sqlite3_busy_timeout(*db, 5000);
    sqlite3_extended_result_codes(*db, 1);
    sl_code rc = SL_OK;
    if (!readonly && ((rc = sl_db_exec(*db, who, "PRAGMA journal_mode = WAL", e)) != SL_OK ||
                      (rc = sl_db_exec(*db, who, "PRAGMA synchronous = FULL", e)) != SL_OK)) {
        sl_error why;
        if (sl_db_check_path(path, readonly, who, &why) != SL_OK) /* e.g. no -wal file */
            rc = sl_fail(e, why.code, "%s", why.msg);
        sqlite3_close(*db);
        *db = NULL;
    }
    return rc;
}

sl_code sl_db_exec(sqlite3 *db, const char *who, const char *sql, sl_error *e)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return fail(db, who, sql, e);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SL_OK : fail(db, who, sql, e);
}

sl_code sl_db_user_version(sqlite3 *db, const char *who, int *version, sl_error *e)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
        return fail(db, who, "reading the schema version", e);
    int rc = sqlite3_step(st);
    *version = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? SL_OK : fail(db, who, "reading the schema version", e);
}

sl_code sl_db_migrate(sqlite3 *db, const char *who, int from, const char *const *const *steps,
                      int n, sl_error *e)
{
    sl_code rc = sl_db_exec(db, who, "BEGIN IMMEDIATE", e);
    for (int v = from < 0 ? 0 : from; rc == SL_OK && v < n; v++)
        for (size_t i = 0; rc == SL_OK && steps[v][i]; i++)
            rc = sl_db_exec(db, who, steps[v][i], e);
    if (rc != SL_OK) {
        sl_db_exec(db, who, "ROLLBACK", NULL);
        return rc;
    }
    return sl_db_exec(db, who, "COMMIT", e);
}

const char *sl_db_text(sqlite3_stmt *st, int col)
{
    const unsigned char *v = sqlite3_column_text(st, col);
    return v ? (const char *)v : "";
}
