/* The database layer (sluice/db.h, db_schema.h) on a real engine: SQLite here, MariaDB in the
 * .mariadb twin (the `mariadb` fixture's server, over TLS). Numbered parameters, NULLs, 64-bit
 * and double round trips, duplicate and foreign-key failures told apart, UPDATE counting
 * matched rows on both engines, keys compared byte for byte, a failed transaction rolled back,
 * a MariaDB deadlock and a killed connection run again, schema sync and its refusals. */
#include <pthread.h>
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
#include "sluice/db_schema.h"

static const char *const create_v1[] = {
    "CREATE TABLE parent (k VARCHAR(16) NOT NULL PRIMARY KEY, v BIGINT NOT NULL,"
    " d DOUBLE, t TEXT)",
    "CREATE TABLE child (id VARCHAR(16) NOT NULL PRIMARY KEY, k VARCHAR(16) NOT NULL,"
    " CONSTRAINT child_parent FOREIGN KEY (k) REFERENCES parent (k) ON DELETE CASCADE)",
    NULL,
};
static const char *const up_1_2[] = {"CREATE INDEX parent_v ON parent (v)", NULL};
static const char *const *const ups[] = {up_1_2};
static const sl_db_schema v1 = {"dbtest", 1, create_v1, NULL, 0, 0, "run the test's sync"};
static const sl_db_schema v2 = {"dbtest", 2, create_v1, ups, 1, 0, "run the test's sync"};

typedef struct fx {
    nh_testdb t;
    sl_db *db;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    nh_testdb_make_empty(&f->t);
    sl_error e;
    assert_int_equal(sl_db_open(f->t.url, 0, "test store", &f->db, &e), SL_OK);
    int from = -1;
    assert_int_equal(sl_db_schema_sync(f->db, &v1, &from, &e), SL_OK);
    assert_int_equal(from, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    sl_db_close(f->db);
    nh_testdb_drop(&f->t);
    free(f);
    return 0;
}

static sl_code put(sl_db *db, const char *k, int64_t v, sl_error *e)
{
    sl_db_stmt *st;
    sl_code rc =
        sl_db_prepare(db, "INSERT INTO parent (k, v, d, t) VALUES (?1, ?2, ?3, ?4)", &st, e);
    if (rc != SL_OK)
        return rc;
    sl_db_bind_text(st, 1, k);
    sl_db_bind_i64(st, 2, v);
    sl_db_bind_double(st, 3, 0.1);
    sl_db_bind_text(st, 4, NULL);
    rc = sl_db_run(st, "inserting", e);
    sl_db_finalize(st);
    return rc;
}

static void values_and_failures(void **state)
{
    fx *f = *state;
    sl_error e;
    const uint64_t big = (1ULL << 63) + 5;
    assert_int_equal(put(f->db, "ABC", (int64_t)big, &e), SL_OK);
    assert_int_equal(put(f->db, "abc", 7, &e), SL_OK); /* byte for byte: another key */
    assert_int_equal(put(f->db, "ABC", 1, &e), SL_ERR_REFUSED);
    assert_int_equal(sl_db_last_failure(f->db), SL_DB_FAIL_DUPLICATE);
    assert_non_null(strstr(e.msg, "test store"));
    assert_non_null(strstr(e.msg, "inserting"));

    sl_db_stmt *st;
    /* ?2 twice, ?1 once, a '?' inside a literal is no parameter */
    assert_int_equal(sl_db_prepare(f->db,
                                   "SELECT k, v, d, t, '?x' FROM parent WHERE v = ?2 OR "
                                   "(k = ?1 AND v <> ?2) ORDER BY k",
                                   &st, &e),
                     SL_OK);
    sl_db_bind_text(st, 1, "abc");
    sl_db_bind_i64(st, 2, (int64_t)big);
    sl_db_bind_i64(st, 9, 1); /* a number the statement does not use: ignored */
    int row = 0, rows = 0;
    while (sl_db_step(st, "reading", &row, &e) == SL_OK && row) {
        rows++;
        if (!strcmp(sl_db_col_text(st, 0), "ABC"))
            assert_true(sl_db_col_u64(st, 1) == big);
        else
            assert_int_equal(sl_db_col_i64(st, 1), 7);
        assert_true(sl_db_col_double(st, 2) == 0.1);
        assert_true(sl_db_col_null(st, 3));
        assert_string_equal(sl_db_col_text(st, 3), "");
        assert_string_equal(sl_db_col_text(st, 4), "?x");
    }
    assert_int_equal(rows, 2);
    sl_db_finalize(st);
    assert_int_not_equal(sl_db_prepare(f->db, "SELECT k FROM parent WHERE k = ?", &st, &e), SL_OK);
    assert_non_null(strstr(e.msg, "?1..?999"));

    /* UPDATE counts the rows it matched, also when nothing changes (both engines) */
    assert_int_equal(sl_db_prepare(f->db, "UPDATE parent SET v = 7 WHERE k = ?1", &st, &e), SL_OK);
    sl_db_bind_text(st, 1, "abc");
    assert_int_equal(sl_db_run(st, "updating", &e), SL_OK);
    assert_int_equal(sl_db_changes(st), 1);
    sl_db_reset(st);
    sl_db_bind_text(st, 1, "nothing");
    assert_int_equal(sl_db_run(st, "updating", &e), SL_OK);
    assert_int_equal(sl_db_changes(st), 0);
    sl_db_finalize(st);

    /* a child of a missing parent: a foreign-key failure, told apart from a duplicate */
    assert_int_equal(sl_db_prepare(f->db, "INSERT INTO child (id, k) VALUES (?1, ?2)", &st, &e),
                     SL_OK);
    sl_db_bind_text(st, 1, "c1");
    sl_db_bind_text(st, 2, "missing");
    assert_int_equal(sl_db_run(st, "adding a child", &e), SL_ERR_REFUSED);
    assert_int_equal(sl_db_last_failure(f->db), SL_DB_FAIL_FOREIGN_KEY);
    sl_db_finalize(st);
}

static sl_code insert_then_fail(sl_db *db, void *ud, sl_error *e)
{
    (void)ud;
    sl_code rc = put(db, "gone", 1, e);
    return rc == SL_OK ? sl_fail(e, SL_ERR_INVALID, "the caller changed its mind") : rc;
}

static sl_code count_parent(sl_db *db, void *ud, sl_error *e)
{
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db, "SELECT count(*) FROM parent", &st, e);
    int row = 0;
    if (rc == SL_OK && (rc = sl_db_step(st, "counting", &row, e)) == SL_OK)
        *(int64_t *)ud = sl_db_col_i64(st, 0);
    sl_db_finalize(st);
    return rc;
}

static void rollback(void **state)
{
    fx *f = *state;
    sl_error e;
    assert_int_equal(sl_db_transaction(f->db, SL_DB_TXN_WRITE, insert_then_fail, NULL, &e),
                     SL_ERR_INVALID);
    int64_t n = -1;
    assert_int_equal(sl_db_transaction(f->db, 0, count_parent, &n, &e), SL_OK);
    assert_int_equal(n, 0);
}

/* ---- MariaDB: a deadlock between two connections, a connection killed by the server */

typedef struct racer {
    const char *url, *first, *second;
    pthread_barrier_t *both_hold_one;
    int attempts;
    sl_code rc;
    char msg[SL_ERROR_MSG_MAX];
} racer;

static sl_code bump(sl_db *db, const char *k, sl_error *e)
{
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db, "UPDATE parent SET v = v + 1 WHERE k = ?1", &st, e);
    if (rc == SL_OK) {
        sl_db_bind_text(st, 1, k);
        rc = sl_db_run(st, "bumping", e);
    }
    sl_db_finalize(st);
    return rc;
}

static sl_code cross(sl_db *db, void *ud, sl_error *e)
{
    racer *r = ud;
    sl_code rc = bump(db, r->first, e);
    if (r->attempts++ == 0) /* the first attempt of each waits for the other's first lock */
        pthread_barrier_wait(r->both_hold_one);
    return rc == SL_OK ? bump(db, r->second, e) : rc;
}

static void *race(void *arg)
{
    racer *r = arg;
    sl_db *db;
    sl_error e = {0};
    r->rc = sl_db_open(r->url, 0, "racer", &db, &e);
    if (r->rc == SL_OK) {
        r->rc = sl_db_transaction(db, SL_DB_TXN_WRITE, cross, r, &e);
        sl_db_close(db);
    }
    snprintf(r->msg, sizeof r->msg, "%s", e.msg);
    return NULL;
}

static void deadlock_runs_again(void **state)
{
    fx *f = *state;
    if (!f->t.mariadb)
        skip(); /* SQLite has one writer at a time: no deadlock to break */
    sl_error e;
    assert_int_equal(put(f->db, "a", 0, &e), SL_OK);
    assert_int_equal(put(f->db, "b", 0, &e), SL_OK);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    racer x = {f->t.url, "a", "b", &bar, 0, SL_OK, ""},
          y = {f->t.url, "b", "a", &bar, 0, SL_OK, ""};
    pthread_t tx, ty;
    pthread_create(&tx, NULL, race, &x);
    pthread_create(&ty, NULL, race, &y);
    pthread_join(tx, NULL);
    pthread_join(ty, NULL);
    pthread_barrier_destroy(&bar);
    if (x.rc != SL_OK || y.rc != SL_OK)
        fail_msg("racers: %s / %s", x.msg, y.msg);
    printf("deadlock: attempts %d and %d\n", x.attempts, y.attempts);
    assert_int_equal(x.attempts + y.attempts, 3); /* the victim ran once more */
    sl_db_stmt *st;
    assert_int_equal(sl_db_prepare(f->db, "SELECT sum(v) FROM parent", &st, &e), SL_OK);
    int row;
    assert_int_equal(sl_db_step(st, "summing", &row, &e), SL_OK);
    assert_int_equal(sl_db_col_i64(st, 0), 4); /* each committed once: 2 + 2 */
    sl_db_finalize(st);
}

static sl_code my_id(sl_db *db, void *ud, sl_error *e)
{
    sl_db_stmt *st;
    sl_code rc = sl_db_prepare(db, "SELECT CONNECTION_ID()", &st, e);
    int row = 0;
    if (rc == SL_OK && (rc = sl_db_step(st, "reading the connection id", &row, e)) == SL_OK)
        *(int64_t *)ud = sl_db_col_i64(st, 0);
    sl_db_finalize(st);
    return rc;
}

static void killed_connection_reopens(void **state)
{
    fx *f = *state;
    if (!f->t.mariadb)
        skip();
    sl_error e;
    int64_t id = 0, id2 = 0, n = -1;
    assert_int_equal(sl_db_transaction(f->db, 0, my_id, &id, &e), SL_OK);
    sl_db *other;
    assert_int_equal(sl_db_open(f->t.url, 0, "killer", &other, &e), SL_OK);
    char sql[64];
    snprintf(sql, sizeof sql, "KILL %lld", (long long)id);
    assert_int_equal(sl_db_exec(other, sql, &e), SL_OK);
    sl_db_close(other);
    sl_code rc = sl_db_transaction(f->db, 0, count_parent, &n, &e);
    if (rc != SL_OK)
        fail_msg("after KILL: %s", e.msg);
    assert_int_equal(n, 0);
    assert_int_equal(sl_db_transaction(f->db, 0, my_id, &id2, &e), SL_OK);
    assert_int_not_equal(id, id2); /* a new connection */
}

static void schema_versions(void **state)
{
    fx *f = *state;
    sl_error e;
    int from = -1;
    assert_int_equal(sl_db_schema_sync(f->db, &v1, &from, &e), SL_OK); /* nothing to do */
    assert_int_equal(from, 1);
    assert_int_equal(sl_db_schema_check(f->db, &v2, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "older"));
    assert_non_null(strstr(e.msg, "run the test's sync"));
    assert_int_equal(sl_db_schema_sync(f->db, &v2, &from, &e), SL_OK);
    assert_int_equal(from, 1);
    assert_int_equal(sl_db_schema_check(f->db, &v2, &e), SL_OK);
    assert_int_equal(sl_db_schema_check(f->db, &v1, &e), SL_ERR_CONFIG); /* newer */
    assert_non_null(strstr(e.msg, "upgrade this program"));
    assert_int_equal(sl_db_schema_sync(f->db, &v1, &from, &e), SL_ERR_CONFIG);
    /* a database holding tables but no version is not ours: nothing written there */
    nh_testdb other;
    nh_testdb_make_empty(&other);
    sl_db *db;
    assert_int_equal(sl_db_open(other.url, 0, "test store", &db, &e), SL_OK);
    assert_int_equal(sl_db_exec(db, "CREATE TABLE foreign_table (x BIGINT PRIMARY KEY)", &e),
                     SL_OK);
    assert_int_equal(sl_db_schema_check(db, &v1, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "no dbtest schema yet"));
    assert_int_equal(sl_db_schema_sync(db, &v1, &from, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "not a dbtest database"));
    sl_db_close(db);
    nh_testdb_drop(&other);
    /* read-only: a SQLite file must exist (the message says what is missing, not SQLite's
     * "unable to open database file"); no write may happen */
    if (!f->t.mariadb) {
        assert_int_equal(sl_db_open("/nonexistent/x.db", SL_DB_READONLY, "test store", &db, &e),
                         SL_ERR_CONFIG);
        assert_non_null(strstr(e.msg, "/nonexistent/x.db"));
        assert_non_null(strstr(e.msg, "the directory /nonexistent does not exist"));
    }
    assert_int_equal(sl_db_open(f->t.url, SL_DB_READONLY, "test store", &db, &e), SL_OK);
    assert_int_equal(sl_db_schema_sync(db, &v2, &from, &e), SL_ERR_INVALID);
    assert_int_equal(sl_db_transaction(db, SL_DB_TXN_WRITE, insert_then_fail, NULL, &e),
                     SL_ERR_INVALID);
    sl_db_close(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(values_and_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(rollback, setup, teardown),
        cmocka_unit_test_setup_teardown(deadlock_runs_again, setup, teardown),
        cmocka_unit_test_setup_teardown(killed_connection_reopens, setup, teardown),
        cmocka_unit_test_setup_teardown(schema_versions, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
