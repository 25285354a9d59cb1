/* The SQLite conventions Sluice's two durable stores share (the agent's usage store and
 * nova-hook's registry): how a database is opened, one-statement execution, the schema version
 * and migrations in one transaction. Errors name the store (`who`) and the statement. */
#ifndef SLUICE_DB_H
#define SLUICE_DB_H

#include <sqlite3.h>

#include "sluice/error.h"

/* Opens path (created when read-write) with a 5 s busy timeout and extended result codes; a
 * read-write database runs in WAL mode with synchronous=FULL, so a committed transaction is on
 * disk before the call that committed it returns. */
sl_code sl_db_open(const char *path, int readonly, const char *who, sqlite3 **db, sl_error *e);
/* What can be seen wrong with path before opening it, in words a person can act on: its
 * directory missing, not a directory or not writable by this user (read-write: SQLite makes
 * PATH-wal and PATH-shm there); for readonly, the file missing or unreadable. SL_OK when nothing
 * is. sl_db_open says the same when SQLite cannot open the file; --check-config asks it. */
sl_code sl_db_check_path(const char *path, int readonly, const char *who, sl_error *e);
/* Runs one constant statement (no parameters; rows are read and dropped). */
sl_code sl_db_exec(sqlite3 *db, const char *who, const char *sql, sl_error *e);
/* PRAGMA user_version. */
sl_code sl_db_user_version(sqlite3 *db, const char *who, int *version, sl_error *e);
/* From schema version `from`, applies steps[from], steps[from + 1], ... steps[n - 1] (each a
 * NULL-terminated list of statements, the last of each setting user_version) in one
 * transaction: all of them or none. */
sl_code sl_db_migrate(sqlite3 *db, const char *who, int from, const char *const *const *steps,
                      int n, sl_error *e);
/* A text column, "" for NULL. */
const char *sl_db_text(sqlite3_stmt *st, int col);

#endif
