#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/diffspan.h"

#define LEN (5 * SL_DIFF_BLOCK + 123) /* ends in a short block */

static uint8_t g_a[LEN], g_b[LEN];

static void reset(void)
{
    for (size_t i = 0; i < LEN; i++)
        g_a[i] = g_b[i] = (uint8_t)(i * 7);
}

static void equal_buffers_have_no_span(void **state)
{
    (void)state;
    reset();
    size_t lo = 1, hi = 1;
    assert_int_equal(sl_diff_next(g_a, g_b, LEN, 0, &lo, &hi), 0);
    assert_int_equal(sl_diff_next(g_a, g_b, 0, 0, &lo, &hi), 0);
}

static void one_byte_is_one_byte(void **state)
{
    (void)state;
    reset();
    g_b[SL_DIFF_BLOCK + 10] ^= 1;
    size_t lo, hi;
    assert_int_equal(sl_diff_next(g_a, g_b, LEN, 0, &lo, &hi), 1);
    assert_int_equal(lo, SL_DIFF_BLOCK + 10);
    assert_int_equal(hi, SL_DIFF_BLOCK + 11);
    assert_int_equal(sl_diff_next(g_a, g_b, LEN, hi, &lo, &hi), 0);
}

static void changes_an_equal_block_apart_are_two_spans(void **state)
{
    (void)state;
    reset();
    g_b[5] ^= 1;                     /* block 0 */
    g_b[3 * SL_DIFF_BLOCK - 1] ^= 1; /* block 2: block 1 is equal */
    g_b[LEN - 1] ^= 1;               /* the short last block */
    size_t lo, hi;
    assert_int_equal(sl_diff_next(g_a, g_b, LEN, 0, &lo, &hi), 1);
    assert_int_equal(lo, 5);
    assert_int_equal(hi, 6);
    assert_int_equal(sl_diff_next(g_a, g_b, LEN, hi, &lo, &hi), 1);
    assert_int_equal(lo, 3 * SL_DIFF_BLOCK - 1);
    assert_int_equal(hi, 3 * SL_DIFF_BLOCK);
    assert_int_equal(sl_diff_next(g_a, g_b, LEN, hi, &lo, &hi), 1);
    assert_int_equal(lo, LEN - 1);
    assert_int_equal(hi, LEN);
    assert_int_equal(sl_diff_next(g_a, g_b, LEN, hi, &lo, &hi), 0);
}

static void neighbouring_blocks_join(void **state)
{
    (void)state;
    reset();
    g_b[SL_DIFF_BLOCK - 1] ^= 1;     /* last byte of block 0 */
    g_b[2 * SL_DIFF_BLOCK + 3] ^= 1; /* block 2; block 1 differs too */
    g_b[SL_DIFF_BLOCK + 100] ^= 1;
    size_t lo, hi;
    assert_int_equal(sl_diff_next(g_a, g_b, LEN, 0, &lo, &hi), 1);
    assert_int_equal(lo, SL_DIFF_BLOCK - 1);
    assert_int_equal(hi, 2 * SL_DIFF_BLOCK + 4);
}

/* Random changes: the spans cover every differing byte, and no byte outside them differs. */
static void spans_cover_exactly_the_changes(void **state)
{
    (void)state;
    srand(7);
    for (int round = 0; round < 200; round++) {
        reset();
        int n = rand() % 12;
        for (int k = 0; k < n; k++) {
            size_t at = (size_t)rand() % LEN, len = 1 + (size_t)rand() % 300;
            for (size_t i = at; i < at + len && i < LEN; i++)
                g_b[i] = (uint8_t)~g_a[i];
        }
        uint8_t seen[LEN] = {0};
        size_t from = (size_t)rand() % 64, lo, hi, last = 0;
        while (sl_diff_next(g_a, g_b, LEN, from, &lo, &hi)) {
            assert_true(lo >= from && lo < hi && hi <= LEN && lo >= last);
            assert_int_not_equal(g_a[lo], g_b[lo]);
            assert_int_not_equal(g_a[hi - 1], g_b[hi - 1]);
            memset(seen + lo, 1, hi - lo);
            last = from = hi;
        }
        for (size_t i = 64; i < LEN; i++)
            if (g_a[i] != g_b[i])
                assert_true(seen[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(equal_buffers_have_no_span),
        cmocka_unit_test(one_byte_is_one_byte),
        cmocka_unit_test(changes_an_equal_block_apart_are_two_spans),
        cmocka_unit_test(neighbouring_blocks_join),
        cmocka_unit_test(spans_cover_exactly_the_changes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
