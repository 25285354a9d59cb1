/* Export name -> address, over the table the library build supplies (hooks.h). */
#ifndef SLUICE_FRONTEND_EXPORTS_H
#define SLUICE_FRONTEND_EXPORTS_H

/* The address our library exports under name, NULL if it exports no such name. */
const void *sl_fe_export_address(const char *name);

/* Names exported beside the generated table (not calls of cuda.h: cudaProfiler.h's
 * cuProfilerInitialize/Start/Stop, answered locally); NULL for any other name. */
const void *sl_fe_local_export_address(const char *name);

#endif
