/* wire.exports: the generated export table (frontend_exports.c) and the weak
 * sl_fe_unsupported definitions of the handwritten calls (frontend_unsupported.c).
 * The table is sorted, has no duplicates, and holds exactly every exported name: each
 * non-internal call of the table and its _ptds/_ptsz twins. A strong definition in this test
 * (cuGetErrorName) overrides the generated weak one. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>

#include "exports.h"
#include "hooks.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

/* The runtime the generated stubs and weak definitions call into. */
static char g_unsupported[128];
static int g_unsupported_calls;

CUresult sl_fe_unsupported(const char *name)
{
    snprintf(g_unsupported, sizeof g_unsupported, "%s", name);
    g_unsupported_calls++;
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult sl_fe_call(Sluice__Wire__Call *call, Sluice__Wire__Reply **reply)
{
    (void)call;
    *reply = NULL;
    return CUDA_ERROR_NOT_INITIALIZED;
}

void sl_fe_reply_free(Sluice__Wire__Reply *reply)
{
    (void)reply;
}

CUresult sl_fe_enqueue_async(Sluice__Wire__Call *call)
{
    (void)call;
    return CUDA_ERROR_NOT_INITIALIZED;
}

/* A hand-written (strong) definition: it must win over the generated weak one. */
CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    (void)error;
    if (pStr)
        *pStr = "strong";
    return CUDA_SUCCESS;
}

static void table_is_sorted_and_unique(void **state)
{
    (void)state;
    size_t n = 0;
    const struct sl_fe_export *t = sl_fe_export_table(&n);
    assert_non_null(t);
    assert_int_equal(n, SL_FE_EXPORT_COUNT);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(t[i].name);
        assert_non_null(t[i].fn);
        if (i > 0 && strcmp(t[i - 1].name, t[i].name) >= 0)
            fail_msg("export table not strictly sorted at %zu: %s, %s", i, t[i - 1].name,
                     t[i].name);
    }
}

static void table_holds_every_exported_name(void **state)
{
    (void)state;
    size_t expected = 0, calls = 0;
    char name[160];
    for (uint32_t id = 1; id <= SL_CALL_ID_MAX; id++) {
        const struct sl_call_info *c = sl_call_lookup(id);
        if (!c)
            continue;
        if (c->flags & SL_CALL_INTERNAL) {
            assert_null(sl_fe_export_address(c->name));
            continue;
        }
        calls++;
        const char *suffix[3] = {"", (c->flags & SL_CALL_PTDS) ? "_ptds" : NULL,
                                 (c->flags & SL_CALL_PTSZ) ? "_ptsz" : NULL};
        for (int v = 0; v < 3; v++) {
            if (!suffix[v])
                continue;
            snprintf(name, sizeof name, "%s%s", c->name, suffix[v]);
            if (!sl_fe_export_address(name))
                fail_msg("%s is not in the export table", name);
            expected++;
        }
    }
    size_t n = 0;
    sl_fe_export_table(&n);
    assert_int_equal(n, expected);
    assert_null(sl_fe_export_address("cuNoSuchCall"));
    assert_null(sl_fe_export_address("slFence"));
    print_message("%zu exported names for %zu cuda.h calls\n", n, calls);
}

static void weak_definitions_answer_not_supported(void **state)
{
    (void)state;
    CUresult (*get_name)(char *, int, CUdevice) =
        (CUresult(*)(char *, int, CUdevice))sl_fe_export_address("cuDeviceGetName");
    assert_non_null(get_name);
    char buf[8];
    g_unsupported_calls = 0;
    assert_int_equal(get_name(buf, sizeof buf, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_string_equal(g_unsupported, "cuDeviceGetName");
    CUresult (*htod)(CUdeviceptr, const void *, size_t) = (CUresult(*)(
        CUdeviceptr, const void *, size_t))sl_fe_export_address("cuMemcpyHtoD_v2_ptds");
    assert_non_null(htod);
    assert_int_equal(htod(0, buf, sizeof buf), CUDA_ERROR_NOT_SUPPORTED);
    assert_string_equal(g_unsupported, "cuMemcpyHtoD_v2_ptds");
    assert_int_equal(g_unsupported_calls, 2);
}

static void strong_definition_overrides_weak(void **state)
{
    (void)state;
    CUresult (*fn)(CUresult, const char **) =
        (CUresult(*)(CUresult, const char **))sl_fe_export_address("cuGetErrorName");
    assert_ptr_equal((const void *)fn, (const void *)cuGetErrorName);
    const char *s = NULL;
    g_unsupported_calls = 0;
    assert_int_equal(fn(CUDA_SUCCESS, &s), CUDA_SUCCESS);
    assert_string_equal(s, "strong");
    assert_int_equal(g_unsupported_calls, 0);
}

static void generated_stubs_are_exported(void **state)
{
    (void)state;
    /* cuInit is handwritten now (answered by the frontend); cuCtxSynchronize is still a
     * generated synchronous stub that travels through sl_fe_call. */
    CUresult (*sync)(void) = (CUresult(*)(void))sl_fe_export_address("cuCtxSynchronize");
    assert_ptr_equal((const void *)sync, (const void *)cuCtxSynchronize);
    assert_int_equal(sync(), CUDA_ERROR_NOT_INITIALIZED); /* our sl_fe_call's answer */
    CUresult (*flags)(unsigned int *) =
        (CUresult(*)(unsigned int *))sl_fe_export_address("cuCtxGetFlags");
    assert_ptr_equal((const void *)flags, (const void *)cuCtxGetFlags);
    unsigned int f = 0;
    assert_int_equal(flags(&f), CUDA_ERROR_NOT_INITIALIZED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_is_sorted_and_unique),
        cmocka_unit_test(table_holds_every_exported_name),
        cmocka_unit_test(weak_definitions_answer_not_supported),
        cmocka_unit_test(strong_definition_overrides_weak),
        cmocka_unit_test(generated_stubs_are_exported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
