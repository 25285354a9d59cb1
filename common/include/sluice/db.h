/* The database layer Sluice's durable stores share (the agent's usage store and replay store,
 * nova-hook's registry): one API over two engines, SQLite (a file; the default) and MariaDB
 * (a server, through MariaDB Connector/C; library sluice_db_mariadb only, so that the agent
 * never links it). Statements are prepared with numbered parameters (?1, ?2, ...) on both
 * engines; transactions that hit a deadlock, a lock timeout, a Galera certification failure or
 * a lost connection are run again (sl_db_transaction). Every error message names the store
 * (`who`) and the database (its file, or mysql://USER@HOST:PORT/DB, never a password).
 * One sl_db is used by one thread at a time; the stores hold a mutex around it. */
#ifndef SLUICE_DB_H
#define SLUICE_DB_H

#include <stdint.h>

#include "sluice/db_url.h"
#include "sluice/error.h"

typedef struct sl_db sl_db;
typedef struct sl_db_stmt sl_db_stmt;

/* What the last failed statement of a connection ran into, for callers that read some
 * failures as answers (a duplicate key: "stored before"). */
typedef enum sl_db_failure {
    SL_DB_FAIL_NONE,
    SL_DB_FAIL_DUPLICATE,   /* a primary or unique key already holds the value */
    SL_DB_FAIL_FOREIGN_KEY, /* the row a foreign key names is missing */
    SL_DB_FAIL_RETRY,       /* busy, deadlock, lock wait, certification, connection lost */
    SL_DB_FAIL_OTHER,
} sl_db_failure;

#define SL_DB_READONLY 1 /* sl_db_open: never write (SQLite: the file must exist) */

/* Opens the database a URL names (sluice/db_url.h: a path, sqlite:////PATH or
 * mysql+pymysql://USER:PASS@HOST:PORT/DB?...). SQLite: created when read-write, WAL mode with
 * synchronous=FULL (a committed transaction is on disk when the commit returns), a 5 s busy
 * timeout, foreign keys on. MariaDB: TLS when the URL asks for it (the server's certificate
 * verified), utf8mb4 unless charset= says otherwise, strict SQL mode, READ COMMITTED. */
sl_code sl_db_open(const char *url, int flags, const char *who, sl_db **out, sl_error *e);
void sl_db_close(sl_db *db);

sl_db_engine sl_db_engine_of(const sl_db *db);
/* The database for messages: the file, or mysql://USER@HOST:PORT/DB (no password). */
const char *sl_db_where(const sl_db *db);
const char *sl_db_who(const sl_db *db);
sl_db_failure sl_db_last_failure(const sl_db *db);
/* What can be seen wrong with a SQLite file's path before opening it, in words a person can
 * act on: its directory missing, not a directory or not writable by this user (read-write:
 * SQLite makes PATH-wal and PATH-shm there); for readonly, the file missing or unreadable.
 * SL_OK when nothing is. sl_db_open says the same when SQLite cannot open the file;
 * --check-config asks it (sl_db_check_url: the same for a URL, nothing to see for MariaDB). */
sl_code sl_db_check_path(const char *path, int readonly, const char *who, sl_error *e);
sl_code sl_db_check_url(const char *url, int readonly, const char *who, sl_error *e);

/* Runs one constant statement (no parameters; rows are read and dropped). */
sl_code sl_db_exec(sl_db *db, const char *sql, sl_error *e);

/* ---- statements: prepare, bind (?N, from 1), step, read columns, finalize */
sl_code sl_db_prepare(sl_db *db, const char *sql, sl_db_stmt **out, sl_error *e);
/* Values are copied. A NULL text binds SQL NULL. */
void sl_db_bind_text(sl_db_stmt *st, int i, const char *v);
void sl_db_bind_i64(sl_db_stmt *st, int i, int64_t v);
void sl_db_bind_double(sl_db_stmt *st, int i, double v);
void sl_db_bind_null(sl_db_stmt *st, int i);
/* Runs the statement (first call) or moves to the next row: *row = 1 with a row to read,
 * 0 when done. what: for the message ("storing a usage record"). */
sl_code sl_db_step(sl_db_stmt *st, const char *what, int *row, sl_error *e);
/* Steps a statement that returns no row. */
sl_code sl_db_run(sl_db_stmt *st, const char *what, sl_error *e);
/* Steps st to its end, calling row(st, ud) for each row; a non-zero return stops early. */
typedef int (*sl_db_row_fn)(sl_db_stmt *st, void *ud);
sl_code sl_db_each(sl_db_stmt *st, const char *what, sl_db_row_fn row, void *ud, sl_error *e);
/* Rows the statement inserted, deleted or matched (UPDATE: matched, on both engines). */
int64_t sl_db_changes(const sl_db_stmt *st);
/* Columns of the current row, from 0; valid until the next step, reset or finalize. */
int sl_db_col_null(sl_db_stmt *st, int col);
const char *sl_db_col_text(sl_db_stmt *st, int col); /* "" for NULL */
int64_t sl_db_col_i64(sl_db_stmt *st, int col);
uint64_t sl_db_col_u64(sl_db_stmt *st, int col); /* a two's-complement BIGINT read back */
double sl_db_col_double(sl_db_stmt *st, int col);
/* Makes the statement ready to run again; bindings are cleared. */
void sl_db_reset(sl_db_stmt *st);
void sl_db_finalize(sl_db_stmt *st); /* NULL is fine */

/* ---- transactions */
typedef sl_code (*sl_db_txn_fn)(sl_db *db, void *ud, sl_error *e);

#define SL_DB_TXN_WRITE 1 /* a write transaction (else read-only) */
#define SL_DB_TXN_ONCE  2 /* never run fn again (it handed rows to a caller already) */

/* Runs fn inside a transaction (write: SQLite BEGIN IMMEDIATE, MariaDB START TRANSACTION READ
 * WRITE; else a read-only one) and commits; on any failure rolls back. A failure of kind
 * SL_DB_FAIL_RETRY (MariaDB: the connection is opened again first) runs fn again, up to 5
 * times with a short random pause, unless SL_DB_TXN_ONCE: so fn must start from scratch each
 * time (set its outputs at its start, keep no effect outside the database). */
sl_code sl_db_transaction(sl_db *db, int flags, sl_db_txn_fn fn, void *ud, sl_error *e);

#endif
