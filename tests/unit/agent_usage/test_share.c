/* Shared GPU time (agent/usage_share.c, docs/accounting.md "Shared GPU time"): overlapping
 * sessions of several tenants on one GPU and on two, k-way overlaps, intervals in any order and
 * from two backends; the shares always add up to the GPU's busy time exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "usage_share.h"

/* Three sessions (two of tenant A, one of tenant B) on one GPU, by hand:
 *   s0 [0, 60)   s1 [30, 90)   s2 [45, 75) and [100, 110)
 * segments: [0,30) s0 alone 30; [30,45) s0 s1: 7.5 each; [45,60) s0 s1 s2: 5 each;
 * [60,75) s1 s2: 7.5 each; [75,90) s1 alone 15; [90,100) idle; [100,110) s2 alone 10. */
static void test_three_way_by_hand(void **state)
{
    (void)state;
    const ag_share_iv iv[] = {{0, 60, 0}, {30, 90, 1}, {45, 75, 2}, {100, 110, 2}};
    uint64_t sh[3] = {0}, busy = 0;
    assert_int_equal(ag_share_apportion(iv, 4, 3, 0, 200, sh, &busy), 0);
    assert_int_equal(busy, 100);
    /* 7.5 + 7.5: the odd nanoseconds of the two 15 ns halves go to different sessions */
    assert_int_equal(sh[0] + sh[1] + sh[2], 100);
    assert_true(sh[0] >= 42 && sh[0] <= 43); /* 30 + 7.5 + 5 */
    assert_true(sh[1] >= 35 && sh[1] <= 36); /* 7.5 + 5 + 7.5 + 15 */
    assert_true(sh[2] >= 22 && sh[2] <= 23); /* 5 + 7.5 + 10 */
    /* tenant A (s0, s1) and B (s2): 77.5 and 22.5 */
    assert_true(sh[0] + sh[1] >= 77 && sh[0] + sh[1] <= 78);
    /* raw (each session's own busy time) adds up to 60 + 60 + 40 = 160 > 100 */
}

/* Clipping to the window, a session's own overlapping intervals (two streams' runs reported
 * as one union normally, but the rule does not depend on it), touching intervals. */
static void test_clip_self_overlap_touching(void **state)
{
    (void)state;
    const ag_share_iv iv[] = {{-50, 20, 0}, {10, 40, 0}, {40, 60, 0}, {30, 50, 1}, {90, 150, 1}};
    uint64_t sh[2] = {0}, busy = 0;
    assert_int_equal(ag_share_apportion(iv, 5, 2, 0, 100, sh, &busy), 0);
    /* union within [0, 100): [0, 60) and [90, 100) = 70; [30, 50) shared by two */
    assert_int_equal(busy, 70);
    assert_int_equal(sh[0], 30 + 10 + 10); /* [0,30) + half of [30,50) + [50,60) */
    assert_int_equal(sh[1], 10 + 10);      /* half of [30,50) + [90,100) */
    /* nothing in the window, an empty window, no sessions */
    uint64_t z[2] = {0};
    assert_int_equal(ag_share_apportion(iv, 5, 2, 200, 300, z, &busy), 0);
    assert_int_equal(busy, 0);
    assert_int_equal(z[0] + z[1], 0);
    assert_int_equal(ag_share_apportion(iv, 5, 2, 100, 100, z, &busy), 0);
    assert_int_equal(busy, 0);
    assert_int_equal(ag_share_apportion(iv, 5, 0, 0, 100, z, &busy), 0);
    assert_int_equal(busy, 0);
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The reference: every nanosecond of [lo, hi) looked at alone (small windows only); each
 * session's exact share as a double. */
static void reference(const ag_share_iv *iv, size_t n, size_t nwho, int64_t lo, int64_t hi,
                      double *want, uint64_t *busy)
{
    char *on = calloc(nwho, 1);
    *busy = 0;
    for (int64_t t = lo; t < hi; t++) {
        memset(on, 0, nwho);
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (iv[i].a <= t && t < iv[i].b && !on[iv[i].who]) {
                on[iv[i].who] = 1;
                k++;
            }
        if (k)
            ++*busy;
        for (size_t w = 0; w < nwho; w++)
            if (on[w])
                want[w] += 1.0 / (double)k;
    }
    free(on);
}

/* k-way overlaps at random: 12 sessions of 3 tenants, up to all 12 at once; the sum is the
 * union exactly and each share is within a nanosecond per segment of the exact rational. */
static void test_random_k_way(void **state)
{
    (void)state;
    enum { W = 12, N = 120 };
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    for (int round = 0; round < 40; round++) {
        ag_share_iv iv[N];
        for (size_t i = 0; i < N; i++) {
            int64_t a = (int64_t)(rnd(&seed) % 4000), len = (int64_t)(rnd(&seed) % 300) + 1;
            iv[i] = (ag_share_iv){a, a + len, (size_t)(rnd(&seed) % W)};
        }
        uint64_t sh[W] = {0}, busy = 0, rbusy = 0, sum = 0;
        double want[W] = {0};
        assert_int_equal(ag_share_apportion(iv, N, W, 100, 4100, sh, &busy), 0);
        reference(iv, N, W, 100, 4100, want, &rbusy);
        assert_int_equal(busy, rbusy);
        for (size_t w = 0; w < W; w++) {
            sum += sh[w];
            /* at most one rounding nanosecond per segment (2N edges) */
            assert_true((double)sh[w] - want[w] < 2.0 * N && want[w] - (double)sh[w] < 2.0 * N);
        }
        assert_int_equal(sum, busy);
        /* tenants: sessions w % 3; their sums add up to the busy time as well */
        uint64_t t[3] = {0};
        for (size_t w = 0; w < W; w++)
            t[w % 3] += sh[w];
        assert_int_equal(t[0] + t[1] + t[2], busy);
    }
}

/* The same intervals in another order (from two backends, arriving one after the other,
 * records out of order) give the same shares, nanosecond for nanosecond. */
static void test_order_does_not_matter(void **state)
{
    (void)state;
    enum { W = 8, N = 200 };
    uint64_t seed = 12345;
    ag_share_iv iv[N], shuf[N];
    for (size_t i = 0; i < N; i++) {
        int64_t a = (int64_t)(rnd(&seed) % 1000000), len = (int64_t)(rnd(&seed) % 50000) + 1;
        iv[i] = (ag_share_iv){a, a + len, (size_t)(rnd(&seed) % W)};
    }
    /* backend 1 has sessions 0..3, backend 2 sessions 4..7: backend 2's records come first,
     * each backend's newest first */
    size_t k = 0;
    for (size_t pass = 0; pass < 2; pass++)
        for (size_t i = N; i-- > 0;)
            if ((iv[i].who >= W / 2) == (pass == 0))
                shuf[k++] = iv[i];
    assert_int_equal(k, N);
    uint64_t a[W] = {0}, b[W] = {0}, busy_a = 0, busy_b = 0;
    assert_int_equal(ag_share_apportion(iv, N, W, 0, 1100000, a, &busy_a), 0);
    assert_int_equal(ag_share_apportion(shuf, N, W, 0, 1100000, b, &busy_b), 0);
    assert_int_equal(busy_a, busy_b);
    assert_memory_equal(a, b, sizeof a);
}

/* Two GPUs: each GPU's intervals are apportioned on their own (a session on GPU 0 does not
 * share with one on GPU 1); a tenant's shared time is its sessions' sum over both GPUs, and all
 * tenants' shared time adds up to the two GPUs' busy time. */
static void test_two_gpus(void **state)
{
    (void)state;
    /* GPU 0: tenant A's s0 [0,100) and tenant B's s1 [0,100): 50 each.
     * GPU 1: tenant A's s2 [0,100) alone (s1's second GPU is idle). */
    const ag_share_iv g0[] = {{0, 100, 0}, {0, 100, 1}};
    const ag_share_iv g1[] = {{0, 100, 2}};
    uint64_t sh[3] = {0}, b0 = 0, b1 = 0;
    assert_int_equal(ag_share_apportion(g0, 2, 3, 0, 100, sh, &b0), 0);
    assert_int_equal(ag_share_apportion(g1, 1, 3, 0, 100, sh, &b1), 0);
    assert_int_equal(b0, 100);
    assert_int_equal(b1, 100);
    assert_int_equal(sh[0], 50);
    assert_int_equal(sh[1], 50);
    assert_int_equal(sh[2], 100);
    uint64_t tenant_a = sh[0] + sh[2], tenant_b = sh[1];
    assert_int_equal(tenant_a, 150);
    assert_int_equal(tenant_b, 50);
    assert_int_equal(tenant_a + tenant_b, b0 + b1);
}

/* Windows: apportioning [lo, mid) and [mid, hi) separately adds up to [lo, hi) in busy time
 * (a settled window never needs the next one). */
static void test_windows_add_up(void **state)
{
    (void)state;
    const ag_share_iv iv[] = {{0, 70, 0}, {20, 130, 1}, {60, 90, 2}, {95, 140, 0}};
    uint64_t whole[3] = {0}, parts[3] = {0}, bw = 0, b1 = 0, b2 = 0;
    assert_int_equal(ag_share_apportion(iv, 4, 3, 0, 150, whole, &bw), 0);
    assert_int_equal(ag_share_apportion(iv, 4, 3, 0, 75, parts, &b1), 0);
    assert_int_equal(ag_share_apportion(iv, 4, 3, 75, 150, parts, &b2), 0);
    assert_int_equal(bw, 140);
    assert_int_equal(b1 + b2, bw);
    assert_int_equal(parts[0] + parts[1] + parts[2], bw);
    for (int w = 0; w < 3; w++)
        assert_true(parts[w] + 2 >= whole[w] && whole[w] + 2 >= parts[w]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_way_by_hand), cmocka_unit_test(test_clip_self_overlap_touching),
        cmocka_unit_test(test_random_k_way),      cmocka_unit_test(test_order_does_not_matter),
        cmocka_unit_test(test_two_gpus),          cmocka_unit_test(test_windows_add_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
