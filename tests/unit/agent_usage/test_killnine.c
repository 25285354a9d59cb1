/* kill -9 at any moment loses no acknowledged record and duplicates none.
 *
 * A child process does what the agent does with usage records: stores a batch (new records and
 * records sent again) in the usage store, and only after the commit returns "acknowledges" them
 * by writing their ids to a pipe. The parent kills it with SIGKILL after a random time (0 to
 * 60 ms: during the store's creation, a transaction, an fsync, a write of acks) and starts the
 * next child on the same database, many times (the last one, when nothing was acknowledged yet,
 * runs until its first acknowledgement). At the end every acknowledged id must be in the
 * database exactly once, the running totals must match the records, and the database must pass
 * SQLite's integrity check.
 * SLUICE_KILL_SEED=N repeats a run (the seed is printed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "usage_store.h"

#define ROUNDS  60
#define PROJ    "f241e906010e4917ae8153f4fb8aa021"
#define INST    "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60"
#define MAX_ACK 200000

static char db[128];

static void id_of(unsigned round, unsigned k, char out[40])
{
    snprintf(out, 40, "%08x-%04x-4000-8000-000000000000", round, k & 0xffff);
}

/* The child: batches until killed. Never returns. */
static void child(unsigned round, int fd, unsigned seed)
{
    srand(seed);
    ag_usage_store *s;
    sl_error e;
    if (ag_usage_store_open(db, 0, &s, &e) != SL_OK) {
        fprintf(stderr, "child: %s\n", e.msg);
        _exit(3);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL;
    static char idbuf[32][40];
    Sluice__Control__UsageRecord recs[32];
    const Sluice__Control__UsageRecord *ptr[32];
    for (unsigned k = 0;;) {
        int n = 1 + rand() % 20;
        for (int i = 0; i < n; i++) {
            Sluice__Control__UsageRecord r = SLUICE__CONTROL__USAGE_RECORD__INIT;
            int again = rand() % 4 == 0;
            if (again && k > 0)
                id_of(round, (unsigned)rand() % k, idbuf[i]); /* this child's, sent again */
            else if (again && round > 0)
                id_of(round - 1, (unsigned)rand() % 64, idbuf[i]); /* the last child's */
            else
                id_of(round, k++, idbuf[i]);
            r.record_id = idbuf[i];
            r.instance_uuid = INST;
            r.project_id = PROJ;
            r.interval_start_ns = now - 10000000000LL;
            r.interval_end_ns = now;
            r.gpu_busy_ns = 1000;
            recs[i] = r;
            ptr[i] = &recs[i];
        }
        if (ag_usage_store_put(s, ptr, (size_t)n, now / 1000000000LL, NULL, &e) != SL_OK) {
            fprintf(stderr, "child: %s\n", e.msg);
            _exit(4);
        }
        /* acknowledged only now, after the durable commit */
        char line[32 * 41 + 1];
        size_t len = 0;
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(line + len, sizeof line - len, "%s\n", idbuf[i]);
        if (write(fd, line, len) != (ssize_t)len)
            _exit(5);
    }
}

static char (*acked)[40];
static size_t n_acked;

static void take_lines(char *buf, size_t *len)
{
    char *p = buf, *end = buf + *len, *nl;
    while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
        if (nl - p == 36 && n_acked < MAX_ACK) {
            memcpy(acked[n_acked], p, 36);
            acked[n_acked++][36] = '\0';
        }
        p = nl + 1;
    }
    memmove(buf, p, (size_t)(end - p));
    *len = (size_t)(end - p);
}

static int cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void test_kill_nine(void **st)
{
    (void)st;
    char dir[] = "/tmp/ag-usage-kill-XXXXXX";
    assert_non_null(mkdtemp(dir));
    snprintf(db, sizeof db, "%s/usage.db", dir);
    const char *env = getenv("SLUICE_KILL_SEED");
    unsigned seed = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    printf("seed %u (SLUICE_KILL_SEED=%u repeats this run)\n", seed, seed);
    srand(seed);
    acked = calloc(MAX_ACK, sizeof *acked);
    assert_non_null(acked);
    int killed_busy = 0;
    for (unsigned round = 0; round < ROUNDS; round++) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        unsigned cseed = (unsigned)rand();
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            child(round, p[1], cseed);
        }
        close(p[1]);
        int delay_ms = round < 3 ? (int)round : rand() % 61;
        /* the last child, when nothing was acknowledged yet (a slow or loaded machine, a
         * sanitizer build), runs until its first acknowledgement (10 s at most) */
        int until_ack = round == ROUNDS - 1 && n_acked == 0;
        if (until_ack)
            delay_ms = 10000;
        struct timespec t0, now;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        char buf[65536];
        size_t len = 0;
        for (;;) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            long el = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
            if (el >= delay_ms || (until_ack && n_acked > 0))
                break;
            struct pollfd pf = {p[0], POLLIN, 0};
            if (poll(&pf, 1, (int)(delay_ms - el)) > 0) {
                ssize_t r = read(p[0], buf + len, sizeof buf - len);
                if (r > 0) {
                    len += (size_t)r;
                    take_lines(buf, &len);
                }
            }
        }
        kill(pid, SIGKILL);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status))
            fail_msg("round %u: the child exited with status %d (before the kill)", round,
                     WEXITSTATUS(status));
        killed_busy++;
        ssize_t r;
        while ((r = read(p[0], buf + len, sizeof buf - len)) > 0) {
            len += (size_t)r;
            take_lines(buf, &len);
        }
        close(p[0]);
    }
    assert_int_equal(killed_busy, ROUNDS);
    assert_true(n_acked > 0);
    qsort(acked, n_acked, sizeof *acked, cmp);

    sqlite3 *h;
    assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "ok");
    sqlite3_finalize(q);
    assert_int_equal(sqlite3_prepare_v2(h,
                                        "SELECT count(*), count(DISTINCT record_id) FROM records",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    long long rows = sqlite3_column_int64(q, 0), distinct = sqlite3_column_int64(q, 1);
    sqlite3_finalize(q);
    assert_int_equal(rows, distinct);
    /* the running sums were written in the same transactions as the records */
    assert_int_equal(
        sqlite3_prepare_v2(h, "SELECT sum(records), sum(gpu_busy_ns) FROM totals", -1, &q, NULL),
        SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(q, 0), rows);
    assert_int_equal(sqlite3_column_int64(q, 1), rows * 1000);
    sqlite3_finalize(q);
    assert_int_equal(
        sqlite3_prepare_v2(h, "SELECT count(*) FROM records WHERE record_id = ?1", -1, &q, NULL),
        SQLITE_OK);
    size_t unique = 0;
    for (size_t i = 0; i < n_acked; i++) {
        if (i && !strcmp(acked[i], acked[i - 1]))
            continue;
        unique++;
        sqlite3_reset(q);
        sqlite3_bind_text(q, 1, acked[i], -1, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        if (sqlite3_column_int64(q, 0) != 1)
            fail_msg("acknowledged record %s is stored %lld times", acked[i],
                     (long long)sqlite3_column_int64(q, 0));
    }
    sqlite3_finalize(q);
    sqlite3_close(h);
    printf("%d kills; %zu acknowledgements of %zu ids, all stored once; %lld rows\n", ROUNDS,
           n_acked, unique, rows);
    free(acked);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_kill_nine)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
