/* CUDA graphs built by hand: kernel nodes, memset nodes, node lists, and the helpers the other
 * graph files share (graph.h). A kernel node's parameters pack exactly as cuLaunchKernel's
 * (slParamLayout, the packed buffer as the call's bulk; `extra` is the same buffer as given); the
 * CUDA_KERNEL_NODE_PARAMS pod travels with kernelParams and extra cleared, func/kern/ctx as ids.
 * cuGraphKernelNodeGetParams answers kernelParams pointing into a copy the frontend keeps for
 * the node (until its parameters are asked for again). The _v1 structures (cuGraphAddKernelNode,
 * ...) are converted and sent as the _v2 calls. Memset nodes: the pod as is (device pointers,
 * checked remotely). Memcpy and host nodes: graph_host.c. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/graph.h"
#include "api/launch.h"
#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define STACK_PARAMS 4096

CUresult sl_fe_g_result(CUresult rc, Sluice__Wire__Reply *rep)
{
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult sl_fe_g_node_out(Sluice__Wire__Reply *rep, uint64_t id, CUgraphNode *out)
{
    CUresult rc = (CUresult)rep->result;
    if (rc == CUDA_SUCCESS) {
        if (id)
            *out = (CUgraphNode)(uintptr_t)id;
        else
            rc = CUDA_ERROR_UNKNOWN;
    }
    sl_fe_reply_free(rep);
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

CUresult sl_fe_g_deps(const CUgraphNode *deps, size_t n, uint64_t **out)
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
        rc = sl_fe_g_deps(dependencies, numDependencies, &deps);
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
        SL_FE_SET(cuGraphAddKernelNode_v2, &call, &rq);
        struct iovec iov = {(void *)k->bytes, k->len};
        Sluice__Wire__Reply *rep = NULL;
        rc = sl_fe_call_bulk(&call, &iov, k->len ? 1 : 0, NULL, 0, NULL, &rep);
        if (rep) {
            rc = (CUresult)rep->result;
            if (rc == CUDA_SUCCESS) {
                if (SL_FE_REPLY(cuGraphAddKernelNode_v2, rep))
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
            SL_FE_SET(cuGraphExecKernelNodeSetParams_v2, &call, &rqe);
        } else {
            rq.h_node = (uint64_t)(uintptr_t)hNode;
            rq.node_params = pod;
            SL_FE_SET(cuGraphKernelNodeSetParams_v2, &call, &rq);
        }
        struct iovec iov = {(void *)k->bytes, k->len};
        Sluice__Wire__Reply *rep = NULL;
        rc = sl_fe_call_bulk(&call, &iov, k->len ? 1 : 0, NULL, 0, NULL, &rep);
        rc = sl_fe_g_result(rc, rep);
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
    CUresult rc = sl_fe_g_deps(dependencies, numDependencies, &deps);
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
    SL_FE_SET(cuGraphAddMemsetNode, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            if (SL_FE_REPLY(cuGraphAddMemsetNode, rep))
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
    SL_FE_SET(cuGraphGetNodes, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            const Sluice__Cuda__CuGraphGetNodesReply *r = rep->cu_graph_get_nodes;
            if (!SL_FE_REPLY(cuGraphGetNodes, rep) ||
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

CUresult cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
    if (!numRootNodes)
        return CUDA_ERROR_INVALID_VALUE;
    if (rootNodes && *numRootNodes == 0)
        return CUDA_SUCCESS;
    if (rootNodes && *numRootNodes > SL_WIRE_MAX_ARRAY)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuGraphGetRootNodesRequest rq =
        SLUICE__CUDA__CU_GRAPH_GET_ROOT_NODES_REQUEST__INIT;
    rq.h_graph = (uint64_t)(uintptr_t)hGraph;
    rq.num_root_nodes = rootNodes ? *numRootNodes : 0;
    SL_FE_SET(cuGraphGetRootNodes, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    if (rc == CUDA_SUCCESS) {
        const Sluice__Cuda__CuGraphGetRootNodesReply *r = rep->cu_graph_get_root_nodes;
        if (!SL_FE_REPLY(cuGraphGetRootNodes, rep) ||
            (rootNodes && (r->n_root_nodes > *numRootNodes || r->num_root_nodes > *numRootNodes))) {
            rc = CUDA_ERROR_UNKNOWN;
        } else {
            for (size_t i = 0; rootNodes && i < *numRootNodes; i++)
                rootNodes[i] =
                    i < r->n_root_nodes ? (CUgraphNode)(uintptr_t)r->root_nodes[i] : NULL;
            *numRootNodes = r->num_root_nodes;
        }
    }
    sl_fe_reply_free(rep);
    return rc;
}

/* ---------------------------------------------------------------- kernel node parameters */

/* The copy of a node's parameters cuGraphKernelNodeGetParams answers pointers into. */
struct kparams {
    struct kparams *next;
    uint64_t node;
    void **ptrs;
    uint8_t *values;
};
static struct kparams *g_kparams;
static pthread_mutex_t g_kparams_lock = PTHREAD_MUTEX_INITIALIZER;

/* Keeps bulk (layout and values, backend/graph.c) for node; *ptrs the pointer array. */
static CUresult kparams_keep(uint64_t node, const uint8_t *bulk, size_t len, void ***ptrs)
{
    uint64_t count;
    if (len < 8)
        return CUDA_ERROR_UNKNOWN;
    memcpy(&count, bulk, 8);
    if (count > 4096 || len < 8 + 16 * count)
        return CUDA_ERROR_UNKNOWN;
    size_t head = 8 + 16 * (size_t)count, vlen = len - head;
    struct kparams *k = calloc(1, sizeof *k);
    if (!k)
        return CUDA_ERROR_OUT_OF_MEMORY;
    k->node = node;
    k->ptrs = calloc(count + 1, sizeof *k->ptrs);
    k->values = malloc(vlen ? vlen : 1);
    if (!k->ptrs || !k->values) {
        free(k->ptrs);
        free(k->values);
        free(k);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(k->values, bulk + head, vlen);
    for (size_t i = 0; i < count; i++) {
        uint64_t off, sz;
        memcpy(&off, bulk + 8 + 8 * i, 8);
        memcpy(&sz, bulk + 8 + 8 * (count + i), 8);
        if (off > vlen || sz > vlen - off) {
            free(k->ptrs);
            free(k->values);
            free(k);
            return CUDA_ERROR_UNKNOWN;
        }
        k->ptrs[i] = k->values + off;
    }
    pthread_mutex_lock(&g_kparams_lock);
    for (struct kparams **p = &g_kparams; *p; p = &(*p)->next)
        if ((*p)->node == node) {
            struct kparams *old = *p;
            *p = old->next;
            free(old->ptrs);
            free(old->values);
            free(old);
            break;
        }
    k->next = g_kparams;
    g_kparams = k;
    pthread_mutex_unlock(&g_kparams_lock);
    *ptrs = k->ptrs;
    return CUDA_SUCCESS;
}

CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuGraphKernelNodeGetParamsV2Request rq =
        SLUICE__CUDA__CU_GRAPH_KERNEL_NODE_GET_PARAMS_V2_REQUEST__INIT;
    rq.h_node = (uint64_t)(uintptr_t)hNode;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphKernelNodeGetParams_v2, &call, &rq);
    size_t cap = 8 + 16 * 4096 + 32768, got = 0;
    uint8_t *bulk = malloc(cap);
    if (!bulk)
        return CUDA_ERROR_OUT_OF_MEMORY;
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call_bulk(&call, NULL, 0, bulk, cap, &got, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        const Sluice__Cuda__CuGraphKernelNodeGetParamsV2Reply *r =
            rep->cu_graph_kernel_node_get_params_v2;
        if (rc == CUDA_SUCCESS && (!SL_FE_REPLY(cuGraphKernelNodeGetParams_v2, rep) ||
                                   r->node_params.len != sizeof *nodeParams))
            rc = CUDA_ERROR_UNKNOWN;
        void **ptrs = NULL;
        if (rc == CUDA_SUCCESS)
            rc = kparams_keep(rq.h_node, bulk, got, &ptrs);
        if (rc == CUDA_SUCCESS) {
            memcpy(nodeParams, r->node_params.data, sizeof *nodeParams);
            nodeParams->kernelParams = ptrs;
            nodeParams->extra = NULL;
        }
        sl_fe_reply_free(rep);
    }
    free(bulk);
    return rc;
}

CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p;
    CUresult rc = cuGraphKernelNodeGetParams_v2(hNode, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    nodeParams->func = p.func ? p.func : (CUfunction)p.kern;
    nodeParams->gridDimX = p.gridDimX;
    nodeParams->gridDimY = p.gridDimY;
    nodeParams->gridDimZ = p.gridDimZ;
    nodeParams->blockDimX = p.blockDimX;
    nodeParams->blockDimY = p.blockDimY;
    nodeParams->blockDimZ = p.blockDimZ;
    nodeParams->sharedMemBytes = p.sharedMemBytes;
    nodeParams->kernelParams = p.kernelParams;
    nodeParams->extra = NULL;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- memset node parameters */

CUresult cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuGraphMemsetNodeGetParamsRequest rq =
        SLUICE__CUDA__CU_GRAPH_MEMSET_NODE_GET_PARAMS_REQUEST__INIT;
    rq.h_node = (uint64_t)(uintptr_t)hNode;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphMemsetNodeGetParams, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    rc = sl_fe_pod_out(rc,
                       SL_FE_REPLY(cuGraphMemsetNodeGetParams, rep)
                           ? &rep->cu_graph_memset_node_get_params->node_params
                           : NULL,
                       nodeParams, sizeof *nodeParams);
    sl_fe_reply_free(rep);
    return rc;
}

CUresult cuGraphMemsetNodeSetParams(CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuGraphMemsetNodeSetParamsRequest rq =
        SLUICE__CUDA__CU_GRAPH_MEMSET_NODE_SET_PARAMS_REQUEST__INIT;
    rq.h_node = (uint64_t)(uintptr_t)hNode;
    rq.node_params = (ProtobufCBinaryData){sizeof *nodeParams, (uint8_t *)nodeParams};
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphMemsetNodeSetParams, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    return sl_fe_g_result(rc, rep);
}

CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                        const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    if (!memsetParams)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuGraphExecMemsetNodeSetParamsRequest rq =
        SLUICE__CUDA__CU_GRAPH_EXEC_MEMSET_NODE_SET_PARAMS_REQUEST__INIT;
    rq.h_graph_exec = (uint64_t)(uintptr_t)hGraphExec;
    rq.h_node = (uint64_t)(uintptr_t)hNode;
    rq.memset_params = (ProtobufCBinaryData){sizeof *memsetParams, (uint8_t *)memsetParams};
    rq.ctx = (uint64_t)(uintptr_t)ctx;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphExecMemsetNodeSetParams, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    return sl_fe_g_result(rc, rep);
}

/* ---------------------------------------------------------------- instantiation with params */

/* The CUDA_GRAPH_INSTANTIATE_PARAMS travel both ways as a pod: the backend translates the
 * upload stream and answers result_out; hErrNode_out is not reported (NULL). */
static CUresult instantiate_params(bool per_thread, CUgraphExec *phGraphExec, CUgraph hGraph,
                                   CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    if (!phGraphExec || !instantiateParams)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuGraphInstantiateWithParamsRequest rq =
        SLUICE__CUDA__CU_GRAPH_INSTANTIATE_WITH_PARAMS_REQUEST__INIT;
    rq.h_graph = (uint64_t)(uintptr_t)hGraph;
    rq.instantiate_params =
        (ProtobufCBinaryData){sizeof *instantiateParams, (uint8_t *)instantiateParams};
    Sluice__Wire__Call call = SL_FE_CALL(cuGraphInstantiateWithParams, &rq);
    call.per_thread_stream = per_thread;
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    const Sluice__Cuda__CuGraphInstantiateWithParamsReply *o =
        SL_FE_REPLY(cuGraphInstantiateWithParams, rep);
    rc = (CUresult)rep->result;
    if (o &&
        o->instantiate_params.len == sizeof *instantiateParams) /* result_out, also on failure */
        memcpy(instantiateParams, o->instantiate_params.data, sizeof *instantiateParams);
    else if (rc == CUDA_SUCCESS)
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        *phGraphExec = (CUgraphExec)(uintptr_t)o->ph_graph_exec;
    sl_fe_reply_free(rep);
    return rc;
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_params(false, phGraphExec, hGraph, instantiateParams);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_params(true, phGraphExec, hGraph, instantiateParams);
}
