/* The graph nodes on guest memory themselves (the design: graph_host.c): memcpy nodes with a host
 * side and host nodes, added, read and set on graphs and on instantiated graphs, each made on an
 * item of its own (a staging block, or the trampoline's record of the host node being reached),
 * and the items a clone's nodes get. */
#include "api/graph_host_nodes.h"

#include <stdlib.h>
#include <string.h>

#include "api/graph.h"
#include "api/graph_host.h"
#include "api/reply.h"
#include "session/handles.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

/* ---------------------------------------------------------------- items */

/* The driver's parameters of item it: its host side on the staging block. */
static CUDA_MEMCPY3D native_copy(const CUDA_MEMCPY3D *checked, const struct be_gitem *it)
{
    CUDA_MEMCPY3D c = *checked;
    if (it->kind == BE_GI_H2D) {
        c.srcHost = it->buf;
        c.srcXInBytes = c.srcY = c.srcZ = 0;
        c.srcPitch = c.WidthInBytes;
        c.srcHeight = c.Height;
    } else {
        c.dstHost = it->buf;
        c.dstXInBytes = c.dstY = c.dstZ = 0;
        c.dstPitch = c.WidthInBytes;
        c.dstHeight = c.Height;
    }
    return c;
}

static void CUDA_CB trampoline(void *arg)
{
    struct be_gitem *it = arg;
    struct be_gstate *st = it->st;
    pthread_mutex_lock(&st->log_mu);
    if (st->log && st->n_log < BE_G_MAX_LOG)
        st->log[st->n_log++] = it;
    else
        st->log_overflow = 1;
    pthread_mutex_unlock(&st->log_mu);
}

/* A new item (refs 1, in no graph yet) with its staging block. */
static struct be_gitem *item_new(struct be_gstate *st, Sluice__Wire__Reply *reply, int kind,
                                 uint64_t len)
{
    if (st->n_items >= BE_G_MAX_ITEMS) {
        sl_be_detail(reply, "the session holds its maximum of %u host graph nodes", BE_G_MAX_ITEMS);
        return NULL;
    }
    if (len > BE_G_MAX_STAGING - st->staging) {
        sl_be_detail(reply, "graph nodes on guest memory over the session's 1 GiB of staging");
        return NULL;
    }
    if (be_g_grow((void **)&st->items, &st->cap_items, st->n_items, sizeof *st->items))
        return NULL;
    struct be_gitem *it = calloc(1, sizeof *it);
    if (!it)
        return NULL;
    if (len && !(it->buf = calloc(1, len))) {
        free(it);
        return NULL;
    }
    it->refs = 1;
    it->kind = (enum be_gi_kind)kind;
    it->len = len;
    it->st = st;
    it->order = ++st->next_order;
    st->staging += len;
    st->items[st->n_items++] = it;
    return it;
}

/* ---------------------------------------------------------------- memcpy nodes */

static CUresult copy_pod(Sluice__Wire__Reply *reply, const ProtobufCBinaryData *pod,
                         CUDA_MEMCPY3D *c)
{
    if (pod->len != sizeof *c) {
        sl_be_detail(reply, "CUDA_MEMCPY3D of %zu bytes", pod->len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(c, pod->data, sizeof *c);
    return CUDA_SUCCESS;
}

/* Checks the guest's parameters; for a host side, a new item (refs 1) and the driver's
 * parameters on its staging block in *native. */
static CUresult copy_prepare(sl_be_session *s, Sluice__Wire__Reply *reply,
                             const ProtobufCBinaryData *pod, CUDA_MEMCPY3D *native,
                             struct be_gitem **item)
{
    *item = NULL;
    CUDA_MEMCPY3D guest;
    CUresult rc = copy_pod(reply, pod, &guest);
    if (rc != CUDA_SUCCESS)
        return rc;
    *native = guest;
    int kind;
    uint64_t len;
    rc = be_g_copy_check(s, reply, native, &kind, &len);
    if (rc != CUDA_SUCCESS || !kind)
        return rc;
    struct be_gstate *st = be_g_state(s);
    struct be_gitem *it = st ? item_new(st, reply, kind, len) : NULL;
    if (!it)
        return CUDA_ERROR_OUT_OF_MEMORY;
    guest.reserved0 = guest.reserved1 = NULL;
    it->guest = guest;
    *native = native_copy(native, it);
    *item = it;
    return CUDA_SUCCESS;
}

CUresult be_h_cuGraphAddMemcpyNode(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphAddMemcpyNodeRequest *rq = call->cu_graph_add_memcpy_node;
    if (rq->n_copy_params != 1) {
        sl_be_detail(reply, "%zu copy parameter structures", rq->n_copy_params);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuGraphAddMemcpyNode)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraph g;
    void *cx = NULL;
    CUresult rc = be_g_graph(s, rq->h_graph, &g);
    if (rc == CUDA_SUCCESS)
        rc = sl_be_handle_get(s, SL_H_CONTEXT, rq->ctx, &cx);
    CUgraphNode *deps = NULL;
    if (rc == CUDA_SUCCESS)
        rc = be_g_deps_in(s, reply, rq->dependencies, rq->n_dependencies, rq->num_dependencies,
                          &deps);
    CUDA_MEMCPY3D native;
    struct be_gitem *it = NULL;
    if (rc == CUDA_SUCCESS)
        rc = copy_prepare(s, reply, &rq->copy_params[0], &native, &it);
    Sluice__Cuda__CuGraphAddMemcpyNodeReply *rp = NULL;
    if (rc == CUDA_SUCCESS) {
        rp = BE_REPLY(reply, cu_graph_add_memcpy_node,
                      SLUICE__WIRE__REPLY__OUT_CU_GRAPH_ADD_MEMCPY_NODE,
                      Sluice__Cuda__CuGraphAddMemcpyNodeReply,
                      sluice__cuda__cu_graph_add_memcpy_node_reply__init);
        if (!rp)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUgraphNode node = NULL;
    if (rc == CUDA_SUCCESS)
        rc = api->cuGraphAddMemcpyNode(&node, g, deps, (size_t)rq->num_dependencies, &native,
                                       (CUcontext)cx);
    if (rc == CUDA_SUCCESS)
        rc = be_g_node_put(s, rq->h_graph, node, &rp->ph_graph_node);
    if (rc == CUDA_SUCCESS && it) {
        it->graph = rq->h_graph; /* the graph's reference */
        it->node = node;
        it = NULL;
    }
    be_g_item_unref(it);
    free(deps);
    return rc;
}

static CUresult node_in(sl_be_session *s, uint64_t id, CUgraphNode *n)
{
    void *p = NULL;
    CUresult rc = id ? sl_be_handle_get(s, SL_H_GRAPHNODE, id, &p) : CUDA_ERROR_INVALID_VALUE;
    *n = (CUgraphNode)p;
    return rc;
}

CUresult be_h_cuGraphMemcpyNodeGetParams(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    CUgraphNode n;
    CUresult rc = node_in(s, call->cu_graph_memcpy_node_get_params->h_node, &n);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuGraphMemcpyNodeGetParamsReply *rp =
        BE_REPLY(reply, cu_graph_memcpy_node_get_params,
                 SLUICE__WIRE__REPLY__OUT_CU_GRAPH_MEMCPY_NODE_GET_PARAMS,
                 Sluice__Cuda__CuGraphMemcpyNodeGetParamsReply,
                 sluice__cuda__cu_graph_memcpy_node_get_params_reply__init);
    CUDA_MEMCPY3D *cx = rp ? calloc(1, sizeof *cx) : NULL;
    if (!cx)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->node_params.data = (uint8_t *)cx;
    rp->node_params.len = sizeof *cx;
    struct be_gitem *it = be_g_item_find(s->graph, n);
    if (it && it->kind != BE_GI_HOST) {
        *cx = it->guest;
        return CUDA_SUCCESS;
    }
    if (!api->cuGraphMemcpyNodeGetParams)
        return CUDA_ERROR_NOT_SUPPORTED;
    rc = api->cuGraphMemcpyNodeGetParams(n, cx);
    if (rc != CUDA_SUCCESS)
        return rc;
    cx->reserved0 = cx->reserved1 = NULL;
    if (cx->srcMemoryType == CU_MEMORYTYPE_ARRAY)
        cx->srcArray = (CUarray)(uintptr_t)be_g_id_of(s, SL_H_ARRAY, cx->srcArray);
    if (cx->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        cx->dstArray = (CUarray)(uintptr_t)be_g_id_of(s, SL_H_ARRAY, cx->dstArray);
    return CUDA_SUCCESS;
}

CUresult be_h_cuGraphMemcpyNodeSetParams(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphMemcpyNodeSetParamsRequest *rq =
        call->cu_graph_memcpy_node_set_params;
    if (!api->cuGraphMemcpyNodeSetParams)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraphNode n;
    CUresult rc = node_in(s, rq->h_node, &n);
    CUDA_MEMCPY3D native;
    struct be_gitem *it = NULL;
    if (rc == CUDA_SUCCESS)
        rc = copy_prepare(s, reply, &rq->node_params, &native, &it);
    if (rc == CUDA_SUCCESS)
        rc = api->cuGraphMemcpyNodeSetParams(n, &native);
    if (rc == CUDA_SUCCESS) {
        struct be_gitem *old = be_g_item_find(s->graph, n);
        uint64_t graph = old ? old->graph : 0;
        if (!graph) {
            struct be_handle *h = be_handles_find(&s->h, SL_H_GRAPHNODE, rq->h_node);
            graph = h ? h->parent : 0;
        }
        if (it && old)
            it->order = old->order;
        be_g_item_leave(old);
        if (it && graph) {
            it->graph = graph;
            it->node = n;
            it = NULL;
        }
    }
    be_g_item_unref(it);
    return rc;
}

/* The index of node n among exec's items, or -1. */
static long exec_index(const struct be_gexec *e, CUgraphNode n)
{
    for (size_t i = 0; e && i < e->n_items; i++)
        if (e->nodes[i] == n)
            return (long)i;
    return -1;
}

/* exec's item for node n becomes it (NULL: none). */
static CUresult exec_replace(sl_be_session *s, uint64_t exec_id, CUgraphExec exec, CUgraphNode n,
                             struct be_gitem *it)
{
    struct be_gstate *st = be_g_state(s);
    if (!st)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct be_gexec *e = be_g_exec_find(st, exec_id);
    if (!e && it) {
        if (be_g_grow((void **)&st->execs, &st->cap_execs, st->n_execs, sizeof *st->execs))
            return CUDA_ERROR_OUT_OF_MEMORY;
        e = calloc(1, sizeof *e);
        if (!e)
            return CUDA_ERROR_OUT_OF_MEMORY;
        e->id = exec_id;
        e->exec = exec;
        st->execs[st->n_execs++] = e;
    }
    if (!e)
        return CUDA_SUCCESS;
    long i = exec_index(e, n);
    if (i >= 0 && it) {
        be_g_item_unref(e->items[i]);
        e->items[i] = it;
        it->refs++;
    } else if (i >= 0) {
        be_g_item_unref(e->items[i]);
        e->items[i] = e->items[e->n_items - 1];
        e->nodes[i] = e->nodes[e->n_items - 1];
        e->n_items--;
    } else if (it) {
        struct be_gitem **ni = realloc(e->items, (e->n_items + 1) * sizeof *ni);
        if (!ni)
            return CUDA_ERROR_OUT_OF_MEMORY;
        e->items = ni;
        CUgraphNode *nn = realloc(e->nodes, (e->n_items + 1) * sizeof *nn);
        if (!nn)
            return CUDA_ERROR_OUT_OF_MEMORY;
        e->nodes = nn;
        e->items[e->n_items] = it;
        e->nodes[e->n_items++] = n;
        it->refs++;
    }
    e->generation = ++st->next_generation;
    return CUDA_SUCCESS;
}

static CUresult exec_node_in(sl_be_session *s, uint64_t exec_id, uint64_t node_id, CUgraphExec *e,
                             CUgraphNode *n)
{
    void *p = NULL;
    CUresult rc =
        exec_id ? sl_be_handle_get(s, SL_H_GRAPHEXEC, exec_id, &p) : CUDA_ERROR_INVALID_VALUE;
    *e = (CUgraphExec)p;
    return rc == CUDA_SUCCESS ? node_in(s, node_id, n) : rc;
}

CUresult be_h_cuGraphExecMemcpyNodeSetParams(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphExecMemcpyNodeSetParamsRequest *rq =
        call->cu_graph_exec_memcpy_node_set_params;
    if (!api->cuGraphExecMemcpyNodeSetParams)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraphExec e;
    CUgraphNode n;
    void *cx = NULL;
    CUresult rc = exec_node_in(s, rq->h_graph_exec, rq->h_node, &e, &n);
    if (rc == CUDA_SUCCESS)
        rc = sl_be_handle_get(s, SL_H_CONTEXT, rq->ctx, &cx);
    CUDA_MEMCPY3D native;
    struct be_gitem *it = NULL;
    if (rc == CUDA_SUCCESS)
        rc = copy_prepare(s, reply, &rq->copy_params, &native, &it);
    if (rc == CUDA_SUCCESS)
        rc = api->cuGraphExecMemcpyNodeSetParams(e, n, &native, (CUcontext)cx);
    if (rc == CUDA_SUCCESS)
        rc = exec_replace(s, rq->h_graph_exec, e, n, it);
    be_g_item_unref(it);
    return rc;
}

/* ---------------------------------------------------------------- host nodes */

static CUresult host_prepare(sl_be_session *s, Sluice__Wire__Reply *reply,
                             const ProtobufCBinaryData *pod, CUDA_HOST_NODE_PARAMS *native,
                             struct be_gitem **item)
{
    *item = NULL;
    CUDA_HOST_NODE_PARAMS p;
    if (pod->len != sizeof p) {
        sl_be_detail(reply, "CUDA_HOST_NODE_PARAMS of %zu bytes", pod->len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&p, pod->data, sizeof p);
    if (!p.fn)
        return CUDA_ERROR_INVALID_VALUE;
    struct be_gstate *st = be_g_state(s);
    struct be_gitem *it = st ? item_new(st, reply, BE_GI_HOST, 0) : NULL;
    if (!it)
        return CUDA_ERROR_OUT_OF_MEMORY;
    it->fn = (uint64_t)(uintptr_t)p.fn;
    it->user = (uint64_t)(uintptr_t)p.userData;
    native->fn = trampoline;
    native->userData = it;
    *item = it;
    return CUDA_SUCCESS;
}

CUresult be_h_cuGraphAddHostNode(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphAddHostNodeRequest *rq = call->cu_graph_add_host_node;
    if (rq->n_node_params != 1) {
        sl_be_detail(reply, "%zu host node parameter structures", rq->n_node_params);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuGraphAddHostNode)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraph g;
    CUresult rc = be_g_graph(s, rq->h_graph, &g);
    CUgraphNode *deps = NULL;
    if (rc == CUDA_SUCCESS)
        rc = be_g_deps_in(s, reply, rq->dependencies, rq->n_dependencies, rq->num_dependencies,
                          &deps);
    CUDA_HOST_NODE_PARAMS native;
    struct be_gitem *it = NULL;
    if (rc == CUDA_SUCCESS)
        rc = host_prepare(s, reply, &rq->node_params[0], &native, &it);
    Sluice__Cuda__CuGraphAddHostNodeReply *rp = NULL;
    if (rc == CUDA_SUCCESS) {
        rp =
            BE_REPLY(reply, cu_graph_add_host_node, SLUICE__WIRE__REPLY__OUT_CU_GRAPH_ADD_HOST_NODE,
                     Sluice__Cuda__CuGraphAddHostNodeReply,
                     sluice__cuda__cu_graph_add_host_node_reply__init);
        if (!rp)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUgraphNode node = NULL;
    if (rc == CUDA_SUCCESS)
        rc = api->cuGraphAddHostNode(&node, g, deps, (size_t)rq->num_dependencies, &native);
    if (rc == CUDA_SUCCESS)
        rc = be_g_node_put(s, rq->h_graph, node, &rp->ph_graph_node);
    if (rc == CUDA_SUCCESS) {
        it->graph = rq->h_graph;
        it->node = node;
        it = NULL;
    }
    be_g_item_unref(it);
    free(deps);
    return rc;
}

CUresult be_h_cuGraphHostNodeGetParams(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    CUgraphNode n;
    CUresult rc = node_in(s, call->cu_graph_host_node_get_params->h_node, &n);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct be_gitem *it = be_g_item_find(s->graph, n);
    if (!it || it->kind != BE_GI_HOST) {
        sl_be_detail(reply, "not a host node");
        return CUDA_ERROR_INVALID_VALUE;
    }
    Sluice__Cuda__CuGraphHostNodeGetParamsReply *rp =
        BE_REPLY(reply, cu_graph_host_node_get_params,
                 SLUICE__WIRE__REPLY__OUT_CU_GRAPH_HOST_NODE_GET_PARAMS,
                 Sluice__Cuda__CuGraphHostNodeGetParamsReply,
                 sluice__cuda__cu_graph_host_node_get_params_reply__init);
    CUDA_HOST_NODE_PARAMS *p = rp ? calloc(1, sizeof *p) : NULL;
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->fn = (CUhostFn)(uintptr_t)it->fn;
    p->userData = (void *)(uintptr_t)it->user;
    rp->node_params.data = (uint8_t *)p;
    rp->node_params.len = sizeof *p;
    return CUDA_SUCCESS;
}

CUresult be_h_cuGraphHostNodeSetParams(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphHostNodeSetParamsRequest *rq = call->cu_graph_host_node_set_params;
    if (!api->cuGraphHostNodeSetParams)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraphNode n;
    CUresult rc = node_in(s, rq->h_node, &n);
    struct be_gitem *old = rc == CUDA_SUCCESS ? be_g_item_find(s->graph, n) : NULL;
    if (rc == CUDA_SUCCESS && (!old || old->kind != BE_GI_HOST)) {
        sl_be_detail(reply, "not a host node");
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    CUDA_HOST_NODE_PARAMS native;
    struct be_gitem *it = NULL;
    if (rc == CUDA_SUCCESS)
        rc = host_prepare(s, reply, &rq->node_params, &native, &it);
    if (rc == CUDA_SUCCESS)
        rc = api->cuGraphHostNodeSetParams(n, &native);
    if (rc == CUDA_SUCCESS) {
        it->graph = old->graph;
        it->node = n;
        it->order = old->order;
        be_g_item_leave(old);
        it = NULL;
    }
    be_g_item_unref(it);
    return rc;
}

CUresult be_h_cuGraphExecHostNodeSetParams(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphExecHostNodeSetParamsRequest *rq =
        call->cu_graph_exec_host_node_set_params;
    if (!api->cuGraphExecHostNodeSetParams)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraphExec e;
    CUgraphNode n;
    CUresult rc = exec_node_in(s, rq->h_graph_exec, rq->h_node, &e, &n);
    CUDA_HOST_NODE_PARAMS native;
    struct be_gitem *it = NULL;
    if (rc == CUDA_SUCCESS)
        rc = host_prepare(s, reply, &rq->node_params, &native, &it);
    if (rc == CUDA_SUCCESS)
        rc = api->cuGraphExecHostNodeSetParams(e, n, &native);
    if (rc == CUDA_SUCCESS)
        rc = exec_replace(s, rq->h_graph_exec, e, n, it);
    be_g_item_unref(it);
    return rc;
}

/* ---------------------------------------------------------------- clones */

CUresult be_g_clone_items(sl_be_session *s, Sluice__Wire__Reply *reply, uint64_t orig,
                          uint64_t clone, CUgraph native_clone)
{
    struct be_gstate *st = s->graph;
    const struct sl_driver_api *api = s->api;
    size_t n = st ? st->n_items : 0; /* the clone's items are appended after these */
    for (size_t i = 0; i < n; i++) {
        struct be_gitem *it = st->items[i];
        if (!it->graph || !be_g_within(st, it->graph, orig))
            continue;
        if (it->graph != orig) {
            sl_be_detail(reply, "cloning conditional bodies with nodes on guest memory is not "
                                "supported");
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        if (!api->cuGraphNodeFindInClone || !api->cuGraphMemcpyNodeGetParams ||
            !api->cuGraphMemcpyNodeSetParams || !api->cuGraphHostNodeSetParams)
            return CUDA_ERROR_NOT_SUPPORTED;
        CUgraphNode cn = NULL;
        CUresult rc = api->cuGraphNodeFindInClone(&cn, it->node, native_clone);
        if (rc != CUDA_SUCCESS)
            return rc;
        struct be_gitem *c = item_new(st, reply, it->kind, it->len);
        if (!c)
            return CUDA_ERROR_OUT_OF_MEMORY;
        it = st->items[i]; /* item_new may have moved the array, not the items */
        c->guest = it->guest;
        c->fn = it->fn;
        c->user = it->user;
        c->order = it->order;
        if (it->kind == BE_GI_HOST) {
            CUDA_HOST_NODE_PARAMS hp = {trampoline, c};
            rc = api->cuGraphHostNodeSetParams(cn, &hp);
        } else {
            CUDA_MEMCPY3D p;
            memset(&p, 0, sizeof p);
            rc = api->cuGraphMemcpyNodeGetParams(cn, &p);
            if (rc == CUDA_SUCCESS) {
                p = native_copy(&p, c);
                rc = api->cuGraphMemcpyNodeSetParams(cn, &p);
            }
        }
        if (rc != CUDA_SUCCESS) {
            be_g_item_unref(c);
            return rc;
        }
        c->graph = clone;
        c->node = cn;
    }
    return CUDA_SUCCESS;
}
