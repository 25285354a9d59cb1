/* Export name -> address (exports.c), over the export table the library build generates
 * (proto/gen/gen_frontend.py: frontend_exports.c). */
#ifndef SLUICE_FRONTEND_EXPORTS_H
#define SLUICE_FRONTEND_EXPORTS_H

#include <stddef.h>

/* The address our library exports under name, NULL if it exports no such name. */
const void *sl_fe_export_address(const char *name);

/* Names exported beside the generated table (not calls of cuda.h: cudaProfiler.h's
 * cuProfilerInitialize/Start/Stop, answered locally); NULL for any other name. */
const void *sl_fe_local_export_address(const char *name);

/* One exported entry point of libcuda.so.1: its exact export name and its address. */
struct sl_fe_export {
    const char *name;
    const void *fn;
};

/* The library's export table, sorted by strcmp() of name (generated with the library, not
 * defined here; the unit tests of exports/ build their own: tests/unit/frontend/fe_test_hooks.c).
 * Sets *count. An unsorted table is detected once and searched linearly. */
const struct sl_fe_export *sl_fe_export_table(size_t *count);

#endif
