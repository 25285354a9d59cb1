/* wire.exports: the generated export table (frontend_exports.c) linked with libcuda.so.1's
 * objects, as the library is. The table is sorted, has no duplicates, and holds exactly every
 * exported name: each non-internal call of the table and its _ptds/_ptsz twins, each defined
 * once (a generated stub, a refused call's definition or hand code: a missing one would fail
 * this test's link). Refused calls answer CUDA_ERROR_NOT_SUPPORTED without a session. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>

#include "exports/exports.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

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

static void refused_calls_answer_not_supported(void **state)
{
    (void)state;
    const struct sl_call_info *ci = sl_call_lookup(SL_CALL_cuMemRetainAllocationHandle);
    assert_non_null(ci);
    assert_non_null(ci->refuse);
    assert_false(ci->flags & SL_CALL_SENT);
    CUresult (*exp)(CUmemGenericAllocationHandle *, void *) = (CUresult(*)(
        CUmemGenericAllocationHandle *, void *))sl_fe_export_address("cuMemRetainAllocationHandle");
    assert_ptr_equal((const void *)exp, (const void *)cuMemRetainAllocationHandle);
    CUmemGenericAllocationHandle h;
    assert_int_equal(exp(&h, NULL), CUDA_ERROR_NOT_SUPPORTED);
    /* CUDA IPC travels (as tokens the backend brokers, docs/security.md) */
    ci = sl_call_lookup(SL_CALL_cuIpcGetMemHandle);
    assert_non_null(ci);
    assert_null(ci->refuse);
    assert_true(ci->flags & SL_CALL_SENT);
    /* but not its legacy entry point (cuda.h and cudart name cuIpcOpenMemHandle_v2) */
    CUresult (*legacy)(CUdeviceptr *, CUipcMemHandle, unsigned) = (CUresult(*)(
        CUdeviceptr *, CUipcMemHandle, unsigned))sl_fe_export_address("cuIpcOpenMemHandle");
    assert_non_null(legacy);
    CUipcMemHandle mh = {{0}};
    CUdeviceptr p = 0;
    assert_int_equal(legacy(&p, mh, 0), CUDA_ERROR_NOT_SUPPORTED);
    CUresult (*d8)(CUdeviceptr, unsigned char, size_t) =
        (CUresult(*)(CUdeviceptr, unsigned char, size_t))sl_fe_export_address("cuMemsetD8");
    assert_int_equal(d8(0, 0, 1), CUDA_ERROR_NOT_SUPPORTED);
}

static void hand_and_generated_definitions_are_exported(void **state)
{
    (void)state;
    CUresult (*name)(CUresult, const char **) =
        (CUresult(*)(CUresult, const char **))sl_fe_export_address("cuGetErrorName");
    assert_ptr_equal((const void *)name, (const void *)cuGetErrorName); /* hand-written */
    const char *s = NULL;
    assert_int_equal(name(CUDA_ERROR_INVALID_VALUE, &s), CUDA_SUCCESS);
    assert_string_equal(s, "CUDA_ERROR_INVALID_VALUE");
    assert_ptr_equal(sl_fe_export_address("cuCtxSynchronize"), (const void *)cuCtxSynchronize);
    assert_ptr_equal(sl_fe_export_address("cuCtxGetFlags"), (const void *)cuCtxGetFlags);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_is_sorted_and_unique),
        cmocka_unit_test(table_holds_every_exported_name),
        cmocka_unit_test(refused_calls_answer_not_supported),
        cmocka_unit_test(hand_and_generated_definitions_are_exported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
