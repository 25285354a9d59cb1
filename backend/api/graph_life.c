/* Lifetimes of graphs, their nodes and their instantiations (backend/graph.h): instantiation
 * records which items and graph allocations an instantiated graph uses, update renews that,
 * destroying a graph forgets its items, allocation records, conditional bodies and node ids,
 * cloning gives the clone's nodes items of their own. Nodes made by generated handlers get their
 * graph as parent here, so that no id of a destroyed graph's node can reach the driver. A graph
 * that holds nodes on guest memory cannot become a child graph (its nodes would be copied where
 * no item stands for them). */
#include "api/graph_life.h"

#include <stdlib.h>
#include <string.h>

#include "api/graph.h"
#include "api/graph_host.h"
#include "api/graph_host_nodes.h"
#include "api/graph_mem.h"
#include "api/link.h"
#include "api/reply.h"
#include "api/vmm.h"
#include "session/handles.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

/* The generated handlers wrapped here (set once, by be_register_graph_life). */

/* ---------------------------------------------------------------- forgetting */

void be_g_graph_gone(sl_be_session *s, uint64_t graph)
{
    struct be_gstate *st = s->graph;
    if (st) {
        for (size_t i = 0; i < st->n_items;) {
            struct be_gitem *it = st->items[i];
            if (it->graph && be_g_within(st, it->graph, graph)) {
                size_t before = st->n_items;
                be_g_item_leave(it);
                if (st->n_items != before)
                    continue; /* freed: another item moved into slot i */
            }
            i++;
        }
        for (size_t i = 0; i < st->n_allocs;) {
            if (be_g_within(st, st->allocs[i].graph, graph)) {
                free(st->allocs[i].descs);
                st->allocs[i] = st->allocs[--st->n_allocs];
            } else {
                i++;
            }
        }
    }
    /* node ids (and body graphs) of the graph and of its bodies */
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < s->h.cap; i++) {
            struct be_handle *h = &s->h.slot[i];
            if (h->id <= 1 || !h->parent)
                continue;
            if (be_handles_find(&s->h, be_id_kind(h->id), h->id) != h)
                continue;
            enum sl_handle_kind k = be_id_kind(h->id);
            if ((k == SL_H_GRAPHNODE || k == SL_H_GRAPH || k == SL_H_CONDHANDLE) &&
                h->parent == graph) {
                uint64_t id = h->id;
                be_handles_del(&s->h, id);
                if (k == SL_H_GRAPH) {
                    be_g_graph_gone(s, id);
                    again = 1; /* the table may have changed under us */
                    break;
                }
            }
        }
    }
    if (st)
        for (size_t i = 0; i < st->n_bodies;) {
            if (st->bodies[i].body == graph || st->bodies[i].parent == graph)
                st->bodies[i] = st->bodies[--st->n_bodies];
            else
                i++;
        }
}

void be_graph_release(sl_be_session *s)
{
    be_vmm_release(s);
    be_link_release(s);
    struct be_gstate *st = s->graph;
    if (!st)
        return;
    for (size_t i = 0; i < st->n_execs; i++) {
        struct be_gexec *e = st->execs[i];
        free(e->items);
        free(e->nodes);
        free(e->allocs);
        free(e);
    }
    for (size_t i = 0; i < st->n_items; i++) {
        free(st->items[i]->buf);
        free(st->items[i]);
    }
    for (size_t i = 0; i < st->n_allocs; i++)
        free(st->allocs[i].descs);
    free(st->execs);
    free(st->items);
    free(st->allocs);
    free(st->bodies);
    free(st->log);
    pthread_mutex_destroy(&st->log_mu);
    free(st);
    s->graph = NULL;
}

/* ---------------------------------------------------------------- instantiation */

static CUresult exec_record(sl_be_session *s, uint64_t id, CUgraphExec native, uint64_t graph)
{
    struct be_gstate *st = be_g_state(s);
    if (!st || be_g_grow((void **)&st->execs, &st->cap_execs, st->n_execs, sizeof *st->execs))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct be_gexec *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->id = id;
    e->exec = native;
    CUresult rc = be_g_exec_fill(s, e, graph, 0);
    if (rc != CUDA_SUCCESS || (!e->n_items && !e->n_allocs)) {
        be_g_exec_free(e);
        return rc;
    }
    st->execs[st->n_execs++] = e;
    return CUDA_SUCCESS;
}

/* The driver made exec (native) from graph: record it, or undo it. */
static CUresult instantiated(sl_be_session *s, uint64_t graph, uint64_t exec_id)
{
    void *x = NULL;
    CUresult rc = sl_be_handle_get(s, SL_H_GRAPHEXEC, exec_id, &x);
    if (rc == CUDA_SUCCESS)
        rc = exec_record(s, exec_id, (CUgraphExec)x, graph);
    if (rc != CUDA_SUCCESS && x) {
        if (s->api->cuGraphExecDestroy)
            s->api->cuGraphExecDestroy((CUgraphExec)x);
        sl_be_handle_drop(s, SL_H_GRAPHEXEC, exec_id);
    }
    return rc;
}

CUresult be_h_cuGraphInstantiateWithFlags(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    CUresult rc = sl_be_gen_cuGraphInstantiateWithFlags(c);
    if (rc != CUDA_SUCCESS ||
        reply->out_case != SLUICE__WIRE__REPLY__OUT_CU_GRAPH_INSTANTIATE_WITH_FLAGS)
        return rc;
    return instantiated(s, call->cu_graph_instantiate_with_flags->h_graph,
                        reply->cu_graph_instantiate_with_flags->ph_graph_exec);
}

CUresult be_h_cuGraphInstantiateWithParams(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphInstantiateWithParamsRequest *rq =
        call->cu_graph_instantiate_with_params;
    CUDA_GRAPH_INSTANTIATE_PARAMS p;
    if (rq->instantiate_params.len != sizeof p) {
        sl_be_detail(reply, "CUDA_GRAPH_INSTANTIATE_PARAMS of %zu bytes",
                     rq->instantiate_params.len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&p, rq->instantiate_params.data, sizeof p);
    CUresult (*fn)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *) =
        call->per_thread_stream && api->cuGraphInstantiateWithParams_ptsz
            ? api->cuGraphInstantiateWithParams_ptsz
            : api->cuGraphInstantiateWithParams;
    if (!fn)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraph g;
    CUstream st = NULL;
    CUresult rc = be_g_graph(s, rq->h_graph, &g);
    if (rc == CUDA_SUCCESS)
        rc = be_stream(s, (uint64_t)(uintptr_t)p.hUploadStream, &st);
    if (rc != CUDA_SUCCESS)
        return rc;
    p.hUploadStream = st;
    p.hErrNode_out = NULL;
    Sluice__Cuda__CuGraphInstantiateWithParamsReply *rp =
        BE_REPLY(reply, cu_graph_instantiate_with_params,
                 SLUICE__WIRE__REPLY__OUT_CU_GRAPH_INSTANTIATE_WITH_PARAMS,
                 Sluice__Cuda__CuGraphInstantiateWithParamsReply,
                 sluice__cuda__cu_graph_instantiate_with_params_reply__init);
    CUDA_GRAPH_INSTANTIATE_PARAMS *o = rp ? malloc(sizeof *o) : NULL;
    if (!o)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->instantiate_params.data = (uint8_t *)o;
    rp->instantiate_params.len = sizeof *o;
    CUgraphExec x = NULL;
    rc = fn(&x, g, &p);
    *o = p;
    o->hUploadStream =
        (CUstream)(uintptr_t)((const CUDA_GRAPH_INSTANTIATE_PARAMS *)rq->instantiate_params.data)
            ->hUploadStream;
    o->hErrNode_out = NULL;
    if (p.hErrNode_out) {
        uint64_t nid = 0;
        if (be_g_node_id(s, rq->h_graph, p.hErrNode_out, &nid) == CUDA_SUCCESS)
            o->hErrNode_out = (CUgraphNode)(uintptr_t)nid;
    }
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = sl_be_handle_put(s, SL_H_GRAPHEXEC, x, 0, &rp->ph_graph_exec);
    if (rc != CUDA_SUCCESS) {
        if (api->cuGraphExecDestroy)
            api->cuGraphExecDestroy(x);
        return rc;
    }
    return instantiated(s, rq->h_graph, rp->ph_graph_exec);
}

CUresult be_h_cuGraphExecDestroy(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    uint64_t id = call->cu_graph_exec_destroy->h_graph_exec;
    if (!api->cuGraphExecDestroy)
        return CUDA_ERROR_NOT_SUPPORTED;
    void *x = NULL;
    CUresult rc = id ? sl_be_handle_get(s, SL_H_GRAPHEXEC, id, &x) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = api->cuGraphExecDestroy((CUgraphExec)x);
    if (rc != CUDA_SUCCESS)
        return rc;
    sl_be_handle_drop(s, SL_H_GRAPHEXEC, id);
    struct be_gstate *st = s->graph;
    for (size_t i = 0; st && i < st->n_execs; i++)
        if (st->execs[i]->id == id) {
            be_g_exec_free(st->execs[i]);
            st->execs[i] = st->execs[--st->n_execs];
            break;
        }
    return CUDA_SUCCESS;
}

/* exec was updated from graph: its items and allocations are graph's now. */
static CUresult updated(sl_be_session *s, uint64_t exec_id, uint64_t graph)
{
    struct be_gexec *e = be_g_exec_find(s->graph, exec_id);
    if (e)
        return be_g_exec_fill(s, e, graph, 1);
    void *x = NULL;
    CUresult rc = sl_be_handle_get(s, SL_H_GRAPHEXEC, exec_id, &x);
    return rc == CUDA_SUCCESS ? exec_record(s, exec_id, (CUgraphExec)x, graph) : rc;
}

CUresult be_h_cuGraphExecUpdate_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphExecUpdateV2Request *rq = call->cu_graph_exec_update_v2;
    if (!api->cuGraphExecUpdate_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    void *x = NULL;
    CUgraph g;
    CUresult rc = rq->h_graph_exec ? sl_be_handle_get(s, SL_H_GRAPHEXEC, rq->h_graph_exec, &x)
                                   : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = be_g_graph(s, rq->h_graph, &g);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuGraphExecUpdateV2Reply *rp = BE_REPLY(
        reply, cu_graph_exec_update_v2, SLUICE__WIRE__REPLY__OUT_CU_GRAPH_EXEC_UPDATE_V2,
        Sluice__Cuda__CuGraphExecUpdateV2Reply, sluice__cuda__cu_graph_exec_update_v2_reply__init);
    CUgraphExecUpdateResultInfo *info = rp ? calloc(1, sizeof *info) : NULL;
    if (!info)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->result_info.data = (uint8_t *)info;
    rp->result_info.len = sizeof *info;
    CUgraphExecUpdateResultInfo r;
    memset(&r, 0, sizeof r);
    rc = api->cuGraphExecUpdate_v2((CUgraphExec)x, g, &r);
    info->result = r.result;
    uint64_t id = 0;
    if (r.errorNode && be_g_node_id(s, rq->h_graph, r.errorNode, &id) == CUDA_SUCCESS)
        info->errorNode = (CUgraphNode)(uintptr_t)id;
    if (r.errorFromNode)
        info->errorFromNode =
            (CUgraphNode)(uintptr_t)be_g_id_of(s, SL_H_GRAPHNODE, r.errorFromNode);
    if (rc != CUDA_SUCCESS)
        return rc;
    return updated(s, rq->h_graph_exec, rq->h_graph);
}

CUresult be_h_cuGraphExecUpdate(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    CUresult rc = sl_be_gen_cuGraphExecUpdate(c);
    if (rc != CUDA_SUCCESS)
        return rc;
    return updated(s, call->cu_graph_exec_update->h_graph_exec,
                   call->cu_graph_exec_update->h_graph);
}

/* ---------------------------------------------------------------- destruction, cloning */

CUresult be_h_cuGraphDestroy(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    uint64_t id = call->cu_graph_destroy->h_graph;
    struct be_handle *h = be_handles_find(&s->h, SL_H_GRAPH, id);
    if (h && h->parent) {
        sl_be_detail(reply, "the graph belongs to a node of another graph");
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = sl_be_gen_cuGraphDestroy(c);
    if (rc == CUDA_SUCCESS)
        be_g_graph_gone(s, id);
    return rc;
}

CUresult be_h_cuGraphDestroyNode(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    void *n = NULL;
    uint64_t id = call->cu_graph_destroy_node->h_node;
    if (id && sl_be_handle_get(s, SL_H_GRAPHNODE, id, &n) != CUDA_SUCCESS)
        n = NULL;
    CUresult rc = sl_be_gen_cuGraphDestroyNode(c);
    struct be_gstate *st = s->graph;
    if (rc != CUDA_SUCCESS || !n || !st)
        return rc;
    be_g_item_leave(be_g_item_find(st, (CUgraphNode)n));
    be_g_alloc_forget_node(st, (CUgraphNode)n);
    for (size_t i = 0; i < st->n_bodies; i++)
        if (st->bodies[i].node == (CUgraphNode)n) {
            uint64_t body = st->bodies[i].body;
            be_g_graph_gone(s, body);
            sl_be_handle_drop(s, SL_H_GRAPH, body);
            i = (size_t)-1; /* bodies changed: start over */
        }
    return rc;
}

static int holds_items(const struct be_gstate *st, uint64_t graph)
{
    for (size_t i = 0; st && i < st->n_items; i++)
        if (st->items[i]->graph && be_g_within(st, st->items[i]->graph, graph))
            return 1;
    return 0;
}

CUresult be_h_cuGraphClone(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    CUresult rc = sl_be_gen_cuGraphClone(c);
    if (rc != CUDA_SUCCESS || reply->out_case != SLUICE__WIRE__REPLY__OUT_CU_GRAPH_CLONE)
        return rc;
    uint64_t orig = call->cu_graph_clone->original_graph,
             clone = reply->cu_graph_clone->ph_graph_clone;
    void *native = NULL;
    rc = sl_be_handle_get(s, SL_H_GRAPH, clone, &native);
    if (rc == CUDA_SUCCESS)
        rc = be_g_clone_items(s, reply, orig, clone, (CUgraph)native);
    if (rc == CUDA_SUCCESS)
        rc = be_g_clone_allocs(s, orig, clone, (CUgraph)native);
    if (rc != CUDA_SUCCESS && native) {
        be_g_graph_gone(s, clone);
        if (api->cuGraphDestroy)
            api->cuGraphDestroy((CUgraph)native);
        sl_be_handle_drop(s, SL_H_GRAPH, clone);
    }
    return rc;
}

CUresult be_h_cuGraphAddChildGraphNode(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphAddChildGraphNodeRequest *rq = call->cu_graph_add_child_graph_node;
    if (holds_items(s->graph, rq->child_graph)) {
        sl_be_detail(reply,
                     "a graph with memcpy or host nodes on guest memory cannot be a child graph");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    CUresult rc = sl_be_gen_cuGraphAddChildGraphNode(c);
    if (rc == CUDA_SUCCESS &&
        reply->out_case == SLUICE__WIRE__REPLY__OUT_CU_GRAPH_ADD_CHILD_GRAPH_NODE)
        be_g_set_parent(s, reply->cu_graph_add_child_graph_node->ph_graph_node, rq->h_graph);
    return rc;
}

CUresult be_h_cuGraphExecChildGraphNodeSetParams(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    if (holds_items(s->graph, call->cu_graph_exec_child_graph_node_set_params->child_graph)) {
        sl_be_detail(reply,
                     "a graph with memcpy or host nodes on guest memory cannot be a child graph");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return sl_be_gen_cuGraphExecChildGraphNodeSetParams(c);
}

/* The embedded graph of a child graph node: one id per graph, parent the node's graph. */
CUresult be_h_cuGraphChildGraphNodeGetGraph(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    CUresult rc = sl_be_gen_cuGraphChildGraphNodeGetGraph(c);
    if (rc != CUDA_SUCCESS ||
        reply->out_case != SLUICE__WIRE__REPLY__OUT_CU_GRAPH_CHILD_GRAPH_NODE_GET_GRAPH)
        return rc;
    uint64_t *out = &reply->cu_graph_child_graph_node_get_graph->ph_graph;
    struct be_handle *nh =
        be_handles_find(&s->h, SL_H_GRAPHNODE, call->cu_graph_child_graph_node_get_graph->h_node);
    struct be_handle *gh = be_handles_find(&s->h, SL_H_GRAPH, *out);
    if (!gh)
        return rc;
    for (size_t i = 0; i < s->h.cap; i++) {
        struct be_handle *h = &s->h.slot[i];
        if (h != gh && be_id_kind(h->id) == SL_H_GRAPH && h->native == gh->native &&
            be_handles_find(&s->h, SL_H_GRAPH, h->id) == h) {
            uint64_t keep = h->id;
            be_handles_del(&s->h, *out);
            *out = keep;
            return rc;
        }
    }
    gh->parent = nh ? nh->parent : 0;
    return rc;
}

/* cuStreamEndCapture: a graph captured into one the session knows (cuStreamBeginCaptureToGraph,
 * slStreamCaptureInfo) keeps its id. */
CUresult be_h_cuStreamEndCapture(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    CUresult rc = sl_be_gen_cuStreamEndCapture(c);
    if (rc != CUDA_SUCCESS || reply->out_case != SLUICE__WIRE__REPLY__OUT_CU_STREAM_END_CAPTURE)
        return rc;
    uint64_t *out = &reply->cu_stream_end_capture->ph_graph;
    struct be_handle *gh = be_handles_find(&s->h, SL_H_GRAPH, *out);
    for (size_t i = 0; gh && i < s->h.cap; i++) {
        struct be_handle *h = &s->h.slot[i];
        if (h != gh && be_id_kind(h->id) == SL_H_GRAPH && h->native == gh->native &&
            be_handles_find(&s->h, SL_H_GRAPH, h->id) == h) {
            uint64_t keep = h->id;
            be_handles_del(&s->h, *out);
            *out = keep;
            break;
        }
    }
    return rc;
}

/* Generated node makers: the new node's parent is its graph. */
/* Generated node makers: the new node's parent is its graph. */
#define PARENT_WRAP(name, member, CASE, graph_field, node_field)                                   \
    CUresult be_h_##name(struct sl_be_call *c)                                                     \
    {                                                                                              \
        CUresult rc = sl_be_gen_##name(c);                                                         \
        if (rc == CUDA_SUCCESS && c->reply->out_case == CASE)                                      \
            be_g_set_parent(c->s, c->reply->member->node_field, c->call->member->graph_field);     \
        return rc;                                                                                 \
    }
PARENT_WRAP(cuGraphAddEmptyNode, cu_graph_add_empty_node,
            SLUICE__WIRE__REPLY__OUT_CU_GRAPH_ADD_EMPTY_NODE, h_graph, ph_graph_node)
PARENT_WRAP(cuGraphAddEventRecordNode, cu_graph_add_event_record_node,
            SLUICE__WIRE__REPLY__OUT_CU_GRAPH_ADD_EVENT_RECORD_NODE, h_graph, ph_graph_node)
PARENT_WRAP(cuGraphAddEventWaitNode, cu_graph_add_event_wait_node,
            SLUICE__WIRE__REPLY__OUT_CU_GRAPH_ADD_EVENT_WAIT_NODE, h_graph, ph_graph_node)
PARENT_WRAP(cuGraphNodeFindInClone, cu_graph_node_find_in_clone,
            SLUICE__WIRE__REPLY__OUT_CU_GRAPH_NODE_FIND_IN_CLONE, h_cloned_graph, ph_node)
