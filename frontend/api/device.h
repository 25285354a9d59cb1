/* Devices (device.c): cuInit, cuDriverGetVersion and the device queries, answered from
 * SessionAccept. */
#ifndef SLUICE_FRONTEND_API_DEVICE_H
#define SLUICE_FRONTEND_API_DEVICE_H

#include <cuda.h>

/* Asked by exports/ (cuGetProcAddress, cudart's private tables) too: each may be called before
 * cuInit and from any thread, and never calls back into cuGetProcAddress or cuGetExportTable.
 * The unit tests of exports/ link doubles of them (tests/unit/frontend/fe_test_hooks.c). */

/* The version our cuDriverGetVersion reports (>= the highest cudaVersion a guest passes,
 * 13000 for cudart 13.0). cuGetProcAddress refuses cudaVersion above it. */
int sl_fe_reported_driver_version(void);

/* Whether cuInit has succeeded in this process (not merely a session opened). */
int sl_fe_init_done(void);
/* What cuInit's success records (the unit tests call it where they stand in for cuInit). */
void sl_fe_init_mark_done(void);

/* Device facts as our cuDeviceGetCount, cuDeviceGetUuid and cuDeviceGetAttribute report them
 * (the integrity hash covers them, so they must be exactly those values). */
CUresult sl_fe_device_count(int *count);
CUresult sl_fe_device_uuid(CUdevice dev, CUuuid *uuid);
CUresult sl_fe_device_attribute(CUdevice dev, CUdevice_attribute attr, int *value);

#endif
