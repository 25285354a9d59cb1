/* Shared GPU time in the agent's usage store (agent/usage_store_shared.c): busy intervals stored
 * with their records, windows apportioned once settled (every open session reported past them,
 * or the longest delay passed), the shares added to the records and their totals exactly once
 * (across a reopen), two backends' records arriving at different times, two GPUs, intervals of
 * a window settled before they came, and the record checks of the new fields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "usage_query.h"
#include "usage_record.h"
#include "usage_store.h"

#define NS    1000000000LL
#define T0    1800000000000000000LL /* a window boundary (multiple of 10 s) */
#define GPU_A "GPU-00000000-0000-0000-0000-00000000000a"
#define GPU_B "GPU-00000000-0000-0000-0000-00000000000b"
#define P1    "f241e906010e4917ae8153f4fb8aa021"
#define P2    "0a1b2c3d4e5f60718293a4b5c6d7e8f9"

static const char *const INST[] = {"3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60",
                                   "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f61",
                                   "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f62"};

typedef struct recbuf {
    Sluice__Control__UsageRecord r;
    Sluice__Control__BusyInterval iv[8], *ivp[8];
    char id[40];
} recbuf;

/* A record of session `session` of instance INST[inst] (project by inst: 0, 1 -> P1, 2 -> P2)
 * on gpu over [T0 + from_s, T0 + to_s), busy during the pairs of seconds in b (n intervals). */
static void mk(recbuf *x, int serial, int inst, uint64_t session, const char *gpu, int from_s,
               int to_s, const int64_t (*b)[2], size_t n)
{
    memset(x, 0, sizeof *x);
    sluice__control__usage_record__init(&x->r);
    snprintf(x->id, sizeof x->id, "0000%04d-1111-4222-8333-444455556666", serial);
    x->r.record_id = x->id;
    x->r.instance_uuid = (char *)INST[inst];
    x->r.project_id = inst < 2 ? P1 : P2;
    x->r.flavor = "g1.small";
    x->r.gpu_uuid = (char *)gpu;
    x->r.session_id = session;
    x->r.interval_start_ns = T0 + from_s * NS;
    x->r.interval_end_ns = T0 + to_s * NS;
    x->r.measurement = "events";
    uint64_t busy = 0;
    for (size_t i = 0; i < n; i++) {
        sluice__control__busy_interval__init(&x->iv[i]);
        x->iv[i].start_ns = T0 + b[i][0];
        x->iv[i].end_ns = T0 + b[i][1];
        busy += (uint64_t)(b[i][1] - b[i][0]);
        x->ivp[i] = &x->iv[i];
    }
    x->r.n_busy = n;
    x->r.busy = x->ivp;
    x->r.gpu_busy_ns = busy;
}

typedef struct fixture {
    char dir[64], path[96];
    ag_usage_store *s;
} fixture;

static int setup(void **st)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/ag-shared-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/usage.db", f->dir);
    sl_error e;
    assert_int_equal(ag_usage_store_open(f->path, 0, &f->s, &e), SL_OK);
    *st = f;
    return 0;
}

static int teardown(void **st)
{
    fixture *f = *st;
    ag_usage_store_close(f->s);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

static void put(fixture *f, recbuf *x, size_t n)
{
    const Sluice__Control__UsageRecord *v[8];
    for (size_t i = 0; i < n; i++)
        v[i] = &x[i].r;
    sl_error e;
    assert_int_equal(ag_usage_store_put(f->s, v, n, 1, NULL, &e), SL_OK);
}

typedef struct sums {
    uint64_t shared, raw;
    uint64_t by_inst[3];
} sums;

static int on_rec(const sl_usage_rec *r, void *ud)
{
    sums *s = ud;
    s->shared += r->gpu_shared_ns;
    s->raw += r->gpu_busy_ns;
    for (int i = 0; i < 3; i++)
        if (!strcmp(r->instance, INST[i]))
            s->by_inst[i] += r->gpu_shared_ns;
    return 0;
}

static sums read_sums(fixture *f)
{
    sums s = {0};
    sl_error e;
    assert_int_equal(ag_usage_store_records(f->s, 0, INT64_MAX, NULL, on_rec, &s, &e), SL_OK);
    return s;
}

static int on_total(const sl_usage_rec *t, uint64_t records, void *ud)
{
    (void)records;
    *(uint64_t *)ud += t->gpu_shared_ns;
    return 0;
}

static ag_usage_settled settle(fixture *f, int64_t now_ns)
{
    const ag_usage_settle_opts o = {10 * NS, 2 * NS, 120 * NS, 1000};
    ag_usage_settled d;
    sl_error e;
    assert_int_equal(ag_usage_store_settle(f->s, &o, now_ns, &d, &e), SL_OK);
    return d;
}

/* Two tenants' sessions on one GPU, two backends reporting at different times: a window is not
 * apportioned while a session open at its end has not reported past it; once it is, the shares
 * add up to the GPU's busy time exactly, and a reopen or a second call adds nothing. */
static void test_two_backends_one_gpu(void **st)
{
    fixture *f = *st;
    sl_error e;
    /* backend of P1: session 1 (INST[0]) busy [0, 6) s; session 2 (INST[1]) busy [3, 9) s.
     * backend of P2: session 7 (INST[2]) busy [4, 14) s, its records come later. */
    assert_int_equal(ag_usage_store_session_opened(f->s, P1, 1, INST[0], T0, &e), SL_OK);
    assert_int_equal(ag_usage_store_session_opened(f->s, P1, 2, INST[1], T0, &e), SL_OK);
    assert_int_equal(ag_usage_store_session_opened(f->s, P2, 7, INST[2], T0, &e), SL_OK);
    recbuf r[4];
    const int64_t b0[][2] = {{0, 6 * NS}};
    const int64_t b1[][2] = {{3 * NS, 9 * NS}};
    mk(&r[0], 1, 0, 1, GPU_A, 0, 10, b0, 1);
    mk(&r[1], 2, 1, 2, GPU_A, 0, 10, b1, 1);
    r[0].r.final = r[1].r.final = 1;
    put(f, r, 2);
    /* P2's session has not reported: nothing is settled, however late it is (within the
     * longest delay) */
    assert_int_equal(settle(f, T0 + 60 * NS).windows, 0);
    assert_int_equal(read_sums(f).shared, 0);
    /* P2's records: [0, 10) busy [4, 10), [10, 20) busy [10, 14), final */
    const int64_t b2[][2] = {{4 * NS, 10 * NS}};
    const int64_t b3[][2] = {{10 * NS, 14 * NS}};
    mk(&r[2], 3, 2, 7, GPU_A, 0, 10, b2, 1);
    mk(&r[3], 4, 2, 7, GPU_A, 10, 20, b3, 1);
    r[3].r.final = 1;
    put(f, &r[3], 1); /* out of order: the later record first */
    put(f, &r[2], 1);
    /* too soon after the second window's end (grace): only the first */
    assert_int_equal(settle(f, T0 + 21 * NS).windows, 1);
    assert_int_equal(settle(f, T0 + 23 * NS).windows, 1);
    sums s = read_sums(f);
    /* busy [0, 14) s: the union */
    assert_int_equal(s.shared, 14 * NS);
    assert_int_equal(s.raw, 6 * NS + 6 * NS + 6 * NS + 4 * NS);
    /* [0,3) s0; [3,4) s0 s1; [4,6) s0 s1 s2; [6,9) s1 s2; [9,10) s2; [10,14) s2 */
    uint64_t want0 = 3 * NS + NS / 2 + 2 * NS / 3;
    uint64_t want2 = 2 * NS / 3 + 3 * NS / 2 + NS + 4 * NS;
    assert_true(s.by_inst[0] + 1 >= want0 && s.by_inst[0] <= want0 + 1);
    assert_true(s.by_inst[2] + 1 >= want2 && s.by_inst[2] <= want2 + 1);
    uint64_t tot = 0;
    assert_int_equal(ag_usage_store_totals(f->s, on_total, &tot, &e), SL_OK);
    assert_int_equal(tot, 14 * NS);
    /* again, and after a reopen (an agent restart): nothing twice */
    assert_int_equal(settle(f, T0 + 100 * NS).windows, 0);
    ag_usage_store_close(f->s);
    assert_int_equal(ag_usage_store_open(f->path, 0, &f->s, &e), SL_OK);
    assert_int_equal(settle(f, T0 + 200 * NS).windows, 0);
    assert_int_equal(read_sums(f).shared, 14 * NS);
    /* the report shows raw and shared side by side */
    sl_usage_report *rep;
    assert_int_equal(ag_usage_query(f->s, T0, T0 + 3600 * NS, NULL, &rep, &e), SL_OK);
    const sl_usage_view *v = sl_usage_report_view(rep);
    assert_true(v->shared);
    double raw = 0, shared = 0;
    for (size_t t = 0; t < v->n_tenants; t++) {
        raw += v->tenants[t].total.busy_s;
        shared += v->tenants[t].total.shared_s;
    }
    assert_true(raw > 21.999 && raw < 22.001);
    assert_true(shared > 13.999 && shared < 14.001);
    char *text = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&text, &len);
    assert_int_equal(sl_usage_render(v, SL_USAGE_TABLE, mf, &e), SL_OK);
    assert_int_equal(sl_usage_render(v, SL_USAGE_CSV, mf, &e), SL_OK);
    assert_int_equal(sl_usage_render(v, SL_USAGE_JSON, mf, &e), SL_OK);
    fclose(mf);
    assert_non_null(strstr(text, "GPU SHARED"));
    assert_non_null(strstr(text, "14.0 s")); /* the total's shared time */
    assert_non_null(strstr(text, "22.0 s")); /* and its raw time */
    assert_non_null(strstr(text, ",gpu_shared_hours\r\n"));
    assert_non_null(strstr(text, "\"total_gpu_shared_hours\""));
    free(text);
    sl_usage_report_free(rep);
}

/* Two GPUs apportioned each on its own; a session silent past the longest delay does not hold
 * the windows back for ever; intervals arriving for a window already settled are not shared
 * (their record keeps its raw figure). */
static void test_two_gpus_delay_late(void **st)
{
    fixture *f = *st;
    sl_error e;
    assert_int_equal(ag_usage_store_session_opened(f->s, P2, 9, INST[2], T0, &e), SL_OK);
    recbuf r[3];
    const int64_t a0[][2] = {{0, 4 * NS}, {5 * NS, 8 * NS}};
    const int64_t a1[][2] = {{2 * NS, 6 * NS}};
    const int64_t b0[][2] = {{1 * NS, 9 * NS}};
    mk(&r[0], 11, 0, 1, GPU_A, 0, 10, a0, 2);
    mk(&r[1], 12, 2, 7, GPU_A, 0, 10, a1, 1);
    mk(&r[2], 13, 1, 2, GPU_B, 0, 10, b0, 1);
    for (int i = 0; i < 3; i++)
        r[i].r.final = 1;
    put(f, r, 3);
    /* session 9 of P2 never reports: held back until 120 s after the window */
    assert_int_equal(settle(f, T0 + 100 * NS).windows, 0);
    assert_int_equal(settle(f, T0 + 131 * NS).windows, 2); /* one per GPU */
    sums s = read_sums(f);
    /* GPU A: [0, 8) busy = 8 s; GPU B: 8 s */
    assert_int_equal(s.shared, 16 * NS);
    assert_int_equal(s.by_inst[1], 8 * NS); /* alone on GPU B */
    /* [0,2) s0; [2,4) s0 s2: 1 each; [4,5) s2; [5,6) s0 s2: 0.5 each; [6,8) s0 */
    assert_int_equal(s.by_inst[0], 2 * NS + NS + NS / 2 + 2 * NS);
    assert_int_equal(s.by_inst[2], NS + NS + NS / 2);
    /* session 9's record now, for [0, 10): late, not shared */
    recbuf late;
    const int64_t l0[][2] = {{0, 10 * NS}};
    mk(&late, 14, 2, 9, GPU_A, 0, 10, l0, 1);
    late.r.final = 1;
    put(f, &late, 1);
    assert_int_equal(settle(f, T0 + 300 * NS).windows, 0);
    assert_int_equal(read_sums(f).shared, 16 * NS);
}

/* The mark never passes what is settled, even where no interval lies yet: a record that comes
 * later for a time between the limit and the next interval is still shared. */
static void test_mark_stops_at_limit(void **st)
{
    fixture *f = *st;
    recbuf r[2];
    const int64_t b0[][2] = {{100 * NS, 105 * NS}};
    const int64_t b1[][2] = {{22 * NS, 26 * NS}};
    mk(&r[0], 31, 0, 1, GPU_A, 100, 110, b0, 1);
    r[0].r.final = 1;
    put(f, &r[0], 1);
    assert_int_equal(settle(f, T0 + 25 * NS).windows, 0); /* settled up to T0 + 20 s only */
    mk(&r[1], 32, 1, 2, GPU_A, 20, 30, b1, 1);
    r[1].r.final = 1;
    put(f, &r[1], 1);
    assert_int_equal(settle(f, T0 + 200 * NS).windows, 2);
    assert_int_equal(read_sums(f).shared, 9 * NS);
}

/* A store of version 2 (before shared time) is upgraded when opened, its records kept. */
static void test_upgrade_from_v2(void **st)
{
    fixture *f = *st;
    sl_error e;
    recbuf r;
    const int64_t b[][2] = {{0, 5 * NS}};
    mk(&r, 21, 0, 1, GPU_A, 0, 10, b, 1);
    r.r.final = 1;
    put(f, &r, 1);
    ag_usage_store_close(f->s);
    f->s = NULL;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "DROP TABLE busy; DROP TABLE settled; ALTER TABLE records DROP "
                                  "COLUMN gpu_shared_ns; ALTER TABLE totals DROP COLUMN "
                                  "gpu_shared_ns; PRAGMA user_version = 2;",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(ag_usage_store_open(f->path, 0, &f->s, &e), SL_OK);
    sums s = read_sums(f);
    assert_int_equal(s.raw, 5 * NS);
    assert_int_equal(s.shared, 0);
    const int64_t b2[][2] = {{10 * NS, 15 * NS}};
    mk(&r, 22, 1, 2, GPU_A, 10, 20, b2, 1);
    r.r.final = 1;
    put(f, &r, 1);
    assert_int_equal(settle(f, T0 + 60 * NS).windows, 1);
    assert_int_equal(read_sums(f).shared, 5 * NS);
}

/* The record checks of busy and busy_widened_ns. */
static void test_busy_checks(void **st)
{
    (void)st;
    char why[200];
    recbuf x;
    const int64_t ok[][2] = {{1 * NS, 2 * NS}, {3 * NS, 5 * NS}};
    int64_t now = T0 + 60 * NS;
    mk(&x, 1, 0, 1, GPU_A, 0, 10, ok, 2);
    assert_int_equal(ag_usage_record_check(&x.r, P1, now, why, sizeof why), 0);
    const int64_t unsorted[][2] = {{3 * NS, 5 * NS}, {1 * NS, 2 * NS}};
    const int64_t overlap[][2] = {{1 * NS, 4 * NS}, {3 * NS, 5 * NS}};
    const int64_t outside[][2] = {{-1 * NS, 2 * NS}};
    const int64_t beyond[][2] = {{9 * NS, 11 * NS}};
    const int64_t empty[][2] = {{2 * NS, 2 * NS}};
    const struct {
        const int64_t (*b)[2];
        size_t n;
    } bad[] = {{unsorted, 2}, {overlap, 2}, {outside, 1}, {beyond, 1}, {empty, 1}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        mk(&x, 1, 0, 1, GPU_A, 0, 10, bad[k].b, bad[k].n);
        assert_int_equal(ag_usage_record_check(&x.r, P1, now, why, sizeof why), -1);
        assert_non_null(strstr(why, "busy"));
    }
    /* widened: the intervals less the merged gaps must be gpu_busy_ns */
    mk(&x, 1, 0, 1, GPU_A, 0, 10, ok, 2);
    x.r.busy_widened_ns = NS;
    assert_int_equal(ag_usage_record_check(&x.r, P1, now, why, sizeof why), -1);
    assert_non_null(strstr(why, "busy_widened_ns"));
    x.r.gpu_busy_ns -= NS;
    assert_int_equal(ag_usage_record_check(&x.r, P1, now, why, sizeof why), 0);
    /* more than 256 */
    Sluice__Control__BusyInterval many[257], *mp[257];
    for (int i = 0; i < 257; i++) {
        sluice__control__busy_interval__init(&many[i]);
        many[i].start_ns = T0 + i * 10;
        many[i].end_ns = T0 + i * 10 + 5;
        mp[i] = &many[i];
    }
    mk(&x, 1, 0, 1, GPU_A, 0, 10, NULL, 0);
    x.r.busy = mp;
    x.r.n_busy = 257;
    x.r.gpu_busy_ns = 257 * 5;
    assert_int_equal(ag_usage_record_check(&x.r, P1, now, why, sizeof why), -1);
    assert_non_null(strstr(why, "256"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_two_backends_one_gpu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_gpus_delay_late, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mark_stops_at_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_from_v2, setup, teardown),
        cmocka_unit_test(test_busy_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
