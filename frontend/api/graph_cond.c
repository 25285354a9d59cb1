/* cuGraphAddNode, cuGraphNodeSetParams, cuGraphExecNodeSetParams (the generic node API), the
 * conditional handles and nodes, and the stream-capture queries that build graphs around them.
 *
 * The generic calls are dispatched on the node type to the type's own call (so that every node
 * type travels and is checked one way); a conditional node goes as slGraphAddConditional and
 * the ids of its body graphs come back into a CUDA-owned array (here: the frontend's, kept for
 * the life of the process). Dependency edge data other than the default is not supported.
 * A conditional handle is the driver's value (kernels receive it). cuStreamGetCaptureInfo_v3/_v2
 * answer dependency arrays the frontend keeps per thread until the thread's next query. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "api/graph.h"
#include "api/graph_host.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

static int default_edges(const CUgraphEdgeData *e, size_t n)
{
    static const CUgraphEdgeData zero;
    for (size_t i = 0; e && i < n; i++)
        if (memcmp(&e[i], &zero, sizeof zero) != 0)
            return 0;
    return 1;
}

static void kernel_v2(const CUDA_KERNEL_NODE_PARAMS_v3 *in, CUDA_KERNEL_NODE_PARAMS *out)
{
    memset(out, 0, sizeof *out);
    out->func = in->func;
    out->gridDimX = in->gridDimX;
    out->gridDimY = in->gridDimY;
    out->gridDimZ = in->gridDimZ;
    out->blockDimX = in->blockDimX;
    out->blockDimY = in->blockDimY;
    out->blockDimZ = in->blockDimZ;
    out->sharedMemBytes = in->sharedMemBytes;
    out->kernelParams = in->kernelParams;
    out->extra = in->extra;
    out->kern = in->kern;
    out->ctx = in->ctx;
}

static void memset_v1(const CUDA_MEMSET_NODE_PARAMS_v2 *in, CUDA_MEMSET_NODE_PARAMS *out)
{
    memset(out, 0, sizeof *out);
    out->dst = in->dst;
    out->pitch = in->pitch;
    out->value = in->value;
    out->elementSize = in->elementSize;
    out->width = in->width;
    out->height = in->height;
}

/* ---------------------------------------------------------------- conditional nodes */

CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out, CUgraph hGraph,
                                        CUcontext ctx, unsigned int defaultLaunchValue,
                                        unsigned int flags)
{
    if (!pHandle_out)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuGraphConditionalHandleCreateRequest rq =
        SLUICE__CUDA__CU_GRAPH_CONDITIONAL_HANDLE_CREATE_REQUEST__INIT;
    rq.h_graph = (uint64_t)(uintptr_t)hGraph;
    rq.ctx = (uint64_t)(uintptr_t)ctx;
    rq.default_launch_value = defaultLaunchValue;
    rq.flags = flags;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphConditionalHandleCreate, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    if (rc == CUDA_SUCCESS) {
        if (SL_FE_REPLY(cuGraphConditionalHandleCreate, rep))
            *pHandle_out =
                (CUgraphConditionalHandle)rep->cu_graph_conditional_handle_create->p_handle_out;
        else
            rc = CUDA_ERROR_UNKNOWN;
    }
    sl_fe_reply_free(rep);
    return rc;
}

/* The CUDA-owned arrays of body graphs handed out (kept for the life of the process). */
struct bodies {
    struct bodies *next;
    CUgraph g[];
};
static struct bodies *g_bodies;
static pthread_mutex_t g_bodies_lock = PTHREAD_MUTEX_INITIALIZER;

static CUgraph *bodies_new(unsigned n)
{
    struct bodies *b = calloc(1, sizeof *b + n * sizeof(CUgraph));
    if (!b)
        return NULL;
    pthread_mutex_lock(&g_bodies_lock);
    b->next = g_bodies;
    g_bodies = b;
    pthread_mutex_unlock(&g_bodies_lock);
    return b->g;
}

static CUresult add_conditional(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n,
                                CUDA_CONDITIONAL_NODE_PARAMS *c)
{
    uint64_t *ids = NULL;
    CUresult rc = sl_fe_g_deps(deps, n, &ids);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__SlGraphAddConditionalRequest rq =
        SLUICE__CUDA__SL_GRAPH_ADD_CONDITIONAL_REQUEST__INIT;
    rq.graph = (uint64_t)(uintptr_t)g;
    rq.deps = ids;
    rq.n_deps = n;
    rq.handle = (uint64_t)c->handle;
    rq.cond_type = (uint32_t)c->type;
    rq.size = c->size;
    rq.ctx = (uint64_t)(uintptr_t)c->ctx;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(slGraphAddConditional, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    rc = sl_fe_call(&call, &rep);
    free(ids);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    const Sluice__Cuda__SlGraphAddConditionalReply *r = rep->sl_graph_add_conditional;
    if (rc == CUDA_SUCCESS &&
        (!SL_FE_REPLY(slGraphAddConditional, rep) || !r->node || r->n_bodies != c->size))
        rc = CUDA_ERROR_UNKNOWN;
    CUgraph *bodies = rc == CUDA_SUCCESS ? bodies_new(c->size) : NULL;
    if (rc == CUDA_SUCCESS && !bodies)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        for (size_t i = 0; i < r->n_bodies; i++)
            bodies[i] = (CUgraph)(uintptr_t)r->bodies[i];
        c->phGraph_out = bodies; /* CUDA-owned: lives as long as the process */
        *ph = (CUgraphNode)(uintptr_t)r->node;
    }
    sl_fe_reply_free(rep);
    return rc;
}

static CUresult add_node(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps,
                         const CUgraphEdgeData *edges, size_t n, CUgraphNodeParams *p)
{
    if (!ph || !p)
        return CUDA_ERROR_INVALID_VALUE;
    if (!default_edges(edges, n))
        return sl_fe_unsupported("cuGraphAddNode with non-default edge data");
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS k;
        kernel_v2(&p->kernel, &k);
        return cuGraphAddKernelNode_v2(ph, g, deps, n, &k);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return cuGraphAddMemcpyNode(ph, g, deps, n, &p->memcpy.copyParams, p->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS m;
        memset_v1(&p->memset, &m);
        return cuGraphAddMemsetNode(ph, g, deps, n, &m, p->memset.ctx);
    }
    case CU_GRAPH_NODE_TYPE_HOST: {
        CUDA_HOST_NODE_PARAMS h = {p->host.fn, p->host.userData};
        return cuGraphAddHostNode(ph, g, deps, n, &h);
    }
    case CU_GRAPH_NODE_TYPE_GRAPH:
        if (p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE)
            return sl_fe_unsupported("cuGraphAddNode of a child graph moved into its node");
        return cuGraphAddChildGraphNode(ph, g, deps, n, p->graph.graph);
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return cuGraphAddEmptyNode(ph, g, deps, n);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return cuGraphAddEventWaitNode(ph, g, deps, n, p->eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return cuGraphAddEventRecordNode(ph, g, deps, n, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
        CUDA_MEM_ALLOC_NODE_PARAMS a;
        memset(&a, 0, sizeof a);
        a.poolProps = p->alloc.poolProps;
        a.accessDescs = p->alloc.accessDescs;
        a.accessDescCount = p->alloc.accessDescCount;
        a.bytesize = p->alloc.bytesize;
        CUresult rc = cuGraphAddMemAllocNode(ph, g, deps, n, &a);
        if (rc == CUDA_SUCCESS)
            p->alloc.dptr = a.dptr;
        return rc;
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return cuGraphAddMemFreeNode(ph, g, deps, n, p->free.dptr);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return add_conditional(ph, g, deps, n, &p->conditional);
    default:
        return sl_fe_unsupported("cuGraphAddNode of this node type");
    }
}

CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                           const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,
                           size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    return add_node(phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams);
}

CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                        size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    return add_node(phGraphNode, hGraph, dependencies, NULL, numDependencies, nodeParams);
}

CUresult cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    switch (nodeParams->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS k;
        kernel_v2(&nodeParams->kernel, &k);
        return cuGraphKernelNodeSetParams_v2(hNode, &k);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return cuGraphMemcpyNodeSetParams(hNode, &nodeParams->memcpy.copyParams);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS m;
        memset_v1(&nodeParams->memset, &m);
        return cuGraphMemsetNodeSetParams(hNode, &m);
    }
    case CU_GRAPH_NODE_TYPE_HOST: {
        CUDA_HOST_NODE_PARAMS h = {nodeParams->host.fn, nodeParams->host.userData};
        return cuGraphHostNodeSetParams(hNode, &h);
    }
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return cuGraphEventWaitNodeSetEvent(hNode, nodeParams->eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return cuGraphEventRecordNodeSetEvent(hNode, nodeParams->eventRecord.event);
    default:
        return sl_fe_unsupported("cuGraphNodeSetParams of this node type");
    }
}

CUresult cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                  CUgraphNodeParams *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    switch (nodeParams->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS k;
        kernel_v2(&nodeParams->kernel, &k);
        return cuGraphExecKernelNodeSetParams_v2(hGraphExec, hNode, &k);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return cuGraphExecMemcpyNodeSetParams(hGraphExec, hNode, &nodeParams->memcpy.copyParams,
                                              nodeParams->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS m;
        memset_v1(&nodeParams->memset, &m);
        return cuGraphExecMemsetNodeSetParams(hGraphExec, hNode, &m, nodeParams->memset.ctx);
    }
    case CU_GRAPH_NODE_TYPE_HOST: {
        CUDA_HOST_NODE_PARAMS h = {nodeParams->host.fn, nodeParams->host.userData};
        return cuGraphExecHostNodeSetParams(hGraphExec, hNode, &h);
    }
    case CU_GRAPH_NODE_TYPE_GRAPH:
        return cuGraphExecChildGraphNodeSetParams(hGraphExec, hNode, nodeParams->graph.graph);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return cuGraphExecEventWaitNodeSetEvent(hGraphExec, hNode, nodeParams->eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return cuGraphExecEventRecordNodeSetEvent(hGraphExec, hNode, nodeParams->eventRecord.event);
    default:
        return sl_fe_unsupported("cuGraphExecNodeSetParams of this node type");
    }
}

/* ---------------------------------------------------------------- exec update */

CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                              CUgraphExecUpdateResultInfo *resultInfo)
{
    if (!resultInfo)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuGraphExecUpdateV2Request rq =
        SLUICE__CUDA__CU_GRAPH_EXEC_UPDATE_V2_REQUEST__INIT;
    rq.h_graph_exec = (uint64_t)(uintptr_t)hGraphExec;
    rq.h_graph = (uint64_t)(uintptr_t)hGraph;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphExecUpdate_v2, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    sl_fe_g_exec_forget(rq.h_graph_exec);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    if (SL_FE_REPLY(cuGraphExecUpdate_v2, rep) &&
        rep->cu_graph_exec_update_v2->result_info.len == sizeof *resultInfo)
        memcpy(resultInfo, rep->cu_graph_exec_update_v2->result_info.data, sizeof *resultInfo);
    else if (rc == CUDA_SUCCESS)
        rc = CUDA_ERROR_UNKNOWN;
    sl_fe_reply_free(rep);
    return rc;
}

/* ---------------------------------------------------------------- stream capture */

static _Thread_local CUgraphNode *t_deps;
static _Thread_local CUgraphEdgeData *t_edges;

static CUresult capture_info(bool pt, CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *num)
{
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__SlStreamCaptureInfoRequest rq =
        SLUICE__CUDA__SL_STREAM_CAPTURE_INFO_REQUEST__INIT;
    rq.stream = (uint64_t)(uintptr_t)s;
    rq.per_thread = pt;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(slStreamCaptureInfo, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    const Sluice__Cuda__SlStreamCaptureInfoReply *r = rep->sl_stream_capture_info;
    if (rc == CUDA_SUCCESS &&
        (!SL_FE_REPLY(slStreamCaptureInfo, rep) ||
         (r->edges.len && r->edges.len != r->n_nodes * sizeof(CUgraphEdgeData))))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS) {
        size_t n = r->n_nodes;
        free(t_deps);
        free(t_edges);
        t_deps = n ? malloc(n * sizeof *t_deps) : NULL;
        t_edges = n ? calloc(n, sizeof *t_edges) : NULL;
        if (n && (!t_deps || !t_edges)) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            n = 0;
        }
        for (size_t i = 0; i < n; i++)
            t_deps[i] = (CUgraphNode)(uintptr_t)r->nodes[i];
        if (n && r->edges.len)
            memcpy(t_edges, r->edges.data, r->edges.len);
        *status = (CUstreamCaptureStatus)r->status;
        if (id)
            *id = r->capture_id;
        if (graph)
            *graph = (CUgraph)(uintptr_t)r->graph;
        if (deps)
            *deps = t_deps;
        if (edges)
            *edges = t_edges;
        if (num)
            *num = n;
    }
    sl_fe_reply_free(rep);
    return rc;
}

CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out,
                                   const CUgraphEdgeData **edgeData_out,
                                   size_t *numDependencies_out)
{
    return capture_info(false, hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
}

CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        const CUgraphEdgeData **edgeData_out,
                                        size_t *numDependencies_out)
{
    return capture_info(true, hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
}

CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out,
                                   size_t *numDependencies_out)
{
    return capture_info(false, hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        NULL, numDependencies_out);
}

CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        size_t *numDependencies_out)
{
    return capture_info(true, hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                        numDependencies_out);
}

static CUresult update_capture(bool pt, CUstream s, CUgraphNode *deps, const CUgraphEdgeData *edges,
                               size_t n, unsigned flags)
{
    uint64_t *ids = NULL;
    CUresult rc = sl_fe_g_deps(deps, n, &ids);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__SlStreamUpdateCaptureRequest rq =
        SLUICE__CUDA__SL_STREAM_UPDATE_CAPTURE_REQUEST__INIT;
    rq.stream = (uint64_t)(uintptr_t)s;
    rq.per_thread = pt;
    rq.nodes = ids;
    rq.n_nodes = n;
    if (edges && n && !default_edges(edges, n))
        rq.edges = (ProtobufCBinaryData){n * sizeof *edges, (uint8_t *)edges};
    rq.flags = flags;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(slStreamUpdateCapture, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    rc = sl_fe_call(&call, &rep);
    free(ids);
    return sl_fe_g_result(rc, rep);
}

CUresult cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
                                              const CUgraphEdgeData *dependencyData,
                                              size_t numDependencies, unsigned int flags)
{
    return update_capture(false, hStream, dependencies, dependencyData, numDependencies, flags);
}

CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream hStream, CUgraphNode *dependencies,
                                                   const CUgraphEdgeData *dependencyData,
                                                   size_t numDependencies, unsigned int flags)
{
    return update_capture(true, hStream, dependencies, dependencyData, numDependencies, flags);
}

CUresult cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                           size_t numDependencies, unsigned int flags)
{
    return update_capture(false, hStream, dependencies, NULL, numDependencies, flags);
}

CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream hStream, CUgraphNode *dependencies,
                                                size_t numDependencies, unsigned int flags)
{
    return update_capture(true, hStream, dependencies, NULL, numDependencies, flags);
}
