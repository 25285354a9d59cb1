/* Inside sluice_db: what an engine provides, and the connection and statement every engine's
 * own state hangs from. Not installed; only db.c, schema.c and the engines include it. */
#ifndef SLUICE_DB_DRIVER_H
#define SLUICE_DB_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/db.h"

/* A bound parameter: the engines keep them by number (?N) until the statement runs. */
typedef enum sl_db_vtype { SL_DB_V_NULL, SL_DB_V_I64, SL_DB_V_DOUBLE, SL_DB_V_TEXT } sl_db_vtype;
typedef struct sl_db_value {
    sl_db_vtype type;
    int64_t i;
    double d;
    char *s; /* malloc'd copy */
} sl_db_value;

typedef struct sl_db_driver {
    const char *name;
    /* appended to every CREATE TABLE of a schema ("" for none): MariaDB's engine, character
     * set and a binary collation, so that keys compare byte for byte as in SQLite */
    const char *table_options;
    sl_code (*open)(sl_db *db, const sl_db_url *u, int flags, sl_error *e);
    void (*close)(sl_db *db);
    /* BEGIN / COMMIT / ROLLBACK */
    sl_code (*begin)(sl_db *db, int write, sl_error *e);
    sl_code (*commit)(sl_db *db, sl_error *e);
    void (*rollback)(sl_db *db);
    sl_code (*prepare)(sl_db_stmt *st, const char *sql, sl_error *e);
    sl_code (*step)(sl_db_stmt *st, const char *what, int *row, sl_error *e);
    int (*col_null)(sl_db_stmt *st, int col);
    const char *(*col_text)(sl_db_stmt *st, int col);
    int64_t (*col_i64)(sl_db_stmt *st, int col);
    double (*col_double)(sl_db_stmt *st, int col);
    void (*reset)(sl_db_stmt *st);
    void (*finalize)(sl_db_stmt *st);
    /* the schema version: 0 = none yet */
    sl_code (*get_version)(sl_db *db, int *v, sl_error *e);
    sl_code (*set_version)(sl_db *db, int v, sl_error *e);
    /* tables in the database that are not the version's own */
    sl_code (*count_tables)(sl_db *db, int64_t *n, sl_error *e);
    /* an exclusive lock on schema changes (MariaDB: GET_LOCK, each statement of a change
     * commits on its own; SQLite: one write transaction, committed by unlock when ok) */
    sl_code (*lock_schema)(sl_db *db, const char *name, sl_error *e);
    sl_code (*unlock_schema)(sl_db *db, const char *name, int ok, sl_error *e);
} sl_db_driver;

struct sl_db {
    const sl_db_driver *drv;
    sl_db_url url;
    char who[48];
    int readonly;
    sl_db_failure failure;
    void *impl; /* the engine's connection */
};

struct sl_db_stmt {
    sl_db *db;
    sl_db_value *params; /* params[1..nparams] */
    int nparams;
    int64_t changes;
    void *impl; /* the engine's statement */
};

/* Stores a failure's kind and message: "WHO WHERE: what: detail". Returns the code. */
sl_code sl_db_fail(sl_db *db, sl_db_failure kind, const char *what, const char *detail,
                   sl_error *e);
/* The highest ?N of a statement, or -1 when it mixes in a bare '?' or a bad number. */
int sl_db_max_param(const char *sql);

extern const sl_db_driver sl_db_sqlite_driver;
#ifdef SLUICE_DB_MARIADB
extern const sl_db_driver sl_db_mariadb_driver;
#endif

#endif
