/* What the other files of the double use of device.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_DEVICE_H
#define SLUICE_DOUBLE_DEVICE_H

#include "core.h"

CUresult check_dev(CUdevice dev);

/* A plausible sm_90 part with 4 SMs; anything not listed is 0 (feature absent). */
int attribute(CUdevice_attribute a);

#endif
