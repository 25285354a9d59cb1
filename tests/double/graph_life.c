/* Lifetimes of graphs and their instances: destroying, cloning, instantiating, updating
 * and launching (the nodes run in order on the calling thread).
 * TEST DOUBLE: never a GPU result (README.md). */
#include "graph_life.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "graph.h"
#include "graph_cond.h"
#include "graph_mem.h"
#include "launch.h"

static CUresult run_graph(const struct dbl_graph *g, CUstream s, int depth);

static CUresult destroy_node(CUgraphNode h)
{
    struct dbl_gnode *n = node_of(h, 0);
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_graph *g = n->graph;
    for (size_t i = 0; i < g->n; i++)
        if (g->nodes[i] == n) {
            memmove(&g->nodes[i], &g->nodes[i + 1], (g->n - i - 1) * sizeof *g->nodes);
            g->n--;
            break;
        }
    for (size_t i = 0; i < g->n; i++) { /* its edges go with it */
        struct dbl_gnode *o = g->nodes[i];
        size_t k = 0;
        for (size_t j = 0; j < o->ndeps; j++)
            if (o->deps[j] != n)
                o->deps[k++] = o->deps[j];
        o->ndeps = k;
    }
    node_free(n);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroyNode(CUgraphNode hNode)
{
    LOCKED(destroy_node(hNode));
}

/* Deep copy of g (bodies too); registered: the copy's graphs and nodes are objects. */
static struct dbl_graph *graph_copy(const struct dbl_graph *g, bool registered)
{
    struct dbl_graph *c = graph_new(registered);
    if (!c)
        return NULL;
    c->nodes = g->n ? calloc(g->n, sizeof *c->nodes) : NULL;
    if (g->n && !c->nodes) {
        graph_free(c);
        return NULL;
    }
    for (size_t i = 0; i < g->n; i++) {
        struct dbl_gnode *n = malloc(sizeof *n);
        if (!n) {
            graph_free(c);
            return NULL;
        }
        *n = *g->nodes[i];
        n->graph = c;
        n->origin = g->nodes[i];
        for (size_t j = 0; j < n->ndeps; j++) /* the copy's own nodes: always earlier ones */
            for (size_t k = 0; k < i; k++)
                if (g->nodes[k] == n->deps[j])
                    n->deps[j] = c->nodes[k];
        n->bodies = NULL;
        c->nodes[c->n++] = n;
        if (registered)
            obj_add(n);
        if (g->nodes[i]->bodies) {
            n->bodies = calloc(n->csize, sizeof *n->bodies);
            for (unsigned j = 0; n->bodies && j < n->csize; j++)
                if (!(n->bodies[j] = graph_copy(g->nodes[i]->bodies[j], registered))) {
                    graph_free(c);
                    return NULL;
                }
            if (!n->bodies) {
                n->csize = 0;
                graph_free(c);
                return NULL;
            }
        }
    }
    c->cap = c->n;
    return c;
}

static CUresult graph_clone(CUgraph *out, CUgraph h)
{
    struct dbl_graph *g = obj_get(h, K_GRAPH);
    if (!g || !out)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_graph *c = graph_copy(g, true);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = (CUgraph)c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
    LOCKED(graph_clone(phGraphClone, originalGraph));
}

static struct dbl_gnode *find_origin(const struct dbl_graph *g, const void *orig)
{
    for (size_t i = 0; g && i < g->n; i++) {
        if (g->nodes[i]->origin == orig)
            return g->nodes[i];
        for (unsigned j = 0; g->nodes[i]->bodies && j < g->nodes[i]->csize; j++) {
            struct dbl_gnode *n = find_origin(g->nodes[i]->bodies[j], orig);
            if (n)
                return n;
        }
    }
    return NULL;
}

static CUresult find_in_clone(CUgraphNode *out, CUgraphNode orig, CUgraph hClone)
{
    struct dbl_graph *g = obj_get(hClone, K_GRAPH);
    if (!g || !out || !orig)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_gnode *n = find_origin(g, orig);
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode,
                                       CUgraph hClonedGraph)
{
    LOCKED(find_in_clone(phNode, hOriginalNode, hClonedGraph));
}

/* instances */
static CUresult instantiate(CUgraphExec *ph, CUgraph h)
{
    struct dbl_graph *g = obj_get(h, K_GRAPH);
    if (!g || !ph)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_gexec *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->hdr.kind = K_GEXEC;
    e->graph = g;
    if (!(e->snap = graph_copy(g, false))) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    obj_add(e);
    *ph = (CUgraphExec)e;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                            unsigned long long flags)
{
    (void)flags;
    LOCKED(instantiate(phGraphExec, hGraph));
}

EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    if (!instantiateParams)
        return CUDA_ERROR_INVALID_VALUE;
    dbl_lock();
    CUresult rc = instantiate(phGraphExec, hGraph);
    dbl_unlock();
    instantiateParams->hErrNode_out = NULL;
    instantiateParams->result_out =
        rc ? CUDA_GRAPH_INSTANTIATE_ERROR : CUDA_GRAPH_INSTANTIATE_SUCCESS;
    return rc;
}

struct dbl_gnode *exec_node(CUgraphExec h, CUgraphNode node, int type)
{
    struct dbl_gexec *e = obj_get(h, K_GEXEC);
    struct dbl_gnode *n = e && node ? find_origin(e->snap, node) : NULL;
    return n && n->type == type ? n : NULL;
}

/* Update: the graph must have the instance's shape (node count and types, in order); the
 * instance takes the graph's parameters and keeps its own node identities. */
static CUresult exec_update(CUgraphExec h, CUgraph hGraph, CUgraphExecUpdateResultInfo *info)
{
    struct dbl_gexec *e = obj_get(h, K_GEXEC);
    struct dbl_graph *g = obj_get(hGraph, K_GRAPH);
    if (!e || !g || !info)
        return CUDA_ERROR_INVALID_VALUE;
    memset(info, 0, sizeof *info);
    struct dbl_graph *s = e->snap;
    if (s->n != g->n) {
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    for (size_t i = 0; i < g->n; i++)
        if (s->nodes[i]->type != g->nodes[i]->type || g->nodes[i]->type == N_COND ||
            g->nodes[i]->type == N_ALLOC || g->nodes[i]->type == N_FREE) {
            info->result = s->nodes[i]->type != g->nodes[i]->type
                               ? CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED
                               : CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
            info->errorNode = (CUgraphNode)g->nodes[i];
            return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
        }
    for (size_t i = 0; i < g->n; i++) {
        struct dbl_gnode *d = s->nodes[i];
        const void *origin = d->origin;
        struct dbl_graph *graph = d->graph;
        *d = *g->nodes[i];
        d->origin = origin;
        d->graph = graph;
        d->bodies = NULL;
        d->csize = 0;
    }
    info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                     CUgraphExecUpdateResultInfo *resultInfo)
{
    LOCKED(exec_update(hGraphExec, hGraph, resultInfo));
}

static CUresult run_node(const struct dbl_gnode *n, CUstream s, int depth)
{
    switch (n->type) {
    case N_KERNEL: {
        void *ptrs[DBL_MAX_PARAMS];
        const struct dbl_kernel *k = ((struct dbl_func *)n->func)->kernel;
        for (unsigned j = 0; k && j < k->nparams; j++)
            ptrs[j] = (void *)(n->params + k->params[j].offset);
        return launch(n->func, n->grid, n->block, n->shared, s, ptrs, NULL);
    }
    case N_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS *m = &n->memset;
        CUresult rc = CUDA_SUCCESS;
        for (size_t r = 0; r < m->height && !rc; r++)
            rc = memset_n(m->dst + r * m->pitch, m->value, m->elementSize, m->width, s);
        return rc;
    }
    case N_MEMCPY:
        return copy3d(&n->memcpy, s);
    case N_HOST:
        n->host.fn(n->host.userData); /* the stream has reached this point */
        return CUDA_SUCCESS;
    case N_ALLOC:
        if (!n->alloc->live) {
            n->alloc->live = true;
            graph_mem_use(n->alloc->size);
        }
        return CUDA_SUCCESS;
    case N_FREE:
        if (n->alloc->live) {
            n->alloc->live = false;
            graph_mem_unuse(n->alloc->size);
        }
        return CUDA_SUCCESS;
    case N_COND: {
        struct dbl_cond *c = n->cond;
        if (depth > 8)
            return CUDA_ERROR_INVALID_VALUE;
        if (n->ctype == CU_GRAPH_COND_TYPE_IF)
            return c->value        ? run_graph(n->bodies[0], s, depth + 1)
                   : n->csize == 2 ? run_graph(n->bodies[1], s, depth + 1)
                                   : CUDA_SUCCESS;
        if (n->ctype == CU_GRAPH_COND_TYPE_SWITCH)
            return c->value < n->csize ? run_graph(n->bodies[c->value], s, depth + 1)
                                       : CUDA_SUCCESS;
        for (long i = 0; c->value; i++) {
            if (i == DBL_MAX_WHILE)
                return CUDA_ERROR_LAUNCH_TIMEOUT;
            CUresult rc = run_graph(n->bodies[0], s, depth + 1);
            if (rc)
                return rc;
        }
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_SUCCESS;
    }
}

static CUresult run_graph(const struct dbl_graph *g, CUstream s, int depth)
{
    for (size_t i = 0; i < g->n; i++) {
        CUresult rc = run_node(g->nodes[i], s, depth);
        if (rc)
            return rc;
    }
    return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec h, CUstream s)
{
    struct dbl_gexec *e = obj_get(h, K_GEXEC);
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_stream(s);
    if (rc)
        return rc;
    cond_defaults(e->graph);
    return run_graph(e->snap, s, 0);
}

EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    LOCKED(graph_launch(hGraphExec, hStream));
}

EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    LOCKED(graph_launch(hGraphExec, hStream));
}

static CUresult exec_destroy(CUgraphExec h)
{
    struct dbl_gexec *e = obj_get(h, K_GEXEC);
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    graph_free(e->snap);
    obj_del(e);
    free(e);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    LOCKED(exec_destroy(hGraphExec));
}
