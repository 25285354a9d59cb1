/* CONTEXT_LOCAL_STORAGE, case by case as measured on driver 580 (probe data section D). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "exports/et_cls.h"
#include "exports/export_tables.h"
#include "fe_test_hooks.h"

typedef void (*dtor_fn)(CUcontext, void *, void *);
typedef CUresult (*put_fn)(CUcontext, void *, void *, dtor_fn);
typedef CUresult (*del_fn)(CUcontext, void *);
typedef CUresult (*get_fn)(void **, CUcontext, void *);

static put_fn put;
static del_fn del;
static get_fn get;

#define CTX(n) ((CUcontext)(uintptr_t)(0x1000 * (n)))
#define KEY(n) ((void *)(uintptr_t)(0xa0 + (n)))
#define VAL(n) ((void *)(uintptr_t)(n))
static void *const UNTOUCHED = (void *)(uintptr_t)0x77;

static struct {
    int calls;
    CUcontext ctx;
    void *key, *value;
} g_dtor;

static void dtor(CUcontext ctx, void *key, void *value)
{
    g_dtor.calls++;
    g_dtor.ctx = ctx;
    g_dtor.key = key;
    g_dtor.value = value;
}

static int setup(void **state)
{
    (void)state;
    fe_test_reset();
    memset(&g_dtor, 0, sizeof g_dtor);
    const void *t = NULL;
    CUuuid id;
    memcpy(id.bytes, SL_FE_ET_ID_CONTEXT_LOCAL_STORAGE, 16);
    assert_int_equal(sl_fe_cuGetExportTable(&t, &id), CUDA_SUCCESS);
    const void *const *slots = t;
    put = (put_fn)slots[0];
    del = (del_fn)slots[1];
    get = (get_fn)slots[2];
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sl_fe_cls_clear_all();
    return 0;
}

static void test_no_current_context(void **state)
{
    (void)state;
    void *v = UNTOUCHED;
    assert_int_equal(put(NULL, KEY(4), VAL(1), dtor), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(get(&v, NULL, KEY(4)), CUDA_ERROR_INVALID_CONTEXT);
    assert_ptr_equal(v, UNTOUCHED);
    assert_int_equal(del(NULL, KEY(4)), CUDA_ERROR_INVALID_CONTEXT);
}

static void test_explicit_inactive_handle(void **state)
{
    (void)state;
    /* put on an (inactive) primary handle with no current context works */
    CUcontext pc = fe_test_primary_handle(0);
    void *v = UNTOUCHED;
    assert_int_equal(put(pc, KEY(1), VAL(1), dtor), CUDA_SUCCESS);
    assert_int_equal(get(&v, pc, KEY(1)), CUDA_SUCCESS);
    assert_ptr_equal(v, VAL(1));
    /* after it becomes current, NULL finds the same entry */
    fe_test_set_current(pc);
    v = UNTOUCHED;
    assert_int_equal(get(&v, NULL, KEY(1)), CUDA_SUCCESS);
    assert_ptr_equal(v, VAL(1));
}

static void test_put_existing_keeps_old(void **state)
{
    (void)state;
    fe_test_set_current(CTX(1));
    void *v = UNTOUCHED;
    assert_int_equal(put(NULL, KEY(1), VAL(1), dtor), CUDA_SUCCESS);
    assert_int_equal(put(NULL, KEY(1), VAL(0x1111), dtor), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(put(CTX(1), KEY(1), VAL(0x1111), NULL), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(get(&v, NULL, KEY(1)), CUDA_SUCCESS);
    assert_ptr_equal(v, VAL(1));
    assert_int_equal(get(&v, CTX(1), KEY(1)), CUDA_SUCCESS);
    assert_ptr_equal(v, VAL(1));
}

static void test_missing_key(void **state)
{
    (void)state;
    fe_test_set_current(CTX(1));
    void *v = UNTOUCHED;
    assert_int_equal(get(&v, NULL, KEY(2)), CUDA_ERROR_INVALID_HANDLE);
    assert_ptr_equal(v, UNTOUCHED);
    assert_int_equal(del(NULL, KEY(2)), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(get(NULL, NULL, KEY(2)), CUDA_ERROR_INVALID_VALUE);
}

static void test_delete_no_dtor_then_put_again(void **state)
{
    (void)state;
    fe_test_set_current(CTX(1));
    void *v = UNTOUCHED;
    assert_int_equal(put(NULL, KEY(1), VAL(1), dtor), CUDA_SUCCESS);
    assert_int_equal(del(NULL, KEY(1)), CUDA_SUCCESS);
    assert_int_equal(g_dtor.calls, 0);
    assert_int_equal(get(&v, NULL, KEY(1)), CUDA_ERROR_INVALID_HANDLE);
    assert_ptr_equal(v, UNTOUCHED);
    assert_int_equal(del(NULL, KEY(1)), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(put(NULL, KEY(1), VAL(0x2222), dtor), CUDA_SUCCESS);
    assert_int_equal(get(&v, NULL, KEY(1)), CUDA_SUCCESS);
    assert_ptr_equal(v, VAL(0x2222));
}

static void test_keyed_by_context_and_key(void **state)
{
    (void)state;
    void *v = NULL;
    assert_int_equal(put(CTX(1), KEY(1), VAL(11), dtor), CUDA_SUCCESS);
    assert_int_equal(put(CTX(2), KEY(1), VAL(21), dtor), CUDA_SUCCESS);
    assert_int_equal(put(CTX(1), KEY(2), VAL(12), dtor), CUDA_SUCCESS);
    assert_int_equal(get(&v, CTX(1), KEY(1)), CUDA_SUCCESS);
    assert_ptr_equal(v, VAL(11));
    assert_int_equal(get(&v, CTX(2), KEY(1)), CUDA_SUCCESS);
    assert_ptr_equal(v, VAL(21));
    assert_int_equal(get(&v, CTX(1), KEY(2)), CUDA_SUCCESS);
    assert_ptr_equal(v, VAL(12));
    assert_int_equal(get(&v, CTX(2), KEY(2)), CUDA_ERROR_INVALID_HANDLE);
    /* (CUcontext)-1 is an ordinary handle, not "current" */
    fe_test_set_current(CTX(1));
    assert_int_equal(get(&v, (CUcontext)(intptr_t)-1, KEY(1)), CUDA_ERROR_INVALID_HANDLE);
}

static void test_destroy_calls_dtor(void **state)
{
    (void)state;
    assert_int_equal(put(CTX(3), KEY(1), VAL(0x5555), dtor), CUDA_SUCCESS);
    assert_int_equal(put(CTX(3), KEY(2), VAL(0x4444), NULL), CUDA_SUCCESS);
    assert_int_equal(put(CTX(4), KEY(1), VAL(0x6666), dtor), CUDA_SUCCESS);
    sl_fe_cls_on_ctx_destroy(CTX(3));
    assert_int_equal(g_dtor.calls, 1); /* the NULL dtor is skipped */
    assert_ptr_equal(g_dtor.ctx, CTX(3));
    assert_ptr_equal(g_dtor.key, KEY(1));
    assert_ptr_equal(g_dtor.value, VAL(0x5555));
    void *v = UNTOUCHED;
    assert_int_equal(get(&v, CTX(3), KEY(1)), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(get(&v, CTX(3), KEY(2)), CUDA_ERROR_INVALID_HANDLE);
    assert_ptr_equal(v, UNTOUCHED);
    assert_int_equal(get(&v, CTX(4), KEY(1)), CUDA_SUCCESS);
    assert_ptr_equal(v, VAL(0x6666));
    sl_fe_cls_on_ctx_destroy(CTX(3)); /* nothing left */
    sl_fe_cls_on_ctx_destroy(NULL);
    assert_int_equal(g_dtor.calls, 1);
}

static void test_reset_drops_silently(void **state)
{
    (void)state;
    CUcontext pc = fe_test_primary_handle(0);
    assert_int_equal(put(pc, KEY(3), VAL(0x3333), dtor), CUDA_SUCCESS);
    assert_int_equal(put(pc, KEY(2), VAL(0x4444), dtor), CUDA_SUCCESS);
    assert_int_equal(put(CTX(5), KEY(3), VAL(0x5), dtor), CUDA_SUCCESS);
    sl_fe_cls_on_ctx_reset(pc);
    assert_int_equal(g_dtor.calls, 0);
    void *v = UNTOUCHED;
    /* gone, also after a re-retain gives the same handle back */
    assert_int_equal(get(&v, pc, KEY(3)), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(get(&v, pc, KEY(2)), CUDA_ERROR_INVALID_HANDLE);
    assert_ptr_equal(v, UNTOUCHED);
    assert_int_equal(get(&v, CTX(5), KEY(3)), CUDA_SUCCESS);
    /* and put works again */
    assert_int_equal(put(pc, KEY(3), VAL(0x3334), dtor), CUDA_SUCCESS);
}

/* A dtor may use the table (the lock is not held while it runs). */
static put_fn g_reentrant_put;
static void reentrant_dtor(CUcontext ctx, void *key, void *value)
{
    (void)ctx;
    (void)value;
    g_dtor.calls++;
    assert_int_equal(g_reentrant_put(CTX(9), key, VAL(9), NULL), CUDA_SUCCESS);
}

static void test_dtor_may_reenter(void **state)
{
    (void)state;
    g_reentrant_put = put;
    assert_int_equal(put(CTX(8), KEY(1), VAL(1), reentrant_dtor), CUDA_SUCCESS);
    assert_int_equal(put(CTX(8), KEY(2), VAL(2), reentrant_dtor), CUDA_SUCCESS);
    sl_fe_cls_on_ctx_destroy(CTX(8));
    assert_int_equal(g_dtor.calls, 2);
    void *v = NULL;
    assert_int_equal(get(&v, CTX(9), KEY(2)), CUDA_SUCCESS);
    assert_ptr_equal(v, VAL(9));
}

#define THREADS 4
#define ROUNDS  2000

static void *worker(void *arg)
{
    uintptr_t me = (uintptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        CUcontext ctx = CTX(100 + me);
        void *key = KEY(i % 7);
        void *v = NULL;
        if (put(ctx, key, VAL(i + 1), NULL) != CUDA_SUCCESS)
            return (void *)1;
        if (get(&v, ctx, key) != CUDA_SUCCESS || v != VAL(i + 1))
            return (void *)2;
        if (del(ctx, key) != CUDA_SUCCESS)
            return (void *)3;
        if (i % 100 == 0)
            sl_fe_cls_on_ctx_reset(CTX(200 + me)); /* someone else's churn */
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    pthread_t th[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker, (void *)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *rc = (void *)-1;
        assert_int_equal(pthread_join(th[i], &rc), 0);
        assert_null(rc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_current_context, setup, teardown),
        cmocka_unit_test_setup_teardown(test_explicit_inactive_handle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_put_existing_keeps_old, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_no_dtor_then_put_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keyed_by_context_and_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_calls_dtor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_drops_silently, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dtor_may_reenter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
