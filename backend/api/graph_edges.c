/* A graph's edges (slGraphEdges: the frontend sends cuGraphGetEdges_v2 and cuGraphGetEdges as
 * it): the driver's answer with its nodes as ids and every edge's CUgraphEdgeData (the frontend
 * decides a lossy query when its caller passed no edge data). want 0 asks for the count only. */
#include <stdlib.h>
#include <string.h>

#include "api/graph.h"
#include "api/reply.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/wire.h"

/* The reply's arrays (freed with it) for the first n edges. */
static CUresult reply_edges(sl_be_session *s, uint64_t graph, const CUgraphNode *from,
                            const CUgraphNode *to, const CUgraphEdgeData *data, size_t n,
                            Sluice__Cuda__SlGraphEdgesReply *rp)
{
    if (!n)
        return CUDA_SUCCESS;
    rp->from = calloc(n, sizeof *rp->from);
    rp->to = calloc(n, sizeof *rp->to);
    rp->edges.data = malloc(n * sizeof *data);
    if (!rp->from || !rp->to || !rp->edges.data)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(rp->edges.data, data, n * sizeof *data);
    rp->edges.len = n * sizeof *data;
    rp->n_from = rp->n_to = n;
    for (size_t i = 0; i < n; i++) {
        CUresult rc = be_g_node_id(s, graph, from[i], &rp->from[i]);
        if (rc == CUDA_SUCCESS)
            rc = be_g_node_id(s, graph, to[i], &rp->to[i]);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

CUresult be_h_slGraphEdges(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__SlGraphEdgesRequest *rq = c->call->sl_graph_edges;
    if (rq->want > SL_WIRE_MAX_ARRAY) {
        sl_be_detail(reply, "%llu edges asked for", (unsigned long long)rq->want);
        return CUDA_ERROR_INVALID_VALUE;
    }
    Sluice__Cuda__SlGraphEdgesReply *rp =
        BE_REPLY(reply, sl_graph_edges, SLUICE__WIRE__REPLY__OUT_SL_GRAPH_EDGES,
                 Sluice__Cuda__SlGraphEdgesReply, sluice__cuda__sl_graph_edges_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!s->api->cuGraphGetEdges_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraph g;
    CUresult rc = be_g_graph(s, rq->graph, &g);
    if (rc != CUDA_SUCCESS)
        return rc;
    size_t n = (size_t)rq->want;
    if (!n) {
        rc = s->api->cuGraphGetEdges_v2(g, NULL, NULL, NULL, &n);
        rp->count = n;
        return rc;
    }
    size_t want = n;
    CUgraphNode *from = calloc(n, sizeof *from), *to = calloc(n, sizeof *to);
    CUgraphEdgeData *data = calloc(n, sizeof *data);
    rc = from && to && data ? s->api->cuGraphGetEdges_v2(g, from, to, data, &n)
                            : CUDA_ERROR_OUT_OF_MEMORY;
    if (n > want)
        n = want;
    size_t got = 0; /* the edges returned: the NULL entries past them are not edges */
    while (rc == CUDA_SUCCESS && got < n && from[got] && to[got])
        got++;
    if (rc == CUDA_SUCCESS)
        rc = reply_edges(s, rq->graph, from, to, data, got, rp);
    rp->count = n;
    free(from);
    free(to);
    free(data);
    return rc;
}
