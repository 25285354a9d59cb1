/* Graph nodes that touch guest host memory (docs/remoting.md, "Graphs and guest memory"):
 * memcpy nodes with a host side and host nodes, and the launches of the graphs that hold them.
 *
 * The guest's host memory is not the backend's. A memcpy node whose source or destination is
 * guest memory is made on a staging block of the backend's (the HOST side of the pod as the
 * frontend sends it: the guest's pointer, which the backend keeps only to give it back, never
 * dereferences); a host node is made on a trampoline that records, when the GPU reaches it,
 * that it was reached. An instantiated graph holding such items is launched with slGraphLaunch,
 * synchronously: the host-to-device bytes travel with the launch (or just before it,
 * slGraphHostPut) into the staging blocks, the worker launches and waits for the stream, and the
 * reply carries the device-to-host bytes (or they are fetched, slGraphHostGet) and the host
 * nodes reached, in order, which the guest then runs. cuGraphLaunch of such a graph is refused.
 * Memcpy nodes between device memory and arrays need none of this and go to the driver checked
 * like the 3D copies (texture.c). */
#include <stdlib.h>
#include <string.h>

#include "graph.h"

/* ---------------------------------------------------------------- parameters */

struct cside {
    CUmemorytype *type;
    const void **host;
    CUdeviceptr *dev;
    CUarray *arr;
    size_t *x, *y, *z, *pitch, *height;
};

static CUresult side_check(sl_be_session *s, Sluice__Wire__Reply *reply, struct cside d,
                           const CUDA_MEMCPY3D *c, int is_src)
{
    size_t w = c->WidthInBytes, h = c->Height, depth = c->Depth;
    switch (*d.type) {
    case CU_MEMORYTYPE_HOST:
        return CUDA_SUCCESS; /* the guest's memory: the staging block stands in for it */
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED: {
        uint64_t p = *d.pitch ? *d.pitch : w, hr = *d.height, rows, start, span;
        if (!w || !h || !depth)
            return CUDA_SUCCESS; /* nothing is touched; the driver decides */
        if (__builtin_mul_overflow((uint64_t)*d.z, hr, &rows) ||
            __builtin_add_overflow(rows, (uint64_t)*d.y, &rows) ||
            __builtin_mul_overflow(rows, p, &start) ||
            __builtin_add_overflow(start, (uint64_t)*d.x, &start) ||
            __builtin_add_overflow(start, (uint64_t)*d.dev, &start) ||
            __builtin_mul_overflow((uint64_t)(depth - 1), hr, &span) ||
            __builtin_add_overflow(span, (uint64_t)(h - 1), &span) ||
            __builtin_mul_overflow(span, p, &span) || __builtin_add_overflow(span, w, &span))
            return CUDA_ERROR_INVALID_VALUE;
        CUresult rc = sl_be_devptr_check(s, start, span);
        if (rc != CUDA_SUCCESS)
            sl_be_detail(reply, "%s of a memcpy node outside the session's memory",
                         is_src ? "source" : "destination");
        return rc;
    }
    case CU_MEMORYTYPE_ARRAY: {
        void *n = NULL;
        CUresult rc = *d.arr ? sl_be_handle_get(s, SL_H_ARRAY, (uint64_t)(uintptr_t)*d.arr, &n)
                             : CUDA_ERROR_INVALID_HANDLE;
        *d.arr = (CUarray)n;
        return rc;
    }
    default:
        sl_be_detail(reply, "memory type %d in a memcpy node", (int)*d.type);
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult be_g_copy_check(sl_be_session *s, Sluice__Wire__Reply *reply, CUDA_MEMCPY3D *c, int *kind,
                         uint64_t *len)
{
    c->reserved0 = c->reserved1 = NULL;
    struct cside src = {&c->srcMemoryType, &c->srcHost,     &c->srcDevice,
                        &c->srcArray,      &c->srcXInBytes, &c->srcY,
                        &c->srcZ,          &c->srcPitch,    &c->srcHeight};
    struct cside dst = {&c->dstMemoryType, (const void **)&c->dstHost,
                        &c->dstDevice,     &c->dstArray,
                        &c->dstXInBytes,   &c->dstY,
                        &c->dstZ,          &c->dstPitch,
                        &c->dstHeight};
    int sh = c->srcMemoryType == CU_MEMORYTYPE_HOST, dh = c->dstMemoryType == CU_MEMORYTYPE_HOST;
    if (sh && dh) {
        sl_be_detail(reply, "memcpy nodes between two host buffers are not supported");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    *kind = sh ? BE_GI_H2D : dh ? BE_GI_D2H : 0;
    *len = 0;
    if (*kind) {
        uint64_t n;
        if (!c->WidthInBytes || !c->Height || !c->Depth ||
            __builtin_mul_overflow((uint64_t)c->WidthInBytes, (uint64_t)c->Height, &n) ||
            __builtin_mul_overflow(n, (uint64_t)c->Depth, &n) || n > BE_G_MAX_STAGING) {
            sl_be_detail(reply, "memcpy node of %zu x %zu x %zu bytes with a host side",
                         c->WidthInBytes, c->Height, c->Depth);
            return CUDA_ERROR_INVALID_VALUE;
        }
        *len = n;
    }
    CUresult rc = side_check(s, reply, src, c, 1);
    return rc == CUDA_SUCCESS ? side_check(s, reply, dst, c, 0) : rc;
}

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

/* ---------------------------------------------------------------- items */

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

void be_g_item_unref(struct be_gitem *it)
{
    if (!it || --it->refs)
        return;
    struct be_gstate *st = it->st;
    for (size_t i = 0; i < st->n_items; i++)
        if (st->items[i] == it) {
            st->items[i] = st->items[--st->n_items];
            break;
        }
    st->staging -= it->len;
    free(it->buf);
    free(it);
}

struct be_gitem *be_g_item_find(struct be_gstate *st, CUgraphNode n)
{
    for (size_t i = 0; st && n && i < st->n_items; i++)
        if (st->items[i]->graph && st->items[i]->node == n)
            return st->items[i];
    return NULL;
}

void be_g_item_leave(struct be_gitem *it)
{
    if (it && it->graph) {
        it->graph = 0;
        be_g_item_unref(it);
    }
}

/* Items in the order their nodes were made (st->items is not kept in order). */
static int item_cmp(const void *a, const void *b)
{
    const struct be_gitem *x = *(struct be_gitem *const *)a, *y = *(struct be_gitem *const *)b;
    return x->order < y->order ? -1 : x->order > y->order;
}

struct be_gexec *be_g_exec_find(struct be_gstate *st, uint64_t id)
{
    for (size_t i = 0; st && i < st->n_execs; i++)
        if (st->execs[i]->id == id)
            return st->execs[i];
    return NULL;
}

void be_g_exec_free(struct be_gexec *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->n_items; i++)
        be_g_item_unref(e->items[i]);
    free(e->items);
    free(e->nodes);
    free(e->allocs);
    free(e);
}

CUresult be_g_exec_fill(sl_be_session *s, struct be_gexec *e, uint64_t graph, int update)
{
    struct be_gstate *st = be_g_state(s);
    if (!st)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t n = 0;
    for (size_t i = 0; i < st->n_items; i++)
        if (st->items[i]->graph && be_g_within(st, st->items[i]->graph, graph))
            n++;
    struct be_gitem **items = n ? malloc(n * sizeof *items) : NULL;
    CUgraphNode *nodes = n ? malloc(n * sizeof *nodes) : NULL;
    if (n && (!items || !nodes)) {
        free(items);
        free(nodes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    size_t k = 0;
    for (size_t i = 0; i < st->n_items; i++)
        if (st->items[i]->graph && be_g_within(st, st->items[i]->graph, graph))
            items[k++] = st->items[i];
    /* in node creation order: an update pairs the items of two graphs of the same shape so */
    if (n > 1)
        qsort(items, n, sizeof *items, item_cmp);
    for (size_t i = 0; i < n; i++) {
        items[i]->refs++;
        nodes[i] = items[i]->node;
    }
    if (update) {
        if (n != e->n_items)
            e->broken = "updated from a graph with other nodes on guest memory";
        else
            for (size_t i = 0; i < n; i++)
                if (items[i]->kind != e->items[i]->kind)
                    e->broken = "updated from a graph with other nodes on guest memory";
        if (n == e->n_items) {
            free(nodes);
            nodes = e->nodes; /* keep the instantiated graph's node handles */
            e->nodes = NULL;
        }
    }
    for (size_t i = 0; i < e->n_items; i++)
        be_g_item_unref(e->items[i]);
    free(e->items);
    free(e->nodes);
    e->items = items;
    e->nodes = nodes;
    e->n_items = n;
    e->generation = ++st->next_generation;
    free(e->allocs);
    e->allocs = NULL;
    e->n_allocs = 0;
    for (size_t i = 0; i < st->n_allocs; i++)
        if (be_g_within(st, st->allocs[i].graph, graph))
            e->n_allocs++;
    if (e->n_allocs) {
        e->allocs = malloc(e->n_allocs * sizeof *e->allocs);
        if (!e->allocs) {
            e->n_allocs = 0;
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        k = 0;
        for (size_t i = 0; i < st->n_allocs; i++)
            if (be_g_within(st, st->allocs[i].graph, graph)) {
                e->allocs[k][0] = st->allocs[i].p.dptr;
                e->allocs[k++][1] = st->allocs[i].p.bytesize;
            }
    }
    return CUDA_SUCCESS;
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

/* ---------------------------------------------------------------- launches */

static CUresult exec_in(sl_be_session *s, Sluice__Wire__Reply *reply, uint64_t id,
                        uint64_t generation, CUgraphExec *native, struct be_gexec **e)
{
    void *p = NULL;
    CUresult rc = id ? sl_be_handle_get(s, SL_H_GRAPHEXEC, id, &p) : CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    *native = (CUgraphExec)p;
    *e = be_g_exec_find(s->graph, id);
    if (*e && (*e)->generation != generation && generation != UINT64_MAX) {
        sl_be_detail(reply,
                     "the instantiated graph's guest-memory nodes changed (generation %llu, "
                     "not %llu)",
                     (unsigned long long)(*e)->generation, (unsigned long long)generation);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult be_h_slGraphExecHost(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    CUgraphExec x;
    struct be_gexec *e;
    CUresult rc = exec_in(s, reply, call->sl_graph_exec_host->exec, UINT64_MAX, &x, &e);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__SlGraphExecHostReply *rp =
        BE_REPLY(reply, sl_graph_exec_host, SLUICE__WIRE__REPLY__OUT_SL_GRAPH_EXEC_HOST,
                 Sluice__Cuda__SlGraphExecHostReply, sluice__cuda__sl_graph_exec_host_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t n = e ? e->n_items : 0;
    rp->generation = e ? e->generation : 0;
    if (!n)
        return CUDA_SUCCESS;
    rp->kinds = malloc(n * sizeof *rp->kinds);
    rp->lens = malloc(n * sizeof *rp->lens);
    rp->fns = malloc(n * sizeof *rp->fns);
    rp->users = malloc(n * sizeof *rp->users);
    rp->pods.data = malloc(n * sizeof(CUDA_MEMCPY3D));
    if (!rp->kinds || !rp->lens || !rp->fns || !rp->users || !rp->pods.data)
        return CUDA_ERROR_OUT_OF_MEMORY; /* what was allocated goes with the reply */
    rp->n_kinds = rp->n_lens = rp->n_fns = rp->n_users = n;
    rp->pods.len = n * sizeof(CUDA_MEMCPY3D);
    for (size_t i = 0; i < n; i++) {
        const struct be_gitem *it = e->items[i];
        rp->kinds[i] = (uint32_t)it->kind;
        rp->lens[i] = it->len;
        rp->fns[i] = it->fn;
        rp->users[i] = it->user;
        memcpy(rp->pods.data + i * sizeof(CUDA_MEMCPY3D), &it->guest, sizeof(CUDA_MEMCPY3D));
    }
    return CUDA_SUCCESS;
}

static CUresult item_range(Sluice__Wire__Reply *reply, const struct be_gexec *e, uint32_t item,
                           enum be_gi_kind kind, uint64_t offset, uint64_t len)
{
    if (!e || item >= e->n_items || e->items[item]->kind != kind) {
        sl_be_detail(reply, "item %u is not a %s item of the instantiated graph", item,
                     kind == BE_GI_H2D ? "host-to-device" : "device-to-host");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (len > BE_MAX_BULK_PER_CALL || offset > e->items[item]->len ||
        len > e->items[item]->len - offset) {
        sl_be_detail(reply, "bytes %llu+%llu outside item %u of %llu bytes",
                     (unsigned long long)offset, (unsigned long long)len, item,
                     (unsigned long long)e->items[item]->len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult be_h_slGraphHostPut(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__SlGraphHostPutRequest *rq = call->sl_graph_host_put;
    CUgraphExec x;
    struct be_gexec *e;
    CUresult rc = exec_in(s, reply, rq->exec, rq->generation, &x, &e);
    if (rc == CUDA_SUCCESS)
        rc = item_range(reply, e, rq->item, BE_GI_H2D, rq->offset, c->in_len);
    if (rc == CUDA_SUCCESS && c->in_len)
        memcpy(e->items[rq->item]->buf + rq->offset, c->in, c->in_len);
    return rc;
}

CUresult be_h_slGraphHostGet(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__SlGraphHostGetRequest *rq = call->sl_graph_host_get;
    CUgraphExec x;
    struct be_gexec *e;
    CUresult rc = exec_in(s, reply, rq->exec, UINT64_MAX, &x, &e);
    if (rc == CUDA_SUCCESS)
        rc = item_range(reply, e, rq->item, BE_GI_D2H, rq->offset, rq->length);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint8_t *b = malloc(rq->length ? rq->length : 1);
    if (!b)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(b, e->items[rq->item]->buf + rq->offset, rq->length);
    c->out = b;
    c->out_len = rq->length;
    return CUDA_SUCCESS;
}

static CUresult launch_native(sl_be_session *s, CUgraphExec x, CUstream st, int pt)
{
    CUresult (*fn)(CUgraphExec, CUstream) =
        pt && s->api->cuGraphLaunch_ptsz ? s->api->cuGraphLaunch_ptsz : s->api->cuGraphLaunch;
    return fn ? fn(x, st) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult be_h_slGraphLaunch(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__SlGraphLaunchRequest *rq = call->sl_graph_launch;
    CUgraphExec x;
    struct be_gexec *e;
    CUstream stream;
    CUresult rc = exec_in(s, reply, rq->exec, rq->generation, &x, &e);
    if (rc == CUDA_SUCCESS)
        rc = be_stream(s, rq->stream, &stream);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (e && e->broken) {
        sl_be_detail(reply, "%s", e->broken);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    int pt = rq->per_thread != 0;
    CUresult (*sync)(CUstream) = pt && api->cuStreamSynchronize_ptsz ? api->cuStreamSynchronize_ptsz
                                                                     : api->cuStreamSynchronize;
    CUresult (*capturing)(CUstream, CUstreamCaptureStatus *) = pt && api->cuStreamIsCapturing_ptsz
                                                                   ? api->cuStreamIsCapturing_ptsz
                                                                   : api->cuStreamIsCapturing;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!sync)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (capturing && capturing(stream, &cs) == CUDA_SUCCESS &&
        cs != CU_STREAM_CAPTURE_STATUS_NONE) {
        sl_be_detail(reply, "a graph on guest memory cannot be launched into a stream capture");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    /* host-to-device bytes: with the launch, in item order */
    uint64_t h2d = 0, d2h = 0;
    for (size_t i = 0; e && i < e->n_items; i++) {
        if (e->items[i]->kind == BE_GI_H2D)
            h2d += e->items[i]->len;
        else if (e->items[i]->kind == BE_GI_D2H)
            d2h += e->items[i]->len;
    }
    if (!rq->staged) {
        if (c->in_len != h2d) {
            sl_be_detail(reply, "%llu bytes for host-to-device nodes of %llu",
                         (unsigned long long)c->in_len, (unsigned long long)h2d);
            return CUDA_ERROR_INVALID_VALUE;
        }
        uint64_t off = 0;
        for (size_t i = 0; e && i < e->n_items; i++)
            if (e->items[i]->kind == BE_GI_H2D) {
                memcpy(e->items[i]->buf, c->in + off, e->items[i]->len);
                off += e->items[i]->len;
            }
    } else if (c->in_len) {
        sl_be_detail(reply, "bulk with a staged launch");
        return CUDA_ERROR_INVALID_VALUE;
    }
    Sluice__Cuda__SlGraphLaunchReply *rp =
        BE_REPLY(reply, sl_graph_launch, SLUICE__WIRE__REPLY__OUT_SL_GRAPH_LAUNCH,
                 Sluice__Cuda__SlGraphLaunchReply, sluice__cuda__sl_graph_launch_reply__init);
    struct be_gstate *st = be_g_state(s);
    if (!rp || !st)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!st->log && !(st->log = malloc(BE_G_MAX_LOG * sizeof *st->log)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&st->log_mu);
    st->n_log = 0;
    st->log_overflow = 0;
    pthread_mutex_unlock(&st->log_mu);
    if (e)
        be_g_exec_allocs_register(s, e);
    rc = launch_native(s, x, stream, pt);
    if (rc == CUDA_SUCCESS)
        rc = sync(stream);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&st->log_mu);
    size_t n = st->n_log;
    int over = st->log_overflow;
    pthread_mutex_unlock(&st->log_mu);
    if (over) {
        sl_be_detail(reply, "the launch reached more than %u host nodes", BE_G_MAX_LOG);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (n && !(rp->host_items = malloc(n * sizeof *rp->host_items)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; e && i < e->n_items; i++)
            if (e->items[i] == st->log[k]) {
                rp->host_items[rp->n_host_items++] = (uint32_t)i;
                break;
            }
    if (d2h && d2h <= BE_G_INLINE_BYTES) {
        uint8_t *b = malloc(d2h);
        if (!b)
            return CUDA_ERROR_OUT_OF_MEMORY;
        uint64_t off = 0;
        for (size_t i = 0; i < e->n_items; i++)
            if (e->items[i]->kind == BE_GI_D2H) {
                memcpy(b + off, e->items[i]->buf, e->items[i]->len);
                off += e->items[i]->len;
            }
        c->out = b;
        c->out_len = d2h;
        rp->d2h_inline = 1;
    }
    return CUDA_SUCCESS;
}

/* cuGraphLaunch: instantiated graphs that do not touch guest memory. */
CUresult be_h_cuGraphLaunch(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphLaunchRequest *rq = call->cu_graph_launch;
    CUgraphExec x;
    struct be_gexec *e;
    CUstream stream;
    CUresult rc = exec_in(s, reply, rq->h_graph_exec, UINT64_MAX, &x, &e);
    if (rc == CUDA_SUCCESS)
        rc = be_stream(s, rq->h_stream, &stream);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (e && e->n_items) {
        sl_be_detail(reply, "a graph with nodes on guest memory is launched with slGraphLaunch");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (e)
        be_g_exec_allocs_register(s, e);
    return launch_native(s, x, stream, call->per_thread_stream);
}
