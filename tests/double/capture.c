/* Stream capture: work issued on a capturing stream becomes nodes of the capture's graph instead
 * of running. Kernel launches, and the nodes a caller adds itself after cuStreamGetCaptureInfo
 * (cuStreamUpdateCaptureDependencies); other streams join through an event recorded in the
 * capture (fork) and leave when the origin waits on theirs (join). Copies, memsets and host
 * functions issued on a capturing stream are refused with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
 * (not modelled), as are capture modes' cross-thread rules. The legacy stream cannot capture.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "capture.h"

#include <stdlib.h>
#include <string.h>

#include "core.h"

#define MAX_CAPTURING 64

struct dbl_capture {
    CUstream s; /* NULL: a free slot */
    bool origin;
    struct dbl_graph *g;
    unsigned long long id;
    CUgraphNode deps[DBL_MAX_DEPS];
    size_t n;
};

struct recorded {
    CUevent e;
    unsigned long long id;
    struct dbl_graph *g;
    CUgraphNode deps[DBL_MAX_DEPS];
    size_t n;
};

static struct dbl_capture caps[MAX_CAPTURING];
static struct recorded recs[MAX_CAPTURING];
static unsigned long long next_id = 1;

struct dbl_capture *capture_of(CUstream s)
{
    for (size_t i = 0; s && i < MAX_CAPTURING; i++)
        if (caps[i].s == s)
            return &caps[i];
    return NULL;
}

static struct dbl_capture *slot(CUstream s)
{
    for (size_t i = 0; i < MAX_CAPTURING; i++)
        if (!caps[i].s) {
            memset(&caps[i], 0, sizeof caps[i]);
            caps[i].s = s;
            return &caps[i];
        }
    return NULL;
}

CUresult capture_node(struct dbl_capture *c, struct dbl_gnode *proto)
{
    CUgraphNode node = NULL;
    CUresult rc = node_add(&node, (CUgraph)c->g, c->deps, c->n, proto);
    if (rc == CUDA_SUCCESS) {
        c->deps[0] = node;
        c->n = 1;
    }
    return rc;
}

void capture_state(const struct dbl_capture *c, CUgraph *graph, cuuint64_t *id,
                   const CUgraphNode **deps, size_t *n)
{
    if (graph)
        *graph = (CUgraph)c->g;
    if (id)
        *id = c->id;
    if (deps)
        *deps = c->n ? c->deps : NULL;
    if (n)
        *n = c->n;
}

int capture_record(CUevent e, CUstream s)
{
    struct dbl_capture *c = capture_of(s);
    struct recorded *r = NULL;
    for (size_t i = 0; i < MAX_CAPTURING && !r; i++)
        if (recs[i].e == e)
            r = &recs[i];
    if (!c) {
        if (r)
            r->e = NULL; /* recorded outside a capture now */
        return 0;
    }
    for (size_t i = 0; i < MAX_CAPTURING && !r; i++)
        if (!recs[i].e)
            r = &recs[i];
    if (r) {
        r->e = e;
        r->id = c->id;
        r->g = c->g;
        memcpy(r->deps, c->deps, sizeof r->deps);
        r->n = c->n;
    }
    return 1;
}

CUresult capture_wait(CUstream s, CUevent e, int *joined)
{
    *joined = 0;
    const struct recorded *r = NULL;
    for (size_t i = 0; i < MAX_CAPTURING && !r; i++)
        if (recs[i].e == e)
            r = &recs[i];
    if (!r)
        return CUDA_SUCCESS;
    if (!s || (uintptr_t)s <= 2)
        return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    struct dbl_capture *c = capture_of(s);
    if (c && c->id != r->id)
        return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    if (!c) {
        c = slot(s);
        if (!c)
            return CUDA_ERROR_NOT_SUPPORTED;
        c->g = r->g;
        c->id = r->id;
    }
    for (size_t i = 0; i < r->n; i++) { /* the union of both sets */
        size_t k = 0;
        while (k < c->n && c->deps[k] != r->deps[i])
            k++;
        if (k == c->n && c->n == DBL_MAX_DEPS)
            return CUDA_ERROR_NOT_SUPPORTED;
        if (k == c->n)
            c->deps[c->n++] = r->deps[i];
    }
    *joined = 1;
    return CUDA_SUCCESS;
}

/* A launch on a capturing stream: a kernel node of the capture's graph. */
static CUresult capture_kernel(struct dbl_capture *c, const CUDA_KERNEL_NODE_PARAMS *kp)
{
    struct dbl_gnode proto;
    CUresult rc = kernel_proto(&proto, kp);
    return rc ? rc : capture_node(c, &proto);
}

/* What the copies, launches and graph queries reach through core (core.h). */
static const struct dbl_capture_hooks hooks = {capture_of, capture_kernel, capture_state};

static CUresult begin(CUstream s, CUstreamCaptureMode mode)
{
    dbl_capture_hooks_set(&hooks);
    if ((uintptr_t)s > 2 && !obj_get(s, K_STREAM)) /* check_stream (copy.c) without the circle */
        return CUDA_ERROR_INVALID_HANDLE;
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if ((uintptr_t)s <= 2)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (capture_of(s))
        return CUDA_ERROR_ILLEGAL_STATE;
    struct dbl_graph *g = graph_new(true);
    struct dbl_capture *c = g ? slot(s) : NULL;
    if (!c) {
        graph_free(g);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->origin = true;
    c->g = g;
    c->id = next_id++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    LOCKED(begin(hStream, mode));
}

EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    LOCKED(begin(hStream, mode));
}

static CUresult end(CUstream s, CUgraph *ph)
{
    if (!ph)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_capture *c = capture_of(s);
    if (!c || !c->origin)
        return CUDA_ERROR_ILLEGAL_STATE;
    *ph = (CUgraph)c->g;
    unsigned long long id = c->id;
    for (size_t i = 0; i < MAX_CAPTURING; i++) { /* joined streams leave with it */
        if (caps[i].s && caps[i].id == id)
            caps[i].s = NULL;
        if (recs[i].e && recs[i].id == id)
            recs[i].e = NULL;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    LOCKED(end(hStream, phGraph));
}

EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    LOCKED(end(hStream, phGraph));
}

static CUresult update(CUstream s, CUgraphNode *deps, size_t n, unsigned flags)
{
    struct dbl_capture *c = capture_of(s);
    if (!c)
        return CUDA_ERROR_ILLEGAL_STATE;
    if ((n && !deps) || flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES)
        return CUDA_ERROR_INVALID_VALUE;
    size_t base = flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES ? 0 : c->n;
    if (base + n > DBL_MAX_DEPS)
        return CUDA_ERROR_NOT_SUPPORTED;
    for (size_t i = 0; i < n; i++) {
        const struct dbl_gnode *d = node_of(deps[i], 0);
        if (!d || d->graph != c->g)
            return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(c->deps + base, deps, n * sizeof *deps);
    c->n = base + n;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
                                                     const CUgraphEdgeData *dependencyData,
                                                     size_t numDependencies, unsigned int flags)
{
    if (dependencyData)
        for (size_t i = 0; i < numDependencies; i++)
            if (dependencyData[i].type || dependencyData[i].from_port || dependencyData[i].to_port)
                return CUDA_ERROR_NOT_SUPPORTED;
    LOCKED(update(hStream, dependencies, numDependencies, flags));
}

EXPORT CUresult cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                                  size_t numDependencies, unsigned int flags)
{
    LOCKED(update(hStream, dependencies, numDependencies, flags));
}

EXPORT CUresult cuStreamBeginCapture(CUstream hStream)
{
    LOCKED(begin(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL));
}
