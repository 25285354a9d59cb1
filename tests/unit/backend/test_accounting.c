/* Unit tests of the backend's SLA accounting (docs/accounting.md): interval union, the GPU-share
 * token bucket, quota arithmetic and the shared accounting page, usage record building, the
 * server's queue of unacknowledged records, and a session's records without a driver. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "accounting/intervals.h"
#include "accounting/quota.h"
#include "accounting/records.h"
#include "accounting/share.h"
#include "accounting/state.h"
#include "accounting/usage.h"
#include "accounting/usage_queue.h"
#include "session/devices.h"
#include "session/ranges.h"
#include "session/session.h"
#include "session/state.h"
#include "sluice/error.h"
#include "sluice/pod_facts.h"
#include "sluice/wire.h"
#include "sluice_control.pb-c.h"

/* ---------------------------------------------------------------- intervals */

static void test_union_merges_overlaps_once(void **state)
{
    (void)state;
    struct be_iv v[] = {{50, 60}, {0, 10}, {5, 20}, {20, 30}, {100, 100}, {40, 45}, {42, 44}};
    uint64_t total = 0;
    size_t n = be_iv_union(v, sizeof v / sizeof *v, INT64_MIN, INT64_MAX, &total);
    assert_int_equal(n, 3); /* [0,30) [40,45) [50,60): touching ones merge, empty ones go */
    assert_int_equal(v[0].a, 0);
    assert_int_equal(v[0].b, 30);
    assert_int_equal(v[1].a, 40);
    assert_int_equal(v[1].b, 45);
    assert_int_equal(v[2].a, 50);
    assert_int_equal(v[2].b, 60);
    assert_int_equal(total, 45);
}

static void test_union_clips(void **state)
{
    (void)state;
    struct be_iv v[] = {{-10, 5}, {8, 12}, {95, 130}, {200, 300}};
    uint64_t total = 0;
    size_t n = be_iv_union(v, 4, 0, 100, &total);
    assert_int_equal(n, 3);
    assert_int_equal(total, 5 + 4 + 5);
    assert_int_equal(be_iv_union(v, 0, 0, 100, &total), 0);
    assert_int_equal(total, 0);
}

/* The incremental union gives what the whole one gives: in order (the usual case), with
 * overlaps and touching ends, empty intervals, and one out of order (its tail again). */
static void test_union_more_matches_union(void **state)
{
    (void)state;
    struct be_iv all[64], inc[64];
    size_t n = 0, merged = 0;
    uint64_t total = 0;
    srand(7);
    for (int round = 0; round < 12; round++) {
        for (int j = 0; j < 5; j++) {
            int64_t at = round * 100 + rand() % 120 - (round == 9 ? 400 : 0);
            struct be_iv x = {at, at + rand() % 40};
            all[n] = x;
            inc[n] = x;
            n++;
        }
        merged = be_iv_union_more(inc, merged, n, &total);
        struct be_iv copy[64];
        memcpy(copy, all, n * sizeof *all);
        uint64_t want = 0;
        size_t m = be_iv_union(copy, n, INT64_MIN, INT64_MAX, &want);
        assert_int_equal(total, want);
        assert_int_equal(merged, m);
        for (size_t i = 0; i < m; i++) {
            assert_int_equal(inc[i].a, copy[i].a);
            assert_int_equal(inc[i].b, copy[i].b);
        }
        memcpy(all, copy, m * sizeof *all); /* both sides go on from the union */
        n = m;
    }
}

/* Late intervals at every depth (just behind the union's end, deep inside it, before all of
 * it), among in-order ones, in batches: the tail merge gives the whole union each time. */
static void test_union_more_late_intervals(void **state)
{
    (void)state;
    enum { N = 3000 };
    struct be_iv *all = malloc(N * sizeof *all), *inc = malloc(N * sizeof *inc);
    size_t n = 0, merged = 0;
    uint64_t total = 0;
    int64_t now = 1000;
    srand(11);
    while (n < N - 20) {
        size_t batch = 1 + (size_t)(rand() % 20);
        for (size_t j = 0; j < batch; j++) {
            int64_t at = now + rand() % 50;
            int r = rand() % 10;
            if (r == 0)
                at = now - rand() % 200; /* just behind */
            else if (r == 1)
                at = rand() % (now + 1); /* anywhere before */
            struct be_iv x = {at, at + rand() % 30};
            all[n] = inc[n] = x;
            n++;
            now += rand() % 25;
        }
        merged = be_iv_union_more(inc, merged, n, &total);
        uint64_t want = 0;
        size_t m = be_iv_union(all, n, INT64_MIN, INT64_MAX, &want);
        assert_int_equal(total, want);
        assert_int_equal(merged, m);
        for (size_t i = 0; i < m; i++) {
            assert_int_equal(inc[i].a, all[i].a);
            assert_int_equal(inc[i].b, all[i].b);
        }
        n = m;
    }
    free(all);
    free(inc);
}

/* Two streams of the same session: kernel time adds up, busy time counts the overlap once. */
static void test_union_two_streams(void **state)
{
    (void)state;
    struct be_iv v[64];
    size_t n = 0;
    for (int i = 0; i < 32; i++) { /* stream A: 10 ns every 20 ns, stream B: 15 ns every 20 */
        v[n++] = (struct be_iv){i * 20, i * 20 + 10};
        v[n++] = (struct be_iv){i * 20 + 5, i * 20 + 20};
    }
    uint64_t total = 0;
    n = be_iv_union(v, n, INT64_MIN, INT64_MAX, &total);
    assert_int_equal(n, 1);
    assert_int_equal(total, 640);
}

/* ---------------------------------------------------------------- bucket */

/* The cap on a record's busy intervals: the smallest gaps go first, the earlier among equal
 * ones; the union only widens, by exactly the merged gaps. */
static void test_cap_merges_smallest_gaps(void **state)
{
    (void)state;
    /* gaps: 5, 1, 3, 1, 10 */
    struct be_iv v[6] = {{0, 10}, {15, 20}, {21, 30}, {33, 40}, {41, 50}, {60, 70}};
    uint64_t widened = 99;
    assert_int_equal(be_iv_cap(v, 6, 6, &widened), 6);
    assert_int_equal(widened, 0);
    size_t n = be_iv_cap(v, 6, 4, &widened); /* the two gaps of 1 */
    assert_int_equal(n, 4);
    assert_int_equal(widened, 2);
    const struct be_iv want[4] = {{0, 10}, {15, 30}, {33, 50}, {60, 70}};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(v[i].a, want[i].a);
        assert_int_equal(v[i].b, want[i].b);
    }
    n = be_iv_cap(v, n, 1, &widened); /* everything: 3 + 5 + 10 */
    assert_int_equal(n, 1);
    assert_int_equal(widened, 18);
    assert_int_equal(v[0].a, 0);
    assert_int_equal(v[0].b, 70);
    /* many: 1000 intervals of 3 with gaps 1..1000 (i + 1) kept to 256 */
    enum { N = 1000 };
    struct be_iv *w = calloc(N, sizeof *w);
    assert_non_null(w);
    int64_t t = 0;
    uint64_t len0 = 0;
    for (size_t i = 0; i < N; i++) {
        w[i] = (struct be_iv){t, t + 3};
        len0 += 3;
        t += 3 + (int64_t)(i + 1);
    }
    n = be_iv_cap(w, N, BE_USAGE_MAX_BUSY, &widened);
    assert_int_equal(n, BE_USAGE_MAX_BUSY);
    uint64_t len = 0, want_widened = 0;
    for (size_t i = 0; i < n; i++) {
        len += (uint64_t)(w[i].b - w[i].a);
        if (i)
            assert_true(w[i].a > w[i - 1].b);
    }
    for (uint64_t g = 1; g <= N - BE_USAGE_MAX_BUSY; g++) /* the 744 smallest gaps */
        want_widened += g;
    assert_int_equal(widened, want_widened);
    assert_int_equal(len, len0 + widened);
    free(w);
}

static void test_bucket(void **state)
{
    (void)state;
    struct be_bucket b;
    const int64_t s = 1000000000LL;
    be_bucket_init(&b, 0.25, 0);
    assert_true(b.tokens == 0); /* starts empty, and not in debt: the first work may go */
    assert_int_equal(be_bucket_wait_ns(&b), 0);
    be_bucket_accrue(&b, s); /* a second later: a quarter second of tokens */
    assert_true(b.tokens == 0.25 * (double)s);
    /* 1 s of device time: a debt of 0.75 s, repaid at 0.25 s per s: 3 s */
    be_bucket_charge(&b, (uint64_t)s, s);
    int64_t w = be_bucket_wait_ns(&b);
    assert_true(w >= 3 * s && w <= 3 * s + 1);
    be_bucket_accrue(&b, 4 * s);
    assert_int_equal(be_bucket_wait_ns(&b), 0);
    /* idle for long: never more than share x window */
    be_bucket_accrue(&b, 100 * s);
    assert_true(b.tokens <= 0.25 * (double)BE_SHARE_WINDOW_NS + 1);
    /* time going backwards changes nothing */
    double t = b.tokens;
    be_bucket_accrue(&b, 50 * s);
    assert_true(b.tokens == t);
    /* over a long saturating run the device time granted is share x wall time + one window */
    be_bucket_init(&b, 0.3, 0);
    uint64_t granted = 0;
    int64_t now = 0;
    for (int i = 0; i < 10000; i++) { /* 1 ms kernels whenever allowed */
        be_bucket_accrue(&b, now);
        int64_t wait = be_bucket_wait_ns(&b);
        now += wait;
        be_bucket_charge(&b, 1000000, now);
        granted += 1000000;
        now += 1000000; /* the kernel runs */
    }
    double share = (double)granted / (double)now;
    assert_true(share > 0.29 && share < 0.31);
    /* a share out of range is uncapped */
    be_bucket_init(&b, 0, 0);
    assert_true(b.share == 1);
}

/* ---------------------------------------------------------------- quota */

static void test_quota_arithmetic(void **state)
{
    (void)state;
    assert_true(be_quota_fits(0, UINT64_MAX, UINT64_MAX)); /* no quota */
    assert_true(be_quota_fits(100, 60, 40));
    assert_false(be_quota_fits(100, 60, 41));
    assert_false(be_quota_fits(100, 120, 0)); /* already past it */
    assert_false(be_quota_fits(100, 0, UINT64_MAX));
    uint64_t f = 80ULL << 30, t = 96ULL << 30;
    be_quota_meminfo(0, 5, &f, &t); /* no quota: the device's figures */
    assert_int_equal(t, 96ULL << 30);
    be_quota_meminfo(8ULL << 30, 3ULL << 30, &f, &t);
    assert_int_equal(t, 8ULL << 30);
    assert_int_equal(f, 5ULL << 30);
    f = 1ULL << 30; /* the device has less free than the quota has left */
    t = 96ULL << 30;
    be_quota_meminfo(8ULL << 30, 3ULL << 30, &f, &t);
    assert_int_equal(f, 1ULL << 30);
    f = 80ULL << 30; /* a quota larger than the device */
    t = 4ULL << 30;
    be_quota_meminfo(8ULL << 30, 5ULL << 30, &f, &t);
    assert_int_equal(t, 4ULL << 30);
    assert_int_equal(f, 0);
}

static void test_page_slots_and_instances(void **state)
{
    (void)state;
    struct be_acct_shm *m = NULL;
    int fd = -1;
    sl_error e;
    assert_int_equal(be_acct_shm_create(&m, &fd, &e), SL_OK);
    struct be_sla sla = {.share = 0.5, .quota = 1000, .max_sessions = 2};
    snprintf(sla.flavor, sizeof sla.flavor, "g1.small");
    int a = be_acct_inst_set(m, "inst-a", &sla);
    int b = be_acct_inst_set(m, "inst-b", &sla);
    assert_true(a >= 0 && b >= 0 && a != b);
    assert_int_equal(be_acct_inst_set(m, "inst-a", &sla), a); /* the same entry, updated */
    int s1 = be_acct_slot_take(m, a), s2 = be_acct_slot_take(m, a), s3 = be_acct_slot_take(m, b);
    assert_true(s1 >= 0 && s2 >= 0 && s3 >= 0 && s1 != s2 && s2 != s3);
    atomic_store(&m->slot[s1].bytes, 300);
    atomic_store(&m->slot[s2].bytes, 200);
    atomic_store(&m->slot[s3].bytes, 999);
    assert_int_equal(be_acct_inst_bytes(m, a), 500);
    assert_int_equal(be_acct_inst_bytes(m, b), 999);
    be_acct_slot_release(m, s1); /* the worker is gone: its memory with it */
    assert_int_equal(be_acct_inst_bytes(m, a), 200);
    assert_int_equal(be_acct_slot_take(m, -1), -1);

    /* a worker process sees the same page through the inherited fd */
    pid_t pid = fork();
    if (pid == 0) {
        struct be_acct_shm *w = NULL;
        sl_error we;
        if (be_acct_shm_attach(fd, &w, &we) != SL_OK)
            _exit(1);
        be_acct_lock(w);
        atomic_store(&w->slot[s2].bytes, 250);
        int ok = w->inst[a].sla.quota == 1000 && !strcmp(w->inst[a].uuid, "inst-a");
        be_acct_unlock(w);
        _exit(ok ? 0 : 2);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(be_acct_inst_bytes(m, a), 250);

    /* a worker that dies holding the lock does not block the others (robust mutex) */
    pid = fork();
    if (pid == 0) {
        be_acct_lock(m);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    be_acct_lock(m);
    be_acct_unlock(m);

    /* not a page */
    int bogus = memfd_create("bogus", 0);
    assert_int_not_equal(be_acct_shm_attach(bogus, &m, &e), SL_OK);
    close(bogus);
    be_acct_shm_unmap(m);
    close(fd);
}

/* The backend's budget of page-locked staging (--staging-budget): what workers hold of it is
 * counted per slot, refused beyond it, given back by the worker or with its slot. */
static void test_pin_budget(void **state)
{
    (void)state;
    struct be_acct_shm *m = NULL;
    int fd = -1;
    sl_error e;
    assert_int_equal(be_acct_shm_create(&m, &fd, &e), SL_OK);
    struct be_sla sla = {.share = 1};
    int a = be_acct_inst_set(m, "inst-a", &sla);
    int s1 = be_acct_slot_take(m, a), s2 = be_acct_slot_take(m, a);
    assert_int_equal(be_acct_pin(m, s1, 16), 0); /* no budget set: nothing pinned */
    m->pin_budget = 48;
    assert_int_equal(be_acct_pin(m, s1, 16), 1);
    assert_int_equal(be_acct_pin(m, s1, 16), 1);
    assert_int_equal(be_acct_pin(m, s2, 32), 0); /* 32 + 32 > 48 */
    assert_int_equal(be_acct_pin(m, s2, 16), 1);
    assert_int_equal(be_acct_pin(m, s2, 1), 0);
    assert_int_equal(m->pinned, 48);
    assert_int_equal(be_acct_pin(m, s2, -100), 1); /* gives back at most what it holds */
    assert_int_equal(m->pinned, 32);
    assert_int_equal(m->slot[s2].pinned, 0);
    be_acct_slot_release(m, s1); /* a worker that died: its slot's part goes back */
    assert_int_equal(m->pinned, 0);
    assert_int_equal(be_acct_pin(m, s2, 48), 1);
    assert_int_equal(be_acct_pin(m, -1, 1), 0);
    assert_int_equal(be_acct_pin(m, BE_ACCT_MAX_SLOTS, 1), 0);
    be_acct_shm_unmap(m);
    close(fd);
}

static struct sl_driver_api no_api;
static struct be_devices no_devs;

struct sink {
    int n;
    Sluice__Control__UsageRecord *last;
};

static void sink_emit(void *user, const uint8_t *rec, size_t len)
{
    struct sink *k = user;
    if (k->last)
        sluice__control__usage_record__free_unpacked(k->last, NULL);
    k->last = sluice__control__usage_record__unpack(NULL, len, rec);
    assert_non_null(k->last);
    k->n++;
}

/* What a CUDA array counts for against the quota. */
static void test_array_bytes(void **state)
{
    (void)state;
    assert_int_equal(sl_array_bytes(1024, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1), 1024);
    assert_int_equal(sl_array_bytes(1024, 512, 0, CU_AD_FORMAT_FLOAT, 4), 1024 * 512 * 16);
    assert_int_equal(sl_array_bytes(64, 64, 6, CU_AD_FORMAT_HALF, 2), 64 * 64 * 6 * 4);
    assert_true(sl_array_bytes(UINT64_MAX / 2, 4, 1, CU_AD_FORMAT_FLOAT, 1) == UINT64_MAX);
}

/* Two sessions of one instance share its quota; cuMemGetInfo's figures follow. */
static void test_session_quota(void **state)
{
    (void)state;
    struct be_acct_shm *m = NULL;
    int fd = -1;
    sl_error e;
    assert_int_equal(be_acct_shm_create(&m, &fd, &e), SL_OK);
    struct be_sla sla = {.share = 1, .quota = 100 << 20};
    int in = be_acct_inst_set(m, "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60", &sla);
    struct sink k = {0};
    sl_be_session *s[2];
    for (int i = 0; i < 2; i++) {
        s[i] = be_session_new((uint64_t)i + 1, &no_api, &no_devs);
        assert_non_null(s[i]);
        snprintf(s[i]->instance, sizeof s[i]->instance, "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60");
        snprintf(s[i]->project, sizeof s[i]->project, "f241e906010e4917ae8153f4fb8aa021");
        struct be_acct_cfg cfg = {.interval_ns = 3600000000000LL,
                                  .shm = m,
                                  .slot = be_acct_slot_take(m, in),
                                  .inst = in,
                                  .emit = sink_emit,
                                  .user = &k};
        assert_int_equal(be_acct_attach(s[i], &cfg, &e), SL_OK);
    }
    char why[200];
    /* session 1 takes 60 MiB (what its allocation table holds is what counts) */
    assert_int_equal(be_acct_mem_admit(s[0], 60 << 20, why, sizeof why), 0);
    assert_int_equal(be_mem_add(&s[0]->mem, 0x10000000, 60 << 20, BE_R_ALLOC, 0, 0), CUDA_SUCCESS);
    be_mem_count(&s[0]->mem, SL_CALL_cuMemAlloc_v2, 0x10000000);
    be_acct_mem_publish(s[0]);
    assert_int_equal(be_acct_inst_bytes(m, in), 60 << 20);
    /* session 2 may not take 41 MiB more, but 40 MiB */
    assert_int_equal(be_acct_mem_admit(s[1], 41 << 20, why, sizeof why), -1);
    assert_non_null(strstr(why, "quota of 100 MiB"));
    /* the largest request there is: refused, and said as it is (rounding up overflowed) */
    assert_int_equal(be_acct_mem_admit(s[1], UINT64_MAX, why, sizeof why), -1);
    assert_non_null(strstr(why, ", 17592186044416 MiB more asked"));
    assert_int_equal(be_acct_mem_admit(s[1], 40 << 20, why, sizeof why), 0);
    be_acct_mem_publish(s[1]); /* the call failed: nothing allocated, the reservation goes */
    assert_int_equal(be_acct_inst_bytes(m, in), 60 << 20);
    uint64_t f = 1ULL << 40, t = 1ULL << 40;
    be_acct_meminfo(s[1], &f, &t);
    assert_int_equal(t, 100 << 20);
    assert_int_equal(f, 40 << 20);
    assert_int_equal(be_acct_total_mem(s[1], 1ULL << 40), 100 << 20);
    /* a global is not an allocation: it does not count */
    assert_int_equal(be_mem_add(&s[0]->mem, 0x20000000, 4096, BE_R_GLOBAL, 0, 0), CUDA_SUCCESS);
    be_mem_count(&s[0]->mem, SL_CALL_cuModuleGetGlobal_v2, 0x20000000);
    assert_int_equal(s[0]->mem.counted, 60 << 20);
    /* freeing (or the context going) gives the memory back */
    assert_int_equal(be_mem_remove(&s[0]->mem, 0x10000000), 1);
    be_acct_mem_publish(s[0]);
    assert_int_equal(be_acct_inst_bytes(m, in), 0);
    /* the records: two refusals, the high-water mark, no driver = measurement "none" */
    be_acct_tick(s[1]);
    assert_int_equal(k.n, 1);
    assert_int_equal(k.last->quota_refusals, 2);
    assert_string_equal(k.last->measurement, "none");
    be_acct_tick(s[0]);
    assert_int_equal(k.last->memory_high_water, 60 << 20);
    assert_int_equal(k.last->quota_refusals, 0);
    assert_false(k.last->final);
    for (int i = 0; i < 2; i++)
        be_session_free(s[i]); /* the final records */
    assert_int_equal(k.n, 4);
    assert_true(k.last->final);
    sluice__control__usage_record__free_unpacked(k.last, NULL);
    be_acct_shm_unmap(m);
    close(fd);
}

/* ---------------------------------------------------------------- records */

static int is_uuid4(const char *s)
{
    if (strlen(s) != 36 || s[14] != '4' || !strchr("89ab", s[19]))
        return 0;
    for (int i = 0; i < 36; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !strchr("0123456789abcdef", s[i]))
            return 0;
    }
    return 1;
}

static void test_record_building(void **state)
{
    (void)state;
    char gpu[41];
    const uint8_t u[16] = {0x6d, 0x4e, 0x01, 0x02, 0xaa, 0xbb, 0xcc, 0xdd,
                           0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77};
    be_usage_gpu_uuid(u, gpu);
    assert_string_equal(gpu, "GPU-6d4e0102-aabb-ccdd-0011-223344556677");
    struct be_usage in = {.instance = "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60",
                          .project = "f241e906010e4917ae8153f4fb8aa021",
                          .flavor = "g1.gold",
                          .gpu_uuid = gpu,
                          .measurement = BE_ACCT_MEASUREMENT,
                          .session_id = 7,
                          .start_ns = 1700000000000000000LL,
                          .end_ns = 1700000010000000000LL,
                          .busy_ns = 4000000000ULL,
                          .kernel_ns = 5000000000ULL,
                          .kernels = 1000,
                          .bytes_htod = 1 << 20,
                          .bytes_dtoh = 2 << 20,
                          .memory_high_water = 3 << 20,
                          .calls = 1500,
                          .errors = 2,
                          .throttled_ns = 123,
                          .quota_refusals = 1,
                          .gpu_share = 0.3,
                          .final = 1};
    const struct be_iv busy[2] = {{1700000001000000000LL, 1700000003000000000LL},
                                  {1700000005000000000LL, 1700000007000000000LL}};
    in.busy = busy;
    in.nbusy = 2;
    in.busy_widened_ns = 17;
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_error e;
    assert_int_equal(be_usage_encode(&in, &buf, &len, &e), SL_OK);
    Sluice__Control__UsageRecord *r = sluice__control__usage_record__unpack(NULL, len, buf);
    assert_non_null(r);
    assert_true(is_uuid4(r->record_id));
    assert_string_equal(r->instance_uuid, in.instance);
    assert_string_equal(r->project_id, in.project);
    assert_string_equal(r->flavor, "g1.gold");
    assert_string_equal(r->gpu_uuid, gpu);
    assert_string_equal(r->measurement, "events");
    assert_int_equal(r->session_id, 7);
    assert_int_equal(r->interval_start_ns, in.start_ns);
    assert_int_equal(r->interval_end_ns, in.end_ns);
    assert_int_equal(r->gpu_busy_ns, in.busy_ns);
    assert_int_equal(r->kernel_ns, in.kernel_ns);
    assert_int_equal(r->kernels, 1000);
    assert_int_equal(r->bytes_htod, 1 << 20);
    assert_int_equal(r->bytes_dtoh, 2 << 20);
    assert_int_equal(r->memory_high_water, 3 << 20);
    assert_int_equal(r->calls, 1500);
    assert_int_equal(r->errors, 2);
    assert_int_equal(r->throttled_ns, 123);
    assert_int_equal(r->quota_refusals, 1);
    assert_true(r->gpu_share == 0.3);
    assert_true(r->final);
    assert_int_equal(r->n_busy, 2);
    assert_int_equal(r->busy[0]->start_ns, busy[0].a);
    assert_int_equal(r->busy[0]->end_ns, busy[0].b);
    assert_int_equal(r->busy[1]->start_ns, busy[1].a);
    assert_int_equal(r->busy[1]->end_ns, busy[1].b);
    assert_int_equal(r->busy_widened_ns, 17);
    assert_true(r->instance_name == NULL || !*r->instance_name); /* the agent's to fill */
    /* a second record gets another id */
    uint8_t *buf2 = NULL;
    size_t len2 = 0;
    assert_int_equal(be_usage_encode(&in, &buf2, &len2, &e), SL_OK);
    Sluice__Control__UsageRecord *r2 = sluice__control__usage_record__unpack(NULL, len2, buf2);
    assert_string_not_equal(r->record_id, r2->record_id);
    be_usage_log(r); /* one line, no crash */
    sluice__control__usage_record__free_unpacked(r, NULL);
    sluice__control__usage_record__free_unpacked(r2, NULL);
    free(buf);
    free(buf2);
}

/* ---------------------------------------------------------------- the server's queue */

struct sent {
    char ids[16][40];
    int n;
};

static int record_sent(void *user, const Sluice__Control__UsageRecord *r)
{
    struct sent *x = user;
    if (x->n < 16)
        snprintf(x->ids[x->n], sizeof x->ids[0], "%s", r->record_id);
    x->n++;
    return 0;
}

static int socket_full(void *user, const Sluice__Control__UsageRecord *r)
{
    (void)r;
    ++*(int *)user;
    return -1;
}

static void add_record(struct be_uq *q, uint64_t session, char id[40])
{
    struct be_usage u = {.instance = "i", .project = "p", .session_id = session};
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_error e;
    assert_int_equal(be_usage_encode(&u, &buf, &len, &e), SL_OK);
    Sluice__Control__UsageRecord *r = sluice__control__usage_record__unpack(NULL, len, buf);
    snprintf(id, 40, "%s", r->record_id);
    sluice__control__usage_record__free_unpacked(r, NULL);
    assert_int_equal(be_uq_add(q, buf, len), 0);
    free(buf);
}

static void test_queue_resend_ack_bound(void **state)
{
    (void)state;
    struct be_uq *q = be_uq_new(3);
    char id[5][40];
    add_record(q, 1, id[0]);
    add_record(q, 2, id[1]);
    struct sent x = {0};
    be_uq_due(q, 1000, 30000, 0, record_sent, &x); /* new ones go at once */
    assert_int_equal(x.n, 2);
    be_uq_due(q, 2000, 30000, 0, record_sent, &x); /* not again before the resend time */
    assert_int_equal(x.n, 2);
    be_uq_due(q, 31000, 30000, 0, record_sent, &x); /* not acknowledged: again */
    assert_int_equal(x.n, 4);
    be_uq_due(q, 31001, 30000, 1, record_sent, &x); /* a reconnection: all of them */
    assert_int_equal(x.n, 6);
    char *ack[] = {id[0], "not-a-record"};
    assert_int_equal(be_uq_ack(q, ack, 2), 1);
    assert_int_equal(be_uq_len(q), 1);
    x.n = 0;
    be_uq_due(q, 90000, 30000, 0, record_sent, &x);
    assert_int_equal(x.n, 1);
    assert_string_equal(x.ids[0], id[1]);
    /* past the bound the oldest is dropped */
    add_record(q, 3, id[2]);
    add_record(q, 4, id[3]);
    add_record(q, 5, id[4]);
    assert_int_equal(be_uq_len(q), 3);
    char *old[] = {id[1]};
    assert_int_equal(be_uq_ack(q, old, 1), 0);
    /* a full socket: one try, the others wait; the failed one goes again after the period */
    int tries = 0;
    be_uq_due(q, 100000, 30000, 0, socket_full, &tries);
    assert_int_equal(tries, 1);
    be_uq_due(q, 100001, 30000, 0, socket_full, &tries);
    assert_int_equal(tries, 2); /* the next never-sent one */
    x.n = 0;
    be_uq_due(q, 100002, 30000, 0, record_sent, &x);
    assert_int_equal(x.n, 1); /* the last never-sent one; the two failed ones wait */
    assert_int_equal(be_uq_add(q, (const uint8_t *)"\xff\xff", 2), -1); /* not a record */
    be_uq_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_union_merges_overlaps_once),
        cmocka_unit_test(test_union_clips),
        cmocka_unit_test(test_union_more_matches_union),
        cmocka_unit_test(test_union_more_late_intervals),
        cmocka_unit_test(test_array_bytes),
        cmocka_unit_test(test_union_two_streams),
        cmocka_unit_test(test_cap_merges_smallest_gaps),
        cmocka_unit_test(test_bucket),
        cmocka_unit_test(test_quota_arithmetic),
        cmocka_unit_test(test_page_slots_and_instances),
        cmocka_unit_test(test_pin_budget),
        cmocka_unit_test(test_session_quota),
        cmocka_unit_test(test_record_building),
        cmocka_unit_test(test_queue_resend_ack_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
