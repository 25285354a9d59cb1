/* Graph memory: allocation nodes (the CUDA_MEM_ALLOC_NODE_PARAMS pod with its access
 * descriptors as the call's bulk; the address the driver reserved comes back in the pod) and the
 * device's graph memory attributes (one cuuint64_t each, as bulk). cuGraphMemAllocNodeGetParams
 * answers accessDescs pointing into a copy the frontend keeps for the node. Free nodes and
 * cuDeviceGraphMemTrim are generated. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api/graph.h"
#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define MAX_DESCS 64

CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                const CUgraphNode *dependencies, size_t numDependencies,
                                CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    if (!phGraphNode || !nodeParams || nodeParams->accessDescCount > MAX_DESCS ||
        (nodeParams->accessDescCount && !nodeParams->accessDescs))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t *deps = NULL;
    CUresult rc = sl_fe_g_deps(dependencies, numDependencies, &deps);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUDA_MEM_ALLOC_NODE_PARAMS p = *nodeParams;
    p.accessDescs = NULL;
    p.dptr = 0;
    Sluice__Cuda__CuGraphAddMemAllocNodeRequest rq =
        SLUICE__CUDA__CU_GRAPH_ADD_MEM_ALLOC_NODE_REQUEST__INIT;
    ProtobufCBinaryData pod = {sizeof p, (uint8_t *)&p};
    rq.h_graph = (uint64_t)(uintptr_t)hGraph;
    rq.dependencies = deps;
    rq.n_dependencies = numDependencies;
    rq.num_dependencies = numDependencies;
    rq.node_params = &pod;
    rq.n_node_params = 1;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphAddMemAllocNode, &call, &rq);
    struct iovec iov = {(void *)nodeParams->accessDescs,
                        nodeParams->accessDescCount * sizeof(CUmemAccessDesc)};
    Sluice__Wire__Reply *rep = NULL;
    rc = sl_fe_call_bulk(&call, &iov, iov.iov_len ? 1 : 0, NULL, 0, NULL, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        const Sluice__Cuda__CuGraphAddMemAllocNodeReply *r = rep->cu_graph_add_mem_alloc_node;
        if (rc == CUDA_SUCCESS) {
            if (SL_FE_REPLY(cuGraphAddMemAllocNode, rep) && r->n_node_params == 1 &&
                r->node_params[0].len == sizeof p && r->ph_graph_node) {
                const CUDA_MEM_ALLOC_NODE_PARAMS *o =
                    (const CUDA_MEM_ALLOC_NODE_PARAMS *)r->node_params[0].data;
                nodeParams->dptr = o->dptr;
                *phGraphNode = (CUgraphNode)(uintptr_t)r->ph_graph_node;
            } else {
                rc = CUDA_ERROR_UNKNOWN;
            }
        }
        sl_fe_reply_free(rep);
    }
    free(deps);
    return rc;
}

/* The access descriptors cuGraphMemAllocNodeGetParams answers, per node. */
struct descs {
    struct descs *next;
    uint64_t node;
    CUmemAccessDesc d[MAX_DESCS];
};
static struct descs *g_descs;
static pthread_mutex_t g_descs_lock = PTHREAD_MUTEX_INITIALIZER;

static CUmemAccessDesc *descs_for(uint64_t node)
{
    pthread_mutex_lock(&g_descs_lock);
    struct descs *d = g_descs;
    while (d && d->node != node)
        d = d->next;
    if (!d && (d = calloc(1, sizeof *d))) {
        d->node = node;
        d->next = g_descs;
        g_descs = d;
    }
    pthread_mutex_unlock(&g_descs_lock);
    return d ? d->d : NULL;
}

CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    if (!params_out)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t node = (uint64_t)(uintptr_t)hNode;
    CUmemAccessDesc *keep = descs_for(node);
    if (!keep)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUmemAccessDesc got_descs[MAX_DESCS];
    Sluice__Cuda__CuGraphMemAllocNodeGetParamsRequest rq =
        SLUICE__CUDA__CU_GRAPH_MEM_ALLOC_NODE_GET_PARAMS_REQUEST__INIT;
    rq.h_node = node;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphMemAllocNodeGetParams, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    size_t got = 0;
    CUresult rc = sl_fe_call_bulk(&call, NULL, 0, got_descs, sizeof got_descs, &got, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    if (rc == CUDA_SUCCESS) {
        const Sluice__Cuda__CuGraphMemAllocNodeGetParamsReply *r =
            rep->cu_graph_mem_alloc_node_get_params;
        if (SL_FE_REPLY(cuGraphMemAllocNodeGetParams, rep) &&
            r->params_out.len == sizeof *params_out) {
            memcpy(params_out, r->params_out.data, sizeof *params_out);
            if (params_out->accessDescCount * sizeof(CUmemAccessDesc) != got ||
                params_out->accessDescCount > MAX_DESCS) {
                rc = CUDA_ERROR_UNKNOWN;
            } else {
                memcpy(keep, got_descs, got);
                params_out->accessDescs = params_out->accessDescCount ? keep : NULL;
            }
        } else {
            rc = CUDA_ERROR_UNKNOWN;
        }
    }
    sl_fe_reply_free(rep);
    return rc;
}

static CUresult graph_mem_attr(int set, CUdevice device, CUgraphMem_attribute attr, void *value)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuDeviceGetGraphMemAttributeRequest g =
        SLUICE__CUDA__CU_DEVICE_GET_GRAPH_MEM_ATTRIBUTE_REQUEST__INIT;
    Sluice__Cuda__CuDeviceSetGraphMemAttributeRequest st =
        SLUICE__CUDA__CU_DEVICE_SET_GRAPH_MEM_ATTRIBUTE_REQUEST__INIT;
    if (set) {
        st.device = device;
        st.attr = (uint32_t)attr;
        st.value = sizeof(cuuint64_t);
        SL_FE_SET(cuDeviceSetGraphMemAttribute, &call, &st);
    } else {
        g.device = device;
        g.attr = (uint32_t)attr;
        g.value = sizeof(cuuint64_t);
        SL_FE_SET(cuDeviceGetGraphMemAttribute, &call, &g);
    }
    struct iovec iov = {value, sizeof(cuuint64_t)};
    Sluice__Wire__Reply *rep = NULL;
    size_t got = 0;
    CUresult rc = sl_fe_call_bulk(&call, &iov, set ? 1 : 0, set ? NULL : value,
                                  set ? 0 : sizeof(cuuint64_t), &got, &rep);
    rc = sl_fe_g_result(rc, rep);
    if (rc == CUDA_SUCCESS && !set && got != sizeof(cuuint64_t))
        rc = CUDA_ERROR_UNKNOWN;
    return rc;
}

CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    return graph_mem_attr(0, device, attr, value);
}

CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    return graph_mem_attr(1, device, attr, value);
}
