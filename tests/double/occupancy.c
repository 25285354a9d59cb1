/* Occupancy queries on a toy model of the device's SMs.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "core.h"

/* The double's occupancy model: 2048 threads, 32 blocks and 228 KiB of shared memory per SM. */
#define DBL_SM_THREADS 2048

#define DBL_SM_BLOCKS 32

#define DBL_SM_SHARED (228 * 1024)

static CUresult occupancy(int *numBlocks, CUfunction func, int blockSize, size_t smem)
{
    dbl_lock();
    CUresult rc = obj_get(func, K_FUNC) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    dbl_unlock();
    if (rc)
        return rc;
    if (!numBlocks || blockSize <= 0 || blockSize > 1024 || smem > DBL_SM_SHARED)
        return CUDA_ERROR_INVALID_VALUE;
    int n = DBL_SM_THREADS / blockSize;
    if (smem && (int)(DBL_SM_SHARED / smem) < n)
        n = (int)(DBL_SM_SHARED / smem);
    *numBlocks = n > DBL_SM_BLOCKS ? DBL_SM_BLOCKS : n;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                            int blockSize, size_t dynamicSMemSize)
{
    return occupancy(numBlocks, func, blockSize, dynamicSMemSize);
}

EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks,
                                                                     CUfunction func, int blockSize,
                                                                     size_t dynamicSMemSize,
                                                                     unsigned int flags)
{
    if (flags & ~(unsigned)CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)
        return CUDA_ERROR_INVALID_VALUE;
    return occupancy(numBlocks, func, blockSize, dynamicSMemSize);
}

/* Largest block size (multiple of 32 up to the limit) with the most resident threads. */
static CUresult potential(int *minGridSize, int *blockSize, CUfunction func, CUoccupancyB2DSize cb,
                          size_t smem, int limit)
{
    if (!minGridSize || !blockSize || limit < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (limit == 0 || limit > 1024)
        limit = 1024;
    int best = 0, best_n = 0;
    for (int b = (limit + 31) / 32 * 32; b > 0; b -= 32) {
        int bs = b < limit ? b : limit, n = 0;
        CUresult rc = occupancy(&n, func, bs, cb ? cb(bs) : smem);
        if (rc)
            return rc;
        if (bs * n > best * best_n) {
            best = bs;
            best_n = n;
        }
    }
    *minGridSize = best_n * 4; /* 4 SMs */
    *blockSize = best;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                                 CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                 size_t dynamicSMemSize, int blockSizeLimit)
{
    return potential(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                     blockSizeLimit);
}

EXPORT CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(
    int *minGridSize, int *blockSize, CUfunction func,
    CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit,
    unsigned int flags)
{
    if (flags & ~(unsigned)CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)
        return CUDA_ERROR_INVALID_VALUE;
    return potential(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                     blockSizeLimit);
}

/* Clusters: at most 8 blocks per cluster (16 with the non-portable attribute, not modelled);
 * active clusters = resident blocks of the 4 SMs / the cluster size the config asks. */
static CUresult cluster_dim(const CUlaunchConfig *config, unsigned *dim)
{
    if (!config || (config->numAttrs && !config->attrs) || config->blockDimX == 0)
        return CUDA_ERROR_INVALID_VALUE;
    *dim = 1;
    for (unsigned i = 0; i < config->numAttrs; i++)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            *dim = config->attrs[i].value.clusterDim.x * config->attrs[i].value.clusterDim.y *
                   config->attrs[i].value.clusterDim.z;
    return *dim == 0 || *dim > 8 ? CUDA_ERROR_INVALID_CLUSTER_SIZE : CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func,
                                                   const CUlaunchConfig *config)
{
    unsigned dim;
    int n = 0;
    CUresult rc = cluster_dim(config, &dim);
    if (!rc)
        rc = occupancy(&n, func, (int)(config->blockDimX * config->blockDimY * config->blockDimZ),
                       config->sharedMemBytes);
    if (rc)
        return rc;
    if (!clusterSize)
        return CUDA_ERROR_INVALID_VALUE;
    *clusterSize = n * 4 < 8 ? n * 4 : 8;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func,
                                             const CUlaunchConfig *config)
{
    unsigned dim;
    int n = 0;
    CUresult rc = cluster_dim(config, &dim);
    if (!rc)
        rc = occupancy(&n, func, (int)(config->blockDimX * config->blockDimY * config->blockDimZ),
                       config->sharedMemBytes);
    if (rc)
        return rc;
    if (!numClusters)
        return CUDA_ERROR_INVALID_VALUE;
    *numClusters = n * 4 / (int)dim;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func,
                                                        int numBlocks, int blockSize)
{
    int n = 0;
    CUresult rc = occupancy(&n, func, blockSize, 0);
    if (rc)
        return rc;
    if (!dynamicSmemSize || numBlocks <= 0 || numBlocks > n)
        return CUDA_ERROR_INVALID_VALUE;
    *dynamicSmemSize = DBL_SM_SHARED / (size_t)numBlocks;
    return CUDA_SUCCESS;
}
