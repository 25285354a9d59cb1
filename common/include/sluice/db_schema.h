/* Versioned schemas for sluice_db (the `db sync` of OpenStack services): a schema is the
 * statements that create its current version from nothing (one definition, portable SQL for
 * both engines) and the upgrades that take an older database there, one version at a time.
 * SQLite keeps the version in PRAGMA user_version and applies a sync in one transaction (all
 * of it or none). MariaDB keeps it in the table sluice_schema; a sync holds the server lock
 * "sluice-schema-NAME" (GET_LOCK), so two programs syncing at once apply it once; its DDL
 * commits statement by statement (MariaDB cannot roll DDL back), the version row after each
 * upgrade; every CREATE TABLE gets ENGINE=InnoDB, utf8mb4 and the binary collation utf8mb4_bin
 * appended, so that keys compare byte for byte as they do in SQLite. */
#ifndef SLUICE_DB_SCHEMA_H
#define SLUICE_DB_SCHEMA_H

#include "sluice/db.h"

typedef struct sl_db_schema {
    const char *name; /* "registry": messages and the MariaDB lock */
    int version;      /* what this program's statements need */
    /* NULL-terminated statements creating `version` in an empty database */
    const char *const *create;
    /* upgrade[v - first_upgrade] takes version v to v + 1, for first_upgrade <= v < version;
     * NULL when there is none. Versions below sqlite_only_below existed only in SQLite files
     * of earlier releases (a MariaDB database starts at `create`, so such a version there is
     * refused); upgrades from later versions run on both engines. */
    const char *const *const *upgrade;
    int first_upgrade;
    int sqlite_only_below;
    /* what to tell a user whose database is older: "run sluice-registry db-sync" */
    const char *sync_hint;
} sl_db_schema;

/* The version of the database: 0 when it has no schema yet. */
sl_code sl_db_schema_version(sl_db *db, int *version, sl_error *e);
/* SL_OK when the database is at s->version; else SL_ERR_CONFIG saying what to do (an empty
 * database, an older one: s->sync_hint; a newer one: upgrade this program). */
sl_code sl_db_schema_check(sl_db *db, const sl_db_schema *s, sl_error *e);
/* Creates or upgrades the schema to s->version. *from (may be NULL): the version found. A
 * database newer than s->version is refused; so is one with tables but no schema version
 * (not this store's database). */
sl_code sl_db_schema_sync(sl_db *db, const sl_db_schema *s, int *from, sl_error *e);

#endif
