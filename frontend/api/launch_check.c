/* Launch configurations refused at the call, as the driver refuses them (launch_check.h). Only
 * what is certain from the device attributes the session reported (SessionAccept.devices, kept
 * in the frontend): a launch these checks pass goes to the backend, whose driver decides. With
 * several devices a limit is the largest of them (the launch's device is the stream's). */
#define __CUDA_API_VERSION_INTERNAL 1
#include "api/launch_check.h"

#include <stdint.h>

#include "call/connection.h"

/* The largest value of attribute a over the session's devices; 0 when none reports it. */
static uint64_t limit_of(CUdevice_attribute a)
{
    uint64_t best = 0;
    int n = sl_fe_session_device_count();
    for (int i = 0; i < n; i++) {
        const struct sl_fe_device *d = sl_fe_session_device(i);
        if (d && (size_t)a < d->nattrs && d->attrs[a] > 0 && (uint64_t)d->attrs[a] > best)
            best = (uint64_t)d->attrs[a];
    }
    return best;
}

static int over(uint64_t v, CUdevice_attribute a)
{
    uint64_t lim = limit_of(a);
    return lim && v > lim;
}

CUresult sl_fe_launch_check(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                            unsigned bz, unsigned shmem)
{
    if (!gx || !gy || !gz || !bx || !by || !bz)
        return CUDA_ERROR_INVALID_VALUE;
    if (over(bx, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X) ||
        over(by, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y) ||
        over(bz, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z) ||
        over((uint64_t)bx * by * bz, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK))
        return CUDA_ERROR_INVALID_VALUE;
    if (over(gx, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X) ||
        over(gy, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y) ||
        over(gz, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z))
        return CUDA_ERROR_INVALID_VALUE;
    if (over(shmem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* The highest CUlaunchAttributeID cuda.h names (CUDA 13.0). */
#define LAST_ATTRIBUTE CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING

CUresult sl_fe_launch_check_config(const CUlaunchConfig *c)
{
    CUresult rc = sl_fe_launch_check(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX,
                                     c->blockDimY, c->blockDimZ, c->sharedMemBytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    for (unsigned i = 0; i < c->numAttrs; i++) {
        const CUlaunchAttribute *a = &c->attrs[i];
        /* the driver refuses an id it does not know (measured: 1 for id 9999); the backend
         * refuses every id it does not list (backend/api/launch.c), all of them named here */
        if ((unsigned)a->id > (unsigned)LAST_ATTRIBUTE)
            return CUDA_ERROR_INVALID_VALUE;
        if (a->id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            continue;
        unsigned x = a->value.clusterDim.x, y = a->value.clusterDim.y, z = a->value.clusterDim.z;
        if (!x || !y || !z || c->gridDimX % x || c->gridDimY % y || c->gridDimZ % z)
            return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
    return CUDA_SUCCESS;
}
