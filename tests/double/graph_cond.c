/* Conditional handles and nodes, and the stream capture queries (capture.c captures).
 * TEST DOUBLE: never a GPU result (README.md). */
#include "graph_cond.h"

#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "graph.h"

static struct dbl_cond *conds;

/* conditional handles and nodes */
static CUresult cond_create(CUgraphConditionalHandle *h, CUgraph hGraph, unsigned def,
                            unsigned flags)
{
    struct dbl_graph *g = obj_get(hGraph, K_GRAPH);
    if (!g || !h || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_cond *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->graph = g;
    c->value = c->def = def;
    c->flags = flags;
    c->next = conds;
    conds = c;
    *h = (CUgraphConditionalHandle)(uintptr_t)c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out,
                                               CUgraph hGraph, CUcontext ctx,
                                               unsigned int defaultLaunchValue, unsigned int flags)
{
    (void)ctx;
    LOCKED(cond_create(pHandle_out, hGraph, defaultLaunchValue, flags));
}

static struct dbl_cond *cond_of(unsigned long long h)
{
    for (struct dbl_cond *c = conds; c; c = c->next)
        if ((uintptr_t)c == h)
            return c;
    return NULL;
}

/* kernels.c: cudaGraphSetConditional(handle, value) (called with the lock held by the launch) */
void dbl_cond_set(struct dbl_launch *l, unsigned long long handle, unsigned value)
{
    struct dbl_cond *c = cond_of(handle);
    if (c)
        c->value = value;
    else
        l->status = CUDA_ERROR_ILLEGAL_ADDRESS;
}

static CUresult add_node_v2(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                            CUgraphNodeParams *p)
{
    if (!p || p->type != CU_GRAPH_NODE_TYPE_CONDITIONAL)
        return CUDA_ERROR_NOT_SUPPORTED; /* the backend sends the other types their own way */
    CUDA_CONDITIONAL_NODE_PARAMS *c = &p->conditional;
    struct dbl_cond *cond = cond_of((unsigned long long)c->handle);
    unsigned max = c->type == CU_GRAPH_COND_TYPE_IF      ? 2
                   : c->type == CU_GRAPH_COND_TYPE_WHILE ? 1
                                                         : 64;
    if (!cond || c->type > CU_GRAPH_COND_TYPE_SWITCH || !c->size || c->size > max)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_COND;
    proto.cond = cond;
    proto.ctype = c->type;
    proto.csize = c->size;
    proto.bodies = calloc(c->size, sizeof *proto.bodies);
    if (!proto.bodies)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned i = 0; i < c->size; i++)
        if (!(proto.bodies[i] = graph_new(true))) {
            for (unsigned j = 0; j < i; j++)
                graph_free(proto.bodies[j]);
            free(proto.bodies);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    CUresult rc = node_add(ph, g, deps, nd, &proto);
    if (rc) {
        for (unsigned i = 0; i < c->size; i++)
            graph_free(proto.bodies[i]);
        free(proto.bodies);
        return rc;
    }
    c->phGraph_out = (CUgraph *)((struct dbl_gnode *)*ph)->bodies;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                  const CUgraphNode *dependencies,
                                  const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                  CUgraphNodeParams *nodeParams)
{
    if (dependencyData)
        return CUDA_ERROR_NOT_SUPPORTED;
    LOCKED(add_node_v2(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

static CUresult capture_info(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *n)
{
    CUresult rc = check_stream(s);
    if (rc || !status)
        return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    const struct dbl_capture *c = dbl_capture_of(s);
    *status = !c                       ? CU_STREAM_CAPTURE_STATUS_NONE
              : dbl_capture_invalid(c) ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                       : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (id)
        *id = 0;
    if (graph)
        *graph = NULL;
    if (deps)
        *deps = NULL;
    if (edges)
        *edges = NULL; /* every edge has default data */
    if (n)
        *n = 0;
    if (c)
        dbl_capture_state(c, graph, id, deps, n);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream hStream,
                                          CUstreamCaptureStatus *captureStatus_out,
                                          cuuint64_t *id_out, CUgraph *graph_out,
                                          const CUgraphNode **dependencies_out,
                                          const CUgraphEdgeData **edgeData_out,
                                          size_t *numDependencies_out)
{
    LOCKED(capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out));
}

EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    LOCKED(capture_info(hStream, captureStatus, NULL, NULL, NULL, NULL, NULL));
}

/* The per-thread default stream shares the NULL stream's capture state here (as its clock). */
EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return cuStreamIsCapturing(hStream, captureStatus);
}

/* A launch of an instance of g: its handles made with CU_GRAPH_COND_ASSIGN_DEFAULT start at
 * their default. */
void cond_defaults(const struct dbl_graph *g)
{
    for (struct dbl_cond *c = conds; c; c = c->next)
        if (c->graph == g && (c->flags & CU_GRAPH_COND_ASSIGN_DEFAULT))
            c->value = c->def;
}
