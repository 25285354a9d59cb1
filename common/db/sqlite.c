/* The SQLite engine of sluice_db: a file in WAL mode, synchronous=FULL, foreign keys on,
 * the schema version in PRAGMA user_version. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

#define BUSY_TIMEOUT_MS 5000

static sqlite3 *conn(sl_db *db)
{
    return db->impl;
}

static sl_db_failure kind_of(int rc)
{
    switch (rc) {
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_UNIQUE:
        return SL_DB_FAIL_DUPLICATE;
    case SQLITE_CONSTRAINT_FOREIGNKEY:
        return SL_DB_FAIL_FOREIGN_KEY;
    default:
        break;
    }
    int primary = rc & 0xff;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED ? SL_DB_FAIL_RETRY : SL_DB_FAIL_OTHER;
}

static sl_code fail(sl_db *db, int rc, const char *what, sl_error *e)
{
    sqlite3 *c = conn(db);
    return sl_db_fail(db, kind_of(rc), what, c ? sqlite3_errmsg(c) : sqlite3_errstr(rc), e);
}

static sl_code run_sql(sl_db *db, const char *sql, sl_error *e)
{
    char *msg = NULL;
    int rc = sqlite3_exec(conn(db), sql, NULL, NULL, &msg);
    if (rc == SQLITE_OK)
        return SL_OK;
    sl_code out = sl_db_fail(db, kind_of(sqlite3_extended_errcode(conn(db))), sql, msg, e);
    sqlite3_free(msg);
    return out;
}

static sl_code sq_open(sl_db *db, const sl_db_url *u, int flags, sl_error *e)
{
    int ro = (flags & SL_DB_READONLY) != 0;
    sqlite3 *c = NULL;
    int of = ro ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    int rc = sqlite3_open_v2(u->path, &c, of | SQLITE_OPEN_FULLMUTEX, NULL);
    if (rc != SQLITE_OK) {
        char msg[SL_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", c ? sqlite3_errmsg(c) : sqlite3_errstr(rc));
        sqlite3_close(c);
        sl_code why = sl_db_check_path(u->path, ro, db->who, e); /* says why, in plain words */
        if (why != SL_OK)
            return why;
        return sl_fail(e, SL_ERR_IO, "%s %s: cannot open: %s%s", db->who, u->path, msg,
                       ro ? " (read-only: the file must exist)" : "");
    }
    db->impl = c;
    sqlite3_busy_timeout(c, BUSY_TIMEOUT_MS);
    sqlite3_extended_result_codes(c, 1);
    sl_code out = run_sql(db, "PRAGMA foreign_keys = ON", e);
    if (out == SL_OK && !ro && (out = run_sql(db, "PRAGMA journal_mode = WAL", e)) == SL_OK)
        out = run_sql(db, "PRAGMA synchronous = FULL", e);
    if (out != SL_OK) {
        sl_error why;
        if (sl_db_check_path(u->path, ro, db->who, &why) != SL_OK) /* e.g. no -wal file */
            out = sl_fail(e, why.code, "%s", why.msg);
        sqlite3_close(c);
        db->impl = NULL;
    }
    return out;
}

static void sq_close(sl_db *db)
{
    sqlite3_close(conn(db));
    db->impl = NULL;
}

static sl_code sq_begin(sl_db *db, int write, sl_error *e)
{
    return run_sql(db, write ? "BEGIN IMMEDIATE" : "BEGIN", e);
}

static sl_code sq_commit(sl_db *db, sl_error *e)
{
    return run_sql(db, "COMMIT", e);
}

static void sq_rollback(sl_db *db)
{
    if (!sqlite3_get_autocommit(conn(db)))
        sqlite3_exec(conn(db), "ROLLBACK", NULL, NULL, NULL);
}

typedef struct sq_stmt {
    sqlite3_stmt *st;
    int started;
} sq_stmt;

static sl_code sq_prepare(sl_db_stmt *s, const char *sql, sl_error *e)
{
    sq_stmt *q = calloc(1, sizeof *q);
    if (!q)
        return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", s->db->who);
    int rc = sqlite3_prepare_v2(conn(s->db), sql, -1, &q->st, NULL);
    if (rc != SQLITE_OK) {
        free(q);
        return fail(s->db, rc, "preparing a statement", e);
    }
    s->impl = q;
    return SL_OK;
}

static void bind_all(sl_db_stmt *s, sqlite3_stmt *st)
{
    for (int i = 1; i <= s->nparams; i++) {
        const sl_db_value *v = &s->params[i];
        switch (v->type) {
        case SL_DB_V_I64:
            sqlite3_bind_int64(st, i, v->i);
            break;
        case SL_DB_V_DOUBLE:
            sqlite3_bind_double(st, i, v->d);
            break;
        case SL_DB_V_TEXT:
            sqlite3_bind_text(st, i, v->s, -1, SQLITE_STATIC);
            break;
        default:
            sqlite3_bind_null(st, i);
        }
    }
}

static sl_code sq_step(sl_db_stmt *s, const char *what, int *row, sl_error *e)
{
    sq_stmt *q = s->impl;
    if (!q->started) {
        bind_all(s, q->st);
        q->started = 1;
    }
    int rc = sqlite3_step(q->st);
    if (rc == SQLITE_ROW) {
        *row = 1;
        return SL_OK;
    }
    if (rc == SQLITE_DONE) {
        s->changes = sqlite3_changes(conn(s->db));
        return SL_OK;
    }
    return fail(s->db, sqlite3_extended_errcode(conn(s->db)), what, e);
}

static int sq_col_null(sl_db_stmt *s, int col)
{
    return sqlite3_column_type(((sq_stmt *)s->impl)->st, col) == SQLITE_NULL;
}

static const char *sq_col_text(sl_db_stmt *s, int col)
{
    return (const char *)sqlite3_column_text(((sq_stmt *)s->impl)->st, col);
}

static int64_t sq_col_i64(sl_db_stmt *s, int col)
{
    return sqlite3_column_int64(((sq_stmt *)s->impl)->st, col);
}

static double sq_col_double(sl_db_stmt *s, int col)
{
    return sqlite3_column_double(((sq_stmt *)s->impl)->st, col);
}

static void sq_reset(sl_db_stmt *s)
{
    sq_stmt *q = s->impl;
    sqlite3_reset(q->st);
    sqlite3_clear_bindings(q->st);
    q->started = 0;
}

static void sq_finalize(sl_db_stmt *s)
{
    sq_stmt *q = s->impl;
    if (q)
        sqlite3_finalize(q->st);
    free(q);
}

static sl_code sq_get_version(sl_db *db, int *v, sl_error *e)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(conn(db), "PRAGMA user_version", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return fail(db, rc, "reading the schema version", e);
    rc = sqlite3_step(st);
    *v = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? SL_OK : fail(db, rc, "reading the schema version", e);
}

static sl_code sq_set_version(sl_db *db, int v, sl_error *e)
{
    char sql[48];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v);
    return run_sql(db, sql, e);
}

static sl_code sq_count_tables(sl_db *db, int64_t *n, sl_error *e)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(conn(db), "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                                -1, &st, NULL);
    if (rc != SQLITE_OK)
        return fail(db, rc, "listing tables", e);
    rc = sqlite3_step(st);
    *n = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? SL_OK : fail(db, rc, "listing tables", e);
}

/* SQLite: the schema change runs in one write transaction, which is the lock. */
static sl_code sq_lock_schema(sl_db *db, const char *name, sl_error *e)
{
    (void)name;
    return run_sql(db, "BEGIN IMMEDIATE", e);
}

static sl_code sq_unlock_schema(sl_db *db, const char *name, int ok, sl_error *e)
{
    (void)name;
    if (ok)
        return sq_commit(db, e);
    sq_rollback(db);
    return SL_OK;
}

const sl_db_driver sl_db_sqlite_driver = {
    "SQLite",       "",
    sq_open,        sq_close,
    sq_begin,       sq_commit,
    sq_rollback,    sq_prepare,
    sq_step,        sq_col_null,
    sq_col_text,    sq_col_i64,
    sq_col_double,  sq_reset,
    sq_finalize,    sq_get_version,
    sq_set_version, sq_count_tables,
    sq_lock_schema, sq_unlock_schema,
};
