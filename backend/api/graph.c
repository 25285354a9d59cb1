/* CUDA graphs built by hand: kernel nodes (add, get and set parameters, set parameters of an
 * instantiated graph), memset nodes, the node lists, and the helpers the other graph files
 * share (backend/graph.h). A kernel node's CUDA_KERNEL_NODE_PARAMS pod arrives with
 * kernelParams and extra cleared and func/kern/ctx as ids; its parameter buffer is the call's
 * bulk, checked against the function's layout and turned into kernelParams as for
 * cuLaunchKernel (the driver copies the parameters when the node is made or changed). Memset
 * nodes: the destination range (pitch * (height - 1) + width * elementSize bytes) must be the
 * session's memory. The _v1 calls are sent as the _v2 ones by the frontend. Node ids have their
 * graph as parent, so that destroying the graph drops them (graph_life.c). */
#include "api/graph.h"

#include <stdlib.h>
#include <string.h>

#include "api/launch.h"
#include "api/reply.h"
#include "bounds.h"
#include "session/contexts.h"
#include "session/handles.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

/* ---------------------------------------------------------------- shared helpers */

struct be_gstate *be_g_state(sl_be_session *s)
{
    if (!s->graph) {
        s->graph = calloc(1, sizeof *s->graph);
        if (s->graph)
            pthread_mutex_init(&s->graph->log_mu, NULL);
    }
    return s->graph;
}

int be_g_grow(void **arr, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, c * sz);
    if (!p)
        return -1;
    *arr = p;
    *cap = c;
    return 0;
}

CUresult be_g_deps_in(sl_be_session *s, Sluice__Wire__Reply *reply, const uint64_t *ids,
                      size_t n_ids, uint64_t num, CUgraphNode **out)
{
    *out = NULL;
    if (n_ids != num || num > BE_G_MAX_DEPS) {
        sl_be_detail(reply, "%zu dependencies, %llu announced", n_ids, (unsigned long long)num);
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

CUresult be_g_graph(sl_be_session *s, uint64_t id, CUgraph *out)
{
    void *g = NULL;
    CUresult rc = id ? sl_be_handle_get(s, SL_H_GRAPH, id, &g) : CUDA_ERROR_INVALID_VALUE;
    *out = (CUgraph)g;
    return rc;
}

CUresult be_g_node_put(sl_be_session *s, uint64_t graph, CUgraphNode n, uint64_t *id)
{
    uint64_t owner = s->cur_ctx == UINT64_MAX ? 0 : s->cur_ctx;
    return be_handles_put(&s->h, SL_H_GRAPHNODE, n, owner, graph, id);
}

uint64_t be_g_id_of(sl_be_session *s, enum sl_handle_kind kind, const void *native)
{
    for (size_t i = 0; native && i < s->h.cap; i++) {
        struct be_handle *h = &s->h.slot[i];
        if (be_id_kind(h->id) == kind && h->native == native &&
            be_handles_find(&s->h, kind, h->id) == h)
            return h->id;
    }
    return 0;
}

CUresult be_g_node_id(sl_be_session *s, uint64_t graph, CUgraphNode n, uint64_t *id)
{
    uint64_t have = be_g_id_of(s, SL_H_GRAPHNODE, n);
    if (have) {
        *id = have;
        return CUDA_SUCCESS;
    }
    return be_g_node_put(s, graph, n, id);
}

void be_g_set_parent(sl_be_session *s, uint64_t id, uint64_t parent)
{
    struct be_handle *h = be_handles_find(&s->h, be_id_kind(id), id);
    if (h)
        h->parent = parent;
}

int be_g_within(const struct be_gstate *st, uint64_t g, uint64_t root)
{
    for (int depth = 0; g && depth < 64; depth++) {
        if (g == root)
            return 1;
        uint64_t up = 0;
        for (size_t i = 0; st && i < st->n_bodies; i++)
            if (st->bodies[i].body == g)
                up = st->bodies[i].parent;
        g = up;
    }
    return 0;
}

/* ---------------------------------------------------------------- kernel nodes */

/* The node params of the pod with native handles and kernelParams rebuilt from the bulk. */
static CUresult knode_in(struct sl_be_call *c, const ProtobufCBinaryData *pod,
                         CUDA_KERNEL_NODE_PARAMS *p, void **params)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    if (pod->len != sizeof *p) {
        sl_be_detail(reply, "CUDA_KERNEL_NODE_PARAMS of %zu bytes", pod->len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(p, pod->data, sizeof *p);
    if (p->kernelParams || p->extra) {
        sl_be_detail(reply, "kernel node parameters travel as bulk");
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
    rc = be_params_rebuild(l, c->in, c->in_len, params);
    if (rc != CUDA_SUCCESS) {
        sl_be_detail(reply, "parameter buffer of %llu bytes, the kernel's layout needs %llu",
                     (unsigned long long)c->in_len, (unsigned long long)l->end);
        return rc;
    }
    p->kernelParams = params;
    return CUDA_SUCCESS;
}

CUresult be_h_cuGraphAddKernelNode_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphAddKernelNodeV2Request *rq = call->cu_graph_add_kernel_node_v2;
    if (rq->n_node_params != 1) {
        sl_be_detail(reply, "%zu node parameter structures", rq->n_node_params);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuGraphAddKernelNode_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraph g;
    CUresult rc = be_g_graph(s, rq->h_graph, &g);
    if (rc != CUDA_SUCCESS)
        return rc;
    void **params = malloc(BE_MAX_PARAMS * sizeof *params);
    if (!params)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUgraphNode *deps = NULL;
    CUDA_KERNEL_NODE_PARAMS p;
    rc = be_g_deps_in(s, reply, rq->dependencies, rq->n_dependencies, rq->num_dependencies, &deps);
    if (rc == CUDA_SUCCESS)
        rc = knode_in(c, &rq->node_params[0], &p, params);
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
        rc = api->cuGraphAddKernelNode_v2(&node, g, deps, (size_t)rq->num_dependencies, &p);
        if (rc == CUDA_SUCCESS)
            rc = be_g_node_put(s, rq->h_graph, node, &rp->ph_graph_node);
    }
    free(deps);
    free(params);
    return rc;
}

CUresult be_h_cuGraphKernelNodeSetParams_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
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
    rc = knode_in(c, &rq->node_params, &p, params);
    if (rc == CUDA_SUCCESS)
        rc = api->cuGraphKernelNodeSetParams_v2((CUgraphNode)n, &p);
    free(params);
    return rc;
}

CUresult be_h_cuGraphExecKernelNodeSetParams_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
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
    rc = knode_in(c, &rq->node_params, &p, params);
    if (rc == CUDA_SUCCESS)
        rc = api->cuGraphExecKernelNodeSetParams_v2((CUgraphExec)e, (CUgraphNode)n, &p);
    free(params);
    return rc;
}

/* The node's parameters: func/kern/ctx as ids, kernelParams and extra cleared; the reply's bulk
 * is the layout (uint64 count, count offsets, count sizes) and the parameter values packed at
 * its offsets. */
CUresult be_h_cuGraphKernelNodeGetParams_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphKernelNodeGetParamsV2Request *rq =
        call->cu_graph_kernel_node_get_params_v2;
    if (!api->cuGraphKernelNodeGetParams_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    void *n = NULL;
    CUresult rc =
        rq->h_node ? sl_be_handle_get(s, SL_H_GRAPHNODE, rq->h_node, &n) : CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    rc = api->cuGraphKernelNodeGetParams_v2((CUgraphNode)n, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t fid = p.kern ? be_g_id_of(s, SL_H_KERNEL, p.kern) : 0;
    if (!fid && p.func) /* a kernel's CUfunction is the CUkernel itself for cudart's launches */
        fid = be_g_id_of(s, SL_H_KERNEL, p.func);
    if (!fid && p.func)
        fid = be_g_id_of(s, SL_H_FUNCTION, p.func);
    if (!fid) {
        sl_be_detail(reply, "the node's function is not one of the session's");
        return CUDA_ERROR_INVALID_HANDLE;
    }
    struct be_layout *l;
    void *native;
    rc = be_layout_get(s, fid, &l, &native);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* bulk: uint64 count, count offsets, count sizes, then the packed values */
    uint64_t head = 8 + 16 * (uint64_t)l->count, total = head + l->end;
    uint8_t *buf = calloc(1, total);
    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t count = l->count;
    memcpy(buf, &count, 8);
    for (uint32_t i = 0; i < l->count; i++) {
        if (!p.kernelParams || !p.kernelParams[i]) {
            free(buf);
            sl_be_detail(reply, "the driver gave no value for parameter %u", i);
            return CUDA_ERROR_UNKNOWN;
        }
        memcpy(buf + 8 + 8 * (size_t)i, &l->offsets[i], 8);
        memcpy(buf + 8 + 8 * ((size_t)l->count + i), &l->sizes[i], 8);
        memcpy(buf + head + l->offsets[i], p.kernelParams[i], l->sizes[i]);
    }
    Sluice__Cuda__CuGraphKernelNodeGetParamsV2Reply *rp =
        BE_REPLY(reply, cu_graph_kernel_node_get_params_v2,
                 SLUICE__WIRE__REPLY__OUT_CU_GRAPH_KERNEL_NODE_GET_PARAMS_V2,
                 Sluice__Cuda__CuGraphKernelNodeGetParamsV2Reply,
                 sluice__cuda__cu_graph_kernel_node_get_params_v2_reply__init);
    CUDA_KERNEL_NODE_PARAMS *o = rp ? malloc(sizeof *o) : NULL;
    if (!o) {
        free(buf);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *o = p;
    o->kernelParams = NULL;
    o->extra = NULL;
    /* func is the id the guest launches with (cudart passes (CUfunction)kernel) */
    o->func = (CUfunction)(uintptr_t)fid;
    o->kern = be_id_kind(fid) == SL_H_KERNEL ? (CUkernel)(uintptr_t)fid : NULL;
    o->ctx = NULL;
    for (size_t i = 0; p.ctx && i < s->n_ctxs; i++)
        if (s->ctxs[i]->ctx == p.ctx)
            o->ctx = (CUcontext)(uintptr_t)s->ctxs[i]->id;
    rp->node_params.data = (uint8_t *)o; /* freed with the reply */
    rp->node_params.len = sizeof *o;
    c->out = buf;
    c->out_len = total;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- memset nodes */

static CUresult memset_in(sl_be_session *s, Sluice__Wire__Reply *reply,
                          const ProtobufCBinaryData *pod, CUDA_MEMSET_NODE_PARAMS *p)
{
    if (pod->len != sizeof *p) {
        sl_be_detail(reply, "CUDA_MEMSET_NODE_PARAMS malformed");
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(p, pod->data, sizeof *p);
    if ((p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || !p->width ||
        !p->height || p->width > UINT64_MAX / p->elementSize)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t row = (uint64_t)p->width * p->elementSize;
    if (p->height > 1 && (p->pitch < row || p->height - 1 > (UINT64_MAX - row) / p->pitch))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t span = (uint64_t)(p->height - 1) * p->pitch + row;
    CUresult rc = sl_be_devptr_check(s, (uint64_t)p->dst, span);
    if (rc != CUDA_SUCCESS)
        sl_be_detail(reply, "memset node destination outside the session's memory");
    return rc;
}

CUresult be_h_cuGraphAddMemsetNode(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphAddMemsetNodeRequest *rq = call->cu_graph_add_memset_node;
    CUDA_MEMSET_NODE_PARAMS p;
    if (rq->n_memset_params != 1) {
        sl_be_detail(reply, "CUDA_MEMSET_NODE_PARAMS malformed");
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = memset_in(s, reply, &rq->memset_params[0], &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuGraphAddMemsetNode)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraph g;
    void *cx = NULL;
    rc = be_g_graph(s, rq->h_graph, &g);
    if (rc == CUDA_SUCCESS)
        rc = sl_be_handle_get(s, SL_H_CONTEXT, rq->ctx, &cx);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUgraphNode *deps = NULL;
    rc = be_g_deps_in(s, reply, rq->dependencies, rq->n_dependencies, rq->num_dependencies, &deps);
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
        rc = api->cuGraphAddMemsetNode(&node, g, deps, (size_t)rq->num_dependencies, &p,
                                       (CUcontext)cx);
        if (rc == CUDA_SUCCESS)
            rc = be_g_node_put(s, rq->h_graph, node, &rp->ph_graph_node);
    }
    free(deps);
    return rc;
}

CUresult be_h_cuGraphMemsetNodeGetParams(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphMemsetNodeGetParamsRequest *rq =
        call->cu_graph_memset_node_get_params;
    if (!api->cuGraphMemsetNodeGetParams)
        return CUDA_ERROR_NOT_SUPPORTED;
    void *n = NULL;
    CUresult rc =
        rq->h_node ? sl_be_handle_get(s, SL_H_GRAPHNODE, rq->h_node, &n) : CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuGraphMemsetNodeGetParamsReply *rp =
        BE_REPLY(reply, cu_graph_memset_node_get_params,
                 SLUICE__WIRE__REPLY__OUT_CU_GRAPH_MEMSET_NODE_GET_PARAMS,
                 Sluice__Cuda__CuGraphMemsetNodeGetParamsReply,
                 sluice__cuda__cu_graph_memset_node_get_params_reply__init);
    CUDA_MEMSET_NODE_PARAMS *p = rp ? calloc(1, sizeof *p) : NULL;
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->node_params.data = (uint8_t *)p;
    rp->node_params.len = sizeof *p;
    return api->cuGraphMemsetNodeGetParams((CUgraphNode)n, p);
}

CUresult be_h_cuGraphMemsetNodeSetParams(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphMemsetNodeSetParamsRequest *rq =
        call->cu_graph_memset_node_set_params;
    CUDA_MEMSET_NODE_PARAMS p;
    CUresult rc = memset_in(s, reply, &rq->node_params, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuGraphMemsetNodeSetParams)
        return CUDA_ERROR_NOT_SUPPORTED;
    void *n = NULL;
    rc =
        rq->h_node ? sl_be_handle_get(s, SL_H_GRAPHNODE, rq->h_node, &n) : CUDA_ERROR_INVALID_VALUE;
    return rc == CUDA_SUCCESS ? api->cuGraphMemsetNodeSetParams((CUgraphNode)n, &p) : rc;
}

CUresult be_h_cuGraphExecMemsetNodeSetParams(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphExecMemsetNodeSetParamsRequest *rq =
        call->cu_graph_exec_memset_node_set_params;
    CUDA_MEMSET_NODE_PARAMS p;
    CUresult rc = memset_in(s, reply, &rq->memset_params, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuGraphExecMemsetNodeSetParams)
        return CUDA_ERROR_NOT_SUPPORTED;
    void *e = NULL, *n = NULL, *cx = NULL;
    rc = rq->h_graph_exec ? sl_be_handle_get(s, SL_H_GRAPHEXEC, rq->h_graph_exec, &e)
                          : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = rq->h_node ? sl_be_handle_get(s, SL_H_GRAPHNODE, rq->h_node, &n)
                        : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = sl_be_handle_get(s, SL_H_CONTEXT, rq->ctx, &cx);
    if (rc != CUDA_SUCCESS)
        return rc;
    return api->cuGraphExecMemsetNodeSetParams((CUgraphExec)e, (CUgraphNode)n, &p, (CUcontext)cx);
}

/* ---------------------------------------------------------------- node lists */

/* cuGraphGetNodes / cuGraphGetRootNodes: want nodes asked for (0: only the count). */
static CUresult list_nodes(sl_be_session *s, uint64_t graph, uint64_t want, int roots,
                           Sluice__Wire__Reply *reply, uint64_t **ids, size_t *n_ids, uint64_t *num)
{
    if (want > SL_WIRE_MAX_ARRAY) {
        sl_be_detail(reply, "%llu nodes asked for", (unsigned long long)want);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult (*fn)(CUgraph, CUgraphNode *, size_t *) =
        roots ? s->api->cuGraphGetRootNodes : s->api->cuGraphGetNodes;
    if (!fn)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraph g;
    CUresult rc = be_g_graph(s, graph, &g);
    if (rc != CUDA_SUCCESS)
        return rc;
    size_t n = (size_t)want;
    if (!n) {
        rc = fn(g, NULL, &n);
        *num = n;
        return rc;
    }
    CUgraphNode *nodes = calloc(n, sizeof *nodes);
    *ids = nodes ? malloc(n * sizeof **ids) : NULL; /* freed with the reply */
    if (!*ids) {
        free(nodes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rc = fn(g, nodes, &n);
    if (n > want)
        n = (size_t)want;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n && nodes[i]; i++) {
        rc = be_g_node_id(s, graph, nodes[i], &(*ids)[i]);
        *n_ids = i + 1;
    }
    *num = n;
    free(nodes);
    return rc;
}

CUresult be_h_cuGraphGetNodes(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphGetNodesRequest *rq = call->cu_graph_get_nodes;
    Sluice__Cuda__CuGraphGetNodesReply *rp =
        BE_REPLY(reply, cu_graph_get_nodes, SLUICE__WIRE__REPLY__OUT_CU_GRAPH_GET_NODES,
                 Sluice__Cuda__CuGraphGetNodesReply, sluice__cuda__cu_graph_get_nodes_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return list_nodes(s, rq->h_graph, rq->num_nodes, 0, reply, &rp->nodes, &rp->n_nodes,
                      &rp->num_nodes);
}

CUresult be_h_cuGraphGetRootNodes(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphGetRootNodesRequest *rq = call->cu_graph_get_root_nodes;
    Sluice__Cuda__CuGraphGetRootNodesReply *rp = BE_REPLY(
        reply, cu_graph_get_root_nodes, SLUICE__WIRE__REPLY__OUT_CU_GRAPH_GET_ROOT_NODES,
        Sluice__Cuda__CuGraphGetRootNodesReply, sluice__cuda__cu_graph_get_root_nodes_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return list_nodes(s, rq->h_graph, rq->num_root_nodes, 1, reply, &rp->root_nodes,
                      &rp->n_root_nodes, &rp->num_root_nodes);
}
