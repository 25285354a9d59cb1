/* Test doubles of what exports/ asks the rest of the frontend (api/device.h, api/context.h,
 * api/module.h, call/contexts.h) and of the generated export table (exports/exports.h),
 * configurable per test. */
#ifndef SLUICE_TEST_FE_TEST_HOOKS_H
#define SLUICE_TEST_FE_TEST_HOOKS_H

#include <stddef.h>

#include <cuda.h>

#include "exports/integrity.h"

/* Back to defaults: driver 13000, no current context, one device, every export present. */
void fe_test_reset(void);
void fe_test_set_driver_version(int version);
void fe_test_set_current(CUcontext ctx);
/* Devices the count/uuid/attribute hooks report (copied; at most 8). */
void fe_test_set_devices(const struct sl_fe_integrity_device *devs, int count);
/* Makes sl_fe_device_attribute fail with rc. */
void fe_test_fail_device_attribute(CUresult rc);
/* The export table holds every export name of the generated resolver table, each at a unique
 * fake address: the address of its own name string, so (const char *)fn is the name. omit, if
 * not NULL, is left out. */
void fe_test_exports_build(const char *omit);
void fe_test_exports_free(void);
/* The image the last sl_fe_module_load_image got, and how many calls. */
const void *fe_test_last_image(void);
int fe_test_module_loads(void);
/* The fake primary context handle of dev and the module handle the loader returns. */
CUcontext fe_test_primary_handle(CUdevice dev);
#define FE_TEST_MODULE ((CUmodule)(uintptr_t)0x4d0d)
/* The functions sl_fe_module_functions lists for FE_TEST_MODULE (any other module: invalid
 * handle): count of them, fe_test_module_function(0..count-1), or the error rc. */
void fe_test_set_module_functions(unsigned count, CUresult rc);
#define fe_test_module_function(i) ((CUfunction)(uintptr_t)(0xf000 + (i)))
/* sl_fe_function_name names fe_test_module_function(i) "k<i>" (i < 4). sl_fe_stream_id gives
 * a created stream its handle as id, a context's stream (ctx << 4 | handle), 0xbad is an
 * invalid handle; each call counts in *calls if set (NULL: not counted). */
void fe_test_stream_ids(int *calls);

#endif
