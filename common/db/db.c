/* The engine-neutral half of the database layer (sluice/db.h): opening by URL, parameters,
 * error messages, transactions run again on transient failures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver.h"

#define TXN_ATTEMPTS 5

sl_code sl_db_fail(sl_db *db, sl_db_failure kind, const char *what, const char *detail, sl_error *e)
{
    db->failure = kind;
    sl_code code =
        kind == SL_DB_FAIL_DUPLICATE || kind == SL_DB_FAIL_FOREIGN_KEY ? SL_ERR_REFUSED : SL_ERR_IO;
    return sl_fail(e, code, "%s %s: %s: %s", db->who, db->url.display, what,
                   detail ? detail : "failed");
}

sl_code sl_db_open(const char *url, int flags, const char *who, sl_db **out, sl_error *e)
{
    *out = NULL;
    sl_db *db = calloc(1, sizeof *db);
    if (!db)
        return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", who);
    snprintf(db->who, sizeof db->who, "%s", who ? who : "database");
    db->readonly = (flags & SL_DB_READONLY) != 0;
    sl_code rc = sl_db_url_parse(url, &db->url, e);
    if (rc != SL_OK) {
        char msg[SL_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", e ? e->msg : "");
        free(db);
        return sl_fail(e, rc, "%s: %s", who, msg);
    }
    if (db->url.engine == SL_DB_SQLITE) {
        db->drv = &sl_db_sqlite_driver;
    } else {
#ifdef SLUICE_DB_MARIADB
        db->drv = &sl_db_mariadb_driver;
#else
        free(db);
        return sl_fail(e, SL_ERR_UNSUPPORTED, "%s: this program stores in SQLite only, not %s", who,
                       url);
#endif
    }
    if ((rc = db->drv->open(db, &db->url, flags, e)) != SL_OK) {
        free(db);
        return rc;
    }
    *out = db;
    return SL_OK;
}

sl_code sl_db_check_url(const char *url, int readonly, const char *who, sl_error *e)
{
    sl_db_url u;
    sl_code rc = sl_db_url_parse(url, &u, e);
    if (rc == SL_OK && u.engine == SL_DB_SQLITE)
        rc = sl_db_check_path(u.path, readonly, who, e);
    memset(u.password, 0, sizeof u.password);
    return rc;
}

void sl_db_close(sl_db *db)
{
    if (!db)
        return;
    db->drv->close(db);
    memset(db->url.password, 0, sizeof db->url.password);
    free(db);
}

sl_db_engine sl_db_engine_of(const sl_db *db)
{
    return db->url.engine;
}

const char *sl_db_where(const sl_db *db)
{
    return db->url.display;
}

const char *sl_db_who(const sl_db *db)
{
    return db->who;
}

sl_db_failure sl_db_last_failure(const sl_db *db)
{
    return db->failure;
}

int sl_db_max_param(const char *sql)
{
    int max = 0;
    char quote = 0;
    for (const char *p = sql; *p; p++) {
        if (quote) {
            if (*p == quote)
                quote = 0;
            continue;
        }
        if (*p == '\'' || *p == '"' || *p == '`') {
            quote = *p;
            continue;
        }
        if (*p != '?')
            continue;
        if (p[1] < '1' || p[1] > '9')
            return -1;
        int n = 0;
        while (p[1] >= '0' && p[1] <= '9' && n < 1000)
            n = n * 10 + (*++p - '0');
        if (n > 999)
            return -1;
        if (n > max)
            max = n;
    }
    return max;
}

sl_code sl_db_prepare(sl_db *db, const char *sql, sl_db_stmt **out, sl_error *e)
{
    *out = NULL;
    int n = sl_db_max_param(sql);
    if (n < 0)
        return sl_db_fail(db, SL_DB_FAIL_OTHER, "preparing a statement",
                          "parameters must be numbered ?1..?999", e);
    sl_db_stmt *st = calloc(1, sizeof *st);
    sl_db_value *params = calloc((size_t)n + 1, sizeof *params);
    if (!st || !params) {
        free(st);
        free(params);
        return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", db->who);
    }
    st->db = db;
    st->params = params;
    st->nparams = n;
    sl_code rc = db->drv->prepare(st, sql, e);
    if (rc != SL_OK) {
        if (st->impl) /* the engine's half-made statement */
            db->drv->finalize(st);
        free(params);
        free(st);
        return rc;
    }
    *out = st;
    return SL_OK;
}

static sl_db_value *slot(sl_db_stmt *st, int i)
{
    if (i < 1 || i > st->nparams)
        return NULL;
    sl_db_value *v = &st->params[i];
    free(v->s);
    memset(v, 0, sizeof *v);
    return v;
}

void sl_db_bind_text(sl_db_stmt *st, int i, const char *s)
{
    sl_db_value *v = slot(st, i);
    if (v && s) {
        v->s = strdup(s);
        v->type = v->s ? SL_DB_V_TEXT : SL_DB_V_NULL;
    }
}

void sl_db_bind_i64(sl_db_stmt *st, int i, int64_t x)
{
    sl_db_value *v = slot(st, i);
    if (v) {
        v->type = SL_DB_V_I64;
        v->i = x;
    }
}

void sl_db_bind_double(sl_db_stmt *st, int i, double x)
{
    sl_db_value *v = slot(st, i);
    if (v) {
        v->type = SL_DB_V_DOUBLE;
        v->d = x;
    }
}

void sl_db_bind_null(sl_db_stmt *st, int i)
{
    slot(st, i);
}

sl_code sl_db_step(sl_db_stmt *st, const char *what, int *row, sl_error *e)
{
    *row = 0;
    st->db->failure = SL_DB_FAIL_NONE;
    return st->db->drv->step(st, what, row, e);
}

sl_code sl_db_run(sl_db_stmt *st, const char *what, sl_error *e)
{
    int row;
    sl_code rc = sl_db_step(st, what, &row, e);
    if (rc == SL_OK && row)
        return sl_db_fail(st->db, SL_DB_FAIL_OTHER, what, "a row where none was expected", e);
    return rc;
}

sl_code sl_db_each(sl_db_stmt *st, const char *what, sl_db_row_fn fn, void *ud, sl_error *e)
{
    int row = 1;
    sl_code rc = SL_OK;
    while (rc == SL_OK && (rc = sl_db_step(st, what, &row, e)) == SL_OK && row)
        if (fn(st, ud) != 0)
            break;
    return rc;
}

int64_t sl_db_changes(const sl_db_stmt *st)
{
    return st->changes;
}

int sl_db_col_null(sl_db_stmt *st, int col)
{
    return st->db->drv->col_null(st, col);
}

const char *sl_db_col_text(sl_db_stmt *st, int col)
{
    const char *s = st->db->drv->col_text(st, col);
    return s ? s : "";
}

int64_t sl_db_col_i64(sl_db_stmt *st, int col)
{
    return st->db->drv->col_i64(st, col);
}

uint64_t sl_db_col_u64(sl_db_stmt *st, int col)
{
    return (uint64_t)st->db->drv->col_i64(st, col);
}

double sl_db_col_double(sl_db_stmt *st, int col)
{
    return st->db->drv->col_double(st, col);
}

void sl_db_reset(sl_db_stmt *st)
{
    st->db->drv->reset(st);
    for (int i = 1; i <= st->nparams; i++)
        slot(st, i);
    st->changes = 0;
}

void sl_db_finalize(sl_db_stmt *st)
{
    if (!st)
        return;
    st->db->drv->finalize(st);
    for (int i = 1; i <= st->nparams; i++)
        free(st->params[i].s);
    free(st->params);
    free(st);
}

sl_code sl_db_exec(sl_db *db, const char *sql, sl_error *e)
{
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db, sql, &st, e);
    if (rc != SL_OK)
        return rc;
    int row = 1;
    while (rc == SL_OK && row)
        rc = sl_db_step(st, sql, &row, e);
    sl_db_finalize(st);
    return rc;
}

/* 10..60 ms times the attempt, so that two writers that collided do not collide again. */
static void pause_before(int attempt)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long ms = (10 + (long)(ts.tv_nsec / 1000 % 50)) * attempt;
    struct timespec d = {ms / 1000, ms % 1000 * 1000000L};
    nanosleep(&d, NULL);
}

sl_code sl_db_transaction(sl_db *db, int flags, sl_db_txn_fn fn, void *ud, sl_error *e)
{
    int write = (flags & SL_DB_TXN_WRITE) != 0;
    int attempts = flags & SL_DB_TXN_ONCE ? 1 : TXN_ATTEMPTS;
    if (write && db->readonly)
        return sl_fail(e, SL_ERR_INVALID, "%s %s: opened read-only", db->who, db->url.display);
    sl_code rc = SL_OK;
    for (int attempt = 1; attempt <= attempts; attempt++) {
        db->failure = SL_DB_FAIL_NONE;
        rc = db->drv->begin(db, write, e);
        if (rc == SL_OK && (rc = fn(db, ud, e)) == SL_OK && (rc = db->drv->commit(db, e)) == SL_OK)
            return SL_OK;
        sl_db_failure why = db->failure;
        db->drv->rollback(db);
        db->failure = why;
        if (why != SL_DB_FAIL_RETRY)
            break;
        if (attempt < attempts)
            pause_before(attempt);
    }
    return rc;
}
