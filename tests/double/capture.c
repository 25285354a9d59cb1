/* Stream capture: work issued on a capturing stream becomes nodes of the capture's graph instead
 * of running. Kernel launches, and the nodes a caller adds itself after cuStreamGetCaptureInfo
 * (cuStreamUpdateCaptureDependencies); other streams join through an event recorded in the
 * capture (fork) and leave when the origin waits on theirs (join). Copies, memsets and host
 * functions issued on a capturing stream are refused with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
 * (not modelled). The legacy stream cannot capture.
 * What the driver forbids while a capture runs is refused as the driver does, and invalidates
 * the capture (cuStreamEndCapture then fails): synchronizing or querying a capturing stream, an
 * event last recorded in a capture, or the context while any of its streams captures (CUDA
 * Programming Guide, "Prohibited and Unhandled Operations"). The capture modes' rules hold for
 * the potentially unsafe calls modelled here (synchronizing or querying any stream or event,
 * allocating device, host or managed memory with the synchronous calls): a
 * thread in global or thread-local mode may not make them while a capture of its own not begun
 * in relaxed mode runs, nor, in global mode, while another thread's global capture runs
 * (cuStreamBeginCapture, cuThreadExchangeStreamCaptureMode). The backend must never do these
 * behind a program's capture (its accounting's timing events, its waits) but in relaxed mode.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "capture.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define MAX_CAPTURING 64

struct dbl_capture {
    CUstream s; /* NULL: a free slot */
    bool origin;
    bool invalid;             /* a prohibited operation happened: the capture cannot end well */
    CUstreamCaptureMode mode; /* origin: the mode it was begun in, by thread */
    pthread_t thread;
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

void capture_invalidate(unsigned long long id)
{
    for (size_t i = 0; i < MAX_CAPTURING; i++)
        if (caps[i].s && caps[i].id == id)
            caps[i].invalid = true;
}

int capture_invalidate_all(void)
{
    int n = 0;
    for (size_t i = 0; i < MAX_CAPTURING; i++)
        if (caps[i].s) {
            caps[i].invalid = true;
            n++;
        }
    return n;
}

unsigned long long capture_id_of(CUstream s)
{
    const struct dbl_capture *c = capture_of(s);
    return c ? c->id : 0;
}

unsigned long long capture_id_of_event(CUevent e)
{
    for (size_t i = 0; e && i < MAX_CAPTURING; i++)
        if (recs[i].e == e)
            return recs[i].id;
    return 0;
}

static int capture_invalid(const struct dbl_capture *c)
{
    return c->invalid;
}

/* A launch on a capturing stream: a kernel node of the capture's graph. */
static CUresult capture_kernel(struct dbl_capture *c, const CUDA_KERNEL_NODE_PARAMS *kp)
{
    struct dbl_gnode proto;
    CUresult rc = kernel_proto(&proto, kp);
    return rc ? rc : capture_node(c, &proto);
}

/* What the copies, launches and graph queries reach through core (core.h). */
static const struct dbl_capture_hooks hooks = {capture_of, capture_kernel, capture_state,
                                               capture_invalid, capture_invalidate_all};

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
    c->mode = mode;
    c->thread = pthread_self();
    return CUDA_SUCCESS;
}

/* The calling thread's capture mode: global until the thread exchanges it. */
static _Thread_local CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = capture_mode;
    capture_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

unsigned long long capture_prohibiting(void)
{
    if (capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return 0;
    for (size_t i = 0; i < MAX_CAPTURING; i++) {
        const struct dbl_capture *c = &caps[i];
        if (!c->s || !c->origin)
            continue;
        int own = pthread_equal(c->thread, pthread_self());
        if ((own && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
            (!own && capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
             c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL))
            return c->id;
    }
    return 0;
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
    bool invalid = c->invalid;
    struct dbl_graph *g = c->g;
    *ph = invalid ? NULL : (CUgraph)g;
    unsigned long long id = c->id;
    for (size_t i = 0; i < MAX_CAPTURING; i++) { /* joined streams leave with it */
        if (caps[i].s && caps[i].id == id)
            caps[i].s = NULL;
        if (recs[i].e && recs[i].id == id)
            recs[i].e = NULL;
    }
    if (invalid) {
        graph_free(g);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
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
