/* cuGetExportTable: every served id, refused ids, argument checks, and the slots whose
 * behaviour is known (export-tables.md section 1, probe data sections A and D). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "exports/export_tables.h"
#include "fe_test_hooks.h"

typedef const void *const *slots_t;
static const void *const SENTINEL = (const void *)(uintptr_t)0x5e5e5e5e;

static int setup(void **state)
{
    (void)state;
    fe_test_reset();
    return 0;
}

static CUuuid uuid_of(const uint8_t bytes[16])
{
    CUuuid id;
    memcpy(id.bytes, bytes, 16);
    return id;
}

static CUuuid uuid_hex(const char *hex)
{
    CUuuid id;
    for (int i = 0; i < 16; i++) {
        unsigned v = 0;
        sscanf(hex + 2 * i, "%2x", &v);
        id.bytes[i] = (char)v;
    }
    return id;
}

static slots_t get_table(const uint8_t bytes[16])
{
    CUuuid id = uuid_of(bytes);
    const void *t = NULL;
    assert_int_equal(sl_fe_cuGetExportTable(&t, &id), CUDA_SUCCESS);
    assert_non_null(t);
    return t;
}

static void check_sized(const uint8_t id[16], unsigned n_slots)
{
    slots_t t = get_table(id);
    assert_int_equal((uintptr_t)t[0], n_slots * sizeof(void *));
    for (unsigned i = 1; i < n_slots; i++)
        assert_non_null(t[i]);
    /* the same table every time */
    assert_ptr_equal(get_table(id), t);
}

static void test_served_ids(void **state)
{
    (void)state;
    check_sized(SL_FE_ET_ID_CUDART_INTERFACE, 13);
    check_sized(SL_FE_ET_ID_TOOLS_RUNTIME_CALLBACK_HOOKS, 7);
    check_sized(SL_FE_ET_ID_TOOLS_TLS, 3);
    check_sized(SL_FE_ET_ID_CONTEXT_CHECKS, 15);
    check_sized(SL_FE_ET_ID_INTEGRITY_CHECK, 3);
    check_sized(SL_FE_ET_ID_CONTEXT_ID, 93);
    check_sized(SL_FE_ET_ID_CLUSTER, 17);
    check_sized(SL_FE_ET_ID_MODULE_FUNCTIONS, 99);
    CUuuid mf = uuid_hex("6e163fbeb958444d835ce182aff1991e");
    assert_memory_equal(mf.bytes, SL_FE_ET_ID_MODULE_FUNCTIONS, 16);
    CUuuid cl = uuid_hex("1734dc26800d47458726c0f1e7dd8bca");
    assert_memory_equal(cl.bytes, SL_FE_ET_ID_CLUSTER, 16);
    /* CONTEXT_LOCAL_STORAGE has no size slot: put, delete, get, NULL */
    slots_t cls = get_table(SL_FE_ET_ID_CONTEXT_LOCAL_STORAGE);
    assert_non_null(cls[0]);
    assert_non_null(cls[1]);
    assert_non_null(cls[2]);
    assert_null(cls[3]);
    /* the ids are the documented bytes */
    CUuuid a = uuid_hex("6bd5fb6c5bf4e74a8987d93912fd9df9");
    assert_memory_equal(a.bytes, SL_FE_ET_ID_CUDART_INTERFACE, 16);
    const char *hex[] = {"a094798c2e742e7493f20800200c0a66", "42d85a8123f6cb478298f6e78a3aecdc",
                         "c693336e1121df11a8c368f355d89593", "263e88607cd2614392f6bbd5006dfa7e",
                         "d4082055bde6704b8d34ba123c66e1f2", "21318c60971432488ca641ff7324c8f2"};
    const uint8_t *ids[] = {SL_FE_ET_ID_TOOLS_RUNTIME_CALLBACK_HOOKS,
                            SL_FE_ET_ID_TOOLS_TLS,
                            SL_FE_ET_ID_CONTEXT_LOCAL_STORAGE,
                            SL_FE_ET_ID_CONTEXT_CHECKS,
                            SL_FE_ET_ID_INTEGRITY_CHECK,
                            SL_FE_ET_ID_CONTEXT_ID};
    for (size_t i = 0; i < 6; i++) {
        CUuuid u = uuid_hex(hex[i]);
        assert_memory_equal(u.bytes, ids[i], 16);
    }
}

static void test_refused_ids(void **state)
{
    (void)state;
    const char *refused[] = {
        "f8cff95121468b4eb9e2fb469e7c0dd9", /* CUDA 13 bundle: refused on purpose */
        "00112233445566778899aabbccddeeff", /* random */
        "195bcbf4d67d024aacc51d29cea631ae", /* HEAP_ACCESS: absent on 580 too */
        "0ca50b8c1004929a89a7d0df10e77286", /* CTX_CREATE_BYPASS */
        "b10541e1f7c7c74a9f64f223be99f1e2", /* DEVICE_EXTENDED_RT */
        "dd9e98a4f410484499b0e2aeb7b432b5", /* HYBRID_CUDART */
        "35770f1b092e0348a48e056fc423968d", "bfdb432dbf3c5a4a945eb34029e81e75",
        "a6b1ff99ecc4c94f92f91928663d5585", "f88cc93e53fd9e46ba591e2b873e0f91",
        "9af0707b8e2dd84c8e4eb994c82ddc35", "69a28e9f24498b47b030c5da330ea4e9",
        "6bd5fb6c5bf4e74a8987d93912fd9df8", /* CUDART with the last byte off */
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        CUuuid id = uuid_hex(refused[i]);
        const void *t = SENTINEL;
        assert_int_equal(sl_fe_cuGetExportTable(&t, &id), CUDA_ERROR_INVALID_VALUE);
        assert_null(t);
    }
}

static void test_null_arguments(void **state)
{
    (void)state;
    CUuuid id = uuid_of(SL_FE_ET_ID_CUDART_INTERFACE);
    const void *t = SENTINEL;
    assert_int_equal(sl_fe_cuGetExportTable(NULL, &id), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(sl_fe_cuGetExportTable(&t, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_ptr_equal(t, SENTINEL);
    assert_int_equal(sl_fe_cuGetExportTable(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
}

/* ---- CUDART_INTERFACE ---- */
typedef CUresult (*get_module_fn)(CUmodule *, const void *);
typedef CUresult (*primary_fn)(CUcontext *, CUdevice);
typedef CUresult (*ext1_fn)(CUmodule *, const void *, void *, void *, unsigned);
typedef void (*fn7_fn)(size_t);
typedef CUresult (*ext2_fn)(const void *, CUmodule *, void *, void *, unsigned);
typedef CUresult (*noarg_fn)(void);

struct wrapper {
    uint32_t magic, version;
    const void *data;
    void *filename;
};
static const uint32_t FATBIN[4] = {0xba55ed50u, 0x00100001u, 0, 0};
static const struct wrapper WRAPPER = {0x466243b1u, 1, FATBIN, NULL};

static void test_cudart_primary_context(void **state)
{
    (void)state;
    slots_t t = get_table(SL_FE_ET_ID_CUDART_INTERFACE);
    primary_fn f = (primary_fn)t[2];
    CUcontext ctx = NULL;
    assert_int_equal(f(&ctx, 0), CUDA_SUCCESS);
    assert_ptr_equal(ctx, fe_test_primary_handle(0));
    CUcontext again = NULL;
    assert_int_equal(f(&again, 0), CUDA_SUCCESS);
    assert_ptr_equal(again, ctx);
    assert_int_equal(f(&ctx, 1), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(f(&ctx, -1), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(f(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    /* not activated: the current context is untouched */
    fe_test_set_current(NULL);
    assert_int_equal(f(&ctx, 0), CUDA_SUCCESS);
}

static void test_cudart_module_slots(void **state)
{
    (void)state;
    slots_t t = get_table(SL_FE_ET_ID_CUDART_INTERFACE);
    CUmodule mod = NULL;
    /* [1]: wrappers only */
    assert_int_equal(((get_module_fn)t[1])(&mod, &WRAPPER), CUDA_SUCCESS);
    assert_ptr_equal(mod, FE_TEST_MODULE);
    assert_ptr_equal(fe_test_last_image(), &WRAPPER);
    mod = NULL;
    assert_int_equal(((get_module_fn)t[1])(&mod, FATBIN), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(((get_module_fn)t[1])(NULL, &WRAPPER), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(((get_module_fn)t[1])(&mod, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_null(mod);
    /* [6]: as [1] with zero extras */
    assert_int_equal(((ext1_fn)t[6])(&mod, &WRAPPER, NULL, NULL, 0), CUDA_SUCCESS);
    assert_ptr_equal(mod, FE_TEST_MODULE);
    int x;
    assert_int_equal(((ext1_fn)t[6])(&mod, &WRAPPER, &x, NULL, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(((ext1_fn)t[6])(&mod, &WRAPPER, NULL, NULL, 1), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(((ext1_fn)t[6])(&mod, FATBIN, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    /* [8]: raw fatbins only, image first */
    mod = NULL;
    assert_int_equal(((ext2_fn)t[8])(FATBIN, &mod, NULL, NULL, 0), CUDA_SUCCESS);
    assert_ptr_equal(mod, FE_TEST_MODULE);
    assert_ptr_equal(fe_test_last_image(), FATBIN);
    assert_int_equal(((ext2_fn)t[8])(&WRAPPER, &mod, NULL, NULL, 0), CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(((ext2_fn)t[8])(FATBIN, NULL, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(((ext2_fn)t[8])(FATBIN, &mod, &x, NULL, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(fe_test_module_loads(), 3);
}

static void test_cudart_other_slots(void **state)
{
    (void)state;
    slots_t t = get_table(SL_FE_ET_ID_CUDART_INTERFACE);
    ((fn7_fn)t[7])(12345);
    assert_int_equal(((noarg_fn)t[12])(), CUDA_SUCCESS);
    const int stubs[] = {3, 4, 5, 9, 10, 11};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(((noarg_fn)t[stubs[i]])(), CUDA_ERROR_NOT_SUPPORTED);
        assert_int_equal(((noarg_fn)t[stubs[i]])(), CUDA_ERROR_NOT_SUPPORTED); /* logged once */
    }
}

/* ---- TOOLS_RUNTIME_CALLBACK_HOOKS, TOOLS_TLS ---- */
typedef CUresult (*buffer_fn)(void **, size_t *);
typedef CUresult (*tls_fn)(void **);

static void test_tools_hooks(void **state)
{
    (void)state;
    slots_t t = get_table(SL_FE_ET_ID_TOOLS_RUNTIME_CALLBACK_HOOKS);
    void *p = NULL;
    size_t size = 0;
    assert_int_equal(((buffer_fn)t[2])(&p, &size), CUDA_SUCCESS);
    assert_non_null(p);
    assert_int_equal(size, 1024);
    memset(p, 0xab, 4096); /* 4 KiB usable (ASan checks) */
    void *p6 = NULL;
    assert_int_equal(((buffer_fn)t[6])(&p6, &size), CUDA_SUCCESS);
    assert_non_null(p6);
    assert_ptr_not_equal(p6, p);
    assert_int_equal(size, 14);
    memset(p6, 0xcd, 14);
    assert_int_equal(((buffer_fn)t[2])(NULL, &size), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(((buffer_fn)t[6])(&p, NULL), CUDA_ERROR_INVALID_VALUE);
    for (int i = 1; i <= 5; i++) {
        if (i != 2)
            assert_int_equal(((noarg_fn)t[i])(), CUDA_SUCCESS);
    }
}

static void test_tools_tls(void **state)
{
    (void)state;
    slots_t t = get_table(SL_FE_ET_ID_TOOLS_TLS);
    void *out = (void *)SENTINEL;
    assert_int_equal(((tls_fn)t[2])(&out), CUDA_SUCCESS);
    assert_null(out);
    CUcontext ctx = (CUcontext)(uintptr_t)0xc7c7;
    fe_test_set_current(ctx);
    assert_int_equal(((tls_fn)t[2])(&out), CUDA_SUCCESS);
    assert_ptr_equal(out, ctx);
    assert_int_equal(((tls_fn)t[2])(NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(((noarg_fn)t[1])(), CUDA_ERROR_NOT_SUPPORTED);
}

/* ---- CONTEXT_CHECKS ---- */
typedef CUresult (*check_fn)(CUcontext, uint32_t *, const void **);

static void test_context_checks(void **state)
{
    (void)state;
    slots_t t = get_table(SL_FE_ET_ID_CONTEXT_CHECKS);
    uint32_t out1 = 0x77;
    const void *out2 = SENTINEL;
    CUcontext pc = fe_test_primary_handle(0);
    assert_int_equal(((check_fn)t[2])(pc, &out1, &out2), CUDA_SUCCESS);
    assert_int_equal(out1, 0);
    assert_ptr_equal(out2, SENTINEL); /* out2 is not written */
    out1 = 0x77;
    assert_int_equal(((check_fn)t[2])(NULL, &out1, &out2), CUDA_SUCCESS);
    assert_int_equal(out1, 0);
    assert_ptr_equal(out2, SENTINEL);
    assert_int_equal(((check_fn)t[2])(pc, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(((noarg_fn)t[3])(), CUDA_SUCCESS);
    assert_int_equal(((noarg_fn)t[1])(), CUDA_ERROR_NOT_SUPPORTED);
    for (int i = 4; i < 15; i++)
        assert_int_equal(((noarg_fn)t[i])(), CUDA_ERROR_NOT_SUPPORTED);
}

/* ---- context id table ---- */
typedef CUresult (*ctxid_fn)(CUcontext, uint64_t *);

static void test_context_id(void **state)
{
    (void)state;
    slots_t t = get_table(SL_FE_ET_ID_CONTEXT_ID);
    uint64_t id = 99;
    assert_int_equal(((ctxid_fn)t[4])(NULL, &id), CUDA_SUCCESS);
    assert_int_equal(id, 0);
    assert_int_equal(((ctxid_fn)t[4])((CUcontext)(uintptr_t)0x100, &id), CUDA_SUCCESS);
    assert_int_equal(id, 1);
    assert_int_equal(((ctxid_fn)t[4])((CUcontext)(uintptr_t)0x100, NULL), CUDA_ERROR_INVALID_VALUE);
    for (int i = 1; i < 93; i++) {
        if (i != 4 && i != 39 && i != 51)
            assert_int_equal(((noarg_fn)t[i])(), CUDA_ERROR_NOT_SUPPORTED);
    }
    /* distinct stubs per slot, so the log names the slot */
    assert_ptr_not_equal(t[1], t[2]);
    assert_ptr_not_equal(t[91], t[92]);
}

/* ---- context-id [51] and [39]: cuBLAS's stream key ---- */
typedef CUresult (*stream_obj_fn)(CUcontext, CUstream, void **, int);
typedef CUresult (*stream_id_fn)(CUcontext, void *, uint64_t *);

static void test_stream_key(void **state)
{
    (void)state;
    slots_t t = get_table(SL_FE_ET_ID_CONTEXT_ID);
    stream_obj_fn obj = (stream_obj_fn)t[51];
    stream_id_fn id = (stream_id_fn)t[39];
    CUcontext ctx = (CUcontext)(uintptr_t)0x300;
    CUstream created = (CUstream)(uintptr_t)0x5000;
    int calls = 0;
    fe_test_stream_ids(&calls);
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
    /* a context's streams need the context (400 without, as the driver) */
    assert_int_equal(obj(NULL, NULL, &a, 0), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(obj(NULL, CU_STREAM_LEGACY, &a, 0), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(obj(NULL, CU_STREAM_PER_THREAD, &a, 1), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(obj(ctx, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    /* the NULL and the legacy stream share one object, the same every time */
    assert_int_equal(obj(ctx, NULL, &a, 0), CUDA_SUCCESS);
    assert_int_equal(obj(ctx, CU_STREAM_LEGACY, &b, 0), CUDA_SUCCESS);
    assert_ptr_equal(a, b);
    assert_int_equal(obj(ctx, CU_STREAM_PER_THREAD, &c, 1), CUDA_SUCCESS);
    assert_ptr_not_equal(a, c);
    /* a created stream: the same object with or without a context */
    assert_int_equal(obj(ctx, created, &d, 0), CUDA_SUCCESS);
    assert_int_equal(obj(NULL, created, &e, 0), CUDA_SUCCESS);
    assert_ptr_equal(d, e);
    /* [39]: the stream's cuStreamGetId, asked once per object */
    uint64_t v = 0;
    assert_int_equal(id(ctx, a, &v), CUDA_SUCCESS);
    assert_int_equal(v, (0x300 << 4) | 1);
    assert_int_equal(id(NULL, a, &v), CUDA_SUCCESS);
    assert_int_equal(calls, 1);
    assert_int_equal(id(ctx, c, &v), CUDA_SUCCESS);
    assert_int_equal(v, (0x300 << 4) | 2);
    assert_int_equal(id(ctx, d, &v), CUDA_SUCCESS);
    assert_int_equal(v, 0x5000);
    assert_int_equal(calls, 3);
    /* an object that is not one, a NULL out, an invalid stream */
    int local;
    assert_int_equal(id(ctx, &local, &v), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(id(ctx, a, NULL), CUDA_ERROR_INVALID_VALUE);
    void *bad = NULL;
    assert_int_equal(obj(ctx, (CUstream)(uintptr_t)0xbad, &bad, 0), CUDA_SUCCESS);
    assert_int_equal(id(ctx, bad, &v), CUDA_ERROR_INVALID_HANDLE);
}

/* ---- cluster table: the slots that need no session ---- */
typedef CUresult (*ptrs_fn)(unsigned char *, unsigned char *);
typedef CUresult (*intp_fn)(int *);
typedef CUresult (*devintp_fn)(CUdevice, int *);
typedef uint32_t (*override_fn)(int, uint32_t);

static void test_cluster(void **state)
{
    (void)state;
    slots_t t = get_table(SL_FE_ET_ID_CLUSTER);
    int v = 7;
    assert_int_equal(((intp_fn)t[14])(&v), CUDA_SUCCESS);
    assert_int_equal(v, 0);
    assert_int_equal(((intp_fn)t[14])(NULL), CUDA_ERROR_INVALID_VALUE);
    v = 7;
    assert_int_equal(((devintp_fn)t[16])(0, &v), CUDA_SUCCESS);
    assert_int_equal(v, 0);
    assert_int_equal(((ptrs_fn)t[13])(NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(((ptrs_fn)t[4])(NULL, NULL), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(((override_fn)t[11])(0, 16), 0);
}

/* ---- module functions [7]: what cuFFT needs ---- */
typedef void (*visitor_fn)(void *, CUfunction, const char *);
typedef uint64_t (*module_functions_fn)(CUcontext, CUmodule, visitor_fn, void *);

struct visited {
    unsigned n;
    CUfunction last;
    const char *name;
};

static void visit(void *opaque, CUfunction f, const char *name)
{
    struct visited *v = opaque;
    v->n++;
    v->last = f;
    v->name = name;
}

static void test_module_functions(void **state)
{
    (void)state;
    slots_t t = get_table(SL_FE_ET_ID_MODULE_FUNCTIONS);
    module_functions_fn mf = (module_functions_fn)t[7];
    struct visited v = {0};
    /* one function: visited once, the count is 1 (what cuFFT checks) */
    fe_test_set_module_functions(1, CUDA_SUCCESS);
    assert_int_equal(mf(NULL, FE_TEST_MODULE, visit, &v), 1);
    assert_int_equal(v.n, 1);
    assert_ptr_equal(v.last, fe_test_module_function(0));
    assert_string_equal(v.name, "k0");
    /* several: each in the driver's order */
    v = (struct visited){0};
    fe_test_set_module_functions(3, CUDA_SUCCESS);
    assert_int_equal(mf(NULL, FE_TEST_MODULE, visit, &v), 3);
    assert_int_equal(v.n, 3);
    assert_ptr_equal(v.last, fe_test_module_function(2));
    assert_string_equal(v.name, "k2");
    /* a function that cannot be named: nothing visited */
    v = (struct visited){0};
    fe_test_set_module_functions(5, CUDA_SUCCESS);
    assert_int_equal(mf(NULL, FE_TEST_MODULE, visit, &v), 0);
    assert_int_equal(v.n, 0);
    fe_test_set_module_functions(3, CUDA_SUCCESS);
    /* no visitor: only counted */
    assert_int_equal(mf(NULL, FE_TEST_MODULE, NULL, NULL), 3);
    /* a bad module, a module that cannot be listed, an empty one: 0, nothing visited */
    v = (struct visited){0};
    assert_int_equal(mf(NULL, (CUmodule)(uintptr_t)0x1234, visit, &v), 0);
    fe_test_set_module_functions(2, CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(mf(NULL, FE_TEST_MODULE, visit, &v), 0);
    fe_test_set_module_functions(0, CUDA_SUCCESS);
    assert_int_equal(mf(NULL, FE_TEST_MODULE, visit, &v), 0);
    assert_int_equal(v.n, 0);
    /* the other slots are logged stubs */
    assert_int_equal(((CUresult(*)(void))t[1])(), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(((CUresult(*)(void))t[98])(), CUDA_ERROR_NOT_SUPPORTED);
}

/* ---- INTEGRITY_CHECK slot 2 (slot 1: test_integrity.c) ---- */
typedef CUresult (*int_fn)(int);

static void test_integrity_slot2(void **state)
{
    (void)state;
    slots_t t = get_table(SL_FE_ET_ID_INTEGRITY_CHECK);
    assert_int_equal(((int_fn)t[2])(1), CUDA_SUCCESS);
    assert_int_equal(((int_fn)t[2])(0), CUDA_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_served_ids, setup),
        cmocka_unit_test_setup(test_refused_ids, setup),
        cmocka_unit_test_setup(test_null_arguments, setup),
        cmocka_unit_test_setup(test_cudart_primary_context, setup),
        cmocka_unit_test_setup(test_cudart_module_slots, setup),
        cmocka_unit_test_setup(test_cudart_other_slots, setup),
        cmocka_unit_test_setup(test_tools_hooks, setup),
        cmocka_unit_test_setup(test_tools_tls, setup),
        cmocka_unit_test_setup(test_context_checks, setup),
        cmocka_unit_test_setup(test_context_id, setup),
        cmocka_unit_test_setup(test_stream_key, setup),
        cmocka_unit_test_setup(test_cluster, setup),
        cmocka_unit_test_setup(test_module_functions, setup),
        cmocka_unit_test_setup(test_integrity_slot2, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
