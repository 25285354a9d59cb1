/* What the other files of the double use of launch.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_LAUNCH_H
#define SLUICE_DOUBLE_LAUNCH_H

#include "core.h"

CUresult launch(void *h, const unsigned grid[3], const unsigned block[3], size_t shared, CUstream s,
                void **params, void **extra);

/* A device range as a host pointer, or NULL (and launch->status = CUDA_ERROR_ILLEGAL_ADDRESS)
 * when [ptr, ptr + len) is not inside one live allocation. */
void *dbl_dev(struct dbl_launch *launch, CUdeviceptr ptr, size_t len);
/* The launch's image's copy of global `name` (never NULL for a name of dbl_globals). */
void *dbl_global_ptr(struct dbl_launch *launch, const char *name);

#endif
