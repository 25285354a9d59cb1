/* Launch configurations the driver refuses at the call (launch_check.c), refused here before
 * the launch is queued: a queued launch's error would only come at the next synchronizing call. */
#ifndef SLUICE_FRONTEND_API_LAUNCH_CHECK_H
#define SLUICE_FRONTEND_API_LAUNCH_CHECK_H

#include <cuda.h>

/* Grid and block dimensions and dynamic shared memory against the session's devices' limits:
 * a zero dimension, a block or grid beyond every device's MAX_BLOCK_DIM / MAX_GRID_DIM /
 * MAX_THREADS_PER_BLOCK, dynamic shared memory beyond every device's opt-in maximum per block:
 * CUDA_ERROR_INVALID_VALUE. A limit a device reports as 0 is not checked. */
CUresult sl_fe_launch_check(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                            unsigned bz, unsigned shmem);

/* cuLaunchKernelEx's configuration (attrs present when numAttrs is not 0): the dimensions as
 * above, then each attribute: an id beyond those cuda.h names: CUDA_ERROR_INVALID_VALUE; a
 * cluster dimension of 0, or one the grid is not a multiple of: CUDA_ERROR_INVALID_CLUSTER_SIZE. */
CUresult sl_fe_launch_check_config(const CUlaunchConfig *config);

#endif
