/* Versioned schemas (sluice/db_schema.h). */
#include "sluice/db_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

sl_code sl_db_schema_version(sl_db *db, int *version, sl_error *e)
{
    return db->drv->get_version(db, version, e);
}

sl_code sl_db_schema_check(sl_db *db, const sl_db_schema *s, sl_error *e)
{
    int v;
    sl_code rc = sl_db_schema_version(db, &v, e);
    if (rc != SL_OK || v == s->version)
        return rc;
    if (v > s->version)
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s %s: schema version %d is newer than this program's %d: upgrade "
                       "this program",
                       db->who, db->url.display, v, s->version);
    if (v == 0)
        return sl_fail(e, SL_ERR_CONFIG, "%s %s: no %s schema yet: %s", db->who, db->url.display,
                       s->name, s->sync_hint);
    return sl_fail(e, SL_ERR_CONFIG, "%s %s: schema version %d is older than this program's %d: %s",
                   db->who, db->url.display, v, s->version, s->sync_hint);
}

/* Runs a schema's statements; CREATE TABLE gets the engine's table options. */
static sl_code run_all(sl_db *db, const char *const *sql, sl_error *e)
{
    sl_code rc = SL_OK;
    for (size_t i = 0; rc == SL_OK && sql[i]; i++) {
        const char *opts = db->drv->table_options;
        if (strncmp(sql[i], "CREATE TABLE ", 13) != 0 || !*opts) {
            rc = sl_db_exec(db, sql[i], e);
            continue;
        }
        size_t n = strlen(sql[i]) + strlen(opts) + 1;
        char *full = malloc(n);
        if (!full)
            return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", db->who);
        snprintf(full, n, "%s%s", sql[i], opts);
        rc = sl_db_exec(db, full, e);
        free(full);
    }
    return rc;
}

/* Under the schema lock: from version v to s->version. */
static sl_code apply(sl_db *db, const sl_db_schema *s, int v, sl_error *e)
{
    if (v > s->version)
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s %s: schema version %d is newer than this program's %d: upgrade "
                       "this program",
                       db->who, db->url.display, v, s->version);
    if (v == 0) {
        int64_t tables = 0;
        sl_code rc = db->drv->count_tables(db, &tables, e);
        if (rc != SL_OK)
            return rc;
        if (tables > 0)
            return sl_fail(e, SL_ERR_CONFIG,
                           "%s %s: holds %lld tables but no %s schema version: not a %s "
                           "database; refusing to write there",
                           db->who, db->url.display, (long long)tables, s->name, s->name);
        if ((rc = run_all(db, s->create, e)) != SL_OK)
            return rc;
        return db->drv->set_version(db, s->version, e);
    }
    if (v < s->first_upgrade || !s->upgrade)
        return sl_fail(e, SL_ERR_CONFIG, "%s %s: schema version %d cannot be upgraded", db->who,
                       db->url.display, v);
    if (db->url.engine != SL_DB_SQLITE && v < s->sqlite_only_below)
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s %s: schema version %d exists only in SQLite files of earlier "
                       "releases",
                       db->who, db->url.display, v);
    for (; v < s->version; v++) {
        sl_code rc = run_all(db, s->upgrade[v - s->first_upgrade], e);
        if (rc == SL_OK)
            rc = db->drv->set_version(db, v + 1, e);
        if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}

sl_code sl_db_schema_sync(sl_db *db, const sl_db_schema *s, int *from, sl_error *e)
{
    if (db->readonly)
        return sl_fail(e, SL_ERR_INVALID, "%s %s: opened read-only; cannot sync the schema",
                       db->who, db->url.display);
    char lock[80];
    snprintf(lock, sizeof lock, "sluice-schema-%s", s->name);
    sl_code rc = db->drv->lock_schema(db, lock, e);
    if (rc != SL_OK)
        return rc;
    int v = -1;
    rc = sl_db_schema_version(db, &v, e);
    if (rc == SL_OK && from)
        *from = v;
    if (rc == SL_OK && v != s->version)
        rc = apply(db, s, v, e);
    sl_error ue;
    sl_code urc = db->drv->unlock_schema(db, lock, rc == SL_OK, &ue);
    if (rc == SL_OK && urc != SL_OK) {
        if (e)
            *e = ue;
        rc = urc;
    }
    return rc;
}
