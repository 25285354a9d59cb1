/* GPU-time measurement of a session, the "events" method (docs/accounting.md), in the
 * session's worker thread.
 *
 * Work calls (kernel and graph launches, copies, memsets) open a run on their stream: a timing
 * event is recorded before the first of them, and the run goes on while the same kind of work
 * follows on that stream (kernels and copies/memsets are separate runs, so kernel_ns is the sum
 * of kernel runs). Any other call, and the end of a frame after which no other frame is queued
 * yet (or every BE_ACCT_FRAMES_OPEN_MAX frames), closes the open runs: an end event is recorded
 * on each stream. Closed runs (pairs) are measured when their end event has completed
 * (cuEventQuery after each frame, stopping at a stream's first unfinished pair; waited for
 * (wait_event: polled, given up when the session is abandoned) at the end of an interval, at
 * the end of the session, for a capped
 * session on all but its newest BE_ACCT_CAPPED_PAIRS pairs after each frame, and for the
 * oldest pair when BE_ACCT_MAX_PAIRS are waiting). A pair's duration is
 * cuEventElapsedTime(start, end); its place in time is the context's reference event (recorded
 * on a private stream, re-recorded every interval) plus cuEventElapsedTime(ref, start). The
 * busy time is the union of the intervals over every stream of a device, merged as they come
 * (be_iv_union_more: a frame costs what its own runs cost, not what the interval holds).
 * The frames, the intervals and their records are records.c. */
#include "accounting/timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accounting/intervals.h"
#include "accounting/quota.h"
#include "accounting/state.h"
#include "bounds.h"
#include "session/contexts.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/call_facts.h"
#include "sluice/log.h"
#include "sluice/wire.h"

enum { W_NONE = 0, W_KERNEL = 1, W_COPY = 2 };
enum { D_NONE = 0, D_HTOD, D_DTOH };

struct work {
    int kind;        /* W_* */
    uint64_t stream; /* wire stream id (0: the NULL stream) */
    int dir;         /* D_* */
    uint64_t bytes;
    int launch;  /* counts as a kernel launch */
    int neutral; /* neither work nor a reason to close the runs */
};

int64_t be_acct_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---------------------------------------------------------------- what a call is */

/* What the table says of a call's device work (acct=, sluice/call_facts.h). */
static void classify(const Sluice__Wire__Call *c, const struct sl_call_info *ci, struct work *w)
{
    memset(w, 0, sizeof *w);
    if (!ci)
        return;
    switch (ci->acct) {
    case SL_ACCT_LAUNCH: /* a kernel, counted as a launch */
        w->launch = 1;
        w->kind = W_KERNEL;
        break;
    case SL_ACCT_KERNEL: /* graph launches: timed as kernel work, not counted as a launch */
        w->kind = W_KERNEL;
        break;
    case SL_ACCT_COPY: {
        enum sl_call_dir d = SL_DIR_NONE;
        w->kind = W_COPY;
        w->bytes = sl_call_copy_bytes(c, &d);
        w->dir = d == SL_DIR_HTOD ? D_HTOD : d == SL_DIR_DTOH ? D_DTOH : D_NONE;
        break;
    }
    case SL_ACCT_MARKER: /* an event record: the run goes on across it */
        w->neutral = 1;
        return;
    default:
        return;
    }
    uint64_t st;
    if (sl_call_stream(c, &st))
        w->stream = st;
}

/* ---------------------------------------------------------------- events */

static CUresult elapsed(const struct sl_driver_api *api, float *ms, CUevent a, CUevent b)
{
    if (api->cuEventElapsedTime_v2)
        return api->cuEventElapsedTime_v2(ms, a, b);
    return api->cuEventElapsedTime(ms, a, b);
}

int be_acct_timing_available(const struct sl_driver_api *api)
{
    return api && api->cuEventCreate && api->cuEventRecord && api->cuEventQuery &&
           api->cuEventSynchronize && api->cuEventDestroy_v2 && api->cuStreamCreate &&
           api->cuStreamDestroy_v2 && api->cuCtxGetCurrent && api->cuCtxSetCurrent &&
           (api->cuEventElapsedTime_v2 || api->cuEventElapsedTime);
}

static CUevent ev_get(sl_be_session *s, struct be_acct_ctx *c)
{
    if (c->npool)
        return c->pool[--c->npool];
    CUevent e = NULL;
    if (s->api->cuEventCreate(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
        return NULL;
    return e;
}

static void ev_put(sl_be_session *s, struct be_acct_ctx *c, CUevent e)
{
    if (!e)
        return;
    if (c->npool == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        CUevent *p = cap <= 2 * BE_ACCT_MAX_PAIRS + 2 * BE_ACCT_MAX_RUNS
                         ? realloc(c->pool, cap * sizeof *p)
                         : NULL;
        if (!p) {
            s->api->cuEventDestroy_v2(e);
            return;
        }
        c->pool = p;
        c->cap = cap;
    }
    c->pool[c->npool++] = e;
}

/* cuEventSynchronize that a session abandoned meanwhile (its guest gone: session.c,
 * be_session_abandon) stops: the worker then sends the final record of what completed and exits
 * at once. On a GPU shared by 64 contexts an interval's end waited seconds here, and the worker
 * exited without its final record (run 27, docs/backend.md "Teardown"). The event is queried,
 * spinning for WAIT_SPIN_NS, then between sleeps that grow to WAIT_SLEEP_MAX_NS. */
#define WAIT_SPIN_NS      100000
#define WAIT_SLEEP_MAX_NS 1000000
static CUresult wait_event(sl_be_session *s, CUevent e)
{
    int64_t t0 = be_acct_clock_ns(CLOCK_MONOTONIC);
    long sleep_ns = 20000;
    for (;;) {
        CUresult rc = s->api->cuEventQuery(e);
        if (rc != CUDA_ERROR_NOT_READY || atomic_load(&s->abandon))
            return rc;
        if (be_acct_clock_ns(CLOCK_MONOTONIC) - t0 < WAIT_SPIN_NS)
            continue;
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        sleep_ns = sleep_ns * 2 > WAIT_SLEEP_MAX_NS ? WAIT_SLEEP_MAX_NS : sleep_ns * 2;
    }
}

/* The reference event: recorded on the context's idle private stream, so its device time is
 * (within microseconds) the host time it was recorded at. In relaxed capture mode: the first
 * work of a context may be a launch the program captures (capture_host on the H100, run 22: the
 * synchronization invalidated the program's capture). */
void be_acct_rebase(sl_be_session *s, struct be_acct_ctx *c)
{
    if (c->broken)
        return;
    int64_t t0 = be_acct_clock_ns(CLOCK_REALTIME);
    CUstreamCaptureMode m = be_capture_relax(s);
    CUresult rc = s->api->cuEventRecord(c->ref, c->priv);
    if (rc == CUDA_SUCCESS) /* NOT_READY: abandoned meanwhile, measured no more */
        rc = wait_event(s, c->ref);
    be_capture_restore(s, m);
    if (rc != CUDA_SUCCESS) {
        c->broken = 1;
        return;
    }
    c->ref_ns = t0;
}

/* The timing state of native context ctx (ctx is current), made on first use. */
static struct be_acct_ctx *actx(sl_be_session *s, CUcontext ctx, int ordinal)
{
    struct be_acct *a = s->acct;
    for (size_t i = 0; i < a->nctx; i++)
        if (a->ctxs[i]->ctx == ctx)
            return a->ctxs[i];
    if (a->nctx == BE_MAX_CONTEXTS)
        return NULL;
    struct be_acct_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ctx = ctx;
    c->ordinal = ordinal;
    if (s->api->cuStreamCreate(&c->priv, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        c->priv = NULL;
        c->broken = 1;
    } else if (s->api->cuEventCreate(&c->ref, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
        c->ref = NULL;
        c->broken = 1;
    }
    if (c->broken)
        sl_log(SL_LOG_WARNING, BE_COMPONENT,
               "session %llu instance %s: no timing events in a context of device %d: its work "
               "is counted but not timed",
               (unsigned long long)s->id, s->instance, ordinal);
    be_acct_rebase(s, c);
    a->ctxs[a->nctx++] = c;
    return c;
}

static void actx_free(sl_be_session *s, struct be_acct_ctx *c)
{
    for (size_t i = 0; i < c->npool; i++)
        s->api->cuEventDestroy_v2(c->pool[i]);
    if (c->ref)
        s->api->cuEventDestroy_v2(c->ref);
    if (c->priv)
        s->api->cuStreamDestroy_v2(c->priv);
    free(c->pool);
    free(c);
}

/* ---------------------------------------------------------------- measuring */

static void dev_add(struct be_acct_dev *d, int64_t a, int64_t b)
{
    if (d->niv == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 64;
        struct be_iv *v = realloc(d->iv, cap * sizeof *v);
        if (!v)
            return; /* the interval is lost from busy time; kernel_ns still has it */
        d->iv = v;
        d->cap = cap;
    }
    d->iv[d->niv++] = (struct be_iv){a, b};
}

static void pair_release(sl_be_session *s, struct be_acct_pair *p)
{
    ev_put(s, p->c, p->a);
    ev_put(s, p->c, p->b);
}

/* 1 measured (and released), 0 not finished yet, -1 failed (released, counted untimed). */
static int pair_measure(sl_be_session *s, struct be_acct_pair *p, int wait)
{
    struct be_acct *a = s->acct;
    const struct sl_driver_api *api = s->api;
    CUresult rc = wait ? wait_event(s, p->b) : api->cuEventQuery(p->b);
    if (rc == CUDA_ERROR_NOT_READY)
        return 0;
    float d = 0, r = 0;
    if (rc == CUDA_SUCCESS)
        rc = elapsed(api, &d, p->a, p->b);
    if (rc == CUDA_SUCCESS)
        rc = elapsed(api, &r, p->c->ref, p->a);
    if (rc == CUDA_ERROR_NOT_READY && !wait)
        return 0;
    if (rc != CUDA_SUCCESS || d < 0) {
        a->untimed++;
        pair_release(s, p);
        return -1;
    }
    int64_t dur = (int64_t)((double)d * 1e6 + 0.5);
    int64_t at = p->c->ref_ns + (int64_t)((double)r * 1e6 + (r < 0 ? -0.5 : 0.5));
    if (p->c->ordinal >= 0 && p->c->ordinal < a->ndev) {
        struct be_acct_dev *dv = &a->dev[p->c->ordinal];
        dev_add(dv, at, at + dur);
        if (p->kind == W_KERNEL)
            dv->kernel_ns += (uint64_t)dur;
    }
    pair_release(s, p);
    return 1;
}

/* Merges each device's new intervals; returns how much busy time they added. */
static uint64_t merge_new(struct be_acct *a)
{
    uint64_t added = 0;
    for (int i = 0; i < a->ndev; i++) {
        struct be_acct_dev *d = &a->dev[i];
        uint64_t total = d->merged_total;
        d->niv = be_iv_union_more(d->iv, d->merged, d->niv, &total);
        d->merged = d->niv;
        if (total > d->merged_total)
            added += total - d->merged_total;
        d->merged_total = total;
    }
    return added;
}

/* Event queries are "potentially unsafe" calls: during a stream capture in global or
 * thread-local mode they would invalidate the guest's capture (PyTorch's CUDA graphs). The
 * worker measures in relaxed mode, then gives the guest's mode back (session/streams.c). */

/* Measures the pairs that finished, and the oldest `wait` pairs in any case (waiting for them);
 * returns the busy time added. The pairs of a stream finish in order, so a stream's first
 * unfinished pair ends the queries on that stream: when the GPU is far behind, a frame costs
 * one query per stream instead of one per waiting pair. */
#define MEASURE_STREAMS 16
struct busy_stream {
    struct be_acct_ctx *c;
    CUstream st;
};
uint64_t be_acct_measure(sl_be_session *s, size_t wait)
{
    struct be_acct *a = s->acct;
    size_t k = 0, nbusy = 0;
    int any = 0;
    struct busy_stream busy[MEASURE_STREAMS];
    CUstreamCaptureMode m = be_capture_relax(s);
    for (size_t i = 0; i < a->npairs; i++) {
        struct be_acct_pair *p = &a->pairs[i];
        int sync = i < wait, skip = !sync && nbusy == MEASURE_STREAMS;
        for (size_t j = 0; j < nbusy && !skip && !sync; j++)
            skip = busy[j].c == p->c && busy[j].st == p->st;
        int r = skip ? 0 : pair_measure(s, p, sync);
        if (r == 0) { /* unfinished (a waited one: the session was abandoned meanwhile) */
            if (!skip && nbusy < MEASURE_STREAMS)
                busy[nbusy++] = (struct busy_stream){p->c, p->st};
            a->pairs[k++] = *p;
        }
        any |= r > 0;
    }
    be_capture_restore(s, m);
    a->npairs = k;
    return any ? merge_new(a) : 0;
}

/* Measures the pairs of context c, synchronously, and forgets them. */
static void measure_ctx(sl_be_session *s, struct be_acct_ctx *c)
{
    struct be_acct *a = s->acct;
    size_t k = 0;
    for (size_t i = 0; i < a->npairs; i++) {
        if (a->pairs[i].c == c)
            pair_measure(s, &a->pairs[i], 1);
        else
            a->pairs[k++] = a->pairs[i];
    }
    a->npairs = k;
}

/* ---------------------------------------------------------------- runs */

static int null_stream(CUstream st)
{
    return (uintptr_t)st <= 2; /* NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD */
}

/* Closes open run i: its end event goes on the stream (whose context must be current when it
 * is a NULL stream). */
static void run_close(sl_be_session *s, size_t i)
{
    struct be_acct *a = s->acct;
    a->hot.valid = 0;
    struct be_acct_run r = a->runs[i];
    a->runs[i] = a->runs[--a->nruns];
    CUevent e = ev_get(s, r.c);
    if (!e || s->api->cuEventRecord(e, r.st) != CUDA_SUCCESS) {
        ev_put(s, r.c, e);
        ev_put(s, r.c, r.start);
        a->untimed++;
        return;
    }
    if (a->npairs == BE_ACCT_MAX_PAIRS) {          /* bounded: wait for the oldest */
        if (pair_measure(s, &a->pairs[0], 1) == 0) /* abandoned: not measured */
            pair_release(s, &a->pairs[0]);
        memmove(&a->pairs[0], &a->pairs[1], (a->npairs - 1) * sizeof *a->pairs);
        a->npairs--;
        merge_new(a);
    }
    a->pairs[a->npairs++] = (struct be_acct_pair){r.c, r.start, e, r.kind, r.st};
}

void be_acct_runs_close_all(sl_be_session *s)
{
    struct be_acct *a = s->acct;
    if (!a->nruns)
        return;
    CUcontext orig = NULL, cur = NULL;
    s->api->cuCtxGetCurrent(&orig);
    cur = orig;
    while (a->nruns) {
        struct be_acct_run *r = &a->runs[a->nruns - 1];
        if (null_stream(r->st) && r->c->ctx != cur) {
            s->api->cuCtxSetCurrent(r->c->ctx);
            cur = r->c->ctx;
        }
        run_close(s, a->nruns - 1);
    }
    if (cur != orig)
        s->api->cuCtxSetCurrent(orig);
}

/* Work of kind on stream st of the current context c. */
static void run_open(sl_be_session *s, struct be_acct_ctx *c, CUstream st, int kind, int per_thread)
{
    struct be_acct *a = s->acct;
    for (size_t i = 0; i < a->nruns; i++)
        if (a->runs[i].c == c && a->runs[i].st == st) {
            if (a->runs[i].kind == kind)
                return; /* the run goes on */
            run_close(s, i);
            break;
        }
    if (c->broken) {
        a->untimed++;
        return;
    }
    if (be_stream_capturing(s, st, per_thread))
        return; /* captured into a graph, not run: timed when the graph is launched */
    if (a->nruns == BE_ACCT_MAX_RUNS)
        be_acct_runs_close_all(s);
    CUevent e = ev_get(s, c);
    if (!e || s->api->cuEventRecord(e, st) != CUDA_SUCCESS) {
        ev_put(s, c, e);
        a->untimed++;
        return;
    }
    a->runs[a->nruns++] = (struct be_acct_run){c, st, kind, e};
}

/* ---------------------------------------------------------------- hooks */

void be_acct_call_begin(sl_be_session *s, const Sluice__Wire__Call *call)
{
    struct be_acct *a = s->acct;
    if (!a || !a->timing)
        return;
    struct work w;
    classify(call, sl_call_lookup(call->call_id), &w);
    if (w.neutral)
        return;
    if (w.kind == W_NONE) {
        be_acct_runs_close_all(s);
        return;
    }
    if (a->hot.valid && a->hot.ctx == s->cur_ctx && a->hot.stream == w.stream &&
        a->hot.kind == w.kind && a->hot.per_thread == call->per_thread_stream)
        return; /* the run goes on (most launches of a frame) */
    struct be_ctx *bc = be_ctx_find(s, s->cur_ctx);
    if (!bc || !bc->ctx)
        return;
    CUstream st;
    if (be_stream(s, w.stream, &st) != CUDA_SUCCESS)
        return; /* the call fails on its own */
    if (call->per_thread_stream && st == NULL)
        st = CU_STREAM_PER_THREAD;
    struct be_acct_ctx *c = actx(s, bc->ctx, bc->ordinal);
    if (!c) {
        a->untimed++;
        return;
    }
    run_open(s, c, st, w.kind, call->per_thread_stream);
    for (size_t i = 0; i < a->nruns; i++) /* remember the run if one is open for this stream */
        if (a->runs[i].c == c && a->runs[i].st == st && a->runs[i].kind == w.kind) {
            a->hot.ctx = s->cur_ctx;
            a->hot.stream = w.stream;
            a->hot.kind = w.kind;
            a->hot.per_thread = call->per_thread_stream;
            a->hot.valid = 1;
            break;
        }
}

void be_acct_call_end(sl_be_session *s, const Sluice__Wire__Call *call, CUresult rc)
{
    struct be_acct *a = s->acct;
    if (!a)
        return;
    be_acct_mem_publish(s);
    const struct sl_call_info *ci = sl_call_lookup(call->call_id);
    struct work w;
    classify(call, ci, &w);
    if (w.kind == W_NONE)
        return;
    /* a synchronous copy or memset (and an async one the backend completes before it returns,
     * idle=completes-stream: DtoHAsync) is done when it returns: its run ends now, not after
     * the reply has been sent */
    if (a->timing && ((ci->flags & SL_CALL_ASYNC) == 0 || ci->idle == SL_IDLE_COMPLETES_STREAM))
        be_acct_runs_close_all(s);
    if (rc != CUDA_SUCCESS)
        return;
    struct be_ctx *bc = be_ctx_find(s, s->cur_ctx);
    int dev = bc ? bc->ordinal : 0;
    if (dev < 0 || dev >= a->ndev)
        return;
    struct be_acct_dev *d = &a->dev[dev];
    d->kernels += (uint64_t)w.launch;
    if (w.dir == D_HTOD)
        d->htod += w.bytes;
    else if (w.dir == D_DTOH)
        d->dtoh += w.bytes;
}

void be_acct_ctx_gone(sl_be_session *s, CUcontext ctx)
{
    struct be_acct *a = s->acct;
    if (!a || !a->timing || !ctx)
        return;
    a->hot.valid = 0; /* its streams and runs are going */
    be_acct_runs_close_all(s);
    for (size_t i = 0; i < a->nctx; i++) {
        if (a->ctxs[i]->ctx != ctx)
            continue;
        measure_ctx(s, a->ctxs[i]);
        merge_new(a);
        actx_free(s, a->ctxs[i]);
        a->ctxs[i] = a->ctxs[--a->nctx];
        return;
    }
}

/* The session's end (records.c, be_acct_finish): the events of its open runs, of its pairs and
 * of its contexts go back to the driver. */
void be_acct_timing_free(sl_be_session *s)
{
    struct be_acct *a = s->acct;
    for (size_t i = 0; i < a->nruns; i++)
        ev_put(s, a->runs[i].c, a->runs[i].start);
    for (size_t i = 0; i < a->npairs; i++)
        pair_release(s, &a->pairs[i]);
    for (size_t i = 0; i < a->nctx; i++)
        actx_free(s, a->ctxs[i]);
}
