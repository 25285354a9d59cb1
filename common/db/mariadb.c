/* The MariaDB engine of sluice_db (library sluice_db_mariadb), through MariaDB Connector/C:
 * server-side prepared statements only; ?N parameters are rewritten to the positional '?' the
 * server knows and bound by number. A connection that broke (server restarted, Galera node
 * gone, killed) is opened again at the next transaction; sl_db_transaction runs it again. */
#include <mysql.h>
#include <mysqld_error.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

#define LOCK_WAIT_S 60

typedef struct my_conn {
    MYSQL *m;
    int broken; /* open again before the next transaction */
} my_conn;

static my_conn *conn(sl_db *db)
{
    return db->impl;
}

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static void lib_init(void)
{
    mysql_library_init(0, NULL, NULL);
}

/* Client-side errors (2000..2999: the network, TLS, a lost or confused connection) leave the
 * connection in an unknown state: it is opened again and the transaction run again. */
static int client_side(unsigned err)
{
    return err >= 2000 && err < 3000;
}

static sl_db_failure kind_of(unsigned err)
{
    if (client_side(err))
        return SL_DB_FAIL_RETRY;
    switch (err) {
    case ER_DUP_ENTRY:
    case ER_DUP_ENTRY_WITH_KEY_NAME:
        return SL_DB_FAIL_DUPLICATE;
    case ER_NO_REFERENCED_ROW:
    case ER_NO_REFERENCED_ROW_2:
        return SL_DB_FAIL_FOREIGN_KEY;
    case ER_LOCK_DEADLOCK:
    case ER_LOCK_WAIT_TIMEOUT:
    case ER_UNKNOWN_COM_ERROR: /* Galera: "WSREP has not yet prepared node for application use" */
    case ER_ERROR_DURING_COMMIT:
    case ER_CONNECTION_KILLED:
    case ER_SERVER_SHUTDOWN:
    case ER_CON_COUNT_ERROR:
        return SL_DB_FAIL_RETRY;
    default:
        return SL_DB_FAIL_OTHER;
    }
}

static int breaks_connection(unsigned err)
{
    return client_side(err) || err == ER_CONNECTION_KILLED || err == ER_SERVER_SHUTDOWN ||
           err == ER_UNKNOWN_COM_ERROR;
}

static sl_code fail_err(sl_db *db, unsigned err, const char *msg, const char *what, sl_error *e)
{
    if (breaks_connection(err) && conn(db))
        conn(db)->broken = 1;
    char detail[200];
    snprintf(detail, sizeof detail, "%s (MariaDB error %u)", msg && *msg ? msg : "failed", err);
    return sl_db_fail(db, kind_of(err), what, detail, e);
}

static sl_code fail_conn(sl_db *db, const char *what, sl_error *e)
{
    MYSQL *m = conn(db)->m;
    return fail_err(db, mysql_errno(m), mysql_error(m), what, e);
}

static sl_code query(sl_db *db, const char *sql, sl_error *e)
{
    MYSQL *m = conn(db)->m;
    if (mysql_real_query(m, sql, strlen(sql)) != 0)
        return fail_conn(db, sql, e);
    MYSQL_RES *r = mysql_store_result(m);
    mysql_free_result(r);
    if (!r && mysql_field_count(m) != 0)
        return fail_conn(db, sql, e);
    return SL_OK;
}

static sl_code connect_server(sl_db *db, sl_error *e)
{
    const sl_db_url *u = &db->url;
    my_conn *c = conn(db);
    MYSQL *m = mysql_init(NULL);
    if (!m)
        return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", db->who);
    unsigned ct = (unsigned)u->connect_timeout, rt = (unsigned)u->read_timeout,
             wt = (unsigned)u->write_timeout;
    mysql_optionsv(m, MYSQL_OPT_CONNECT_TIMEOUT, &ct);
    mysql_optionsv(m, MYSQL_OPT_READ_TIMEOUT, &rt);
    mysql_optionsv(m, MYSQL_OPT_WRITE_TIMEOUT, &wt);
    mysql_optionsv(m, MYSQL_SET_CHARSET_NAME, u->charset);
    if (u->tls) {
        my_bool on = 1;
        if (u->ssl_ca[0])
            mysql_optionsv(m, MYSQL_OPT_SSL_CA, u->ssl_ca);
        if (u->ssl_capath[0])
            mysql_optionsv(m, MYSQL_OPT_SSL_CAPATH, u->ssl_capath);
        if (u->ssl_cert[0]) {
            mysql_optionsv(m, MYSQL_OPT_SSL_CERT, u->ssl_cert);
            mysql_optionsv(m, MYSQL_OPT_SSL_KEY, u->ssl_key);
        }
        mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &on);
        mysql_optionsv(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on);
    }
    c->m = m;
    c->broken = 1;
    if (!mysql_real_connect(m, u->host[0] ? u->host : NULL, u->user, u->password, u->database,
                            (unsigned)u->port, u->socket[0] ? u->socket : NULL,
                            CLIENT_FOUND_ROWS)) {
        sl_code rc = fail_err(db, mysql_errno(m), mysql_error(m), "connecting", e);
        mysql_close(m);
        c->m = NULL;
        return rc;
    }
    sl_code rc = query(db, "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'", e);
    if (rc == SL_OK)
        rc = query(db, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", e);
    if (rc != SL_OK) {
        mysql_close(m);
        c->m = NULL;
        return rc;
    }
    c->broken = 0;
    return SL_OK;
}

static sl_code my_open(sl_db *db, const sl_db_url *u, int flags, sl_error *e)
{
    (void)u;
    (void)flags;
    pthread_once(&lib_once, lib_init);
    my_conn *c = calloc(1, sizeof *c);
    if (!c)
        return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", db->who);
    db->impl = c;
    sl_code rc = connect_server(db, e);
    if (rc != SL_OK) {
        free(c);
        db->impl = NULL;
    }
    return rc;
}

static void my_close(sl_db *db)
{
    my_conn *c = conn(db);
    if (c)
        mysql_close(c->m);
    free(c);
    db->impl = NULL;
}

static sl_code ensure_connected(sl_db *db, sl_error *e)
{
    my_conn *c = conn(db);
    if (!c->broken && c->m)
        return SL_OK;
    mysql_close(c->m);
    c->m = NULL;
    return connect_server(db, e);
}

static sl_code my_begin(sl_db *db, int write, sl_error *e)
{
    sl_code rc = ensure_connected(db, e);
    if (rc != SL_OK)
        return rc;
    return query(db, write ? "START TRANSACTION READ WRITE" : "START TRANSACTION READ ONLY", e);
}

static sl_code my_commit(sl_db *db, sl_error *e)
{
    return query(db, "COMMIT", e);
}

static void my_rollback(sl_db *db)
{
    my_conn *c = conn(db);
    if (c->m && !c->broken && mysql_real_query(c->m, "ROLLBACK", 8) != 0 &&
        breaks_connection(mysql_errno(c->m)))
        c->broken = 1;
}

/* ------------------------------------------------------------------------------ statements */

typedef struct my_col {
    enum { COL_INT, COL_DOUBLE, COL_STRING } kind;
    int64_t i;
    double d;
    char *s;
    unsigned long cap, len;
    my_bool is_null, error;
    char scratch[32]; /* a number as text */
} my_col;

typedef struct my_stmt {
    MYSQL_STMT *st;
    int *pos; /* parameter number of each '?' */
    int npos;
    MYSQL_BIND *pbind;
    int started, has_result;
    my_col *cols;
    MYSQL_BIND *rbind;
    unsigned ncols;
} my_stmt;

/* "?12" -> "?", remembering 12; quoted text is copied as it is. */
static sl_code rewrite(const char *sql, char **out, int **pos, int *npos)
{
    size_t n = strlen(sql);
    char *s = malloc(n + 1);
    int *p = calloc(n / 2 + 1, sizeof *p);
    if (!s || !p) {
        free(s);
        free(p);
        return SL_ERR_NOMEM;
    }
    size_t o = 0;
    int k = 0;
    char quote = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = sql[i];
        if (quote) {
            quote = ch == quote ? 0 : quote;
        } else if (ch == '\'' || ch == '"' || ch == '`') {
            quote = ch;
        } else if (ch == '?') {
            int num = 0;
            while (i + 1 < n && sql[i + 1] >= '0' && sql[i + 1] <= '9')
                num = num * 10 + (sql[++i] - '0');
            p[k++] = num;
        }
        s[o++] = ch;
    }
    s[o] = '\0';
    *out = s;
    *pos = p;
    *npos = k;
    return SL_OK;
}

static sl_code my_prepare(sl_db_stmt *st, const char *sql, sl_error *e)
{
    sl_db *db = st->db;
    if (!conn(db)->m || conn(db)->broken)
        return sl_db_fail(db, SL_DB_FAIL_RETRY, "preparing a statement", "not connected", e);
    my_stmt *q = calloc(1, sizeof *q);
    char *text = NULL;
    if (!q || rewrite(sql, &text, &q->pos, &q->npos) != SL_OK) {
        free(q);
        return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", db->who);
    }
    st->impl = q;
    q->pbind = calloc((size_t)q->npos + 1, sizeof *q->pbind);
    q->st = mysql_stmt_init(conn(db)->m);
    sl_code rc = SL_OK;
    if (!q->pbind || !q->st)
        rc = sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", db->who);
    else if (mysql_stmt_prepare(q->st, text, strlen(text)) != 0)
        rc = fail_err(db, mysql_stmt_errno(q->st), mysql_stmt_error(q->st), "preparing a statement",
                      e);
    else if (mysql_stmt_param_count(q->st) != (unsigned long)q->npos)
        rc = sl_db_fail(db, SL_DB_FAIL_OTHER, "preparing a statement",
                        "the server counts other parameters", e);
    free(text);
    if (rc == SL_OK) {
        my_bool on = 1;
        mysql_stmt_attr_set(q->st, STMT_ATTR_UPDATE_MAX_LENGTH, &on);
    }
    return rc;
}

static void free_result(my_stmt *q)
{
    for (unsigned i = 0; q->cols && i < q->ncols; i++)
        free(q->cols[i].s);
    free(q->cols);
    free(q->rbind);
    q->cols = NULL;
    q->rbind = NULL;
    q->ncols = 0;
    q->has_result = 0;
}

static void bind_params(sl_db_stmt *st, my_stmt *q)
{
    memset(q->pbind, 0, sizeof *q->pbind * (size_t)(q->npos + 1));
    for (int k = 0; k < q->npos; k++) {
        MYSQL_BIND *b = &q->pbind[k];
        sl_db_value *v = q->pos[k] >= 1 && q->pos[k] <= st->nparams ? &st->params[q->pos[k]] : NULL;
        if (!v || v->type == SL_DB_V_NULL) {
            b->buffer_type = MYSQL_TYPE_NULL;
        } else if (v->type == SL_DB_V_I64) {
            b->buffer_type = MYSQL_TYPE_LONGLONG;
            b->buffer = &v->i;
        } else if (v->type == SL_DB_V_DOUBLE) {
            b->buffer_type = MYSQL_TYPE_DOUBLE;
            b->buffer = &v->d;
        } else {
            b->buffer_type = MYSQL_TYPE_STRING;
            b->buffer = v->s;
            b->buffer_length = strlen(v->s);
        }
    }
}

/* Binds result buffers after mysql_stmt_store_result (max_length known). */
static sl_code bind_result(sl_db_stmt *st, my_stmt *q, MYSQL_RES *meta, sl_error *e)
{
    q->ncols = mysql_num_fields(meta);
    MYSQL_FIELD *f = mysql_fetch_fields(meta);
    q->cols = calloc(q->ncols, sizeof *q->cols);
    q->rbind = calloc(q->ncols, sizeof *q->rbind);
    if (!q->cols || !q->rbind)
        return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", st->db->who);
    for (unsigned i = 0; i < q->ncols; i++) {
        my_col *c = &q->cols[i];
        MYSQL_BIND *b = &q->rbind[i];
        switch (f[i].type) {
        case MYSQL_TYPE_TINY:
        case MYSQL_TYPE_SHORT:
        case MYSQL_TYPE_LONG:
        case MYSQL_TYPE_INT24:
        case MYSQL_TYPE_LONGLONG:
        case MYSQL_TYPE_YEAR:
            c->kind = COL_INT;
            b->buffer_type = MYSQL_TYPE_LONGLONG;
            b->buffer = &c->i;
            break;
        case MYSQL_TYPE_FLOAT:
        case MYSQL_TYPE_DOUBLE:
            c->kind = COL_DOUBLE;
            b->buffer_type = MYSQL_TYPE_DOUBLE;
            b->buffer = &c->d;
            break;
        default:
            c->kind = COL_STRING;
            c->cap = f[i].max_length + 1;
            if (!(c->s = malloc(c->cap)))
                return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", st->db->who);
            b->buffer_type = MYSQL_TYPE_STRING;
            b->buffer = c->s;
            b->buffer_length = c->cap;
            b->length = &c->len;
        }
        b->is_null = &c->is_null;
        b->error = &c->error;
    }
    if (mysql_stmt_bind_result(q->st, q->rbind) != 0)
        return fail_err(st->db, mysql_stmt_errno(q->st), mysql_stmt_error(q->st),
                        "binding a result", e);
    q->has_result = 1;
    return SL_OK;
}

static sl_code execute(sl_db_stmt *st, my_stmt *q, const char *what, sl_error *e)
{
    bind_params(st, q);
    if ((q->npos && mysql_stmt_bind_param(q->st, q->pbind) != 0) || mysql_stmt_execute(q->st) != 0)
        return fail_err(st->db, mysql_stmt_errno(q->st), mysql_stmt_error(q->st), what, e);
    MYSQL_RES *meta = mysql_stmt_result_metadata(q->st);
    if (!meta) {
        st->changes = (int64_t)mysql_stmt_affected_rows(q->st);
        return SL_OK;
    }
    sl_code rc = SL_OK;
    if (mysql_stmt_store_result(q->st) != 0)
        rc = fail_err(st->db, mysql_stmt_errno(q->st), mysql_stmt_error(q->st), what, e);
    else
        rc = bind_result(st, q, meta, e);
    mysql_free_result(meta);
    return rc;
}

static sl_code my_step(sl_db_stmt *st, const char *what, int *row, sl_error *e)
{
    my_stmt *q = st->impl;
    if (!q->started) {
        q->started = 1;
        sl_code rc = execute(st, q, what, e);
        if (rc != SL_OK || !q->has_result)
            return rc;
    }
    if (!q->has_result)
        return SL_OK;
    int r = mysql_stmt_fetch(q->st);
    if (r == MYSQL_NO_DATA)
        return SL_OK;
    if (r == MYSQL_DATA_TRUNCATED)
        return sl_db_fail(st->db, SL_DB_FAIL_OTHER, what, "a column did not fit its buffer", e);
    if (r != 0)
        return fail_err(st->db, mysql_stmt_errno(q->st), mysql_stmt_error(q->st), what, e);
    for (unsigned i = 0; i < q->ncols; i++)
        if (q->cols[i].kind == COL_STRING)
            q->cols[i].s[q->cols[i].len < q->cols[i].cap ? q->cols[i].len : q->cols[i].cap - 1] =
                '\0';
    *row = 1;
    return SL_OK;
}

static my_col *col(sl_db_stmt *st, int i)
{
    my_stmt *q = st->impl;
    return i >= 0 && (unsigned)i < q->ncols ? &q->cols[i] : NULL;
}

static int my_col_null(sl_db_stmt *st, int i)
{
    my_col *c = col(st, i);
    return !c || c->is_null;
}

static const char *my_col_text(sl_db_stmt *st, int i)
{
    my_col *c = col(st, i);
    if (!c || c->is_null)
        return NULL;
    if (c->kind == COL_INT)
        snprintf(c->scratch, sizeof c->scratch, "%lld", (long long)c->i);
    else if (c->kind == COL_DOUBLE)
        snprintf(c->scratch, sizeof c->scratch, "%.17g", c->d);
    else
        return c->s;
    return c->scratch;
}

static int64_t my_col_i64(sl_db_stmt *st, int i)
{
    my_col *c = col(st, i);
    if (!c || c->is_null)
        return 0;
    if (c->kind == COL_INT)
        return c->i;
    if (c->kind == COL_DOUBLE)
        return (int64_t)c->d;
    return strtoll(c->s, NULL, 10);
}

static double my_col_double(sl_db_stmt *st, int i)
{
    my_col *c = col(st, i);
    if (!c || c->is_null)
        return 0;
    if (c->kind == COL_INT)
        return (double)c->i;
    if (c->kind == COL_DOUBLE)
        return c->d;
    return strtod(c->s, NULL);
}

static void my_reset(sl_db_stmt *st)
{
    my_stmt *q = st->impl;
    if (q->has_result)
        mysql_stmt_free_result(q->st);
    free_result(q);
    mysql_stmt_reset(q->st);
    q->started = 0;
}

static void my_finalize(sl_db_stmt *st)
{
    my_stmt *q = st->impl;
    if (!q)
        return;
    free_result(q);
    if (q->st)
        mysql_stmt_close(q->st);
    free(q->pos);
    free(q->pbind);
    free(q);
}

/* ---------------------------------------------------------------------------- the schema */

/* One prepared statement with a text parameter, reading one integer: *out, *found. */
static sl_code one_int(sl_db *db, const char *sql, const char *arg, int64_t *out, int *found,
                       const char *what, sl_error *e)
{
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db, sql, &st, e);
    if (rc != SL_OK)
        return rc;
    if (arg)
        sl_db_bind_text(st, 1, arg);
    int row = 0;
    rc = sl_db_step(st, what, &row, e);
    *found = rc == SL_OK && row && !sl_db_col_null(st, 0);
    *out = *found ? sl_db_col_i64(st, 0) : 0;
    sl_db_finalize(st);
    return rc;
}

static sl_code my_get_version(sl_db *db, int *v, sl_error *e)
{
    int64_t n;
    int found;
    sl_error mine;
    sl_code rc = one_int(db, "SELECT version FROM sluice_schema WHERE id = 1", NULL, &n, &found,
                         "reading the schema version", &mine);
    if (rc != SL_OK && strstr(mine.msg, "error 1146)")) { /* ER_NO_SUCH_TABLE */
        *v = 0;
        db->failure = SL_DB_FAIL_NONE;
        return SL_OK;
    }
    if (rc != SL_OK) {
        if (e)
            *e = mine;
        return rc;
    }
    *v = found ? (int)n : 0;
    return SL_OK;
}

static sl_code my_set_version(sl_db *db, int v, sl_error *e)
{
    sl_code rc = query(db,
                       "CREATE TABLE IF NOT EXISTS sluice_schema (id INT NOT NULL PRIMARY KEY, "
                       "version INT NOT NULL)",
                       e);
    sl_db_stmt *st = NULL;
    if (rc == SL_OK)
        rc = sl_db_prepare(db,
                           "INSERT INTO sluice_schema (id, version) VALUES (1, ?1) "
                           "ON DUPLICATE KEY UPDATE version = ?1",
                           &st, e);
    if (rc == SL_OK) {
        sl_db_bind_i64(st, 1, v);
        rc = sl_db_run(st, "writing the schema version", e);
    }
    sl_db_finalize(st);
    return rc;
}

static sl_code my_count_tables(sl_db *db, int64_t *n, sl_error *e)
{
    int found;
    return one_int(db,
                   "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() "
                   "AND table_name <> 'sluice_schema'",
                   NULL, n, &found, "listing tables", e);
}

static sl_code my_lock_schema(sl_db *db, const char *name, sl_error *e)
{
    int64_t got;
    int found;
    char sql[64];
    snprintf(sql, sizeof sql, "SELECT GET_LOCK(?1, %d)", LOCK_WAIT_S);
    sl_code rc = one_int(db, sql, name, &got, &found, "taking the schema lock", e);
    if (rc == SL_OK && got != 1)
        rc = sl_db_fail(db, SL_DB_FAIL_OTHER, "taking the schema lock",
                        "another program holds it (a db sync running elsewhere?)", e);
    return rc;
}

static sl_code my_unlock_schema(sl_db *db, const char *name, int ok, sl_error *e)
{
    (void)ok;
    int64_t got;
    int found;
    return one_int(db, "SELECT RELEASE_LOCK(?1)", name, &got, &found, "releasing the schema lock",
                   e);
}

const sl_db_driver sl_db_mariadb_driver = {
    "MariaDB",      " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    my_open,        my_close,
    my_begin,       my_commit,
    my_rollback,    my_prepare,
    my_step,        my_col_null,
    my_col_text,    my_col_i64,
    my_col_double,  my_reset,
    my_finalize,    my_get_version,
    my_set_version, my_count_tables,
    my_lock_schema, my_unlock_schema,
};
