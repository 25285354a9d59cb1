/* CUDA graphs built by hand: kernel nodes (add, set params, set params of an instantiated graph)
 * and memset nodes. A kernel node's CUDA_KERNEL_NODE_PARAMS pod arrives with kernelParams and
 * extra cleared and func/kern/ctx as ids; its parameter buffer is the call's bulk, checked
 * against the function's layout and turned into kernelParams as for cuLaunchKernel (the driver
 * copies the parameters when the node is made or changed). Memset nodes: the destination range
 * (pitch * (height - 1) + width * elementSize bytes) must be the session's memory. The _v1 calls
 * are sent as the _v2 ones by the frontend. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define MAX_DEPS 4096

static CUresult deps_in(sl_be_session *s, Sluice__Wire__Reply *reply, const uint64_t *ids,
                        size_t n_ids, uint64_t num, CUgraphNode **out)
{
    *out = NULL;
    if (n_ids != num || num > MAX_DEPS) {
        be_detail(reply, "%zu dependencies, %llu announced", n_ids, (unsigned long long)num);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!num)
        return CUDA_SUCCESS;
    CUgraphNode *d = malloc(num * sizeof *d);
    if (!d)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < num; i++) {
        void *n = NULL;
        CUresult rc =
            ids[i] ? sl_be_handle_get(s, SL_H_GRAPHNODE, ids[i], &n) : CUDA_ERROR_INVALID_VALUE;
        if (rc != CUDA_SUCCESS) {
            free(d);
            return rc;
        }
        d[i] = (CUgraphNode)n;
    }
    *out = d;
    return CUDA_SUCCESS;
}

/* The node params of the pod with native handles and kernelParams rebuilt from the bulk. */
static CUresult knode_in(sl_be_session *s, Sluice__Wire__Reply *reply,
                         const ProtobufCBinaryData *pod, CUDA_KERNEL_NODE_PARAMS *p, void **params)
{
    if (pod->len != sizeof *p) {
        be_detail(reply, "CUDA_KERNEL_NODE_PARAMS of %zu bytes", pod->len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(p, pod->data, sizeof *p);
    if (p->kernelParams || p->extra) {
        be_detail(reply, "kernel node parameters travel as bulk");
        return CUDA_ERROR_INVALID_VALUE;
    }
    uint64_t fid = p->func ? (uint64_t)(uintptr_t)p->func : (uint64_t)(uintptr_t)p->kern;
    if (!p->func && be_id_kind(fid) != SL_H_KERNEL)
        return CUDA_ERROR_INVALID_HANDLE;
    struct be_layout *l;
    void *native;
    CUresult rc = be_layout_get(s, fid, &l, &native);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (p->func)
        p->func = (CUfunction)native;
    else
        p->kern = (CUkernel)native;
    if (p->ctx) {
        void *c = NULL;
        rc = sl_be_handle_get(s, SL_H_CONTEXT, (uint64_t)(uintptr_t)p->ctx, &c);
        if (rc != CUDA_SUCCESS)
            return rc;
        p->ctx = (CUcontext)c;
    }
    rc = be_params_rebuild(l, s->in_bulk, s->in_bulk_len, params);
    if (rc != CUDA_SUCCESS) {
        be_detail(reply, "parameter buffer of %llu bytes, the kernel's layout needs %llu",
                  (unsigned long long)s->in_bulk_len, (unsigned long long)l->end);
        return rc;
    }
    p->kernelParams = params;
    return CUDA_SUCCESS;
}

static CUresult h_add_kernel(sl_be_session *s, const struct sl_driver_api *api,
                             const Sluice__Wire__Call *call, Sluice__Wire__Reply *reply)
{
    const Sluice__Cuda__CuGraphAddKernelNodeV2Request *rq = call->cu_graph_add_kernel_node_v2;
    if (rq->n_node_params != 1) {
        be_detail(reply, "%zu node parameter structures", rq->n_node_params);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuGraphAddKernelNode_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    void *g = NULL;
    CUresult rc =
        rq->h_graph ? sl_be_handle_get(s, SL_H_GRAPH, rq->h_graph, &g) : CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    void **params = malloc(BE_MAX_PARAMS * sizeof *params);
    if (!params)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUgraphNode *deps = NULL;
    CUDA_KERNEL_NODE_PARAMS p;
    rc = deps_in(s, reply, rq->dependencies, rq->n_dependencies, rq->num_dependencies, &deps);
    if (rc == CUDA_SUCCESS)
        rc = knode_in(s, reply, &rq->node_params[0], &p, params);
    Sluice__Cuda__CuGraphAddKernelNodeV2Reply *rp = NULL;
    if (rc == CUDA_SUCCESS) {
        rp = BE_REPLY(reply, cu_graph_add_kernel_node_v2,
                      SLUICE__WIRE__REPLY__OUT_CU_GRAPH_ADD_KERNEL_NODE_V2,
                      Sluice__Cuda__CuGraphAddKernelNodeV2Reply,
                      sluice__cuda__cu_graph_add_kernel_node_v2_reply__init);
        if (!rp)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS) {
        CUgraphNode node = NULL;
        rc =
            api->cuGraphAddKernelNode_v2(&node, (CUgraph)g, deps, (size_t)rq->num_dependencies, &p);
        if (rc == CUDA_SUCCESS)
            rc = sl_be_handle_put(s, SL_H_GRAPHNODE, node, &rp->ph_graph_node);
    }
    free(deps);
    free(params);
    return rc;
}

static CUresult h_set_kernel(sl_be_session *s, const struct sl_driver_api *api,
                             const Sluice__Wire__Call *call, Sluice__Wire__Reply *reply)
{
    const Sluice__Cuda__CuGraphKernelNodeSetParamsV2Request *rq =
        call->cu_graph_kernel_node_set_params_v2;
    if (!api->cuGraphKernelNodeSetParams_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    void *n = NULL;
    CUresult rc =
        rq->h_node ? sl_be_handle_get(s, SL_H_GRAPHNODE, rq->h_node, &n) : CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    void **params = malloc(BE_MAX_PARAMS * sizeof *params);
    if (!params)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUDA_KERNEL_NODE_PARAMS p;
    rc = knode_in(s, reply, &rq->node_params, &p, params);
    if (rc == CUDA_SUCCESS)
        rc = api->cuGraphKernelNodeSetParams_v2((CUgraphNode)n, &p);
    free(params);
    return rc;
}

static CUresult h_exec_set_kernel(sl_be_session *s, const struct sl_driver_api *api,
                                  const Sluice__Wire__Call *call, Sluice__Wire__Reply *reply)
{
    const Sluice__Cuda__CuGraphExecKernelNodeSetParamsV2Request *rq =
        call->cu_graph_exec_kernel_node_set_params_v2;
    if (!api->cuGraphExecKernelNodeSetParams_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    void *e = NULL, *n = NULL;
    CUresult rc = rq->h_graph_exec ? sl_be_handle_get(s, SL_H_GRAPHEXEC, rq->h_graph_exec, &e)
                                   : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = rq->h_node ? sl_be_handle_get(s, SL_H_GRAPHNODE, rq->h_node, &n)
                        : CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    void **params = malloc(BE_MAX_PARAMS * sizeof *params);
    if (!params)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUDA_KERNEL_NODE_PARAMS p;
    rc = knode_in(s, reply, &rq->node_params, &p, params);
    if (rc == CUDA_SUCCESS)
        rc = api->cuGraphExecKernelNodeSetParams_v2((CUgraphExec)e, (CUgraphNode)n, &p);
    free(params);
    return rc;
}

static CUresult h_add_memset(sl_be_session *s, const struct sl_driver_api *api,
                             const Sluice__Wire__Call *call, Sluice__Wire__Reply *reply)
{
    const Sluice__Cuda__CuGraphAddMemsetNodeRequest *rq = call->cu_graph_add_memset_node;
    CUDA_MEMSET_NODE_PARAMS p;
    if (rq->n_memset_params != 1 || rq->memset_params[0].len != sizeof p) {
        be_detail(reply, "CUDA_MEMSET_NODE_PARAMS malformed");
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&p, rq->memset_params[0].data, sizeof p);
    if (!api->cuGraphAddMemsetNode)
        return CUDA_ERROR_NOT_SUPPORTED;
    if ((p.elementSize != 1 && p.elementSize != 2 && p.elementSize != 4) || !p.width || !p.height ||
        p.width > UINT64_MAX / p.elementSize)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t row = (uint64_t)p.width * p.elementSize;
    if (p.height > 1 && (p.pitch < row || p.height - 1 > (UINT64_MAX - row) / p.pitch))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t span = (uint64_t)(p.height - 1) * p.pitch + row;
    CUresult rc = sl_be_devptr_check(s, (uint64_t)p.dst, span);
    if (rc != CUDA_SUCCESS) {
        be_detail(reply, "memset node destination outside the session's memory");
        return rc;
    }
    void *g = NULL, *c = NULL;
    rc = rq->h_graph ? sl_be_handle_get(s, SL_H_GRAPH, rq->h_graph, &g) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = sl_be_handle_get(s, SL_H_CONTEXT, rq->ctx, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUgraphNode *deps = NULL;
    rc = deps_in(s, reply, rq->dependencies, rq->n_dependencies, rq->num_dependencies, &deps);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuGraphAddMemsetNodeReply *rp =
        BE_REPLY(reply, cu_graph_add_memset_node, SLUICE__WIRE__REPLY__OUT_CU_GRAPH_ADD_MEMSET_NODE,
                 Sluice__Cuda__CuGraphAddMemsetNodeReply,
                 sluice__cuda__cu_graph_add_memset_node_reply__init);
    if (!rp)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        CUgraphNode node = NULL;
        rc = api->cuGraphAddMemsetNode(&node, (CUgraph)g, deps, (size_t)rq->num_dependencies, &p,
                                       (CUcontext)c);
        if (rc == CUDA_SUCCESS)
            rc = sl_be_handle_put(s, SL_H_GRAPHNODE, node, &rp->ph_graph_node);
    }
    free(deps);
    return rc;
}

/* The id of a node the driver handed back: the one it already has, or a new one (nodes made by
 * stream capture get theirs here). */
static CUresult node_id(sl_be_session *s, CUgraphNode n, uint64_t *id)
{
    for (size_t i = 0; i < s->h.cap; i++) {
        struct be_handle *h = &s->h.slot[i];
        if (be_id_kind(h->id) == SL_H_GRAPHNODE && h->native == (void *)n &&
            be_handles_find(&s->h, SL_H_GRAPHNODE, h->id) == h) {
            *id = h->id;
            return CUDA_SUCCESS;
        }
    }
    return sl_be_handle_put(s, SL_H_GRAPHNODE, n, id);
}

static CUresult h_get_nodes(sl_be_session *s, const struct sl_driver_api *api,
                            const Sluice__Wire__Call *call, Sluice__Wire__Reply *reply)
{
    const Sluice__Cuda__CuGraphGetNodesRequest *rq = call->cu_graph_get_nodes;
    if (rq->num_nodes > SL_WIRE_MAX_ARRAY) {
        be_detail(reply, "%llu nodes asked for", (unsigned long long)rq->num_nodes);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuGraphGetNodes)
        return CUDA_ERROR_NOT_SUPPORTED;
    void *g = NULL;
    CUresult rc =
        rq->h_graph ? sl_be_handle_get(s, SL_H_GRAPH, rq->h_graph, &g) : CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuGraphGetNodesReply *rp =
        BE_REPLY(reply, cu_graph_get_nodes, SLUICE__WIRE__REPLY__OUT_CU_GRAPH_GET_NODES,
                 Sluice__Cuda__CuGraphGetNodesReply, sluice__cuda__cu_graph_get_nodes_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t n = (size_t)rq->num_nodes;
    if (!n) {
        rc = api->cuGraphGetNodes((CUgraph)g, NULL, &n);
        rp->num_nodes = n;
        return rc;
    }
    CUgraphNode *nodes = calloc(n, sizeof *nodes);
    rp->nodes = nodes ? malloc(n * sizeof *rp->nodes) : NULL; /* freed with the reply */
    if (!rp->nodes) {
        free(nodes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rc = api->cuGraphGetNodes((CUgraph)g, nodes, &n);
    if (n > rq->num_nodes)
        n = (size_t)rq->num_nodes;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n && nodes[i]; i++) {
        rc = node_id(s, nodes[i], &rp->nodes[i]);
        rp->n_nodes = i + 1;
    }
    rp->num_nodes = n;
    free(nodes);
    return rc;
}

void be_register_graph(struct sl_be_dispatch_entry *t)
{
    t[SL_CALL_cuGraphGetNodes].handler = h_get_nodes;
    t[SL_CALL_cuGraphAddKernelNode_v2].handler = h_add_kernel;
    t[SL_CALL_cuGraphKernelNodeSetParams_v2].handler = h_set_kernel;
    t[SL_CALL_cuGraphExecKernelNodeSetParams_v2].handler = h_exec_set_kernel;
    t[SL_CALL_cuGraphAddMemsetNode].handler = h_add_memset;
}
