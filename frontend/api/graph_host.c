/* Graph nodes on guest host memory and the launches of the graphs that hold them
 * (docs/remoting.md, "Graphs and guest memory").
 *
 * Memcpy nodes: the CUDA_MEMCPY3D goes to the backend with a guest-memory side marked HOST (a
 * UNIFIED pointer into guest memory becomes HOST); its host pointer is only kept there, as a
 * number. Host nodes: the CUDA_HOST_NODE_PARAMS (the guest's function and userData) likewise.
 *
 * cuGraphLaunch asks the backend once per instantiated graph which of its nodes touch guest
 * memory (slGraphExecHost) and keeps the answer until the graph's nodes change (update, set
 * parameters) or it is destroyed. A graph without such nodes is launched as before (async). One
 * with them is launched synchronously: the stream is synchronized first when the graph reads
 * guest memory (so that earlier work writing it, host functions included, is done); the bytes
 * of every host-to-device node are gathered and travel with slGraphLaunch (or before it in
 * 16 MiB slGraphHostPut calls when they exceed 32 MiB); the backend launches the graph and waits
 * for it; the device-to-host bytes come back with the reply (or in slGraphHostGet calls) and are
 * scattered into guest memory; then the host nodes the launch reached run here, in the order the
 * GPU reached them, before cuGraphLaunch returns. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "api/graph_host.h"
#include "api/copy.h"
#include "api/graph.h"
#include "api/memory.h"
#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/log.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define INLINE_BYTES ((size_t)32 << 20)
enum { K_H2D = 1, K_D2H = 2, K_HOST = 3 };

/* ---------------------------------------------------------------- what an exec touches */

struct xinfo {
    struct xinfo *next;
    uint64_t exec, generation;
    size_t n;
    uint32_t *kinds;
    uint64_t *lens, *fns, *users;
    CUDA_MEMCPY3D *pods;
};

#define BUCKETS 256
static struct xinfo *g_x[BUCKETS];
static pthread_mutex_t g_x_lock = PTHREAD_MUTEX_INITIALIZER;

static void xinfo_free(struct xinfo *x)
{
    if (!x)
        return;
    free(x->kinds);
    free(x->lens);
    free(x->fns);
    free(x->users);
    free(x->pods);
    free(x);
}

void sl_fe_g_exec_forget(uint64_t exec)
{
    pthread_mutex_lock(&g_x_lock);
    for (struct xinfo **p = &g_x[exec % BUCKETS]; *p; p = &(*p)->next)
        if ((*p)->exec == exec) {
            struct xinfo *x = *p;
            *p = x->next;
            xinfo_free(x);
            break;
        }
    pthread_mutex_unlock(&g_x_lock);
}

/* A copy of what the frontend knows of exec (NULL: not asked yet). */
static struct xinfo *xinfo_copy(uint64_t exec, int *plain)
{
    struct xinfo *c = NULL;
    *plain = 0;
    pthread_mutex_lock(&g_x_lock);
    struct xinfo *x = g_x[exec % BUCKETS];
    while (x && x->exec != exec)
        x = x->next;
    if (x && !x->n) {
        *plain = 1;
    } else if (x && (c = calloc(1, sizeof *c))) {
        *c = *x;
        c->next = NULL;
        c->kinds = malloc(x->n * sizeof *c->kinds);
        c->lens = malloc(x->n * sizeof *c->lens);
        c->fns = malloc(x->n * sizeof *c->fns);
        c->users = malloc(x->n * sizeof *c->users);
        c->pods = malloc(x->n * sizeof *c->pods);
        if (c->kinds && c->lens && c->fns && c->users && c->pods) {
            memcpy(c->kinds, x->kinds, x->n * sizeof *c->kinds);
            memcpy(c->lens, x->lens, x->n * sizeof *c->lens);
            memcpy(c->fns, x->fns, x->n * sizeof *c->fns);
            memcpy(c->users, x->users, x->n * sizeof *c->users);
            memcpy(c->pods, x->pods, x->n * sizeof *c->pods);
        } else {
            xinfo_free(c);
            c = NULL;
        }
    }
    pthread_mutex_unlock(&g_x_lock);
    return c;
}

/* Asks the backend (slGraphExecHost) and remembers the answer. */
static CUresult xinfo_fetch(uint64_t exec)
{
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__SlGraphExecHostRequest rq = SLUICE__CUDA__SL_GRAPH_EXEC_HOST_REQUEST__INIT;
    rq.exec = exec;
    SL_FE_SET(slGraphExecHost, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    const Sluice__Cuda__SlGraphExecHostReply *r = rep->sl_graph_exec_host;
    if (rc == CUDA_SUCCESS &&
        (!SL_FE_REPLY(slGraphExecHost, rep) || r->n_lens != r->n_kinds || r->n_fns != r->n_kinds ||
         r->n_users != r->n_kinds || r->pods.len != r->n_kinds * sizeof(CUDA_MEMCPY3D)))
        rc = CUDA_ERROR_UNKNOWN;
    struct xinfo *x = rc == CUDA_SUCCESS ? calloc(1, sizeof *x) : NULL;
    if (rc == CUDA_SUCCESS && !x)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (x) {
        size_t n = r->n_kinds;
        x->exec = exec;
        x->generation = r->generation;
        x->n = n;
        if (n) {
            x->kinds = malloc(n * sizeof *x->kinds);
            x->lens = malloc(n * sizeof *x->lens);
            x->fns = malloc(n * sizeof *x->fns);
            x->users = malloc(n * sizeof *x->users);
            x->pods = malloc(n * sizeof *x->pods);
            if (!x->kinds || !x->lens || !x->fns || !x->users || !x->pods) {
                xinfo_free(x);
                x = NULL;
                rc = CUDA_ERROR_OUT_OF_MEMORY;
            } else {
                memcpy(x->kinds, r->kinds, n * sizeof *x->kinds);
                memcpy(x->lens, r->lens, n * sizeof *x->lens);
                memcpy(x->fns, r->fns, n * sizeof *x->fns);
                memcpy(x->users, r->users, n * sizeof *x->users);
                memcpy(x->pods, r->pods.data, n * sizeof *x->pods);
            }
        }
    }
    sl_fe_reply_free(rep);
    if (x) {
        sl_fe_g_exec_forget(exec);
        pthread_mutex_lock(&g_x_lock);
        x->next = g_x[exec % BUCKETS];
        g_x[exec % BUCKETS] = x;
        pthread_mutex_unlock(&g_x_lock);
    }
    return rc;
}

/* ---------------------------------------------------------------- guest rectangles */

struct rect {
    uint8_t *base;
    size_t pitch, height, x, y, z, w, h, d;
};

/* The guest-memory side of item i's pod. */
static struct rect rect_of(const CUDA_MEMCPY3D *c, int kind)
{
    struct rect r;
    r.w = c->WidthInBytes;
    r.h = c->Height;
    r.d = c->Depth ? c->Depth : 1;
    if (kind == K_H2D) {
        r.base = (uint8_t *)(uintptr_t)c->srcHost;
        r.pitch = c->srcPitch ? c->srcPitch : r.w;
        r.height = c->srcHeight ? c->srcHeight : r.h;
        r.x = c->srcXInBytes, r.y = c->srcY, r.z = c->srcZ;
    } else {
        r.base = (uint8_t *)c->dstHost;
        r.pitch = c->dstPitch ? c->dstPitch : r.w;
        r.height = c->dstHeight ? c->dstHeight : r.h;
        r.x = c->dstXInBytes, r.y = c->dstY, r.z = c->dstZ;
    }
    return r;
}

static void gather(const struct rect *r, uint8_t *out)
{
    for (size_t z = 0; z < r->d; z++)
        for (size_t y = 0; y < r->h; y++)
            memcpy(out + (z * r->h + y) * r->w,
                   r->base + ((r->z + z) * r->height + r->y + y) * r->pitch + r->x, r->w);
}

static void scatter(const struct rect *r, const uint8_t *in)
{
    for (size_t z = 0; z < r->d; z++)
        for (size_t y = 0; y < r->h; y++)
            memcpy(r->base + ((r->z + z) * r->height + r->y + y) * r->pitch + r->x,
                   in + (z * r->h + y) * r->w, r->w);
}

/* ---------------------------------------------------------------- launches */

static CUresult enqueue_launch(bool pt, CUgraphExec e, CUstream s)
{
    Sluice__Cuda__CuGraphLaunchRequest rq = SLUICE__CUDA__CU_GRAPH_LAUNCH_REQUEST__INIT;
    rq.h_graph_exec = (uint64_t)(uintptr_t)e;
    rq.h_stream = (uint64_t)(uintptr_t)s;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.per_thread_stream = pt;
    SL_FE_SET(cuGraphLaunch, &call, &rq);
    return sl_fe_enqueue_async(&call);
}

static CUresult put_item(uint64_t exec, uint64_t gen, uint32_t item, const uint8_t *b, size_t len)
{
    for (size_t off = 0; off < len;) {
        size_t c = len - off > SL_FE_MAX_COPY_CHUNK ? SL_FE_MAX_COPY_CHUNK : len - off;
        Sluice__Cuda__SlGraphHostPutRequest rq = SLUICE__CUDA__SL_GRAPH_HOST_PUT_REQUEST__INIT;
        rq.exec = exec;
        rq.item = item;
        rq.offset = off;
        rq.generation = gen;
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        SL_FE_SET(slGraphHostPut, &call, &rq);
        struct iovec iov = {(void *)(b + off), c};
        Sluice__Wire__Reply *rep = NULL;
        CUresult rc = sl_fe_call_bulk(&call, &iov, 1, NULL, 0, NULL, &rep);
        rc = sl_fe_g_result(rc, rep);
        if (rc != CUDA_SUCCESS)
            return rc;
        off += c;
    }
    return CUDA_SUCCESS;
}

static CUresult get_item(uint64_t exec, uint32_t item, uint8_t *b, size_t len)
{
    for (size_t off = 0; off < len;) {
        size_t c = len - off > SL_FE_MAX_COPY_CHUNK ? SL_FE_MAX_COPY_CHUNK : len - off;
        Sluice__Cuda__SlGraphHostGetRequest rq = SLUICE__CUDA__SL_GRAPH_HOST_GET_REQUEST__INIT;
        rq.exec = exec;
        rq.item = item;
        rq.offset = off;
        rq.length = c;
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        SL_FE_SET(slGraphHostGet, &call, &rq);
        Sluice__Wire__Reply *rep = NULL;
        size_t got = 0;
        CUresult rc = sl_fe_call_bulk(&call, NULL, 0, b + off, c, &got, &rep);
        rc = sl_fe_g_result(rc, rep);
        if (rc == CUDA_SUCCESS && got != c)
            rc = CUDA_ERROR_UNKNOWN;
        if (rc != CUDA_SUCCESS)
            return rc;
        off += c;
    }
    return CUDA_SUCCESS;
}

/* One launch of a graph on guest memory (x: what it touches). */
static CUresult launch_host(bool pt, uint64_t exec, CUstream s, const struct xinfo *x)
{
    size_t h2d = 0, d2h = 0, biggest = 0;
    for (size_t i = 0; i < x->n; i++) {
        if (x->kinds[i] == K_H2D)
            h2d += x->lens[i];
        else if (x->kinds[i] == K_D2H)
            d2h += x->lens[i];
        if (x->kinds[i] != K_HOST && x->lens[i] > biggest)
            biggest = x->lens[i];
    }
    CUresult rc = CUDA_SUCCESS;
    if (h2d) /* earlier work of the stream that writes guest memory is done */
        rc = pt ? cuStreamSynchronize_ptsz(s) : cuStreamSynchronize(s);
    if (rc != CUDA_SUCCESS)
        return rc;
    int staged = h2d > INLINE_BYTES;
    size_t tmp_len = staged ? biggest : (h2d > d2h ? h2d : d2h);
    if (d2h > tmp_len)
        tmp_len = d2h <= INLINE_BYTES ? d2h : biggest;
    uint8_t *tmp = tmp_len ? malloc(tmp_len) : NULL;
    if (tmp_len && !tmp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t off = 0;
    for (size_t i = 0; i < x->n && rc == CUDA_SUCCESS; i++) {
        if (x->kinds[i] != K_H2D)
            continue;
        struct rect r = rect_of(&x->pods[i], K_H2D);
        if (staged) {
            gather(&r, tmp);
            rc = put_item(exec, x->generation, (uint32_t)i, tmp, x->lens[i]);
        } else {
            gather(&r, tmp + off);
            off += x->lens[i];
        }
    }
    Sluice__Wire__Reply *rep = NULL;
    if (rc == CUDA_SUCCESS) {
        Sluice__Cuda__SlGraphLaunchRequest rq = SLUICE__CUDA__SL_GRAPH_LAUNCH_REQUEST__INIT;
        rq.exec = exec;
        rq.stream = (uint64_t)(uintptr_t)s;
        rq.generation = x->generation;
        rq.staged = (uint32_t)staged;
        rq.per_thread = pt;
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        SL_FE_SET(slGraphLaunch, &call, &rq);
        struct iovec iov = {tmp, staged ? 0 : h2d};
        size_t got = 0;
        int inl = d2h && d2h <= INLINE_BYTES;
        rc = sl_fe_call_bulk(&call, &iov, iov.iov_len ? 1 : 0, inl ? tmp : NULL, inl ? d2h : 0,
                             &got, &rep);
        if (rep) {
            rc = (CUresult)rep->result;
            if (rc == CUDA_SUCCESS && (!SL_FE_REPLY(slGraphLaunch, rep) ||
                                       (inl && (!rep->sl_graph_launch->d2h_inline || got != d2h))))
                rc = CUDA_ERROR_UNKNOWN;
        }
    }
    /* device-to-host bytes into guest memory, then the host nodes */
    off = 0;
    for (size_t i = 0; i < x->n && rc == CUDA_SUCCESS; i++) {
        if (x->kinds[i] != K_D2H)
            continue;
        struct rect r = rect_of(&x->pods[i], K_D2H);
        if (d2h <= INLINE_BYTES) {
            scatter(&r, tmp + off);
            off += x->lens[i];
        } else {
            rc = get_item(exec, (uint32_t)i, tmp, x->lens[i]);
            if (rc == CUDA_SUCCESS)
                scatter(&r, tmp);
        }
    }
    for (size_t k = 0; rc == CUDA_SUCCESS && k < rep->sl_graph_launch->n_host_items; k++) {
        uint32_t i = rep->sl_graph_launch->host_items[k];
        if (i < x->n && x->kinds[i] == K_HOST && x->fns[i])
            ((CUhostFn)(uintptr_t)x->fns[i])((void *)(uintptr_t)x->users[i]);
    }
    sl_fe_reply_free(rep);
    free(tmp);
    return rc;
}

static CUresult graph_launch(bool pt, CUgraphExec hGraphExec, CUstream hStream)
{
    uint64_t exec = (uint64_t)(uintptr_t)hGraphExec;
    if (!exec)
        return CUDA_ERROR_INVALID_VALUE;
    for (int attempt = 0;; attempt++) {
        int plain = 0;
        struct xinfo *x = xinfo_copy(exec, &plain);
        if (plain)
            return enqueue_launch(pt, hGraphExec, hStream);
        if (!x) {
            CUresult rc = xinfo_fetch(exec);
            if (rc != CUDA_SUCCESS)
                return rc;
            continue;
        }
        CUresult rc = launch_host(pt, exec, hStream, x);
        xinfo_free(x);
        if (rc != CUDA_ERROR_INVALID_VALUE || attempt)
            return rc;
        /* the nodes may have changed behind our back (a generated update call): ask again */
        sl_fe_g_exec_forget(exec);
    }
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(false, hGraphExec, hStream);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(true, hGraphExec, hStream);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    uint64_t exec = (uint64_t)(uintptr_t)hGraphExec;
    Sluice__Cuda__CuGraphExecDestroyRequest rq = SLUICE__CUDA__CU_GRAPH_EXEC_DESTROY_REQUEST__INIT;
    rq.h_graph_exec = exec;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphExecDestroy, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    rc = sl_fe_g_result(rc, rep);
    if (rc == CUDA_SUCCESS)
        sl_fe_g_exec_forget(exec);
    return rc;
}

/* ---------------------------------------------------------------- memcpy nodes */

/* The pod the backend gets: a side in guest memory is HOST. */
static CUresult copy_wire(const CUDA_MEMCPY3D *in, CUDA_MEMCPY3D *out)
{
    if (!in)
        return CUDA_ERROR_INVALID_VALUE;
    *out = *in;
    out->reserved0 = out->reserved1 = NULL;
    /* a UNIFIED side names its address in the device field (cuda.h) */
    if (out->srcMemoryType == CU_MEMORYTYPE_UNIFIED &&
        sl_fe_is_host_pointer((const void *)(uintptr_t)out->srcDevice)) {
        out->srcMemoryType = CU_MEMORYTYPE_HOST;
        out->srcHost = (const void *)(uintptr_t)out->srcDevice;
        out->srcDevice = 0;
    }
    if (out->dstMemoryType == CU_MEMORYTYPE_UNIFIED &&
        sl_fe_is_host_pointer((const void *)(uintptr_t)out->dstDevice)) {
        out->dstMemoryType = CU_MEMORYTYPE_HOST;
        out->dstHost = (void *)(uintptr_t)out->dstDevice;
        out->dstDevice = 0;
    }
    if (out->srcMemoryType == CU_MEMORYTYPE_HOST && out->dstMemoryType == CU_MEMORYTYPE_HOST)
        return CUDA_ERROR_NOT_SUPPORTED; /* host to host: not remoted */
    if ((out->srcMemoryType == CU_MEMORYTYPE_HOST && !out->srcHost) ||
        (out->dstMemoryType == CU_MEMORYTYPE_HOST && !out->dstHost))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies, size_t numDependencies,
                              const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    if (!phGraphNode)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D c;
    CUresult rc = copy_wire(copyParams, &c);
    uint64_t *deps = NULL;
    if (rc == CUDA_SUCCESS)
        rc = sl_fe_g_deps(dependencies, numDependencies, &deps);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuGraphAddMemcpyNodeRequest rq =
        SLUICE__CUDA__CU_GRAPH_ADD_MEMCPY_NODE_REQUEST__INIT;
    ProtobufCBinaryData pod = {sizeof c, (uint8_t *)&c};
    rq.h_graph = (uint64_t)(uintptr_t)hGraph;
    rq.dependencies = deps;
    rq.n_dependencies = numDependencies;
    rq.num_dependencies = numDependencies;
    rq.copy_params = &pod;
    rq.n_copy_params = 1;
    rq.ctx = (uint64_t)(uintptr_t)ctx;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphAddMemcpyNode, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    rc = sl_fe_call(&call, &rep);
    if (rep)
        rc = sl_fe_g_node_out(rep,
                              SL_FE_REPLY(cuGraphAddMemcpyNode, rep)
                                  ? rep->cu_graph_add_memcpy_node->ph_graph_node
                                  : 0,
                              phGraphNode);
    free(deps);
    return rc;
}

CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuGraphMemcpyNodeGetParamsRequest rq =
        SLUICE__CUDA__CU_GRAPH_MEMCPY_NODE_GET_PARAMS_REQUEST__INIT;
    rq.h_node = (uint64_t)(uintptr_t)hNode;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphMemcpyNodeGetParams, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    rc = sl_fe_pod_out(rc,
                       SL_FE_REPLY(cuGraphMemcpyNodeGetParams, rep)
                           ? &rep->cu_graph_memcpy_node_get_params->node_params
                           : NULL,
                       nodeParams, sizeof *nodeParams);
    sl_fe_reply_free(rep);
    return rc;
}

CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
    CUDA_MEMCPY3D c;
    CUresult rc = copy_wire(nodeParams, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuGraphMemcpyNodeSetParamsRequest rq =
        SLUICE__CUDA__CU_GRAPH_MEMCPY_NODE_SET_PARAMS_REQUEST__INIT;
    rq.h_node = (uint64_t)(uintptr_t)hNode;
    rq.node_params = (ProtobufCBinaryData){sizeof c, (uint8_t *)&c};
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphMemcpyNodeSetParams, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    rc = sl_fe_call(&call, &rep);
    return sl_fe_g_result(rc, rep);
}

CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                        const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    CUDA_MEMCPY3D c;
    CUresult rc = copy_wire(copyParams, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuGraphExecMemcpyNodeSetParamsRequest rq =
        SLUICE__CUDA__CU_GRAPH_EXEC_MEMCPY_NODE_SET_PARAMS_REQUEST__INIT;
    rq.h_graph_exec = (uint64_t)(uintptr_t)hGraphExec;
    rq.h_node = (uint64_t)(uintptr_t)hNode;
    rq.copy_params = (ProtobufCBinaryData){sizeof c, (uint8_t *)&c};
    rq.ctx = (uint64_t)(uintptr_t)ctx;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphExecMemcpyNodeSetParams, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    rc = sl_fe_call(&call, &rep);
    sl_fe_g_exec_forget(rq.h_graph_exec);
    return sl_fe_g_result(rc, rep);
}

/* ---------------------------------------------------------------- host nodes */

CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                            const CUgraphNode *dependencies, size_t numDependencies,
                            const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    if (!phGraphNode || !nodeParams || !nodeParams->fn)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t *deps = NULL;
    CUresult rc = sl_fe_g_deps(dependencies, numDependencies, &deps);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUDA_HOST_NODE_PARAMS p = *nodeParams;
    Sluice__Cuda__CuGraphAddHostNodeRequest rq = SLUICE__CUDA__CU_GRAPH_ADD_HOST_NODE_REQUEST__INIT;
    ProtobufCBinaryData pod = {sizeof p, (uint8_t *)&p};
    rq.h_graph = (uint64_t)(uintptr_t)hGraph;
    rq.dependencies = deps;
    rq.n_dependencies = numDependencies;
    rq.num_dependencies = numDependencies;
    rq.node_params = &pod;
    rq.n_node_params = 1;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphAddHostNode, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    rc = sl_fe_call(&call, &rep);
    if (rep)
        rc = sl_fe_g_node_out(
            rep,
            SL_FE_REPLY(cuGraphAddHostNode, rep) ? rep->cu_graph_add_host_node->ph_graph_node : 0,
            phGraphNode);
    free(deps);
    return rc;
}

CUresult cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuGraphHostNodeGetParamsRequest rq =
        SLUICE__CUDA__CU_GRAPH_HOST_NODE_GET_PARAMS_REQUEST__INIT;
    rq.h_node = (uint64_t)(uintptr_t)hNode;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphHostNodeGetParams, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    rc = sl_fe_pod_out(rc,
                       SL_FE_REPLY(cuGraphHostNodeGetParams, rep)
                           ? &rep->cu_graph_host_node_get_params->node_params
                           : NULL,
                       nodeParams, sizeof *nodeParams);
    sl_fe_reply_free(rep);
    return rc;
}

CUresult cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    if (!nodeParams || !nodeParams->fn)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_HOST_NODE_PARAMS p = *nodeParams;
    Sluice__Cuda__CuGraphHostNodeSetParamsRequest rq =
        SLUICE__CUDA__CU_GRAPH_HOST_NODE_SET_PARAMS_REQUEST__INIT;
    rq.h_node = (uint64_t)(uintptr_t)hNode;
    rq.node_params = (ProtobufCBinaryData){sizeof p, (uint8_t *)&p};
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphHostNodeSetParams, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    return sl_fe_g_result(rc, rep);
}

CUresult cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                      const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    if (!nodeParams || !nodeParams->fn)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_HOST_NODE_PARAMS p = *nodeParams;
    Sluice__Cuda__CuGraphExecHostNodeSetParamsRequest rq =
        SLUICE__CUDA__CU_GRAPH_EXEC_HOST_NODE_SET_PARAMS_REQUEST__INIT;
    rq.h_graph_exec = (uint64_t)(uintptr_t)hGraphExec;
    rq.h_node = (uint64_t)(uintptr_t)hNode;
    rq.node_params = (ProtobufCBinaryData){sizeof p, (uint8_t *)&p};
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuGraphExecHostNodeSetParams, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    sl_fe_g_exec_forget(rq.h_graph_exec);
    return sl_fe_g_result(rc, rep);
}
