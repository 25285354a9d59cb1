/* Graph memcpy and host nodes (on graphs and on instances).
 * TEST DOUBLE: never a GPU result (README.md). */
#include "core.h"

#include <string.h>

#include "graph.h"
#include "graph_life.h"

/* memcpy nodes: the parameters are checked when the node runs (copy3d) */
static CUresult add_memcpy(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                           const CUDA_MEMCPY3D *p)
{
    if (!p || !p->WidthInBytes || !p->Height)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_MEMCPY;
    proto.memcpy = *p;
    return node_add(ph, g, deps, nd, &proto);
}

EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                     const CUgraphNode *dependencies, size_t numDependencies,
                                     const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    (void)ctx;
    LOCKED(add_memcpy(phGraphNode, hGraph, dependencies, numDependencies, copyParams));
}

static CUresult memcpy_params(CUgraphNode h, CUDA_MEMCPY3D *get, const CUDA_MEMCPY3D *set)
{
    struct dbl_gnode *n = node_of(h, N_MEMCPY);
    if (!n || (!get && (!set || !set->WidthInBytes || !set->Height)))
        return CUDA_ERROR_INVALID_VALUE;
    if (get)
        *get = n->memcpy;
    else
        n->memcpy = *set;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(memcpy_params(hNode, nodeParams, NULL));
}

EXPORT CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
    LOCKED(memcpy_params(hNode, NULL, nodeParams));
}

static CUresult add_host(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                         const CUDA_HOST_NODE_PARAMS *p)
{
    if (!p || !p->fn)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_HOST;
    proto.host = *p;
    return node_add(ph, g, deps, nd, &proto);
}

EXPORT CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                   const CUgraphNode *dependencies, size_t numDependencies,
                                   const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    LOCKED(add_host(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

static CUresult host_params(CUgraphNode h, CUDA_HOST_NODE_PARAMS *get,
                            const CUDA_HOST_NODE_PARAMS *set)
{
    struct dbl_gnode *n = node_of(h, N_HOST);
    if (!n || (!get && (!set || !set->fn)))
        return CUDA_ERROR_INVALID_VALUE;
    if (get)
        *get = n->host;
    else
        n->host = *set;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(host_params(hNode, nodeParams, NULL));
}

EXPORT CUresult cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    LOCKED(host_params(hNode, NULL, nodeParams));
}

static CUresult exec_set_memcpy(CUgraphExec h, CUgraphNode node, const CUDA_MEMCPY3D *p)
{
    struct dbl_gnode *n = exec_node(h, node, N_MEMCPY);
    if (!n || !p || !p->WidthInBytes || !p->Height)
        return CUDA_ERROR_INVALID_VALUE;
    n->memcpy = *p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                               const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    (void)ctx;
    LOCKED(exec_set_memcpy(hGraphExec, hNode, copyParams));
}

static CUresult exec_set_host(CUgraphExec h, CUgraphNode node, const CUDA_HOST_NODE_PARAMS *p)
{
    struct dbl_gnode *n = exec_node(h, node, N_HOST);
    if (!n || !p || !p->fn)
        return CUDA_ERROR_INVALID_VALUE;
    n->host = *p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                             const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    LOCKED(exec_set_host(hGraphExec, hNode, nodeParams));
}
