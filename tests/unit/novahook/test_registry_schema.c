/* The registry's schema (store_schema.c) over its life: a SQLite file of schema version 1 (as
 * release 1 wrote it) is upgraded to the current version by the daemon's open, its data kept and
 * its tables ending with the columns of a fresh database; on MariaDB the daemon and the CLI's
 * reports refuse a database without the current schema and say to run db-sync, which makes it
 * (twice is harmless) and refuses the SQLite-only versions; a version 4 database (before shared
 * GPU time) is upgraded on both engines, its records then read as "shared time not reported";
 * retention removes old usage and closed placement history, on both engines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nh_testdb.h"
#include "sluice/db.h"
#include "store.h"

#define NOW  1800000000LL
#define NS   1000000000LL
#define INST "11111111-0000-4000-8000-000000000001"
#define PROJ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

/* Release 1's schema, verbatim (the test's fixture: what files in the field hold). */
static const char *const legacy_v1[] = {
    "CREATE TABLE agents ("
    " host TEXT PRIMARY KEY NOT NULL,"
    " endpoint TEXT NOT NULL,"
    " slots INTEGER NOT NULL,"
    " gpus TEXT NOT NULL,"
    " version TEXT NOT NULL,"
    " ca_pem TEXT,"
    " registered INTEGER NOT NULL,"
    " last_seen INTEGER NOT NULL)",
    "CREATE TABLE placements ("
    " instance TEXT PRIMARY KEY NOT NULL,"
    " project TEXT NOT NULL,"
    " flavor TEXT NOT NULL,"
    " host TEXT NOT NULL REFERENCES agents(host) ON DELETE CASCADE,"
    " since INTEGER NOT NULL)",
    "CREATE INDEX placements_host ON placements(host)",
    "CREATE INDEX placements_project ON placements(project)",
    "CREATE TABLE usage ("
    " record_id TEXT PRIMARY KEY NOT NULL,"
    " host TEXT NOT NULL,"
    " instance TEXT NOT NULL,"
    " project TEXT NOT NULL,"
    " flavor TEXT NOT NULL,"
    " gpu_uuid TEXT NOT NULL,"
    " session_id INTEGER NOT NULL,"
    " interval_start_ns INTEGER NOT NULL,"
    " interval_end_ns INTEGER NOT NULL,"
    " gpu_busy_ns INTEGER NOT NULL,"
    " kernel_ns INTEGER NOT NULL,"
    " kernels INTEGER NOT NULL,"
    " bytes_htod INTEGER NOT NULL,"
    " bytes_dtoh INTEGER NOT NULL,"
    " memory_high_water INTEGER NOT NULL,"
    " calls INTEGER NOT NULL,"
    " errors INTEGER NOT NULL,"
    " throttled_ns INTEGER NOT NULL,"
    " quota_refusals INTEGER NOT NULL,"
    " measurement TEXT NOT NULL,"
    " final INTEGER NOT NULL,"
    " received INTEGER NOT NULL)",
    "CREATE INDEX usage_project ON usage(project, interval_start_ns)",
    NULL,
};

static void exec_all(sl_db *db, const char *const *sql)
{
    sl_error e;
    for (size_t i = 0; sql[i]; i++)
        if (sl_db_exec(db, sql[i], &e) != SL_OK)
            fail_msg("%s", e.msg);
}

/* "table: col,col,..." for every table, sorted, as one string. */
static void columns(const char *path, char *out, size_t cap)
{
    sl_db *db;
    sl_error e;
    assert_int_equal(sl_db_open(path, SL_DB_READONLY, "test", &db, &e), SL_OK);
    sl_db_stmt *st;
    assert_int_equal(sl_db_prepare(db,
                                   "SELECT m.name, p.name FROM sqlite_master m, "
                                   "pragma_table_info(m.name) p WHERE m.type = 'table' "
                                   "ORDER BY m.name, p.name",
                                   &st, &e),
                     SL_OK);
    out[0] = '\0';
    int row;
    while (sl_db_step(st, "columns", &row, &e) == SL_OK && row)
        snprintf(out + strlen(out), cap - strlen(out), "%s.%s ", sl_db_col_text(st, 0),
                 sl_db_col_text(st, 1));
    sl_db_finalize(st);
    sl_db_close(db);
}

static int on_old_record(const sl_usage_rec *u, void *ud)
{
    assert_true(u->shared_unknown);
    assert_int_equal(u->gpu_busy_ns, 5);
    (*(int *)ud)++;
    return 0;
}

static void legacy_sqlite_upgrade(void **state)
{
    (void)state;
    nh_testdb old, fresh;
    nh_testdb_make_empty(&old);
    if (old.mariadb) {
        nh_testdb_drop(&old);
        skip();
    }
    sl_db *db;
    sl_error e;
    assert_int_equal(sl_db_open(old.url, 0, "test", &db, &e), SL_OK);
    exec_all(db, legacy_v1);
    const char *const data[] = {
        "PRAGMA user_version = 1",
        "INSERT INTO agents VALUES ('gpu1', 'tcp://192.0.2.1:7400', 8, '[]', '0.1', NULL, 1, 1)",
        "INSERT INTO placements VALUES ('" INST "', '" PROJ "', 'g1.small', 'gpu1', 5)",
        "INSERT INTO usage VALUES ('rec-1', 'gpu1', '" INST "', '" PROJ "', 'g1.small', 'GPU-1',"
        " 1, 10, 20, 5, 5, 1, 0, 0, 0, 1, 0, 0, 0, 'events', 1, 30)",
        NULL,
    };
    exec_all(db, data);
    sl_db_close(db);

    nh_store *s;
    assert_int_equal(nh_store_open(old.url, NH_STORE_READ, &s, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "db-sync"));
    assert_int_equal(nh_store_open(old.url, NH_STORE_SERVE, &s, &e), SL_OK);
    assert_int_equal(nh_store_found_version(s), 1);
    nh_target t;
    int found = 0;
    assert_int_equal(nh_store_lookup(s, INST, &t, &found, &e), SL_OK);
    assert_true(found);
    assert_string_equal(t.host, "gpu1");
    int64_t n = 0;
    assert_int_equal(nh_store_usage_count(s, &n, &e), SL_OK);
    assert_int_equal(n, 1);
    int seen = 0; /* from before shared GPU time: not reported */
    assert_int_equal(nh_store_usage_records(s, 0, 100, NULL, on_old_record, &seen, &e), SL_OK);
    assert_int_equal(seen, 1);
    nh_store_close(s);

    nh_testdb_make(&fresh);
    assert_int_equal(nh_store_open(fresh.url, NH_STORE_SERVE, &s, &e), SL_OK);
    assert_int_equal(nh_store_found_version(s), 0);
    nh_store_close(s);
    static char a[8192], b[8192];
    columns(old.url, a, sizeof a);
    columns(fresh.url, b, sizeof b);
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "usage_records.record_id"));
    assert_non_null(strstr(a, "tokens.jti"));
    nh_testdb_drop(&old);
    nh_testdb_drop(&fresh);
}

static void mariadb_needs_db_sync(void **state)
{
    (void)state;
    nh_testdb t;
    nh_testdb_make_empty(&t);
    if (!t.mariadb) {
        nh_testdb_drop(&t);
        skip();
    }
    nh_store *s;
    sl_error e;
    assert_int_equal(nh_store_open(t.url, NH_STORE_SERVE, &s, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "db-sync"));
    assert_null(strstr(e.msg, "password"));
    assert_int_equal(nh_store_open(t.url, NH_STORE_READ, &s, &e), SL_ERR_CONFIG);
    assert_int_equal(nh_store_open(t.url, NH_STORE_SYNC, &s, &e), SL_OK);
    assert_int_equal(nh_store_found_version(s), 0);
    nh_store_close(s);
    assert_int_equal(nh_store_open(t.url, NH_STORE_SYNC, &s, &e), SL_OK);
    assert_int_equal(nh_store_found_version(s), NH_STORE_SCHEMA_VERSION);
    nh_store_close(s);
    assert_int_equal(nh_store_open(t.url, NH_STORE_SERVE, &s, &e), SL_OK);
    nh_store_close(s);
    /* a version that only ever existed in SQLite files */
    sl_db *db;
    assert_int_equal(sl_db_open(t.url, 0, "test", &db, &e), SL_OK);
    assert_int_equal(sl_db_exec(db, "UPDATE sluice_schema SET version = 2", &e), SL_OK);
    sl_db_close(db);
    assert_int_equal(nh_store_open(t.url, NH_STORE_SYNC, &s, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "only in SQLite files"));
    nh_testdb_drop(&t);
}

/* A database of version 4, as the release before shared GPU time left it, with one record. */
static void make_v4(nh_testdb *t)
{
    nh_testdb_make(t);
    nh_store *s;
    sl_error e;
    assert_int_equal(nh_store_open(t->url, NH_STORE_SERVE, &s, &e), SL_OK);
    nh_store_close(s);
    sl_db *db;
    assert_int_equal(sl_db_open(t->url, 0, "test", &db, &e), SL_OK);
    const char *const v4[] = {
        "ALTER TABLE usage_records DROP COLUMN gpu_shared_ns",
        t->mariadb ? "UPDATE sluice_schema SET version = 4" : "PRAGMA user_version = 4",
        "INSERT INTO usage_records (record_id, host, instance, project, flavor, gpu_uuid, "
        "session_id, interval_start_ns, interval_end_ns, gpu_busy_ns, kernel_ns, kernels, "
        "bytes_htod, bytes_dtoh, memory_high_water, calls, errors, throttled_ns, quota_refusals, "
        "measurement, final, received) VALUES ('rec-1', 'gpu1', '" INST "', '" PROJ "', "
        "'g1.small', 'GPU-1', 1, 10, 20, 5, 5, 1, 0, 0, 0, 1, 0, 0, 0, 'events', 1, 30)",
        NULL,
    };
    exec_all(db, v4);
    sl_db_close(db);
}

static void v4_upgrade_shared_not_reported(void **state)
{
    (void)state;
    nh_testdb t;
    make_v4(&t);
    nh_store *s;
    sl_error e;
    assert_int_equal(nh_store_open(t.url, NH_STORE_READ, &s, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "db-sync"));
    if (t.mariadb) { /* the daemon refuses it: db-sync first */
        assert_int_equal(nh_store_open(t.url, NH_STORE_SERVE, &s, &e), SL_ERR_CONFIG);
        assert_int_equal(nh_store_open(t.url, NH_STORE_SYNC, &s, &e), SL_OK);
    } else { /* a SQLite file is upgraded by the daemon's open */
        assert_int_equal(nh_store_open(t.url, NH_STORE_SERVE, &s, &e), SL_OK);
    }
    assert_int_equal(nh_store_found_version(s), 4);
    nh_store_close(s);
    assert_int_equal(nh_store_open(t.url, NH_STORE_READ, &s, &e), SL_OK);
    int n = 0;
    assert_int_equal(nh_store_usage_records(s, 0, 100, NULL, on_old_record, &n, &e), SL_OK);
    assert_int_equal(n, 1);
    nh_store_close(s);
    nh_testdb_drop(&t);
}

static void prune_old_usage(void **state)
{
    (void)state;
    nh_testdb t;
    nh_testdb_make(&t);
    nh_store *s;
    sl_error e;
    assert_int_equal(nh_store_open(t.url, NH_STORE_SERVE, &s, &e), SL_OK);
    nh_agent_in a = {"gpu1", "tcp://192.0.2.1:7400", 8, "[]", "0.1", NULL};
    assert_int_equal(nh_store_register(s, &a, NOW, &e), SL_OK);
    /* a stay that ended long ago (placed, moved away), one still open */
    assert_int_equal(nh_store_place(s, INST, PROJ, "g1.small", "gpu1", NOW - 100 * 86400, &e),
                     SL_OK);
    nh_agent_in b = {"gpu2", "tcp://192.0.2.2:7400", 8, "[]", "0.1", NULL};
    assert_int_equal(nh_store_register(s, &b, NOW, &e), SL_OK);
    assert_int_equal(nh_store_place(s, INST, PROJ, "g1.small", "gpu2", NOW - 90 * 86400, &e),
                     SL_OK);
    Sluice__Control__UsageRecord r[2];
    Sluice__Control__UsageRecord *p[2] = {&r[0], &r[1]};
    const char *ids[] = {"old", "new"};
    for (int i = 0; i < 2; i++) {
        sluice__control__usage_record__init(&r[i]);
        r[i].record_id = (char *)ids[i];
        r[i].instance_uuid = INST;
        r[i].project_id = PROJ;
        r[i].interval_start_ns = (NOW - (i ? 1 : 95) * 86400) * NS;
        r[i].interval_end_ns = r[i].interval_start_ns + 10 * NS;
    }
    size_t added;
    assert_int_equal(nh_store_usage_insert(s, "gpu2", p, 2, NOW, &added, &e), SL_OK);
    nh_pruned out;
    assert_int_equal(nh_store_prune(s, (NOW - 30 * 86400) * NS, 0, &out, &e), SL_OK);
    assert_int_equal(out.usage, 1);
    assert_int_equal(out.history, 1);
    assert_int_equal(out.tokens, 0);
    int64_t n;
    assert_int_equal(nh_store_usage_count(s, &n, &e), SL_OK);
    assert_int_equal(n, 1);
    /* again: nothing left to do (several nova-hooks may prune at once) */
    assert_int_equal(nh_store_prune(s, (NOW - 30 * 86400) * NS, 0, &out, &e), SL_OK);
    assert_int_equal(out.usage + out.history + out.tokens, 0);
    nh_target tg;
    int found = 0;
    assert_int_equal(nh_store_lookup(s, INST, &tg, &found, &e), SL_OK);
    assert_true(found);
    assert_string_equal(tg.host, "gpu2");
    free(tg.ca_pem);
    nh_store_close(s);
    nh_testdb_drop(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(legacy_sqlite_upgrade),
        cmocka_unit_test(mariadb_needs_db_sync),
        cmocka_unit_test(v4_upgrade_shared_not_reported),
        cmocka_unit_test(prune_old_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
