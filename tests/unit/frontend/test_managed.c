/* The guest's page tracker for managed memory (frontend/call/managed.c), on real mappings and real
 * faults: a buffer of this process stands for the device's copy (fetch and push copy to and from
 * it), so what the program reads and writes can be compared with what the device holds. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "call/managed.h"

#define SPAN ((size_t)1 << 20)

static uintptr_t g_base; /* the "device" address range [g_base, g_base + SPAN) */
static uint8_t *g_dev;   /* its contents */
static size_t g_pushes, g_pushed;
static uint64_t g_push_lo, g_push_hi;

static CUresult fake_fetch(void *dst, uint64_t src, size_t len)
{
    assert_true(src >= g_base && src + len <= g_base + SPAN);
    memcpy(dst, g_dev + (src - g_base), len);
    return CUDA_SUCCESS;
}

static CUresult fake_push(uint64_t dst, const void *data, size_t len)
{
    assert_true(dst >= g_base && dst + len <= g_base + SPAN);
    memcpy(g_dev + (dst - g_base), data, len);
    if (!g_pushes || dst < g_push_lo)
        g_push_lo = dst;
    if (dst + len > g_push_hi)
        g_push_hi = dst + len;
    g_pushes++;
    g_pushed += len;
    return CUDA_SUCCESS;
}

static int setup(void **state)
{
    (void)state;
    g_dev = calloc(1, SPAN);
    void *p = mmap(NULL, SPAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    munmap(p, SPAN); /* a free range: the "device" hands out addresses in it */
    g_base = (uintptr_t)p;
    for (size_t i = 0; i < SPAN; i++)
        g_dev[i] = (uint8_t)(i * 7 + 3);
    g_pushes = g_pushed = 0;
    g_push_lo = g_push_hi = 0;
    sl_fe_managed_set_fetch(fake_fetch);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sl_fe_managed_reset();
    free(g_dev);
    return 0;
}

static int mapped_here(uintptr_t p)
{
    unsigned char v;
    return mincore((void *)(p & ~(uintptr_t)4095), 4096, &v) == 0 || errno != ENOMEM;
}

static void read_fetches_one_block(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_int_equal(sl_fe_managed_map(g_base, 256 << 10, &why), 0);
    volatile uint8_t *m = (volatile uint8_t *)g_base;
    assert_int_equal(m[70000], g_dev[70000]); /* the second 64 KiB block */
    assert_int_equal(m[65536], g_dev[65536]);
    assert_int_equal(m[131071], g_dev[131071]);
    struct sl_fe_managed_stats st;
    sl_fe_managed_stats(&st);
    assert_int_equal(st.fetches, 1);
    assert_int_equal(st.fetched_bytes, SL_FE_MANAGED_BLOCK);
    assert_int_equal(m[0], g_dev[0]); /* another block: another fetch */
    sl_fe_managed_stats(&st);
    assert_int_equal(st.fetches, 2);
    uint64_t base = 0;
    size_t len = 0;
    assert_true(sl_fe_managed_find(g_base + 5, &base, &len));
    assert_int_equal(base, g_base);
    assert_int_equal(len, 256 << 10);
    assert_false(sl_fe_managed_find(g_base + (256 << 10), NULL, NULL));
}

static void writes_are_pushed_once(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_int_equal(sl_fe_managed_map(g_base, 256 << 10, &why), 0);
    uint8_t *m = (uint8_t *)g_base;
    m[10] = 0xab; /* absent: fetched, then written */
    m[200000] = 0xcd;
    assert_int_not_equal(g_dev[10], 0xab);
    struct sl_fe_managed_stats st;
    sl_fe_managed_stats(&st);
    assert_int_equal(st.write_faults, 2);
    assert_int_equal(sl_fe_managed_sync_out(fake_push), CUDA_SUCCESS);
    assert_int_equal(g_dev[10], 0xab);
    assert_int_equal(g_dev[200000], 0xcd);
    assert_int_equal(g_pushes, 2);
    assert_int_equal(g_pushed, 2 * 4096); /* the two dirty pages only */
    assert_int_equal(sl_fe_managed_sync_out(fake_push), CUDA_SUCCESS);
    assert_int_equal(g_pushes, 2); /* clean again: nothing more */
    m[11] = 0xef;                  /* present, read-only again: a write fault marks it */
    assert_int_equal(sl_fe_managed_sync_out(fake_push), CUDA_SUCCESS);
    assert_int_equal(g_dev[11], 0xef);
    assert_int_equal(g_pushes, 3);
}

static void invalidate_refetches(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_int_equal(sl_fe_managed_map(g_base, 8192, &why), 0);
    volatile uint8_t *m = (volatile uint8_t *)g_base;
    uint8_t before = m[100];
    g_dev[100] = (uint8_t)(before + 1); /* "a kernel" writes the device's copy */
    assert_int_equal(m[100], before);   /* present: not seen before a synchronization */
    sl_fe_managed_invalidate();
    assert_int_equal(m[100], (uint8_t)(before + 1));
    /* a dirty page keeps the program's bytes across an invalidation (pushed next) */
    m[200] = 0x11;
    sl_fe_managed_invalidate();
    assert_int_equal(m[200], 0x11);
    assert_int_equal(sl_fe_managed_sync_out(fake_push), CUDA_SUCCESS);
    assert_int_equal(g_dev[200], 0x11);
}

static void shared_pages_are_clipped(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_int_equal(sl_fe_managed_map(g_base + 0, 100, &why), 0);
    assert_int_equal(sl_fe_managed_map(g_base + 512, 100, &why), 0); /* the same page */
    uint8_t *m = (uint8_t *)g_base;
    assert_int_equal(m[50], g_dev[50]);
    assert_int_equal(m[300], 0); /* between the two: not fetched */
    assert_int_equal(m[600], g_dev[600]);
    m[520] = 0x42;
    assert_int_equal(sl_fe_managed_sync_out(fake_push), CUDA_SUCCESS);
    assert_int_equal(g_pushed, 200); /* both allocations' bytes, not the gap */
    assert_int_equal(g_push_lo, g_base);
    assert_int_equal(g_push_hi, g_base + 612);
    assert_true(sl_fe_managed_unmap(g_base));
    assert_true(mapped_here(g_base)); /* still the second one's page */
    assert_false(sl_fe_managed_unmap(g_base));
    assert_true(sl_fe_managed_unmap(g_base + 512));
    assert_false(mapped_here(g_base));
}

static void taken_address_fails(void **state)
{
    (void)state;
    void *p = mmap((void *)g_base, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    assert_true(p == (void *)g_base);
    const char *why = NULL;
    assert_int_equal(sl_fe_managed_map(g_base, 8192, &why), -1);
    assert_non_null(why);
    assert_non_null(strstr(why, "taken"));
    assert_false(sl_fe_managed_find(g_base, NULL, NULL));
    munmap(p, 4096);
}

static void fetch_range_without_faults(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_int_equal(sl_fe_managed_map(g_base, 200 << 10, &why), 0);
    assert_int_equal(sl_fe_managed_fetch_range(g_base + 1000, 150 << 10), CUDA_SUCCESS);
    struct sl_fe_managed_stats st;
    sl_fe_managed_stats(&st);
    assert_int_equal(st.fetches, 3); /* blocks 0, 1, 2 */
    assert_memory_equal((void *)(g_base + 1000), g_dev + 1000, 150 << 10);
    sl_fe_managed_stats(&st);
    assert_int_equal(st.fetches, 3); /* present: read without a fault */
}

/* A program that installs its own SIGSEGV handler after the allocation (Python's faulthandler,
 * a JVM): ours goes back in front of it at the next call, and faults outside managed memory
 * still reach the program's handler. */
static sigjmp_buf g_jump;
static volatile sig_atomic_t g_program_faults;

static void program_handler(int sig)
{
    (void)sig;
    g_program_faults++;
    siglongjmp(g_jump, 1);
}

static void later_handler_is_chained(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_int_equal(sl_fe_managed_map(g_base, 8192, &why), 0);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = program_handler;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGSEGV, &sa, &old), 0);
    assert_int_equal(sl_fe_managed_sync_out(fake_push), CUDA_SUCCESS); /* "the next call" */
    volatile uint8_t *m = (volatile uint8_t *)g_base;
    assert_int_equal(m[1], g_dev[1]);
    assert_int_equal(g_program_faults, 0);
    void *guard = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(guard != MAP_FAILED);
    if (sigsetjmp(g_jump, 1) == 0) {
        (void)*(volatile uint8_t *)guard;
        fail_msg("the guard page did not fault");
    }
    assert_int_equal(g_program_faults, 1);
    munmap(guard, 4096);
    sigaction(SIGSEGV, &old, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(read_fetches_one_block, setup, teardown),
        cmocka_unit_test_setup_teardown(writes_are_pushed_once, setup, teardown),
        cmocka_unit_test_setup_teardown(invalidate_refetches, setup, teardown),
        cmocka_unit_test_setup_teardown(shared_pages_are_clipped, setup, teardown),
        cmocka_unit_test_setup_teardown(taken_address_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(fetch_range_without_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(later_handler_is_chained, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
