/* Run on the GPU machine (not a unit test): compares the generated resolver table with the
 * REAL driver's cuGetProcAddress_v2 for every name, at each ABI's first version, just below it,
 * at the per-thread entry's first version and just below it, at 13000, with flags 0 and 2.
 * A match: both not found with the same status, or the real pfn == dlsym(real, our name).
 *
 *   build-fe/tests/unit/frontend/procaddr_probe [path to the real libcuda.so.1]
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>

#include "api/device.h"
#include "exports/exports.h"
#include "exports/procaddr.h"
#include "exports/procaddr_table.h"

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t,
                            CUdriverProcAddressQueryResult *);

/* procaddr.o needs these hooks; the probe only uses the table lookup. */
int sl_fe_reported_driver_version(void)
{
    return 13000;
}

const struct sl_fe_export *sl_fe_export_table(size_t *count)
{
    *count = 0;
    return NULL;
}

static void *g_lib;
static gpa2_fn g_real;
static int g_checked, g_bad;

static const char *name_of(void *p)
{
    Dl_info info;
    return p && dladdr(p, &info) && info.dli_sname ? info.dli_sname : "?";
}

static void check(const char *sym, int ver, int flags)
{
    if (ver < 0 || ver > 13000)
        return;
    void *pfn = NULL;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
    CUresult rc = g_real(sym, &pfn, ver, (cuuint64_t)flags, &st);
    const char *ours = NULL;
    enum sl_fe_proc_result r = sl_fe_procaddr_lookup(sym, ver, flags & 2, &ours);
    int ok;
    if (rc != CUDA_SUCCESS)
        ok = 0;
    else if (r != SL_FE_PROC_FOUND)
        ok = pfn == NULL && (int)st == (int)r;
    else
        ok = pfn != NULL && pfn == dlsym(g_lib, ours);
    g_checked++;
    if (!ok) {
        g_bad++;
        printf("DIFF %s @%d flags %d: real rc=%d status=%d %s, ours %s (result %d)\n", sym, ver,
               flags, (int)rc, (int)st, name_of(pfn), ours ? ours : "-", (int)r);
    }
}

int main(int argc, char **argv)
{
    g_lib = dlopen(argc > 1 ? argv[1] : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!g_lib) {
        fprintf(stderr, "procaddr_probe: %s\n", dlerror());
        return 2;
    }
    g_real = (gpa2_fn)dlsym(g_lib, "cuGetProcAddress_v2");
    if (!g_real)
        return 2;
    size_t n = 0;
    const struct sl_fe_proc_entry *t = sl_fe_proc_table(&n);
    for (size_t i = 0; i < n; i++) {
        for (int flags = 0; flags <= 2; flags += 2) {
            check(t[i].name, 13000, flags);
            check(t[i].name, 0, flags);
            for (unsigned j = 0; j < t[i].n_abis; j++) {
                const struct sl_fe_proc_abi *a = &t[i].abis[j];
                check(t[i].name, a->since, flags);
                check(t[i].name, a->since - 10, flags);
                check(t[i].name, a->since - 1, flags);
                if (a->pt_export_name) {
                    check(t[i].name, a->pt_since, flags);
                    check(t[i].name, a->pt_since - 10, flags);
                }
            }
        }
    }
    printf("%d requests, %d differ\n", g_checked, g_bad);
    return g_bad ? 1 : 0;
}
