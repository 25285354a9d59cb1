/* The sorted address ranges of frontend/call/ranges.c: a lookup finds the range holding an
 * address (its first and last byte, nothing either side), adding refuses overlaps, a full set,
 * empty and wrapping ranges, removing takes only a range's own base, and a larger set kept in
 * random order answers as a linear scan does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "call/ranges.h"

static void finds_the_holding_range(void **state)
{
    (void)state;
    struct sl_fe_ranges *r = sl_fe_ranges_new(8);
    assert_non_null(r);
    uint64_t base = 0;
    assert_int_equal(sl_fe_ranges_find(r, 0x1000, &base), 0); /* empty */
    assert_int_equal(sl_fe_ranges_add(r, 0x3000, 0x1000), 0);
    assert_int_equal(sl_fe_ranges_add(r, 0x1000, 0x800), 0);
    assert_int_equal(sl_fe_ranges_add(r, 0x2000, 0x1000), 0); /* touching the next one */
    assert_int_equal(sl_fe_ranges_count(r), 3);
    assert_int_equal(sl_fe_ranges_find(r, 0xfff, &base), 0);
    assert_int_equal(sl_fe_ranges_find(r, 0x1000, &base), 1);
    assert_int_equal(base, 0x1000);
    assert_int_equal(sl_fe_ranges_find(r, 0x17ff, &base), 1);
    assert_int_equal(base, 0x1000);
    assert_int_equal(sl_fe_ranges_find(r, 0x1800, &base), 0); /* the gap */
    assert_int_equal(sl_fe_ranges_find(r, 0x2fff, &base), 1);
    assert_int_equal(base, 0x2000);
    assert_int_equal(sl_fe_ranges_find(r, 0x3000, NULL), 1);
    assert_int_equal(sl_fe_ranges_find(r, 0x3fff, &base), 1);
    assert_int_equal(base, 0x3000);
    assert_int_equal(sl_fe_ranges_find(r, 0x4000, &base), 0);
    assert_int_equal(sl_fe_ranges_find(r, UINT64_MAX, &base), 0);
    sl_fe_ranges_free(r);
}

static void refuses_overlaps_and_bad_ranges(void **state)
{
    (void)state;
    struct sl_fe_ranges *r = sl_fe_ranges_new(3);
    assert_int_equal(sl_fe_ranges_add(r, 0x2000, 0x1000), 0);
    assert_int_equal(sl_fe_ranges_add(r, 0x2000, 0x10), -1);           /* same base */
    assert_int_equal(sl_fe_ranges_add(r, 0x2fff, 0x10), -1);           /* starts inside */
    assert_int_equal(sl_fe_ranges_add(r, 0x1000, 0x1001), -1);         /* reaches into it */
    assert_int_equal(sl_fe_ranges_add(r, 0x1000, 0x3000), -1);         /* covers it */
    assert_int_equal(sl_fe_ranges_add(r, 0x5000, 0), -1);              /* empty */
    assert_int_equal(sl_fe_ranges_add(r, UINT64_MAX - 0xf, 0x20), -1); /* wraps */
    assert_int_equal(sl_fe_ranges_count(r), 1);
    assert_int_equal(sl_fe_ranges_add(r, UINT64_MAX - 0xf, 0x10), 0); /* ends at the top */
    assert_int_equal(sl_fe_ranges_find(r, UINT64_MAX, NULL), 1);
    assert_int_equal(sl_fe_ranges_add(r, 0x1000, 0x1000), 0);
    assert_int_equal(sl_fe_ranges_add(r, 0x8000, 0x1000), -1); /* full */
    assert_int_equal(sl_fe_ranges_count(r), 3);
    sl_fe_ranges_free(r);
}

static void removes_by_base_only(void **state)
{
    (void)state;
    struct sl_fe_ranges *r = sl_fe_ranges_new(4);
    assert_int_equal(sl_fe_ranges_add(r, 0x1000, 0x1000), 0);
    assert_int_equal(sl_fe_ranges_add(r, 0x4000, 0x1000), 0);
    assert_int_equal(sl_fe_ranges_remove(r, 0x1800), 0); /* inside, not its base */
    assert_int_equal(sl_fe_ranges_remove(r, 0x3000), 0);
    assert_int_equal(sl_fe_ranges_remove(r, 0x1000), 1);
    assert_int_equal(sl_fe_ranges_remove(r, 0x1000), 0);
    assert_int_equal(sl_fe_ranges_find(r, 0x1000, NULL), 0);
    assert_int_equal(sl_fe_ranges_find(r, 0x4800, NULL), 1);
    assert_int_equal(sl_fe_ranges_add(r, 0x1000, 0x3000), 0); /* the room is free again */
    sl_fe_ranges_clear(r);
    assert_int_equal(sl_fe_ranges_count(r), 0);
    assert_int_equal(sl_fe_ranges_find(r, 0x4800, NULL), 0);
    sl_fe_ranges_free(r);
}

#define N 1024

/* A full set of random disjoint ranges, added and removed in random order, against a scan. */
static void agrees_with_a_scan(void **state)
{
    (void)state;
    static uint64_t base[N], size[N];
    static int in[N];
    struct sl_fe_ranges *r = sl_fe_ranges_new(N);
    srand(18);
    for (int i = 0; i < N; i++) { /* slot i owns [i << 24, (i + 1) << 24) */
        base[i] = ((uint64_t)i << 24) + (uint64_t)(rand() % 4096) * 64;
        size[i] = 1 + (uint64_t)(rand() % (1 << 23));
    }
    for (int round = 0; round < 5000; round++) {
        int i = rand() % N;
        if (in[i]) {
            assert_int_equal(sl_fe_ranges_remove(r, base[i]), 1);
            in[i] = 0;
        } else {
            assert_int_equal(sl_fe_ranges_add(r, base[i], size[i]), 0);
            in[i] = 1;
        }
        for (int q = 0; q < 4; q++) {
            int j = rand() % N;
            uint64_t p = base[j] + (uint64_t)(rand() % (1 << 24)) - (1 << 10);
            int want = 0;
            uint64_t at = 0, wb = 0;
            for (int k = 0; k < N; k++)
                if (in[k] && p >= base[k] && p - base[k] < size[k])
                    want = 1, wb = base[k];
            assert_int_equal(sl_fe_ranges_find(r, p, &at), want);
            if (want)
                assert_int_equal(at, wb);
        }
    }
    sl_fe_ranges_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(finds_the_holding_range),
        cmocka_unit_test(refuses_overlaps_and_bad_ranges),
        cmocka_unit_test(removes_by_base_only),
        cmocka_unit_test(agrees_with_a_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
