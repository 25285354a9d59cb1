/* Conditional nodes and the stream-capture queries that build graphs around them.
 *
 * A conditional handle is the driver's value, not an id: kernels receive it inside their
 * parameters (cudaGraphSetConditional), like device pointers. The session's handle table keeps
 * it (kind condhandle, looked up by value, parent its graph), so that a conditional node can
 * only use a handle of the session's own. slGraphAddConditional makes the node with
 * cuGraphAddNode and answers ids for the body graphs the driver made; bodies belong to the node
 * (their ids have the node's graph as parent and cannot be destroyed by the guest).
 * slStreamCaptureInfo / slStreamUpdateCapture carry cuStreamGetCaptureInfo_v3 and
 * cuStreamUpdateCaptureDependencies_v2 with their node arrays and edge data. */
#include <stdlib.h>
#include <string.h>

#include "api/graph.h"
#include "api/reply.h"
#include "session/handles.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

#define MAX_BODIES 1024u

static struct be_handle *cond_by_value(sl_be_session *s, uint64_t v)
{
    for (size_t i = 0; v && i < s->h.cap; i++) {
        struct be_handle *h = &s->h.slot[i];
        if (be_id_kind(h->id) == SL_H_CONDHANDLE && (uint64_t)(uintptr_t)h->native == v &&
            be_handles_find(&s->h, SL_H_CONDHANDLE, h->id) == h)
            return h;
    }
    return NULL;
}

CUresult be_h_cuGraphConditionalHandleCreate(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphConditionalHandleCreateRequest *rq =
        call->cu_graph_conditional_handle_create;
    if (!api->cuGraphConditionalHandleCreate)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraph g;
    void *cx = NULL;
    CUresult rc = be_g_graph(s, rq->h_graph, &g);
    if (rc == CUDA_SUCCESS)
        rc = sl_be_handle_get(s, SL_H_CONTEXT, rq->ctx, &cx);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuGraphConditionalHandleCreateReply *rp =
        BE_REPLY(reply, cu_graph_conditional_handle_create,
                 SLUICE__WIRE__REPLY__OUT_CU_GRAPH_CONDITIONAL_HANDLE_CREATE,
                 Sluice__Cuda__CuGraphConditionalHandleCreateReply,
                 sluice__cuda__cu_graph_conditional_handle_create_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUgraphConditionalHandle h = 0;
    rc = api->cuGraphConditionalHandleCreate(&h, g, (CUcontext)cx, rq->default_launch_value,
                                             rq->flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t id;
    uint64_t owner = s->cur_ctx == UINT64_MAX ? 0 : s->cur_ctx;
    rc = be_handles_put(&s->h, SL_H_CONDHANDLE, (void *)(uintptr_t)h, owner, rq->h_graph, &id);
    if (rc == CUDA_SUCCESS)
        rp->p_handle_out = (uint64_t)h; /* the value: kernels receive it */
    return rc;
}

CUresult be_h_slGraphAddConditional(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__SlGraphAddConditionalRequest *rq = call->sl_graph_add_conditional;
    if (!rq->size || rq->size > MAX_BODIES) {
        sl_be_detail(reply, "a conditional node of %u bodies", rq->size);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuGraphAddNode_v2 && !api->cuGraphAddNode)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct be_handle *ch = cond_by_value(s, rq->handle);
    if (!ch) {
        sl_be_detail(reply, "conditional handle 0x%llx is not the session's",
                     (unsigned long long)rq->handle);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUgraph g;
    void *cx = NULL;
    CUresult rc = be_g_graph(s, rq->graph, &g);
    if (rc == CUDA_SUCCESS)
        rc = sl_be_handle_get(s, SL_H_CONTEXT, rq->ctx, &cx);
    CUgraphNode *deps = NULL;
    if (rc == CUDA_SUCCESS)
        rc = be_g_deps_in(s, reply, rq->deps, rq->n_deps, rq->n_deps, &deps);
    struct be_gstate *st = rc == CUDA_SUCCESS ? be_g_state(s) : NULL;
    if (rc == CUDA_SUCCESS && !st)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    CUgraph *bodies = NULL; /* the driver's array, owned by the node */
    Sluice__Cuda__SlGraphAddConditionalReply *rp = NULL;
    if (rc == CUDA_SUCCESS) {
        rp = BE_REPLY(reply, sl_graph_add_conditional,
                      SLUICE__WIRE__REPLY__OUT_SL_GRAPH_ADD_CONDITIONAL,
                      Sluice__Cuda__SlGraphAddConditionalReply,
                      sluice__cuda__sl_graph_add_conditional_reply__init);
        if (rp)
            rp->bodies = calloc(rq->size, sizeof *rp->bodies);
        if (!rp || !rp->bodies)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUgraphNode node = NULL;
    if (rc == CUDA_SUCCESS) {
        CUgraphNodeParams p;
        memset(&p, 0, sizeof p);
        p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
        p.conditional.handle = (CUgraphConditionalHandle)rq->handle;
        p.conditional.type = (CUgraphConditionalNodeType)rq->cond_type;
        p.conditional.size = rq->size;
        p.conditional.ctx = (CUcontext)cx;
        rc = api->cuGraphAddNode_v2 ? api->cuGraphAddNode_v2(&node, g, deps, NULL, rq->n_deps, &p)
                                    : api->cuGraphAddNode(&node, g, deps, rq->n_deps, &p);
        bodies = p.conditional.phGraph_out;
        if (rc == CUDA_SUCCESS && !bodies)
            rc = CUDA_ERROR_UNKNOWN;
    }
    if (rc == CUDA_SUCCESS)
        rc = be_g_node_put(s, rq->graph, node, &rp->node);
    for (uint32_t i = 0; rc == CUDA_SUCCESS && i < rq->size; i++) {
        uint64_t owner = s->cur_ctx == UINT64_MAX ? 0 : s->cur_ctx;
        if (be_g_grow((void **)&st->bodies, &st->cap_bodies, st->n_bodies, sizeof *st->bodies))
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        if (rc == CUDA_SUCCESS)
            rc = be_handles_put(&s->h, SL_H_GRAPH, bodies[i], owner, rq->graph, &rp->bodies[i]);
        if (rc == CUDA_SUCCESS) {
            st->bodies[st->n_bodies++] = (struct be_gbody){rp->bodies[i], rq->graph, node};
            rp->n_bodies = i + 1;
        }
    }
    free(deps);
    return rc;
}

/* ---------------------------------------------------------------- stream capture */

CUresult be_h_slStreamCaptureInfo(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__SlStreamCaptureInfoRequest *rq = call->sl_stream_capture_info;
    CUresult (*fn)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *, const CUgraphNode **,
                   const CUgraphEdgeData **, size_t *) =
        rq->per_thread && api->cuStreamGetCaptureInfo_v3_ptsz ? api->cuStreamGetCaptureInfo_v3_ptsz
                                                              : api->cuStreamGetCaptureInfo_v3;
    if (!fn)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUstream st;
    CUresult rc = be_stream(s, rq->stream, &st);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__SlStreamCaptureInfoReply *rp = BE_REPLY(
        reply, sl_stream_capture_info, SLUICE__WIRE__REPLY__OUT_SL_STREAM_CAPTURE_INFO,
        Sluice__Cuda__SlStreamCaptureInfoReply, sluice__cuda__sl_stream_capture_info_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t cid = 0;
    CUgraph g = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t n = 0;
    rc = fn(st, &status, &cid, &g, &deps, &edges, &n);
    if (rc != CUDA_SUCCESS)
        return rc;
    rp->status = (uint32_t)status;
    rp->capture_id = cid;
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || !g)
        return CUDA_SUCCESS;
    if (n > SL_WIRE_MAX_ARRAY) {
        sl_be_detail(reply, "%zu capture dependencies", n);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    rp->graph = be_g_id_of(s, SL_H_GRAPH, g);
    if (!rp->graph && (rc = sl_be_handle_put(s, SL_H_GRAPH, g, 0, &rp->graph)) != CUDA_SUCCESS)
        return rc;
    if (n && !(rp->nodes = malloc(n * sizeof *rp->nodes)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        rc = be_g_node_id(s, rp->graph, deps[i], &rp->nodes[i]);
        if (rc != CUDA_SUCCESS)
            return rc;
        rp->n_nodes = i + 1;
    }
    if (n && edges) {
        rp->edges.data = malloc(n * sizeof *edges);
        if (!rp->edges.data)
            return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(rp->edges.data, edges, n * sizeof *edges);
        rp->edges.len = n * sizeof *edges;
    }
    return CUDA_SUCCESS;
}

CUresult be_h_slStreamUpdateCapture(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__SlStreamUpdateCaptureRequest *rq = call->sl_stream_update_capture;
    CUresult (*v2)(CUstream, CUgraphNode *, const CUgraphEdgeData *, size_t, unsigned) =
        rq->per_thread && api->cuStreamUpdateCaptureDependencies_v2_ptsz
            ? api->cuStreamUpdateCaptureDependencies_v2_ptsz
            : api->cuStreamUpdateCaptureDependencies_v2;
    CUresult (*v1)(CUstream, CUgraphNode *, size_t, unsigned) =
        rq->per_thread && api->cuStreamUpdateCaptureDependencies_ptsz
            ? api->cuStreamUpdateCaptureDependencies_ptsz
            : api->cuStreamUpdateCaptureDependencies;
    if (rq->edges.len && rq->edges.len != rq->n_nodes * sizeof(CUgraphEdgeData)) {
        sl_be_detail(reply, "%zu bytes of edge data for %zu nodes", rq->edges.len, rq->n_nodes);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!v2 && (!v1 || rq->edges.len))
        return CUDA_ERROR_NOT_SUPPORTED;
    CUstream st;
    CUresult rc = be_stream(s, rq->stream, &st);
    CUgraphNode *nodes = NULL;
    if (rc == CUDA_SUCCESS)
        rc = be_g_deps_in(s, reply, rq->nodes, rq->n_nodes, rq->n_nodes, &nodes);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUgraphEdgeData *edges = NULL;
    if (rq->edges.len && !(edges = malloc(rq->edges.len))) {
        free(nodes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (edges)
        memcpy(edges, rq->edges.data, rq->edges.len);
    rc = v2 ? v2(st, nodes, edges, rq->n_nodes, rq->flags) : v1(st, nodes, rq->n_nodes, rq->flags);
    free(edges);
    free(nodes);
    return rc;
}
