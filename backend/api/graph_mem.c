/* Graph memory: allocation and free nodes, and the device's graph memory attributes.
 *
 * cuGraphAddMemAllocNode: the CUDA_MEM_ALLOC_NODE_PARAMS pod (accessDescs cleared) with the
 * access descriptors as the call's bulk (accessDescCount of them). The pool properties name a
 * device of the session (ordinal translated; host locations, shareable handle types and
 * Windows attributes refused), so do the descriptors. The address the driver reserves for the
 * allocation enters the session's allocation table at once: the graph's nodes and, after a
 * launch, the guest's own calls use it. It stays there until the guest frees it outside a graph
 * (cuMemFree / cuMemFreeAsync remove it) or the session ends, and every launch of an
 * instantiated graph that allocates it enters it again (a launch allocates it anew at that
 * address). Its size counts against the instance's memory quota from the node's creation until
 * that free (the driver keeps graph memory reserved between launches); a node past the quota is
 * refused with CUDA_ERROR_OUT_OF_MEMORY. cuGraphMemAllocNodeGetParams answers the pod with the
 * descriptors as bulk. A free node's address is the session's memory or a graph allocation's
 * (reserved for the graph even after the guest freed it outside). */
#include "api/graph_mem.h"

#include <stdlib.h>
#include <string.h>

#include "accounting/quota.h"
#include "api/graph.h"
#include "api/reply.h"
#include "session/ranges.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

static CUresult location_in(sl_be_session *s, Sluice__Wire__Reply *reply, CUmemLocation *loc)
{
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE) {
        sl_be_detail(reply, "graph allocations on location type %d are not supported",
                     (int)loc->type);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    CUdevice dev;
    CUresult rc = sl_be_device_get(s, loc->id, &dev);
    if (rc == CUDA_SUCCESS)
        loc->id = (int)dev;
    return rc;
}

CUresult be_h_cuGraphAddMemAllocNode(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphAddMemAllocNodeRequest *rq = call->cu_graph_add_mem_alloc_node;
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    if (rq->n_node_params != 1 || rq->node_params[0].len != sizeof p) {
        sl_be_detail(reply, "CUDA_MEM_ALLOC_NODE_PARAMS malformed");
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&p, rq->node_params[0].data, sizeof p);
    if (!api->cuGraphAddMemAllocNode)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (p.accessDescCount > 64 || c->in_len != p.accessDescCount * sizeof(CUmemAccessDesc)) {
        sl_be_detail(reply, "%zu access descriptors with %llu bulk bytes", p.accessDescCount,
                     (unsigned long long)c->in_len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (p.poolProps.handleTypes != CU_MEM_HANDLE_TYPE_NONE || p.poolProps.win32SecurityAttributes) {
        sl_be_detail(reply, "graph allocations with shareable handle types are refused");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (!p.bytesize)
        return CUDA_ERROR_INVALID_VALUE;
    CUmemAccessDesc *guest = NULL, *native = NULL;
    if (p.accessDescCount) {
        guest = malloc(c->in_len);
        native = malloc(c->in_len);
        if (!guest || !native) {
            free(guest);
            free(native);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(guest, c->in, c->in_len);
        memcpy(native, c->in, c->in_len);
    }
    CUmemLocation guest_loc = p.poolProps.location;
    CUresult rc = location_in(s, reply, &p.poolProps.location);
    for (size_t i = 0; rc == CUDA_SUCCESS && i < p.accessDescCount; i++)
        rc = location_in(s, reply, &native[i].location);
    CUgraph g;
    if (rc == CUDA_SUCCESS)
        rc = be_g_graph(s, rq->h_graph, &g);
    CUgraphNode *deps = NULL;
    if (rc == CUDA_SUCCESS)
        rc = be_g_deps_in(s, reply, rq->dependencies, rq->n_dependencies, rq->num_dependencies,
                          &deps);
    struct be_gstate *st = rc == CUDA_SUCCESS ? be_g_state(s) : NULL;
    if (rc == CUDA_SUCCESS &&
        (!st || be_g_grow((void **)&st->allocs, &st->cap_allocs, st->n_allocs, sizeof *st->allocs)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    Sluice__Cuda__CuGraphAddMemAllocNodeReply *rp = NULL;
    CUDA_MEM_ALLOC_NODE_PARAMS *out = NULL;
    if (rc == CUDA_SUCCESS) {
        rp = BE_REPLY(reply, cu_graph_add_mem_alloc_node,
                      SLUICE__WIRE__REPLY__OUT_CU_GRAPH_ADD_MEM_ALLOC_NODE,
                      Sluice__Cuda__CuGraphAddMemAllocNodeReply,
                      sluice__cuda__cu_graph_add_mem_alloc_node_reply__init);
        out = rp ? calloc(1, sizeof *out) : NULL;
        if (out)
            rp->node_params = calloc(1, sizeof *rp->node_params);
        if (!out || !rp->node_params) {
            free(out);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            rp->node_params[0].data = (uint8_t *)out; /* freed with the reply */
            rp->node_params[0].len = sizeof *out;
            rp->n_node_params = 1;
        }
    }
    char why[200];
    int admitted = 0;
    if (rc == CUDA_SUCCESS) { /* the quota (quota.c): graph memory counts from its node on */
        admitted = be_acct_mem_admit(s, p.bytesize, why, sizeof why) == 0;
        if (!admitted) {
            sl_be_detail(reply, "%s", why);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    CUgraphNode node = NULL;
    if (rc == CUDA_SUCCESS) {
        p.accessDescs = native;
        rc = api->cuGraphAddMemAllocNode(&node, g, deps, (size_t)rq->num_dependencies, &p);
    }
    if (rc == CUDA_SUCCESS)
        rc = be_g_node_put(s, rq->h_graph, node, &rp->ph_graph_node);
    if (rc == CUDA_SUCCESS)
        rc = be_mem_add(&s->mem, p.dptr, p.bytesize, BE_R_ALLOC, 0, 0);
    if (rc == CUDA_SUCCESS)
        be_mem_count(&s->mem, SL_CALL_cuGraphAddMemAllocNode, p.dptr);
    if (admitted)
        be_acct_mem_publish(s); /* what is held now replaces the reservation */
    if (rc == CUDA_SUCCESS) {
        struct be_galloc *a = &st->allocs[st->n_allocs++];
        a->graph = rq->h_graph;
        a->node = node;
        a->p = p;
        a->p.poolProps.location = guest_loc;
        a->p.accessDescs = NULL;
        a->descs = guest;
        guest = NULL;
        *out = a->p;
    }
    free(guest);
    free(native);
    free(deps);
    return rc;
}

CUresult be_h_cuGraphMemAllocNodeGetParams(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    void *n = NULL;
    uint64_t id = call->cu_graph_mem_alloc_node_get_params->h_node;
    CUresult rc = id ? sl_be_handle_get(s, SL_H_GRAPHNODE, id, &n) : CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    struct be_gstate *st = s->graph;
    struct be_galloc *a = NULL;
    for (size_t i = 0; st && i < st->n_allocs; i++)
        if (st->allocs[i].node == (CUgraphNode)n)
            a = &st->allocs[i];
    if (!a) {
        sl_be_detail(reply, "not a memory allocation node");
        return CUDA_ERROR_INVALID_VALUE;
    }
    Sluice__Cuda__CuGraphMemAllocNodeGetParamsReply *rp =
        BE_REPLY(reply, cu_graph_mem_alloc_node_get_params,
                 SLUICE__WIRE__REPLY__OUT_CU_GRAPH_MEM_ALLOC_NODE_GET_PARAMS,
                 Sluice__Cuda__CuGraphMemAllocNodeGetParamsReply,
                 sluice__cuda__cu_graph_mem_alloc_node_get_params_reply__init);
    CUDA_MEM_ALLOC_NODE_PARAMS *o = rp ? malloc(sizeof *o) : NULL;
    uint64_t blen = a->p.accessDescCount * sizeof(CUmemAccessDesc);
    uint8_t *b = o ? malloc(blen ? blen : 1) : NULL;
    if (!b) {
        free(o);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *o = a->p;
    rp->params_out.data = (uint8_t *)o;
    rp->params_out.len = sizeof *o;
    if (blen)
        memcpy(b, a->descs, blen);
    c->out = b;
    c->out_len = blen;
    return CUDA_SUCCESS;
}

void be_g_alloc_forget_node(struct be_gstate *st, CUgraphNode n)
{
    for (size_t i = 0; st && i < st->n_allocs; i++)
        if (st->allocs[i].node == n) {
            free(st->allocs[i].descs);
            st->allocs[i] = st->allocs[--st->n_allocs];
            return;
        }
}

void be_g_exec_allocs_register(sl_be_session *s, const struct be_gexec *e)
{
    for (size_t i = 0; i < e->n_allocs; i++)
        if (be_mem_add(&s->mem, e->allocs[i][0], e->allocs[i][1], BE_R_ALLOC, 0, 0) == CUDA_SUCCESS)
            be_mem_count(&s->mem, SL_CALL_cuGraphAddMemAllocNode, e->allocs[i][0]);
    be_acct_mem_publish(s); /* counted again if the guest had freed it outside a graph */
}

CUresult be_g_clone_allocs(sl_be_session *s, uint64_t orig, uint64_t clone, CUgraph native_clone)
{
    struct be_gstate *st = s->graph;
    size_t n = st ? st->n_allocs : 0;
    for (size_t i = 0; i < n; i++) {
        if (!be_g_within(st, st->allocs[i].graph, orig))
            continue;
        CUgraphNode cn = NULL;
        CUDA_MEM_ALLOC_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        if (!s->api->cuGraphNodeFindInClone || !s->api->cuGraphMemAllocNodeGetParams)
            return CUDA_ERROR_NOT_SUPPORTED;
        CUresult rc = s->api->cuGraphNodeFindInClone(&cn, st->allocs[i].node, native_clone);
        if (rc == CUDA_SUCCESS)
            rc = s->api->cuGraphMemAllocNodeGetParams(cn, &p);
        if (rc == CUDA_SUCCESS && (p.dptr != st->allocs[i].p.dptr)) {
            rc = be_mem_add(&s->mem, p.dptr, p.bytesize, BE_R_ALLOC, 0, 0);
            if (rc == CUDA_SUCCESS) {
                be_mem_count(&s->mem, SL_CALL_cuGraphAddMemAllocNode, p.dptr);
                be_acct_mem_publish(s);
            }
        }
        uint64_t blen = st->allocs[i].p.accessDescCount * sizeof(CUmemAccessDesc);
        CUmemAccessDesc *d = NULL;
        if (rc == CUDA_SUCCESS && blen && !(d = malloc(blen)))
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        if (rc == CUDA_SUCCESS &&
            be_g_grow((void **)&st->allocs, &st->cap_allocs, st->n_allocs, sizeof *st->allocs))
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        if (rc != CUDA_SUCCESS) {
            free(d);
            return rc;
        }
        struct be_galloc *a = &st->allocs[st->n_allocs++];
        *a = st->allocs[i];
        a->graph = clone;
        a->node = cn;
        a->p.dptr = p.dptr;
        if (blen)
            memcpy(d, st->allocs[i].descs, blen);
        a->descs = d;
    }
    return CUDA_SUCCESS;
}

/* Whether ptr is the address of a graph allocation of the session: an allocation node's, or one
 * an instantiated graph's launches make. Such an address stays reserved for the graph after the
 * guest freed the memory outside it, and a free node of another graph may name it
 * (graphMemoryNodes: "freed in a different graph"). */
static int graph_reserved(const struct be_gstate *st, uint64_t ptr)
{
    for (size_t i = 0; st && i < st->n_allocs; i++)
        if (ptr == st->allocs[i].p.dptr)
            return 1;
    for (size_t i = 0; st && i < st->n_execs; i++)
        for (size_t j = 0; j < st->execs[i]->n_allocs; j++)
            if (ptr == st->execs[i]->allocs[j][0])
                return 1;
    return 0;
}

/* cuGraphAddMemFreeNode: the address is the session's memory or a graph allocation of it. */
CUresult be_h_cuGraphAddMemFreeNode(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuGraphAddMemFreeNodeRequest *rq = c->call->cu_graph_add_mem_free_node;
    if (!rq)
        return CUDA_ERROR_INVALID_VALUE;
    if (!s->api->cuGraphAddMemFreeNode)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (sl_be_devptr_check(s, rq->dptr, 0) != CUDA_SUCCESS && !graph_reserved(s->graph, rq->dptr)) {
        sl_be_detail(reply, "0x%llx is neither the session's memory nor a graph allocation",
                     (unsigned long long)rq->dptr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUgraph g;
    CUresult rc = be_g_graph(s, rq->h_graph, &g);
    CUgraphNode *deps = NULL;
    if (rc == CUDA_SUCCESS)
        rc = be_g_deps_in(s, reply, rq->dependencies, rq->n_dependencies, rq->num_dependencies,
                          &deps);
    CUgraphNode node = NULL;
    if (rc == CUDA_SUCCESS)
        rc = s->api->cuGraphAddMemFreeNode(&node, g, deps, (size_t)rq->num_dependencies,
                                           (CUdeviceptr)rq->dptr);
    free(deps);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuGraphAddMemFreeNodeReply *rp = BE_REPLY(
        reply, cu_graph_add_mem_free_node, SLUICE__WIRE__REPLY__OUT_CU_GRAPH_ADD_MEM_FREE_NODE,
        Sluice__Cuda__CuGraphAddMemFreeNodeReply,
        sluice__cuda__cu_graph_add_mem_free_node_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return be_g_node_put(s, rq->h_graph, node, &rp->ph_graph_node);
}

/* cuDeviceGetGraphMemAttribute / cuDeviceSetGraphMemAttribute: every attribute is a cuuint64_t
 * (8 bytes of bulk: out for get, in for set). */
static CUresult mem_attr(struct sl_be_call *c, int32_t ordinal, uint32_t attr, uint64_t len,
                         int set)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    if (attr > CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH || len != sizeof(cuuint64_t)) {
        sl_be_detail(reply, "graph memory attribute %u of %llu bytes", attr,
                     (unsigned long long)len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult (*fn)(CUdevice, CUgraphMem_attribute, void *) =
        set ? s->api->cuDeviceSetGraphMemAttribute : s->api->cuDeviceGetGraphMemAttribute;
    if (!fn)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUdevice dev;
    CUresult rc = sl_be_device_get(s, ordinal, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (set) {
        if (c->in_len != sizeof(cuuint64_t))
            return CUDA_ERROR_INVALID_VALUE;
        cuuint64_t v;
        memcpy(&v, c->in, sizeof v);
        return fn(dev, (CUgraphMem_attribute)attr, &v);
    }
    if (c->in_len)
        return CUDA_ERROR_INVALID_VALUE;
    cuuint64_t *v = calloc(1, sizeof *v);
    if (!v)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = fn(dev, (CUgraphMem_attribute)attr, v);
    if (rc != CUDA_SUCCESS) {
        free(v);
        return rc;
    }
    c->out = (uint8_t *)v;
    c->out_len = sizeof *v;
    return CUDA_SUCCESS;
}

CUresult be_h_cuDeviceGetGraphMemAttribute(struct sl_be_call *c)
{
    const Sluice__Wire__Call *call = c->call;
    const Sluice__Cuda__CuDeviceGetGraphMemAttributeRequest *rq =
        call->cu_device_get_graph_mem_attribute;
    return mem_attr(c, rq->device, rq->attr, rq->value, 0);
}

CUresult be_h_cuDeviceSetGraphMemAttribute(struct sl_be_call *c)
{
    const Sluice__Wire__Call *call = c->call;
    const Sluice__Cuda__CuDeviceSetGraphMemAttributeRequest *rq =
        call->cu_device_set_graph_mem_attribute;
    return mem_attr(c, rq->device, rq->attr, rq->value, 1);
}
