/* What the other files of the double use of launch.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_LAUNCH_H
#define SLUICE_DOUBLE_LAUNCH_H

#include "core.h"

CUresult launch(void *h, const unsigned grid[3], const unsigned block[3], size_t shared, CUstream s,
                void **params, void **extra);

#endif
