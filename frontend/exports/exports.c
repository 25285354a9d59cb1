#include "exports/exports.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "sluice/log.h"

/* frontend/api/profiler.c (runtime objects); weak so that the core links without them (tests).
 * Declared here without cudaProfiler.h (whose cuProfilerInitialize is deprecated); only the
 * addresses are taken. */
extern CUresult cuProfilerInitialize(const char *, const char *, int) __attribute__((weak));
extern CUresult cuProfilerStart(void) __attribute__((weak));
extern CUresult cuProfilerStop(void) __attribute__((weak));

const void *sl_fe_local_export_address(const char *name)
{
    const struct {
        const char *name;
        const void *fn;
    } local[] = {
        {"cuProfilerInitialize", (const void *)cuProfilerInitialize},
        {"cuProfilerStart", (const void *)cuProfilerStart},
        {"cuProfilerStop", (const void *)cuProfilerStop},
    };
    for (size_t i = 0; i < sizeof local / sizeof *local; i++)
        if (strcmp(local[i].name, name) == 0)
            return local[i].fn; /* NULL where profiler.c is not linked */
    return NULL;
}

static pthread_once_t g_check_once = PTHREAD_ONCE_INIT;
static int g_sorted;

static void check_sorted(void)
{
    size_t n = 0;
    const struct sl_fe_export *t = sl_fe_export_table(&n);
    g_sorted = 1;
    for (size_t i = 1; t && i < n; i++) {
        if (!t[i - 1].name || !t[i].name || strcmp(t[i - 1].name, t[i].name) >= 0) {
            sl_log(SL_LOG_ERR, "frontend", "export table not sorted at %zu; searching linearly", i);
            g_sorted = 0;
            return;
        }
    }
}

static int cmp_export(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const struct sl_fe_export *)elem)->name);
}

const void *sl_fe_export_address(const char *name)
{
    if (!name)
        return NULL;
    pthread_once(&g_check_once, check_sorted);
    size_t n = 0;
    const struct sl_fe_export *t = sl_fe_export_table(&n);
    if (!t || n == 0)
        return sl_fe_local_export_address(name);
    if (g_sorted) {
        const struct sl_fe_export *e = bsearch(name, t, n, sizeof *t, cmp_export);
        return e ? e->fn : sl_fe_local_export_address(name);
    }
    for (size_t i = 0; i < n; i++) {
        if (t[i].name && strcmp(t[i].name, name) == 0)
            return t[i].fn;
    }
    return sl_fe_local_export_address(name);
}
