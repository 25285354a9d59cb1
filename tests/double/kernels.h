/* What the kernels' host implementations (kernels.c) give the other files beyond double.h.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_KERNELS_H
#define SLUICE_DOUBLE_KERNELS_H

#include "double.h"

/* Device printf: writes straight to fd 1 (the backend captures fd 1; no stdio buffering). */
void dbl_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
