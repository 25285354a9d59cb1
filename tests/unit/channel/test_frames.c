/* The frame buffer pool (proto/channel/frames.c): full-size buffers come back for reuse, at
 * most `keep` of them wait, small ones are never pooled, and buffers still out when the owner
 * releases the pool are freed when they come back (ASan checks there is no leak and no use after
 * free; a second thread returns them, as ZeroMQ's I/O thread does). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "internal.h"

static void test_reuse(void **state)
{
    (void)state;
    ch_pool *p = ch_pool_new(1000, 2);
    assert_non_null(p);
    size_t cap = 900;
    uint8_t *a = ch_buf_alloc(p, &cap);
    assert_non_null(a);
    assert_int_equal(cap, 1000); /* the pool's size */
    memset(a, 1, cap);
    ch_buf_free(a);
    cap = 1000;
    uint8_t *b = ch_buf_alloc(p, &cap);
    assert_ptr_equal(a, b); /* the same buffer again */
    uint64_t reused, fresh;
    ch_pool_counts(p, &reused, &fresh);
    assert_int_equal(reused, 1);
    assert_int_equal(fresh, 1);
    ch_buf_free(b);
    ch_pool_release(p);
}

static void test_small_and_large_unpooled(void **state)
{
    (void)state;
    ch_pool *p = ch_pool_new(1000, 2);
    size_t cap = 100; /* a control record */
    uint8_t *s = ch_buf_alloc(p, &cap);
    assert_int_equal(cap, 100);
    cap = 5000; /* over the pool's size */
    uint8_t *l = ch_buf_alloc(p, &cap);
    assert_int_equal(cap, 5000);
    memset(l, 2, cap);
    uint8_t *g = ch_buf_grow(s, 0, 200);
    assert_non_null(g);
    ch_buf_free(g);
    ch_buf_free(l);
    uint64_t reused, fresh;
    ch_pool_counts(p, &reused, &fresh);
    assert_int_equal(reused + fresh, 0);
    ch_pool_release(p);
    ch_buf_free(ch_buf_alloc(NULL, &cap)); /* no pool at all */
}

static void test_keep_bound(void **state)
{
    (void)state;
    ch_pool *p = ch_pool_new(1000, 2);
    uint8_t *b[5];
    for (int i = 0; i < 5; i++) {
        size_t cap = 1000;
        b[i] = ch_buf_alloc(p, &cap);
        assert_non_null(b[i]);
    }
    for (int i = 0; i < 5; i++)
        ch_buf_free(b[i]); /* two kept, three freed */
    for (int i = 0; i < 5; i++) {
        size_t cap = 1000;
        b[i] = ch_buf_alloc(p, &cap);
    }
    uint64_t reused, fresh;
    ch_pool_counts(p, &reused, &fresh);
    assert_int_equal(reused, 2);
    assert_int_equal(fresh, 8);
    for (int i = 0; i < 5; i++)
        ch_buf_free(b[i]);
    ch_pool_release(p);
}

static void *give_back(void *arg)
{
    uint8_t **b = arg;
    for (int i = 0; i < 3; i++)
        ch_buf_free(b[i]);
    return NULL;
}

static void test_release_with_buffers_out(void **state)
{
    (void)state;
    ch_pool *p = ch_pool_new(4096, 4);
    uint8_t *b[3];
    for (int i = 0; i < 3; i++) {
        size_t cap = 4096;
        b[i] = ch_buf_alloc(p, &cap);
        memset(b[i], i, cap);
    }
    ch_pool_release(p); /* the session ends while its frames are still in ZeroMQ */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, give_back, b), 0);
    pthread_join(t, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reuse),
        cmocka_unit_test(test_small_and_large_unpooled),
        cmocka_unit_test(test_keep_bound),
        cmocka_unit_test(test_release_with_buffers_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
