/* The cuGetProcAddress resolver against what driver 580 answered (export-tables-probe-data.txt
 * sections C and D). argv[1]: data/procaddr_cudart13.txt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fe_test_hooks.h"
#include "exports/procaddr.h"
#include "exports/procaddr_table.h"

static const char *g_vectors;
static void *const SENTINEL = (void *)(uintptr_t)0x5e5e5e5e;

static int setup(void **state)
{
    (void)state;
    fe_test_reset();
    fe_test_exports_build(NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fe_test_exports_free();
    return 0;
}

/* v2 then v1 for one request; returns the export name both agree on, or NULL. */
static const char *gpa_both(const char *sym, int ver, cuuint64_t flags, int *status)
{
    void *pfn = SENTINEL;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
    assert_int_equal(sl_fe_cuGetProcAddress_v2(sym, &pfn, ver, flags, &st), CUDA_SUCCESS);
    *status = (int)st;
    void *pfn1 = SENTINEL;
    CUresult rc1 = sl_fe_cuGetProcAddress(sym, &pfn1, ver, flags);
    if (st == CU_GET_PROC_ADDRESS_SUCCESS) {
        assert_int_equal(rc1, CUDA_SUCCESS);
        assert_ptr_equal(pfn1, pfn);
        assert_non_null(pfn);
        return (const char *)pfn;
    }
    assert_null(pfn);
    assert_int_equal(rc1, CUDA_ERROR_NOT_FOUND);
    assert_ptr_equal(pfn1, SENTINEL);
    return NULL;
}

static void test_cudart13_requests(void **state)
{
    (void)state;
    FILE *f = fopen(g_vectors, "r");
    if (!f)
        fail_msg("cannot open %s", g_vectors);
    char line[512];
    int n = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        char sym[128], expect[128];
        int ver, flags;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (sscanf(line, "%127s %d %d -> %127s", sym, &ver, &flags, expect) != 4)
            fail_msg("bad vector line: %s", line);
        const char *s = strcmp(sym, "\"\"") == 0 ? "" : sym;
        int status = -1;
        const char *got = gpa_both(s, ver, (cuuint64_t)flags, &status);
        int ok = strcmp(expect, "NULL") == 0 ? (got == NULL && status == 1)
                                             : (got != NULL && strcmp(got, expect) == 0);
        if (!ok) {
            print_error("%s @%d flags %d: expected %s, got %s (status %d)\n", s, ver, flags, expect,
                        got ? got : "NULL", status);
            bad++;
        }
        n++;
    }
    fclose(f);
    assert_int_equal(n, 440);
    assert_int_equal(bad, 0);
}

/* Section D, one by one. */
static void expect_found(const char *sym, int ver, cuuint64_t flags, const char *name)
{
    int status = -1;
    const char *got = gpa_both(sym, ver, flags, &status);
    assert_int_equal(status, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_string_equal(got, name);
}

static void expect_status(const char *sym, int ver, cuuint64_t flags, int want)
{
    int status = -1;
    assert_null(gpa_both(sym, ver, flags, &status));
    assert_int_equal(status, want);
}

static void expect_invalid(const char *sym, int ver, cuuint64_t flags)
{
    void *pfn = SENTINEL;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)77;
    assert_int_equal(sl_fe_cuGetProcAddress_v2(sym, &pfn, ver, flags, &st),
                     CUDA_ERROR_INVALID_VALUE);
    assert_ptr_equal(pfn, SENTINEL);
    assert_int_equal(st, 77);
    assert_int_equal(sl_fe_cuGetProcAddress(sym, &pfn, ver, flags), CUDA_ERROR_INVALID_VALUE);
    assert_ptr_equal(pfn, SENTINEL);
}

static void test_direct_unknown_names(void **state)
{
    (void)state;
    expect_status("cuNoSuchSymbol", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    expect_status("", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    /* base names only */
    expect_status("cuMemAlloc_v2", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    expect_status("cuMemcpyAsync_ptsz", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

static void test_direct_versions(void **state)
{
    (void)state;
    expect_found("cuMemAlloc", 13000, 0, "cuMemAlloc_v2");
    expect_found("cuMemAlloc", 3010, 0, "cuMemAlloc");
    expect_status("cuMemAlloc", 1000, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_status("cuMemAlloc", 0, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_status("cuMemAlloc", -5, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_found("cuCtxCreate", 3020, 0, "cuCtxCreate_v2");
    expect_found("cuCtxCreate", 12040, 0, "cuCtxCreate_v3");
    expect_found("cuCtxCreate", 13000, 0, "cuCtxCreate_v4");
    expect_found("cuCtxSynchronize", 12090, 0, "cuCtxSynchronize");
    expect_found("cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2");
    expect_found("cuStreamGetCaptureInfo", 13000, 0, "cuStreamGetCaptureInfo_v3");
    expect_found("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
    expect_found("cuGetProcAddress", 13000, 0, "cuGetProcAddress_v2");
    expect_found("cuGetExportTable", 13000, 0, "cuGetExportTable");
    expect_found("cuGetExportTable", 3000, 0, "cuGetExportTable");
    expect_status("cuGetExportTable", 0, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_status("cuGetExportTable", 2999, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_found("cuDriverGetVersion", 13000, 0, "cuDriverGetVersion");
    expect_found("cuDevicePrimaryCtxRelease", 7000, 0, "cuDevicePrimaryCtxRelease");
}

static void test_direct_flags(void **state)
{
    (void)state;
    expect_found("cuMemcpyAsync", 13000, 0, "cuMemcpyAsync");
    expect_found("cuMemcpyAsync", 13000, 1, "cuMemcpyAsync");
    expect_found("cuMemcpyAsync", 13000, 2, "cuMemcpyAsync_ptsz");
    expect_found("cuMemcpyAsync", 13000, 3, "cuMemcpyAsync_ptsz");
    expect_found("cuMemcpyHtoD", 13000, 2, "cuMemcpyHtoD_v2_ptds");
    expect_found("cuMemAlloc", 13000, 2, "cuMemAlloc_v2");
    expect_found("cuLaunchKernel", 13000, 2, "cuLaunchKernel_ptsz");
    expect_invalid("cuMemcpyAsync", 13000, 4);
    expect_invalid("cuMemcpyAsync", 13000, 8);
    expect_invalid("cuMemcpyAsync", 13000, (cuuint64_t)1 << 40);
}

static void test_direct_invalid(void **state)
{
    (void)state;
    /* cudaVersion above the driver's: 1, status not written */
    expect_invalid("cuMemAlloc", 13010, 0);
    expect_invalid("cuMemAlloc", 14000, 0);
    expect_invalid("cuNoSuchSymbol", 13010, 0);
    void *pfn = SENTINEL;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)77;
    assert_int_equal(sl_fe_cuGetProcAddress_v2(NULL, &pfn, 13000, 0, &st),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(sl_fe_cuGetProcAddress_v2("cuMemAlloc", NULL, 13000, 0, &st),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(st, 77);
    assert_int_equal(sl_fe_cuGetProcAddress(NULL, &pfn, 13000, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(sl_fe_cuGetProcAddress("cuMemAlloc", NULL, 13000, 0),
                     CUDA_ERROR_INVALID_VALUE);
    assert_ptr_equal(pfn, SENTINEL);
    /* the status pointer is optional */
    assert_int_equal(sl_fe_cuGetProcAddress_v2("cuMemAlloc", &pfn, 13000, 0, NULL), CUDA_SUCCESS);
    assert_string_equal((const char *)pfn, "cuMemAlloc_v2");
    assert_int_equal(sl_fe_cuGetProcAddress_v2("cuNoSuch", &pfn, 13000, 0, NULL), CUDA_SUCCESS);
    assert_null(pfn);
}

static void test_follows_reported_driver_version(void **state)
{
    (void)state;
    fe_test_set_driver_version(12080);
    expect_invalid("cuCtxSynchronize", 13000, 0);
    expect_found("cuCtxSynchronize", 12080, 0, "cuCtxSynchronize");
    fe_test_set_driver_version(13010);
    expect_found("cuCtxSynchronize", 13010, 0, "cuCtxSynchronize_v2");
}

static void test_unexported_is_not_found(void **state)
{
    (void)state;
    /* A call the library does not export is SYMBOL_NOT_FOUND, never a stub. */
    fe_test_exports_build("cuMemcpyHtoD_v2_ptds");
    expect_status("cuMemcpyHtoD", 13000, 2, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    expect_found("cuMemcpyHtoD", 13000, 0, "cuMemcpyHtoD_v2");
}

static void test_per_thread_before_it_existed(void **state)
{
    (void)state;
    /* The _ptds entry appeared at 7000 (PFN_cuMemcpyHtoD_v7000_ptds); before it, a
     * per-thread request is VERSION_NOT_SUFFICIENT (580, procaddr_probe), also for an ABI
     * that never had one (cuMemcpy2D v1 @2000). Calls without per-thread entries: plain. */
    expect_status("cuMemcpyHtoD", 6990, 2, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_status("cuMemcpyHtoD", 3020, 2, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_status("cuMemcpy2D", 2000, 2, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_found("cuMemcpyHtoD", 6990, 0, "cuMemcpyHtoD_v2");
    expect_found("cuMemAlloc", 3020, 2, "cuMemAlloc_v2");
    expect_found("cuMemcpyHtoD", 7000, 2, "cuMemcpyHtoD_v2_ptds");
    /* each ABI has its own per-thread entry */
    expect_found("cuStreamGetCaptureInfo", 10010, 2, "cuStreamGetCaptureInfo_ptsz");
    expect_found("cuStreamGetCaptureInfo", 12030, 2, "cuStreamGetCaptureInfo_v3_ptsz");
}

static void test_table_sorted_and_sane(void **state)
{
    (void)state;
    size_t n = 0;
    const struct sl_fe_proc_entry *t = sl_fe_proc_table(&n);
    assert_true(n > 400);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            assert_true(strcmp(t[i - 1].name, t[i].name) < 0);
        assert_true(t[i].n_abis >= 1);
        for (unsigned j = 1; j < t[i].n_abis; j++)
            assert_true(t[i].abis[j - 1].since < t[i].abis[j].since);
        for (unsigned j = 0; j < t[i].n_abis; j++)
            assert_true(strncmp(t[i].abis[j].export_name, t[i].name, strlen(t[i].name)) == 0);
    }
    const char *name = NULL;
    assert_int_equal(sl_fe_procaddr_lookup(NULL, 13000, 0, &name), SL_FE_PROC_SYMBOL_NOT_FOUND);
    assert_int_equal(sl_fe_procaddr_lookup("cuInit", 13000, 0, NULL), SL_FE_PROC_SYMBOL_NOT_FOUND);
    /* declared in the headers, never resolved by the Linux driver */
    assert_int_equal(sl_fe_procaddr_lookup("cuWGLGetDevice", 13000, 0, &name),
                     SL_FE_PROC_SYMBOL_NOT_FOUND);
    assert_int_equal(sl_fe_procaddr_lookup("cuEventCreateFromEGLSync", 13000, 0, &name),
                     SL_FE_PROC_SYMBOL_NOT_FOUND);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <procaddr_cudart13.txt>\n", argv[0]);
        return 2;
    }
    g_vectors = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cudart13_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_direct_unknown_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_direct_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_direct_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_direct_invalid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follows_reported_driver_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unexported_is_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_per_thread_before_it_existed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_table_sorted_and_sane, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
