/* The page-locked slots of large copies (backend/session/bulk_pool.c) with a fake driver table:
 * slots made up to the maximum and reused, the size range, every bulk freed by be_bulk_free
 * (slot or malloc'd), registration once per slot and a refusal keeping slots pageable, the
 * backend's budget of page-locked bytes (a slot over it stays pageable until there is room), a slot
 * read by an async copy held until its event is done, and a pool closed while a slot is still
 * out (a reply not yet sent). No driver, no GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "session/bulk_pool.h"

static struct {
    int registered, unregistered, created, destroyed;
    int refuse;  /* cuMemHostRegister_v2 answers an error */
    int pending; /* events not done yet (cuEventQuery: NOT_READY) */
} n;

static CUresult f_register(void *p, size_t len, unsigned flags)
{
    (void)p;
    assert_int_equal(len, BE_POOL_SLOT);
    assert_int_equal(flags, CU_MEMHOSTREGISTER_PORTABLE);
    if (n.refuse)
        return CUDA_ERROR_NOT_SUPPORTED;
    n.registered++;
    return CUDA_SUCCESS;
}
static CUresult f_unregister(void *p)
{
    (void)p;
    n.unregistered++;
    return CUDA_SUCCESS;
}
static CUresult f_ev_create(CUevent *e, unsigned flags)
{
    (void)flags;
    *e = (CUevent)(uintptr_t)(0x100 + n.created++);
    return CUDA_SUCCESS;
}
static CUresult f_ev_record(CUevent e, CUstream s)
{
    (void)e;
    (void)s;
    return CUDA_SUCCESS;
}
static CUresult f_ev_query(CUevent e)
{
    (void)e;
    return n.pending ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}
static CUresult f_ev_destroy(CUevent e)
{
    (void)e;
    n.destroyed++;
    return CUDA_SUCCESS;
}

static struct sl_driver_api g_api;

static int setup(void **state)
{
    (void)state;
    memset(&n, 0, sizeof n);
    memset(&g_api, 0, sizeof g_api);
    g_api.cuMemHostRegister_v2 = f_register;
    g_api.cuMemHostUnregister = f_unregister;
    g_api.cuEventCreate = f_ev_create;
    g_api.cuEventRecord = f_ev_record;
    g_api.cuEventQuery = f_ev_query;
    g_api.cuEventDestroy_v2 = f_ev_destroy;
    return 0;
}

static void slots_are_made_up_to_the_maximum_and_reused(void **state)
{
    (void)state;
    be_pool *p = be_pool_new(&g_api, 2);
    assert_null(be_pool_take(p, BE_POOL_MIN - 1)); /* small bulk: malloc'd */
    assert_null(be_pool_take(p, BE_POOL_SLOT + 1));
    void *a = be_pool_take(p, BE_POOL_MIN);
    void *b = be_pool_take(p, BE_POOL_SLOT);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_null(be_pool_take(p, BE_POOL_SLOT)); /* both out */
    assert_true(be_bulk_is_slot(a));
    memset(a, 0xab, BE_POOL_SLOT); /* writable, all of it */
    be_bulk_free(a);
    assert_ptr_equal(be_pool_take(p, 2 * BE_POOL_MIN), a);
    void *m = malloc(64);
    assert_false(be_bulk_is_slot(m));
    be_bulk_free(m); /* not a slot: freed (ASan would see a leak or a bad free) */
    be_bulk_free(NULL);
    be_bulk_free(a);
    be_bulk_free(b);
    be_pool_free(p);
    assert_false(be_bulk_is_slot(a));
}

static void a_slot_is_registered_once(void **state)
{
    (void)state;
    be_pool *p = be_pool_new(&g_api, 4);
    void *a = be_pool_take(p, BE_POOL_SLOT);
    assert_int_equal(be_pool_pin(p, a), 1);
    assert_int_equal(be_pool_pin(p, a), 1);
    assert_int_equal(n.registered, 1);
    int x;
    assert_int_equal(be_pool_pin(p, &x), 0); /* no slot */
    be_bulk_free(a);
    be_pool_free(p);
    assert_int_equal(n.unregistered, 1);
}

/* A budget of one slot (a fake of the backend's, quota.c): the second slot stays pageable while
 * the first holds the budget, is asked again at its next use, and gets it once given back; the
 * pool gives back what it holds when it closes, and what the driver refused. */
static struct {
    int64_t held, cap;
    int asked;
} bud;
static int f_budget(void *u, int64_t bytes)
{
    assert_ptr_equal(u, &bud);
    bud.asked++;
    if (bytes > 0 && bud.held + bytes > bud.cap)
        return 0;
    bud.held += bytes;
    assert_true(bud.held >= 0);
    return 1;
}

static void slots_are_pinned_within_the_budget(void **state)
{
    (void)state;
    bud.held = 0;
    bud.cap = (int64_t)BE_POOL_SLOT;
    bud.asked = 0;
    be_pool *p = be_pool_new(&g_api, 4);
    be_pool_budget(p, f_budget, &bud);
    void *a = be_pool_take(p, BE_POOL_SLOT);
    void *b = be_pool_take(p, BE_POOL_SLOT);
    assert_int_equal(be_pool_pin(p, a), 1);
    assert_int_equal(be_pool_pin(p, b), 0); /* over the budget: pageable */
    assert_int_equal(be_pool_pin(p, b), 0); /* asked again */
    assert_int_equal(bud.asked, 3);
    assert_int_equal(n.registered, 1);
    assert_int_equal(bud.held, (int64_t)BE_POOL_SLOT);
    bud.cap = 2 * (int64_t)BE_POOL_SLOT; /* another session gave some back */
    assert_int_equal(be_pool_pin(p, b), 1);
    assert_int_equal(be_pool_pin(p, b), 1); /* pinned: not asked again */
    assert_int_equal(bud.asked, 4);
    be_bulk_free(a);
    be_bulk_free(b);
    be_pool_free(p);
    assert_int_equal(bud.held, 0);
    /* the driver refuses: what was asked for goes back at once */
    n.refuse = 1;
    p = be_pool_new(&g_api, 4);
    be_pool_budget(p, f_budget, &bud);
    a = be_pool_take(p, BE_POOL_SLOT);
    assert_int_equal(be_pool_pin(p, a), 0);
    assert_int_equal(bud.held, 0);
    be_bulk_free(a);
    be_pool_free(p);
    assert_int_equal(bud.held, 0);
}

static void a_refusal_leaves_slots_pageable(void **state)
{
    (void)state;
    n.refuse = 1;
    be_pool *p = be_pool_new(&g_api, 4);
    void *a = be_pool_take(p, BE_POOL_SLOT);
    void *b = be_pool_take(p, BE_POOL_SLOT);
    assert_int_equal(be_pool_pin(p, a), 0);
    assert_int_equal(be_pool_pin(p, b), 0);        /* not asked again */
    assert_int_equal(be_pool_hold(p, a, NULL), 0); /* pageable: the driver staged it */
    assert_int_equal(n.created, 0);
    be_bulk_free(a);
    be_bulk_free(b);
    be_pool_free(p);
    assert_int_equal(n.unregistered, 0);
}

static void a_held_slot_waits_for_its_copy(void **state)
{
    (void)state;
    be_pool *p = be_pool_new(&g_api, 1);
    uint8_t *a = be_pool_take(p, BE_POOL_SLOT);
    assert_int_equal(be_pool_pin(p, a), 1);
    n.pending = 1;
    assert_int_equal(be_pool_hold(p, a + 4096, (CUstream)(uintptr_t)7), 0); /* inside the slot */
    be_bulk_free(a);                                                        /* its frame ran */
    assert_null(be_pool_take(p, BE_POOL_SLOT)); /* the copy may still read it */
    be_pool_reap(p);
    assert_null(be_pool_take(p, BE_POOL_SLOT));
    n.pending = 0;
    be_pool_reap(p);
    assert_int_equal(n.destroyed, 1);
    assert_ptr_equal(be_pool_take(p, BE_POOL_SLOT), a);
    /* held again, reaped before its frame gave it back: still out until then */
    n.pending = 1;
    assert_int_equal(be_pool_hold(p, a, NULL), 0);
    n.pending = 0;
    be_pool_reap(p);
    assert_null(be_pool_take(p, BE_POOL_SLOT));
    be_bulk_free(a);
    assert_ptr_equal(be_pool_take(p, BE_POOL_SLOT), a);
    be_bulk_free(a);
    be_pool_free(p);
}

static void a_slot_out_at_the_close_is_unmapped_when_it_comes_back(void **state)
{
    (void)state;
    be_pool *p = be_pool_new(&g_api, 2);
    void *a = be_pool_take(p, BE_POOL_SLOT);
    void *b = be_pool_take(p, BE_POOL_SLOT);
    be_bulk_free(b);
    be_pool_free(p); /* b unmapped now; a is a reply still queued */
    assert_true(be_bulk_is_slot(a));
    assert_false(be_bulk_is_slot(b));
    memset(a, 1, 4096);
    be_bulk_free(a); /* unmapped, and the pool with it */
    assert_false(be_bulk_is_slot(a));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(slots_are_made_up_to_the_maximum_and_reused, setup),
        cmocka_unit_test_setup(a_slot_is_registered_once, setup),
        cmocka_unit_test_setup(a_refusal_leaves_slots_pageable, setup),
        cmocka_unit_test_setup(slots_are_pinned_within_the_budget, setup),
        cmocka_unit_test_setup(a_held_slot_waits_for_its_copy, setup),
        cmocka_unit_test_setup(a_slot_out_at_the_close_is_unmapped_when_it_comes_back, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
