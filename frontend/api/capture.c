/* Work on guest memory recorded by stream capture (docs/remoting.md "Graphs and guest memory").
 * A copy between guest memory and the device, or a host function, issued on a capturing stream
 * cannot be captured by the backend's driver as it is: the copy's bytes and the callback's
 * record live only for the call, and a graph replays its nodes. The frontend adds instead the
 * node the driver would have captured to the capture's graph, with the calls a program would
 * use for it (cuStreamGetCaptureInfo, cuGraphAddMemcpyNode / cuGraphAddHostNode on the
 * capture's dependencies, cuStreamUpdateCaptureDependencies), so that the node is one of the
 * backend's guest-memory items: every launch of the graph carries its bytes and runs its host
 * function in the guest, as for graphs built node by node. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "api/capture.h"

#include <stdlib.h>
#include <string.h>

#include "call/memo.h"
#include "sluice/stub_runtime.h"

int sl_fe_capturing(bool pt, CUstream s)
{
    if (!sl_fe_memo_capture_begun())
        return 0; /* no stream can capture before a capture is begun: no round trip */
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc = pt ? cuStreamIsCapturing_ptsz(s, &st) : cuStreamIsCapturing(s, &st);
    return rc == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

static int default_edges(const CUgraphEdgeData *e, size_t n)
{
    static const CUgraphEdgeData zero;
    for (size_t i = 0; e && i < n; i++)
        if (memcmp(&e[i], &zero, sizeof zero))
            return 0;
    return 1;
}

/* The capture's graph and a copy of its current dependencies (free *deps). */
static CUresult capture_point(bool pt, CUstream s, CUgraph *graph, CUgraphNode **deps, size_t *n)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    const CUgraphNode *d = NULL;
    const CUgraphEdgeData *e = NULL;
    CUresult rc = pt ? cuStreamGetCaptureInfo_v3_ptsz(s, &st, NULL, graph, &d, &e, n)
                     : cuStreamGetCaptureInfo_v3(s, &st, NULL, graph, &d, &e, n);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (st == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return CUDA_ERROR_ILLEGAL_STATE;
    if (!default_edges(e, *n))
        return sl_fe_unsupported("a copy or host function captured after an edge with data");
    *deps = malloc((*n ? *n : 1) * sizeof **deps);
    if (!*deps)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (*n)
        memcpy(*deps, d, *n * sizeof **deps);
    return CUDA_SUCCESS;
}

/* The node just added becomes what the stream's next work depends on. */
static CUresult capture_after(bool pt, CUstream s, CUgraphNode node)
{
    return pt ? cuStreamUpdateCaptureDependencies_ptsz(s, &node, 1,
                                                       CU_STREAM_SET_CAPTURE_DEPENDENCIES)
              : cuStreamUpdateCaptureDependencies(s, &node, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
}

CUresult sl_fe_capture_copy(bool pt, CUstream s, const CUDA_MEMCPY3D *copy)
{
    CUgraph g = NULL;
    CUgraphNode *deps = NULL, node = NULL;
    size_t n = 0;
    CUcontext ctx = NULL;
    CUresult rc = cuCtxGetCurrent(&ctx);
    if (rc == CUDA_SUCCESS)
        rc = capture_point(pt, s, &g, &deps, &n);
    if (rc == CUDA_SUCCESS)
        rc = cuGraphAddMemcpyNode(&node, g, deps, n, copy, ctx);
    free(deps);
    return rc == CUDA_SUCCESS ? capture_after(pt, s, node) : rc;
}

CUresult sl_fe_capture_host_func(bool pt, CUstream s, CUhostFn fn, void *user)
{
    CUgraph g = NULL;
    CUgraphNode *deps = NULL, node = NULL;
    size_t n = 0;
    CUresult rc = capture_point(pt, s, &g, &deps, &n);
    CUDA_HOST_NODE_PARAMS p = {.fn = fn, .userData = user};
    if (rc == CUDA_SUCCESS)
        rc = cuGraphAddHostNode(&node, g, deps, n, &p);
    free(deps);
    return rc == CUDA_SUCCESS ? capture_after(pt, s, node) : rc;
}
