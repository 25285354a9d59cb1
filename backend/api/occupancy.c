/* Occupancy calls (hand handlers: the table marks them hand=both because two of them take a
 * guest callback). The function argument may be a function or a kernel id (cudart 13 passes
 * kernels as functions): sl_be_handle_get accepts both for SL_H_FUNCTION and the native CUkernel
 * goes to the driver, which accepts it. cuOccupancyMaxPotentialBlockSize(WithFlags) with a
 * blockSizeToDynamicSMemSize callback is computed by the frontend (it calls the guest's callback
 * and asks MaxActiveBlocks here); a request naming a callback is refused.
 * MaxPotentialClusterSize / MaxActiveClusters: the CUlaunchConfig pod travels with attrs = NULL
 * and the attributes as the call's bulk (as for cuLaunchKernelEx). */
#include <stdlib.h>
#include <string.h>

#include "api/reply.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

#define OCC_FLAGS ((unsigned)(CU_OCCUPANCY_DEFAULT | CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE))

static CUresult func_of(sl_be_session *s, uint64_t id, CUfunction *f)
{
    void *n = NULL;
    if (!id)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult rc = sl_be_handle_get(s, SL_H_FUNCTION, id, &n);
    *f = (CUfunction)n;
    return rc;
}

static CUresult max_active(sl_be_session *s, const struct sl_driver_api *api, uint64_t fid,
                           int32_t block, uint64_t smem, uint32_t flags, int *out)
{
    CUfunction f;
    CUresult rc = func_of(s, fid, &f);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (flags & ~OCC_FLAGS)
        return CUDA_ERROR_INVALID_VALUE;
    if (api->cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)
        return api->cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(out, f, block,
                                                                         (size_t)smem, flags);
    if (flags == 0 && api->cuOccupancyMaxActiveBlocksPerMultiprocessor)
        return api->cuOccupancyMaxActiveBlocksPerMultiprocessor(out, f, block, (size_t)smem);
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult be_h_cuOccupancyMaxActiveBlocksPerMultiprocessor(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuOccupancyMaxActiveBlocksPerMultiprocessorRequest *rq =
        call->cu_occupancy_max_active_blocks_per_multiprocessor;
    int n = 0;
    CUresult rc = max_active(s, api, rq->func, rq->block_size, rq->dynamic_smem_size, 0, &n);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuOccupancyMaxActiveBlocksPerMultiprocessorReply *rp =
        BE_REPLY(reply, cu_occupancy_max_active_blocks_per_multiprocessor,
                 SLUICE__WIRE__REPLY__OUT_CU_OCCUPANCY_MAX_ACTIVE_BLOCKS_PER_MULTIPROCESSOR,
                 Sluice__Cuda__CuOccupancyMaxActiveBlocksPerMultiprocessorReply,
                 sluice__cuda__cu_occupancy_max_active_blocks_per_multiprocessor_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->num_blocks = n;
    return CUDA_SUCCESS;
}

CUresult be_h_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuOccupancyMaxActiveBlocksPerMultiprocessorWithFlagsRequest *rq =
        call->cu_occupancy_max_active_blocks_per_multiprocessor_with_flags;
    int n = 0;
    CUresult rc =
        max_active(s, api, rq->func, rq->block_size, rq->dynamic_smem_size, rq->flags, &n);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuOccupancyMaxActiveBlocksPerMultiprocessorWithFlagsReply *rp = BE_REPLY(
        reply, cu_occupancy_max_active_blocks_per_multiprocessor_with_flags,
        SLUICE__WIRE__REPLY__OUT_CU_OCCUPANCY_MAX_ACTIVE_BLOCKS_PER_MULTIPROCESSOR_WITH_FLAGS,
        Sluice__Cuda__CuOccupancyMaxActiveBlocksPerMultiprocessorWithFlagsReply,
        sluice__cuda__cu_occupancy_max_active_blocks_per_multiprocessor_with_flags_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->num_blocks = n;
    return CUDA_SUCCESS;
}

static CUresult potential(sl_be_session *s, const struct sl_driver_api *api, uint64_t fid,
                          uint64_t cb, uint64_t smem, int32_t limit, uint32_t flags, int *grid,
                          int *block, Sluice__Wire__Reply *reply)
{
    CUfunction f;
    CUresult rc = func_of(s, fid, &f);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (cb) { /* the frontend computes it when there is a callback */
        sl_be_detail(reply, "a blockSizeToDynamicSMemSize callback is run by the frontend");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (flags & ~OCC_FLAGS)
        return CUDA_ERROR_INVALID_VALUE;
    if (api->cuOccupancyMaxPotentialBlockSizeWithFlags)
        return api->cuOccupancyMaxPotentialBlockSizeWithFlags(grid, block, f, NULL, (size_t)smem,
                                                              limit, flags);
    if (flags == 0 && api->cuOccupancyMaxPotentialBlockSize)
        return api->cuOccupancyMaxPotentialBlockSize(grid, block, f, NULL, (size_t)smem, limit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult be_h_cuOccupancyMaxPotentialBlockSize(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuOccupancyMaxPotentialBlockSizeRequest *rq =
        call->cu_occupancy_max_potential_block_size;
    int grid = 0, block = 0;
    CUresult rc = potential(s, api, rq->func, rq->block_size_to_dynamic_smem_size,
                            rq->dynamic_smem_size, rq->block_size_limit, 0, &grid, &block, reply);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuOccupancyMaxPotentialBlockSizeReply *rp =
        BE_REPLY(reply, cu_occupancy_max_potential_block_size,
                 SLUICE__WIRE__REPLY__OUT_CU_OCCUPANCY_MAX_POTENTIAL_BLOCK_SIZE,
                 Sluice__Cuda__CuOccupancyMaxPotentialBlockSizeReply,
                 sluice__cuda__cu_occupancy_max_potential_block_size_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->min_grid_size = grid;
    rp->block_size = block;
    return CUDA_SUCCESS;
}

CUresult be_h_cuOccupancyMaxPotentialBlockSizeWithFlags(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuOccupancyMaxPotentialBlockSizeWithFlagsRequest *rq =
        call->cu_occupancy_max_potential_block_size_with_flags;
    int grid = 0, block = 0;
    CUresult rc =
        potential(s, api, rq->func, rq->block_size_to_dynamic_smem_size, rq->dynamic_smem_size,
                  rq->block_size_limit, rq->flags, &grid, &block, reply);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuOccupancyMaxPotentialBlockSizeWithFlagsReply *rp =
        BE_REPLY(reply, cu_occupancy_max_potential_block_size_with_flags,
                 SLUICE__WIRE__REPLY__OUT_CU_OCCUPANCY_MAX_POTENTIAL_BLOCK_SIZE_WITH_FLAGS,
                 Sluice__Cuda__CuOccupancyMaxPotentialBlockSizeWithFlagsReply,
                 sluice__cuda__cu_occupancy_max_potential_block_size_with_flags_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->min_grid_size = grid;
    rp->block_size = block;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- clusters */
/* config is the CUlaunchConfig pod with attrs = NULL; the attributes (numAttrs of them) are the
 * call's bulk; hStream is a stream id. Only attributes without pointers or handles inside. */
static CUresult cluster_config(struct sl_be_call *c, const ProtobufCBinaryData *pod,
                               CUlaunchConfig *cfg, CUlaunchAttribute *attrs)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    if (pod->len != sizeof *cfg) {
        sl_be_detail(reply, "config is %zu bytes, CUlaunchConfig is %zu", pod->len, sizeof *cfg);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(cfg, pod->data, sizeof *cfg);
    if (cfg->numAttrs > 64 || c->in_len != (uint64_t)cfg->numAttrs * sizeof(CUlaunchAttribute)) {
        sl_be_detail(reply, "%u launch attributes do not match %llu bulk bytes", cfg->numAttrs,
                     (unsigned long long)c->in_len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (cfg->numAttrs)
        memcpy(attrs, c->in, cfg->numAttrs * sizeof(CUlaunchAttribute));
    for (unsigned i = 0; i < cfg->numAttrs; i++) {
        switch (attrs[i].id) {
        case CU_LAUNCH_ATTRIBUTE_IGNORE:
        case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
        case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
            break;
        default:
            sl_be_detail(reply, "launch attribute %d is not supported here", (int)attrs[i].id);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    cfg->attrs = cfg->numAttrs ? attrs : NULL;
    CUstream hs;
    CUresult rc = be_stream(s, (uint64_t)(uintptr_t)cfg->hStream, &hs);
    cfg->hStream = hs;
    return rc;
}

CUresult be_h_cuOccupancyMaxPotentialClusterSize(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuOccupancyMaxPotentialClusterSizeRequest *rq =
        call->cu_occupancy_max_potential_cluster_size;
    CUfunction f;
    CUlaunchConfig cfg;
    CUlaunchAttribute attrs[64];
    CUresult rc = func_of(s, rq->func, &f);
    if (rc == CUDA_SUCCESS)
        rc = cluster_config(c, &rq->config, &cfg, attrs);
    int n = 0;
    if (rc == CUDA_SUCCESS)
        rc = api->cuOccupancyMaxPotentialClusterSize
                 ? api->cuOccupancyMaxPotentialClusterSize(&n, f, &cfg)
                 : CUDA_ERROR_NOT_SUPPORTED;
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuOccupancyMaxPotentialClusterSizeReply *rp =
        BE_REPLY(reply, cu_occupancy_max_potential_cluster_size,
                 SLUICE__WIRE__REPLY__OUT_CU_OCCUPANCY_MAX_POTENTIAL_CLUSTER_SIZE,
                 Sluice__Cuda__CuOccupancyMaxPotentialClusterSizeReply,
                 sluice__cuda__cu_occupancy_max_potential_cluster_size_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->cluster_size = n;
    return CUDA_SUCCESS;
}

CUresult be_h_cuOccupancyMaxActiveClusters(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuOccupancyMaxActiveClustersRequest *rq =
        call->cu_occupancy_max_active_clusters;
    CUfunction f;
    CUlaunchConfig cfg;
    CUlaunchAttribute attrs[64];
    CUresult rc = func_of(s, rq->func, &f);
    if (rc == CUDA_SUCCESS)
        rc = cluster_config(c, &rq->config, &cfg, attrs);
    int n = 0;
    if (rc == CUDA_SUCCESS)
        rc = api->cuOccupancyMaxActiveClusters ? api->cuOccupancyMaxActiveClusters(&n, f, &cfg)
                                               : CUDA_ERROR_NOT_SUPPORTED;
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuOccupancyMaxActiveClustersReply *rp =
        BE_REPLY(reply, cu_occupancy_max_active_clusters,
                 SLUICE__WIRE__REPLY__OUT_CU_OCCUPANCY_MAX_ACTIVE_CLUSTERS,
                 Sluice__Cuda__CuOccupancyMaxActiveClustersReply,
                 sluice__cuda__cu_occupancy_max_active_clusters_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->num_clusters = n;
    return CUDA_SUCCESS;
}
