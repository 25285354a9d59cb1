/* A graph's edges (cuGraphGetEdges_v2; the v1 call is the same without edge data), both sent as
 * slGraphEdges. The backend always asks its driver for the edge data too, so this side decides
 * what the driver does when the caller passes none: CUDA_ERROR_LOSSY_QUERY if an edge returned
 * has non-default data. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

static bool is_default(const uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (d[i])
            return false;
    return true;
}

/* The reply's edges into the caller's arrays (of *num entries; from and to not NULL). */
static CUresult take_edges(const Sluice__Cuda__SlGraphEdgesReply *r, CUgraphNode *from,
                           CUgraphNode *to, CUgraphEdgeData *data, size_t *num)
{
    const size_t es = sizeof(CUgraphEdgeData);
    if (r->n_from != r->n_to || r->edges.len != r->n_from * es || r->n_from > *num ||
        r->count > *num)
        return CUDA_ERROR_UNKNOWN;
    if (!data && !is_default(r->edges.data, r->edges.len))
        return CUDA_ERROR_LOSSY_QUERY;
    for (size_t i = 0; i < *num; i++) {
        bool have = i < r->n_from;
        from[i] = have ? (CUgraphNode)(uintptr_t)r->from[i] : NULL;
        to[i] = have ? (CUgraphNode)(uintptr_t)r->to[i] : NULL;
        if (!data)
            continue;
        if (have)
            memcpy(&data[i], r->edges.data + i * es, es);
        else
            memset(&data[i], 0, es);
    }
    *num = r->count;
    return CUDA_SUCCESS;
}

static CUresult get_edges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                          CUgraphEdgeData *edgeData, size_t *numEdges)
{
    if (!numEdges || !from != !to || (edgeData && !from))
        return CUDA_ERROR_INVALID_VALUE;
    if (from && *numEdges == 0)
        return CUDA_SUCCESS; /* nothing asked for */
    if (from && *numEdges > SL_WIRE_MAX_ARRAY)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__SlGraphEdgesRequest rq = SLUICE__CUDA__SL_GRAPH_EDGES_REQUEST__INIT;
    rq.graph = (uint64_t)(uintptr_t)hGraph;
    rq.want = from ? *numEdges : 0; /* 0: only the count */
    SL_FE_SET(slGraphEdges, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    const Sluice__Cuda__SlGraphEdgesReply *r = SL_FE_REPLY(slGraphEdges, rep);
    if (rc == CUDA_SUCCESS && !r)
        rc = CUDA_ERROR_UNKNOWN;
    else if (rc == CUDA_SUCCESS && from)
        rc = take_edges(r, from, to, edgeData, numEdges);
    else if (rc == CUDA_SUCCESS)
        *numEdges = r->count;
    sl_fe_reply_free(rep);
    return rc;
}

CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                            CUgraphEdgeData *edgeData, size_t *numEdges)
{
    return get_edges(hGraph, from, to, edgeData, numEdges);
}

CUresult cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges)
{
    return get_edges(hGraph, from, to, NULL, numEdges);
}
