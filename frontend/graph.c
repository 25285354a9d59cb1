/* CUDA graphs built by hand: kernel nodes and memset nodes. A kernel node's parameters pack
 * exactly as cuLaunchKernel's (slParamLayout, the packed buffer as the call's bulk; `extra` is
 * the same buffer as given); the CUDA_KERNEL_NODE_PARAMS pod travels with kernelParams and extra
 * cleared, func/kern/ctx as ids. The _v1 structures (cuGraphAddKernelNode, ...) are converted
 * and sent as the _v2 calls. Memset nodes: the pod as is (device pointers, checked remotely).
 * Node getters, memcpy and host nodes are not remoted yet. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fe.h"
#include "hooks.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define STACK_PARAMS 4096

static CUresult finish(CUresult rc, Sluice__Wire__Reply *rep)
{
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    return rc;
}

/* The pod to send and the parameter bytes of a kernel node. */
struct knode {
    CUDA_KERNEL_NODE_PARAMS p;
    uint8_t stack[STACK_PARAMS];
    uint8_t *heap;
    const void *bytes;
    size_t len;
};

static CUresult knode_prepare(const CUDA_KERNEL_NODE_PARAMS *in, struct knode *k)
{
    k->heap = NULL;
    if (!in)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t f = in->func ? (uint64_t)(uintptr_t)in->func : (uint64_t)(uintptr_t)in->kern;
    if (!f)
        return CUDA_ERROR_INVALID_VALUE;
    if (in->kernelParams && in->extra)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sl_fe_param_bytes(f, in->kernelParams, in->extra, k->stack, sizeof k->stack,
                                    &k->heap, &k->bytes, &k->len);
    if (rc != CUDA_SUCCESS)
        return rc;
    k->p = *in;
    k->p.kernelParams = NULL;
    k->p.extra = NULL;
    return CUDA_SUCCESS;
}

static void from_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *v1, CUDA_KERNEL_NODE_PARAMS *v2)
{
    memset(v2, 0, sizeof *v2);
    v2->func = v1->func;
    v2->gridDimX = v1->gridDimX;
    v2->gridDimY = v1->gridDimY;
    v2->gridDimZ = v1->gridDimZ;
    v2->blockDimX = v1->blockDimX;
    v2->blockDimY = v1->blockDimY;
    v2->blockDimZ = v1->blockDimZ;
    v2->sharedMemBytes = v1->sharedMemBytes;
    v2->kernelParams = v1->kernelParams;
    v2->extra = v1->extra;
}

static CUresult deps_ids(const CUgraphNode *deps, size_t n, uint64_t **out)
{
    *out = NULL;
    if (n && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    if (n > SL_WIRE_MAX_ARRAY)
        return CUDA_ERROR_INVALID_VALUE;
    if (!n)
        return CUDA_SUCCESS;
    *out = malloc(n * sizeof **out);
    if (!*out)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++)
        (*out)[i] = (uint64_t)(uintptr_t)deps[i];
    return CUDA_SUCCESS;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                 const CUgraphNode *dependencies, size_t numDependencies,
                                 const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    if (!phGraphNode)
        return CUDA_ERROR_INVALID_VALUE;
    struct knode *k = malloc(sizeof *k);
    if (!k)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t *deps = NULL;
    CUresult rc = knode_prepare(nodeParams, k);
    if (rc == CUDA_SUCCESS)
        rc = deps_ids(dependencies, numDependencies, &deps);
    if (rc == CUDA_SUCCESS) {
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        Sluice__Cuda__CuGraphAddKernelNodeV2Request rq =
            SLUICE__CUDA__CU_GRAPH_ADD_KERNEL_NODE_V2_REQUEST__INIT;
        ProtobufCBinaryData pod = {sizeof k->p, (uint8_t *)&k->p};
        rq.h_graph = (uint64_t)(uintptr_t)hGraph;
        rq.dependencies = deps;
        rq.n_dependencies = numDependencies;
        rq.num_dependencies = numDependencies;
        rq.node_params = &pod;
        rq.n_node_params = 1;
        call.call_id = SL_CALL_cuGraphAddKernelNode_v2;
        call.args_case = SLUICE__WIRE__CALL__ARGS_CU_GRAPH_ADD_KERNEL_NODE_V2;
        call.cu_graph_add_kernel_node_v2 = &rq;
        struct iovec iov = {(void *)k->bytes, k->len};
        Sluice__Wire__Reply *rep = NULL;
        rc = sl_fe_call_bulk(&call, &iov, k->len ? 1 : 0, NULL, 0, NULL, &rep);
        if (rep) {
            rc = (CUresult)rep->result;
            if (rc == CUDA_SUCCESS) {
                if (rep->out_case == SLUICE__WIRE__REPLY__OUT_CU_GRAPH_ADD_KERNEL_NODE_V2)
                    *phGraphNode =
                        (CUgraphNode)(uintptr_t)rep->cu_graph_add_kernel_node_v2->ph_graph_node;
                else
                    rc = CUDA_ERROR_UNKNOWN;
            }
            sl_fe_reply_free(rep);
        }
    }
    free(deps);
    free(k->heap);
    free(k);
    return rc;
}

CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies, size_t numDependencies,
                              const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p;
    from_v1(nodeParams, &p);
    return cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies, &p);
}

/* cuGraphKernelNodeSetParams_v2 (exec == 0) or cuGraphExecKernelNodeSetParams_v2. */
static CUresult set_params(uint64_t exec, CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *in)
{
    struct knode *k = malloc(sizeof *k);
    if (!k)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = knode_prepare(in, k);
    if (rc == CUDA_SUCCESS) {
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        Sluice__Cuda__CuGraphKernelNodeSetParamsV2Request rq =
            SLUICE__CUDA__CU_GRAPH_KERNEL_NODE_SET_PARAMS_V2_REQUEST__INIT;
        Sluice__Cuda__CuGraphExecKernelNodeSetParamsV2Request rqe =
            SLUICE__CUDA__CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V2_REQUEST__INIT;
        ProtobufCBinaryData pod = {sizeof k->p, (uint8_t *)&k->p};
        if (exec) {
            rqe.h_graph_exec = exec;
            rqe.h_node = (uint64_t)(uintptr_t)hNode;
            rqe.node_params = pod;
            call.call_id = SL_CALL_cuGraphExecKernelNodeSetParams_v2;
            call.args_case = SLUICE__WIRE__CALL__ARGS_CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V2;
            call.cu_graph_exec_kernel_node_set_params_v2 = &rqe;
        } else {
            rq.h_node = (uint64_t)(uintptr_t)hNode;
            rq.node_params = pod;
            call.call_id = SL_CALL_cuGraphKernelNodeSetParams_v2;
            call.args_case = SLUICE__WIRE__CALL__ARGS_CU_GRAPH_KERNEL_NODE_SET_PARAMS_V2;
            call.cu_graph_kernel_node_set_params_v2 = &rq;
        }
        struct iovec iov = {(void *)k->bytes, k->len};
        Sluice__Wire__Reply *rep = NULL;
        rc = sl_fe_call_bulk(&call, &iov, k->len ? 1 : 0, NULL, 0, NULL, &rep);
        rc = finish(rc, rep);
    }
    free(k->heap);
    free(k);
    return rc;
}

CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    return set_params(0, hNode, nodeParams);
}

CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p;
    from_v1(nodeParams, &p);
    return set_params(0, hNode, &p);
}

CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                           const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    if (!hGraphExec)
        return CUDA_ERROR_INVALID_VALUE;
    return set_params((uint64_t)(uintptr_t)hGraphExec, hNode, nodeParams);
}

CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                        const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams || !hGraphExec)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p;
    from_v1(nodeParams, &p);
    return set_params((uint64_t)(uintptr_t)hGraphExec, hNode, &p);
}

CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies, size_t numDependencies,
                              const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    if (!phGraphNode || !memsetParams)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t *deps = NULL;
    CUresult rc = deps_ids(dependencies, numDependencies, &deps);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuGraphAddMemsetNodeRequest rq =
        SLUICE__CUDA__CU_GRAPH_ADD_MEMSET_NODE_REQUEST__INIT;
    ProtobufCBinaryData pod = {sizeof *memsetParams, (uint8_t *)memsetParams};
    rq.h_graph = (uint64_t)(uintptr_t)hGraph;
    rq.dependencies = deps;
    rq.n_dependencies = numDependencies;
    rq.num_dependencies = numDependencies;
    rq.memset_params = &pod;
    rq.n_memset_params = 1;
    rq.ctx = (uint64_t)(uintptr_t)ctx;
    call.call_id = SL_CALL_cuGraphAddMemsetNode;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_GRAPH_ADD_MEMSET_NODE;
    call.cu_graph_add_memset_node = &rq;
    Sluice__Wire__Reply *rep = NULL;
    rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            if (rep->out_case == SLUICE__WIRE__REPLY__OUT_CU_GRAPH_ADD_MEMSET_NODE)
                *phGraphNode = (CUgraphNode)(uintptr_t)rep->cu_graph_add_memset_node->ph_graph_node;
            else
                rc = CUDA_ERROR_UNKNOWN;
        }
        sl_fe_reply_free(rep);
    }
    free(deps);
    return rc;
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    if (!numNodes)
        return CUDA_ERROR_INVALID_VALUE;
    if (nodes && *numNodes == 0)
        return CUDA_SUCCESS; /* nothing asked for */
    if (nodes && *numNodes > SL_WIRE_MAX_ARRAY)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuGraphGetNodesRequest rq = SLUICE__CUDA__CU_GRAPH_GET_NODES_REQUEST__INIT;
    rq.h_graph = (uint64_t)(uintptr_t)hGraph;
    rq.num_nodes = nodes ? *numNodes : 0;
    call.call_id = SL_CALL_cuGraphGetNodes;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_GRAPH_GET_NODES;
    call.cu_graph_get_nodes = &rq;
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            const Sluice__Cuda__CuGraphGetNodesReply *r = rep->cu_graph_get_nodes;
            if (rep->out_case != SLUICE__WIRE__REPLY__OUT_CU_GRAPH_GET_NODES ||
                (nodes && (r->n_nodes > *numNodes || r->num_nodes > *numNodes))) {
                rc = CUDA_ERROR_UNKNOWN;
            } else if (nodes) {
                for (size_t i = 0; i < *numNodes; i++)
                    nodes[i] = i < r->n_nodes ? (CUgraphNode)(uintptr_t)r->nodes[i] : NULL;
                *numNodes = r->num_nodes;
            } else {
                *numNodes = r->num_nodes;
            }
        }
        sl_fe_reply_free(rep);
    }
    return rc;
}
