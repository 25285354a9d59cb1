/* Occupancy calls. MaxActiveBlocks(WithFlags) and MaxPotentialBlockSize(WithFlags) without a
 * callback are remote (the backend asks its driver; a kernel id is accepted as a function).
 * With a blockSizeToDynamicSMemSize callback (a guest function) MaxPotentialBlockSize is
 * computed here the way the driver does: for every block size from the limit down, in steps of
 * the warp size, the callback gives the dynamic shared memory and the remote MaxActiveBlocks
 * the blocks per SM; the block size with the most resident threads wins. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdint.h>

#include "api/device.h"
#include "call/contexts.h"
#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

static CUresult max_active(int *numBlocks, CUfunction func, int blockSize, size_t smem,
                           unsigned flags, int with_flags)
{
    if (!numBlocks)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuOccupancyMaxActiveBlocksPerMultiprocessorRequest rq =
        SLUICE__CUDA__CU_OCCUPANCY_MAX_ACTIVE_BLOCKS_PER_MULTIPROCESSOR_REQUEST__INIT;
    Sluice__Cuda__CuOccupancyMaxActiveBlocksPerMultiprocessorWithFlagsRequest rqf =
        SLUICE__CUDA__CU_OCCUPANCY_MAX_ACTIVE_BLOCKS_PER_MULTIPROCESSOR_WITH_FLAGS_REQUEST__INIT;
    if (with_flags) {
        rqf.func = (uint64_t)(uintptr_t)func;
        rqf.block_size = blockSize;
        rqf.dynamic_smem_size = smem;
        rqf.flags = flags;
        SL_FE_SET(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, &call, &rqf);
    } else {
        rq.func = (uint64_t)(uintptr_t)func;
        rq.block_size = blockSize;
        rq.dynamic_smem_size = smem;
        SL_FE_SET(cuOccupancyMaxActiveBlocksPerMultiprocessor, &call, &rq);
    }
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            if (with_flags &&
                SL_FE_REPLY(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, rep))
                *numBlocks =
                    rep->cu_occupancy_max_active_blocks_per_multiprocessor_with_flags->num_blocks;
            else if (!with_flags && SL_FE_REPLY(cuOccupancyMaxActiveBlocksPerMultiprocessor, rep))
                *numBlocks = rep->cu_occupancy_max_active_blocks_per_multiprocessor->num_blocks;
            else
                rc = CUDA_ERROR_UNKNOWN;
        }
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
                                                     size_t dynamicSMemSize)
{
    return max_active(numBlocks, func, blockSize, dynamicSMemSize, 0, 0);
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
                                                              int blockSize, size_t dynamicSMemSize,
                                                              unsigned int flags)
{
    return max_active(numBlocks, func, blockSize, dynamicSMemSize, flags, 1);
}

static CUresult potential_remote(int *minGridSize, int *blockSize, CUfunction func, size_t smem,
                                 int limit, unsigned flags, int with_flags)
{
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuOccupancyMaxPotentialBlockSizeRequest rq =
        SLUICE__CUDA__CU_OCCUPANCY_MAX_POTENTIAL_BLOCK_SIZE_REQUEST__INIT;
    Sluice__Cuda__CuOccupancyMaxPotentialBlockSizeWithFlagsRequest rqf =
        SLUICE__CUDA__CU_OCCUPANCY_MAX_POTENTIAL_BLOCK_SIZE_WITH_FLAGS_REQUEST__INIT;
    if (with_flags) {
        rqf.func = (uint64_t)(uintptr_t)func;
        rqf.dynamic_smem_size = smem;
        rqf.block_size_limit = limit;
        rqf.flags = flags;
        SL_FE_SET(cuOccupancyMaxPotentialBlockSizeWithFlags, &call, &rqf);
    } else {
        rq.func = (uint64_t)(uintptr_t)func;
        rq.dynamic_smem_size = smem;
        rq.block_size_limit = limit;
        SL_FE_SET(cuOccupancyMaxPotentialBlockSize, &call, &rq);
    }
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            if (with_flags && SL_FE_REPLY(cuOccupancyMaxPotentialBlockSizeWithFlags, rep)) {
                *minGridSize = rep->cu_occupancy_max_potential_block_size_with_flags->min_grid_size;
                *blockSize = rep->cu_occupancy_max_potential_block_size_with_flags->block_size;
            } else if (!with_flags && SL_FE_REPLY(cuOccupancyMaxPotentialBlockSize, rep)) {
                *minGridSize = rep->cu_occupancy_max_potential_block_size->min_grid_size;
                *blockSize = rep->cu_occupancy_max_potential_block_size->block_size;
            } else {
                rc = CUDA_ERROR_UNKNOWN;
            }
        }
        sl_fe_reply_free(rep);
    }
    return rc;
}

/* The device of the current context (occupancy is asked in a context). */
static CUresult current_device(CUdevice *dev)
{
    CUcontext ctx = sl_fe_current_context();
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    int d = sl_fe_ctx_device(ctx);
    if (d < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = d;
    return CUDA_SUCCESS;
}

static CUresult potential(int *minGridSize, int *blockSize, CUfunction func, CUoccupancyB2DSize cb,
                          size_t smem, int limit, unsigned flags, int with_flags)
{
    if (!minGridSize || !blockSize || limit < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!cb)
        return potential_remote(minGridSize, blockSize, func, smem, limit, flags, with_flags);
    CUdevice dev;
    CUresult rc = current_device(&dev);
    int dev_max = 0, warp = 0, sms = 0, sm_threads = 0, fn_max = 0;
    if (rc == CUDA_SUCCESS)
        rc = sl_fe_device_attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &dev_max);
    if (rc == CUDA_SUCCESS)
        rc = sl_fe_device_attribute(dev, CU_DEVICE_ATTRIBUTE_WARP_SIZE, &warp);
    if (rc == CUDA_SUCCESS)
        rc = sl_fe_device_attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &sms);
    if (rc == CUDA_SUCCESS)
        rc = sl_fe_device_attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
                                    &sm_threads);
    if (rc == CUDA_SUCCESS)
        rc = cuFuncGetAttribute(&fn_max, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, func);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (warp <= 0 || dev_max <= 0 || fn_max <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    int max_threads = dev_max < fn_max ? dev_max : fn_max;
    if (limit == 0 || limit > max_threads)
        limit = max_threads;
    int aligned = (limit + warp - 1) / warp * warp;
    int best_block = 0, best_blocks = 0, best_threads = 0;
    for (int try_aligned = aligned; try_aligned > 0; try_aligned -= warp) {
        int b = try_aligned < limit ? try_aligned : limit;
        int n = 0;
        rc = max_active(&n, func, b, cb(b), flags, with_flags);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (b * n > best_threads) {
            best_block = b;
            best_blocks = n;
            best_threads = b * n;
        }
        if (best_threads == sm_threads)
            break;
    }
    *minGridSize = best_blocks * sms;
    *blockSize = best_block;
    return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                          CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                          size_t dynamicSMemSize, int blockSizeLimit)
{
    return potential(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                     blockSizeLimit, 0, 0);
}

CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize,
                                                   CUfunction func,
                                                   CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                   size_t dynamicSMemSize, int blockSizeLimit,
                                                   unsigned int flags)
{
    return potential(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                     blockSizeLimit, flags, 1);
}

/* Cluster occupancy: the CUlaunchConfig pod with attrs = NULL, the attributes as bulk (as
 * cuLaunchKernelEx sends them); hStream is a stream id already. */
static CUresult cluster_call(int *out, CUfunction func, const CUlaunchConfig *config, int active)
{
    if (!out || !config || (config->numAttrs && !config->attrs) || config->numAttrs > 64)
        return CUDA_ERROR_INVALID_VALUE;
    CUlaunchConfig cfg = *config;
    cfg.attrs = NULL;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuOccupancyMaxPotentialClusterSizeRequest sq =
        SLUICE__CUDA__CU_OCCUPANCY_MAX_POTENTIAL_CLUSTER_SIZE_REQUEST__INIT;
    Sluice__Cuda__CuOccupancyMaxActiveClustersRequest aq =
        SLUICE__CUDA__CU_OCCUPANCY_MAX_ACTIVE_CLUSTERS_REQUEST__INIT;
    if (active) {
        aq.func = (uint64_t)(uintptr_t)func;
        aq.config.data = (uint8_t *)&cfg;
        aq.config.len = sizeof cfg;
        SL_FE_SET(cuOccupancyMaxActiveClusters, &call, &aq);
    } else {
        sq.func = (uint64_t)(uintptr_t)func;
        sq.config.data = (uint8_t *)&cfg;
        sq.config.len = sizeof cfg;
        SL_FE_SET(cuOccupancyMaxPotentialClusterSize, &call, &sq);
    }
    struct iovec iov = {config->attrs, config->numAttrs * sizeof(CUlaunchAttribute)};
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call_bulk(&call, &iov, config->numAttrs ? 1 : 0, NULL, 0, NULL, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            if (active && SL_FE_REPLY(cuOccupancyMaxActiveClusters, rep))
                *out = rep->cu_occupancy_max_active_clusters->num_clusters;
            else if (!active && SL_FE_REPLY(cuOccupancyMaxPotentialClusterSize, rep))
                *out = rep->cu_occupancy_max_potential_cluster_size->cluster_size;
            else
                rc = CUDA_ERROR_UNKNOWN;
        }
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func,
                                            const CUlaunchConfig *config)
{
    return cluster_call(clusterSize, func, config, 0);
}

CUresult cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func,
                                      const CUlaunchConfig *config)
{
    return cluster_call(numClusters, func, config, 1);
}
