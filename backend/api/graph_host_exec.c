/* Launches of instantiated graphs that hold nodes on guest memory (the design: graph_host.c):
 * slGraphExecHost lists the items, slGraphHostPut / slGraphHostGet move their bytes,
 * slGraphLaunch runs the graph synchronously with the host-to-device bytes and answers the
 * device-to-host bytes and the host nodes reached; cuGraphLaunch of such a graph is refused. */
#include <stdlib.h>
#include <string.h>

#include "api/graph.h"
#include "api/graph_host.h"
#include "api/graph_mem.h"
#include "api/reply.h"
#include "bounds.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

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
