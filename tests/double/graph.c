/* Graphs: the graph and node objects every graph file shares, graph creation, kernel,
 * memset and empty nodes, the node lists and types.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "graph.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "graph_life.h"

struct dbl_graph *graph_new(bool registered)
{
    struct dbl_graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->hdr.kind = K_GRAPH;
    g->registered = registered;
    if (registered)
        obj_add(g);
    return g;
}

void node_free(struct dbl_gnode *n)
{
    for (unsigned i = 0; n->bodies && i < n->csize; i++)
        graph_free(n->bodies[i]);
    free(n->bodies);
    obj_del(n);
    free(n);
}

void graph_free(struct dbl_graph *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++)
        node_free(g->nodes[i]);
    free(g->nodes);
    /* conditional handles stay (instances may still use them) */
    obj_del(g);
    free(g);
}

EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    if (!phGraph || flags)
        return CUDA_ERROR_INVALID_VALUE;
    dbl_lock();
    struct dbl_graph *g = graph_new(true);
    dbl_unlock();
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

static bool owned_body(const struct dbl_graph *g)
{
    for (size_t i = 0; i < obj_count(); i++) {
        const struct dbl_gnode *n = obj_at(i);
        if (n->hdr.kind == K_GNODE && n->bodies)
            for (unsigned j = 0; j < n->csize; j++)
                if (n->bodies[j] == g)
                    return true;
    }
    return false;
}

static CUresult graph_destroy(CUgraph h)
{
    struct dbl_graph *g = obj_get(h, K_GRAPH);
    if (!g || owned_body(g))
        return CUDA_ERROR_INVALID_VALUE;
    graph_free(g);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    LOCKED(graph_destroy(hGraph));
}

/* Fills a kernel node from the params (kernelParams or the extra buffer). */
static CUresult knode_set(struct dbl_gnode *n, const CUDA_KERNEL_NODE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_func *f = obj_get(p->func ? (void *)p->func : (void *)p->kern, K_FUNC);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    const struct dbl_kernel *k = f->kernel;
    unsigned char buf[DBL_NODE_PARAM_BYTES];
    memset(buf, 0, sizeof buf);
    if (k && k->nparams) {
        size_t end = 0;
        for (unsigned i = 0; i < k->nparams; i++)
            if (k->params[i].offset + k->params[i].size > end)
                end = k->params[i].offset + k->params[i].size;
        if (end > sizeof buf)
            return CUDA_ERROR_INVALID_VALUE;
        if (p->kernelParams) {
            for (unsigned i = 0; i < k->nparams; i++)
                memcpy(buf + k->params[i].offset, p->kernelParams[i], k->params[i].size);
        } else if (p->extra) {
            void *eb = NULL;
            size_t es = 0;
            for (size_t i = 0; p->extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
                if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                    eb = p->extra[i + 1];
                else if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                    es = *(size_t *)p->extra[i + 1];
            }
            if (!eb || es != end)
                return CUDA_ERROR_INVALID_VALUE;
            memcpy(buf, eb, end);
        } else {
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    n->type = N_KERNEL;
    n->func = f;
    n->grid[0] = p->gridDimX;
    n->grid[1] = p->gridDimY;
    n->grid[2] = p->gridDimZ;
    n->block[0] = p->blockDimX;
    n->block[1] = p->blockDimY;
    n->block[2] = p->blockDimZ;
    n->shared = p->sharedMemBytes;
    memcpy(n->params, buf, sizeof buf);
    return CUDA_SUCCESS;
}

CUresult node_add(CUgraphNode *ph, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                  struct dbl_gnode *proto)
{
    struct dbl_graph *g = obj_get(hGraph, K_GRAPH);
    if (!g || !ph || (ndeps && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    if (ndeps > DBL_MAX_DEPS)
        return CUDA_ERROR_NOT_SUPPORTED;
    for (size_t i = 0; i < ndeps; i++) {
        struct dbl_gnode *d = obj_get(deps[i], K_GNODE);
        if (!d || d->graph != g)
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 8;
        struct dbl_gnode **nn = realloc(g->nodes, cap * sizeof *nn);
        if (!nn)
            return CUDA_ERROR_OUT_OF_MEMORY;
        g->nodes = nn;
        g->cap = cap;
    }
    struct dbl_gnode *n = malloc(sizeof *n);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *n = *proto;
    n->hdr.kind = K_GNODE;
    n->hdr.ctx = NULL;
    n->graph = g;
    n->ndeps = ndeps;
    for (size_t i = 0; i < ndeps; i++)
        n->deps[i] = obj_get(deps[i], K_GNODE);
    g->nodes[g->n++] = n;
    obj_add(n);
    *ph = (CUgraphNode)n;
    return CUDA_SUCCESS;
}

CUresult kernel_proto(struct dbl_gnode *proto, const CUDA_KERNEL_NODE_PARAMS *p)
{
    memset(proto, 0, sizeof *proto);
    return knode_set(proto, p);
}

static CUresult add_kernel(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                           const CUDA_KERNEL_NODE_PARAMS *p)
{
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    CUresult rc = knode_set(&proto, p);
    return rc ? rc : node_add(ph, g, deps, nd, &proto);
}

EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                        const CUgraphNode *dependencies, size_t numDependencies,
                                        const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    LOCKED(add_kernel(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

struct dbl_gnode *node_of(CUgraphNode h, int type)
{
    struct dbl_gnode *n = obj_get(h, K_GNODE);
    return n && (!type || n->type == type) ? n : NULL;
}

static CUresult set_kernel(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS *p)
{
    struct dbl_gnode *n = node_of(h, N_KERNEL);
    return n ? knode_set(n, p) : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
                                              const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    LOCKED(set_kernel(hNode, nodeParams));
}

static CUresult get_kernel(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS *p)
{
    struct dbl_gnode *n = node_of(h, N_KERNEL);
    if (!n || !p)
        return CUDA_ERROR_INVALID_VALUE;
    const struct dbl_kernel *k = ((struct dbl_func *)n->func)->kernel;
    for (unsigned j = 0; k && j < k->nparams; j++)
        n->argv[j] = n->params + k->params[j].offset;
    memset(p, 0, sizeof *p);
    p->func = (CUfunction)n->func;
    p->gridDimX = n->grid[0];
    p->gridDimY = n->grid[1];
    p->gridDimZ = n->grid[2];
    p->blockDimX = n->block[0];
    p->blockDimY = n->block[1];
    p->blockDimZ = n->block[2];
    p->sharedMemBytes = (unsigned)n->shared;
    p->kernelParams = n->argv;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode,
                                              CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    LOCKED(get_kernel(hNode, nodeParams));
}

static CUresult memset_check(const CUDA_MEMSET_NODE_PARAMS *p)
{
    if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || !p->width ||
        !p->height || (p->height > 1 && p->pitch < p->width * p->elementSize))
        return CUDA_ERROR_INVALID_VALUE;
    size_t span = (p->height - 1) * p->pitch + p->width * p->elementSize;
    return dev_range(DEVPTR(p->dst), span) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult add_memset(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                           const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
    (void)ctx;
    CUresult rc = memset_check(p);
    if (rc)
        return rc;
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_MEMSET;
    proto.memset = *p;
    return node_add(ph, g, deps, nd, &proto);
}

EXPORT CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                     const CUgraphNode *dependencies, size_t numDependencies,
                                     const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    LOCKED(add_memset(phGraphNode, hGraph, dependencies, numDependencies, memsetParams, ctx));
}

static CUresult memset_params(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS *get,
                              const CUDA_MEMSET_NODE_PARAMS *set)
{
    struct dbl_gnode *n = node_of(h, N_MEMSET);
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    if (get) {
        *get = n->memset;
        return CUDA_SUCCESS;
    }
    CUresult rc = memset_check(set);
    if (!rc)
        n->memset = *set;
    return rc;
}

EXPORT CUresult cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(memset_params(hNode, nodeParams, NULL));
}

EXPORT CUresult cuGraphMemsetNodeSetParams(CUgraphNode hNode,
                                           const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    LOCKED(memset_params(hNode, NULL, nodeParams));
}

static CUresult add_empty(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd)
{
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_EMPTY;
    return node_add(ph, g, deps, nd, &proto);
}

EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                    const CUgraphNode *dependencies, size_t numDependencies)
{
    LOCKED(add_empty(phGraphNode, hGraph, dependencies, numDependencies));
}

/* node queries */
static CUresult node_type(CUgraphNode h, CUgraphNodeType *t)
{
    static const CUgraphNodeType types[] = {
        [N_KERNEL] = CU_GRAPH_NODE_TYPE_KERNEL, [N_MEMSET] = CU_GRAPH_NODE_TYPE_MEMSET,
        [N_MEMCPY] = CU_GRAPH_NODE_TYPE_MEMCPY, [N_HOST] = CU_GRAPH_NODE_TYPE_HOST,
        [N_EMPTY] = CU_GRAPH_NODE_TYPE_EMPTY,   [N_ALLOC] = CU_GRAPH_NODE_TYPE_MEM_ALLOC,
        [N_FREE] = CU_GRAPH_NODE_TYPE_MEM_FREE, [N_COND] = CU_GRAPH_NODE_TYPE_CONDITIONAL};
    struct dbl_gnode *n = node_of(h, 0);
    if (!n || !t)
        return CUDA_ERROR_INVALID_VALUE;
    *t = types[n->type];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    LOCKED(node_type(hNode, type));
}

static CUresult root_nodes(CUgraph h, CUgraphNode *nodes, size_t *num)
{
    struct dbl_graph *g = obj_get(h, K_GRAPH);
    if (!g || !num)
        return CUDA_ERROR_INVALID_VALUE;
    size_t k = 0;
    for (size_t i = 0; i < g->n; i++)
        if (!g->nodes[i]->ndeps) {
            if (nodes && k < *num)
                nodes[k] = (CUgraphNode)g->nodes[i];
            k++;
        }
    if (nodes)
        for (size_t i = k; i < *num; i++)
            nodes[i] = NULL;
    if (!nodes || k < *num)
        *num = k;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
    LOCKED(root_nodes(hGraph, rootNodes, numRootNodes));
}

static CUresult exec_set_kernel(CUgraphExec h, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p)
{
    struct dbl_gnode *n = exec_node(h, node, N_KERNEL);
    return n ? knode_set(n, p) : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                  const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    LOCKED(exec_set_kernel(hGraphExec, hNode, nodeParams));
}

static CUresult exec_set_memset(CUgraphExec h, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p)
{
    struct dbl_gnode *n = exec_node(h, node, N_MEMSET);
    CUresult rc = n ? memset_check(p) : CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        n->memset = *p;
    return rc;
}

EXPORT CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                               const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                               CUcontext ctx)
{
    (void)ctx;
    LOCKED(exec_set_memset(hGraphExec, hNode, memsetParams));
}

static CUresult graph_nodes(CUgraph h, CUgraphNode *nodes, size_t *num)
{
    struct dbl_graph *g = obj_get(h, K_GRAPH);
    if (!g || !num)
        return CUDA_ERROR_INVALID_VALUE;
    if (!nodes) {
        *num = g->n;
        return CUDA_SUCCESS;
    }
    for (size_t i = 0; i < *num; i++)
        nodes[i] = i < g->n ? (CUgraphNode)g->nodes[i] : NULL;
    if (*num > g->n)
        *num = g->n;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    LOCKED(graph_nodes(hGraph, nodes, numNodes));
}

/* Every edge (dependency -> node) in the order the nodes were added; all edge data default. */
static CUresult graph_edges(CUgraph h, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *data,
                            size_t *num)
{
    struct dbl_graph *g = obj_get(h, K_GRAPH);
    if (!g || !num || !from != !to || (data && !from))
        return CUDA_ERROR_INVALID_VALUE;
    size_t k = 0;
    for (size_t i = 0; i < g->n; i++)
        for (size_t j = 0; j < g->nodes[i]->ndeps; j++, k++)
            if (from && k < *num) {
                from[k] = (CUgraphNode)g->nodes[i]->deps[j];
                to[k] = (CUgraphNode)g->nodes[i];
                if (data)
                    memset(&data[k], 0, sizeof data[k]);
            }
    for (size_t i = k; from && i < *num; i++) {
        from[i] = to[i] = NULL;
        if (data)
            memset(&data[i], 0, sizeof data[i]);
    }
    if (!from || k < *num)
        *num = k;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                                   CUgraphEdgeData *edgeData, size_t *numEdges)
{
    LOCKED(graph_edges(hGraph, from, to, edgeData, numEdges));
}
