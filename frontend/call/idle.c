/* What the guest knows to be idle (docs/frontend-internals.md "Answers kept in the guest"):
 * streams and the context whose last synchronization was answered with success and that got
 * no work since, so that cuStreamSynchronize, cuStreamQuery and cuCtxSynchronize of them are
 * answered here, as the driver would answer. All of it runs with the call layer's lock held
 * (filters.c calls it). */
#include <stdatomic.h>
#include <string.h>

#include "call/idle.h"
#include "sluice/call_facts.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

static uint32_t g_unclean_by_call[SL_CALL_ID_MAX + 1]; /* the idle context forgotten, per call */
static uint64_t g_work_seq; /* the seq of the last call of device work appended */

/* Streams known to be idle: a call that synchronized them was answered with success, and no
 * call appended since gave them GPU work (work on another stream does not count, the legacy
 * stream's does: note_work). cuStreamSynchronize and cuStreamQuery of such a stream are answered
 * here, as the driver would answer: there is nothing to wait for and no error left to report. */
#define IDLE_MAX 8
static struct idle_stream {
    uint64_t ctx, stream;
} g_idle[IDLE_MAX];
static size_t g_nidle;

/* A stream as these sets know it: its handle; the legacy stream is 1 (NULL without per-thread
 * semantics); each thread's per-thread default stream (NULL with them, or
 * CU_STREAM_PER_THREAD) is a key of that thread's own, never a handle the backend issues. */
static uint64_t stream_key(uint64_t h, int per_thread)
{
    static atomic_uint_fast64_t next_thread = 1;
    static _Thread_local uint64_t self;
    if (h == 0 && !per_thread)
        return 1u;
    if (h != 0 && h != 2u)
        return h;
    if (!self)
        self = atomic_fetch_add(&next_thread, 1);
    return (1ull << 63) | self;
}

static int idle_known(uint64_t ctx, uint64_t stream)
{
    for (size_t i = 0; i < g_nidle; i++)
        if (g_idle[i].ctx == ctx && g_idle[i].stream == stream)
            return 1;
    return 0;
}

static void idle_add(uint64_t ctx, uint64_t stream)
{
    if (idle_known(ctx, stream))
        return;
    if (g_nidle == IDLE_MAX)
        g_nidle = 0; /* forget the older ones */
    g_idle[g_nidle++] = (struct idle_stream){ctx, stream};
}

/* The context known idle (g_clean): a cuCtxSynchronize of it was answered with success, and
 * every stream that got work since (g_busy) is in the idle set; then cuCtxSynchronize is
 * answered here too (a training loop's float(loss) then torch.cuda.synchronize()). Any work
 * whose stream cannot be read, in another context, or on more than BUSY_MAX streams forgets
 * it. Streams joined by events count too: when stream Y, which waited on an event recorded on
 * stream X, is known idle, so is X if it got no work after that record (cuDNN forks work to a
 * second stream and joins it back every step). */
#define BUSY_MAX 8
static int g_clean; /* g_clean_ctx is known idle */
static uint64_t g_clean_ctx;
static struct busy {
    uint64_t key;  /* stream */
    uint64_t last; /* seq of its last work (stream waits excepted), 0: none */
} g_busy[BUSY_MAX];
static size_t g_nbusy;

#define EVENTS_MAX     16
#define UNKNOWN_STREAM UINT64_MAX /* a wait on an event recorded before the clean point */
static struct recorded {
    uint64_t event, stream, seq; /* the record call that gave event its work to wait for */
} g_events[EVENTS_MAX];
static size_t g_nevents;
static struct joined {
    uint64_t waiter, stream, seq; /* waiter waited for stream's work up to seq */
} g_joins[EVENTS_MAX];
static size_t g_njoins;

/* The stream a call works on (the table's stream parameter), as these sets know it. */
static int request_stream(const Sluice__Wire__Call *c, uint64_t *key)
{
    uint64_t h;
    if (!sl_call_stream(c, &h))
        return -1;
    *key = stream_key(h, c->per_thread_stream);
    return 0;
}

static void unclean(uint32_t call_id)
{
    g_clean = 0;
    if (call_id <= SL_CALL_ID_MAX)
        g_unclean_by_call[call_id]++;
}

/* Event records and stream waits of the clean context (note_work): which stream's work a
 * stream waited for. */
static void note_join(const Sluice__Wire__Call *c, enum sl_call_idle idle, uint64_t stream)
{
    uint64_t event = idle == SL_IDLE_RECORD || idle == SL_IDLE_WAIT ? sl_call_event(c) : 0;
    if (event && idle == SL_IDLE_RECORD) {
        size_t i = 0;
        while (i < g_nevents && g_events[i].event != event)
            i++;
        if (i == g_nevents)
            i = g_nevents < EVENTS_MAX ? g_nevents++ : (size_t)(c->seq % EVENTS_MAX);
        g_events[i] = (struct recorded){event, stream, c->seq};
        return;
    }
    if (!event)
        return;
    if (g_njoins == EVENTS_MAX) { /* a forgotten wait could make a stream look idle */
        unclean(c->call_id);
        return;
    }
    struct joined *j = &g_joins[g_njoins++];
    *j = (struct joined){stream, UNKNOWN_STREAM, 0}; /* an event recorded before: never idle */
    for (size_t i = 0; i < g_nevents; i++)
        if (g_events[i].event == event) {
            j->stream = g_events[i].stream;
            j->seq = g_events[i].seq;
        }
}

/* Every wait of stream since the clean point is on a stream known idle. */
static int waits_done(uint64_t ctx, uint64_t stream)
{
    for (size_t i = 0; i < g_njoins; i++)
        if (g_joins[i].waiter == stream && !idle_known(ctx, g_joins[i].stream))
            return 0;
    return 1;
}

/* stream is known idle: so is each stream it waited for that has had no work since (waits
 * are not work, but each of that stream's own waits must be on a stream known idle). */
static void idle_joined(uint64_t ctx, uint64_t stream, int depth)
{
    if (!g_clean || ctx != g_clean_ctx || depth > 2)
        return;
    for (size_t i = 0; i < g_njoins; i++) {
        if (g_joins[i].waiter != stream || g_joins[i].stream == stream)
            continue;
        for (size_t k = 0; k < g_nbusy; k++)
            if (g_busy[k].key == g_joins[i].stream && g_busy[k].last <= g_joins[i].seq &&
                !idle_known(ctx, g_busy[k].key) && waits_done(ctx, g_busy[k].key)) {
                idle_add(ctx, g_busy[k].key);
                idle_joined(ctx, g_busy[k].key, depth + 1);
            }
    }
}

/* A stream got work: it is no longer known idle; the others stay. */
static void idle_drop(uint64_t ctx, uint64_t stream)
{
    for (size_t i = 0; i < g_nidle; i++)
        if (g_idle[i].ctx == ctx && g_idle[i].stream == stream) {
            g_idle[i] = g_idle[--g_nidle];
            return;
        }
}

static void note_work(const Sluice__Wire__Call *c, enum sl_call_idle idle)
{
    uint64_t k = 0;
    /* nothing known idle, no clean context: nothing to forget (every async launch comes here) */
    int on_stream = (g_nidle || g_clean) && request_stream(c, &k) == 0;
    /* work on a stream leaves the other streams idle (a thread's cuStreamSynchronize of its
     * own idle stream while another stream computes is answered here); the legacy stream's
     * work, which orders itself with every blocking stream, and work whose stream cannot be
     * read forget them all */
    if (on_stream && k != 1u)
        idle_drop(c->context, k);
    else
        g_nidle = 0;
    if (!g_clean)
        return;
    if (c->context != g_clean_ctx || !on_stream) {
        unclean(c->call_id);
        return;
    }
    struct busy *b = NULL;
    for (size_t i = 0; i < g_nbusy && !b; i++)
        if (g_busy[i].key == k)
            b = &g_busy[i];
    if (!b && g_nbusy == BUSY_MAX) {
        unclean(c->call_id);
        return;
    }
    if (!b) {
        b = &g_busy[g_nbusy++];
        *b = (struct busy){k, 0};
    }
    if (idle != SL_IDLE_WAIT)
        b->last = c->seq; /* a wait is a dependency (g_joins), not work of its own */
    note_join(c, idle, k);
}

/* ctx answered a synchronization with success (there or here): the new clean point. */
static void clean_point(uint64_t ctx)
{
    g_clean = 1;
    g_clean_ctx = ctx;
    g_nbusy = 0;
    g_nevents = g_njoins = 0;
}

/* A synchronization of the calling thread's context (the one it names, or the current one). */
static int ctx_sync_call(const Sluice__Wire__Call *c, enum sl_call_idle idle)
{
    uint64_t ctx = idle == SL_IDLE_SYNC_CTX ? sl_call_context_arg(c) : 0;
    return idle == SL_IDLE_SYNC_CTX && (!ctx || ctx == c->context);
}

static int ctx_known_idle(uint64_t ctx)
{
    if (!g_clean || ctx != g_clean_ctx)
        return 0;
    for (size_t i = 0; i < g_nbusy; i++)
        if (!idle_known(ctx, g_busy[i].key))
            return 0;
    return 1;
}

/* The stream a call synchronizes (0: none). */
static uint64_t synced_stream(const Sluice__Wire__Call *c, enum sl_call_idle idle)
{
    uint64_t key;
    if (idle != SL_IDLE_SYNC_STREAM && idle != SL_IDLE_COMPLETES_STREAM)
        return 0;
    return request_stream(c, &key) == 0 ? key : 0;
}

/* Whether an appended call keeps streams idle: synchronizations, queries, copies into guest
 * memory, memo queries (the table's idle= and memo). */
static int keeps_idle(const struct sl_call_info *ci)
{
    switch (ci->idle) {
    case SL_IDLE_WORK:
        return (ci->flags & SL_CALL_MEMO) != 0;
    case SL_IDLE_RECORD:
    case SL_IDLE_WAIT:
        return 0; /* work of their stream: joins (note_join) */
    default:
        return 1;
    }
}

static enum sl_call_idle idle_of(const Sluice__Wire__Call *c)
{
    const struct sl_call_info *ci = sl_call_lookup(c->call_id);
    return ci ? (enum sl_call_idle)ci->idle : SL_IDLE_WORK;
}

/* ------------------------------------------------------------------ entry points */
void sl_fe_idle_note(const Sluice__Wire__Call *c, const struct sl_call_info *ci)
{
    if (ci && keeps_idle(ci))
        return;
    g_work_seq = c->seq;
    note_work(c, ci ? (enum sl_call_idle)ci->idle : SL_IDLE_WORK);
}

int sl_fe_idle_can_answer(const Sluice__Wire__Call *c)
{
    enum sl_call_idle idle = idle_of(c);
    uint64_t key;
    if (ctx_sync_call(c, idle))
        return ctx_known_idle(c->context);
    if (idle == SL_IDLE_SYNC_STREAM || idle == SL_IDLE_QUERY_STREAM)
        return request_stream(c, &key) == 0 && idle_known(c->context, key);
    return 0;
}

void sl_fe_idle_answered(const Sluice__Wire__Call *c)
{
    /* another thread appended work after this synchronization went out: it proves nothing idle
     * (its reply came while that thread's work may still run) */
    if (g_work_seq > c->seq)
        return;
    enum sl_call_idle idle = idle_of(c);
    uint64_t st = synced_stream(c, idle);
    if (st) {
        idle_add(c->context, st);
        idle_joined(c->context, st, 0);
    }
    if (ctx_sync_call(c, idle))
        clean_point(c->context);
}

void sl_fe_idle_after_error(uint32_t call_id)
{
    g_nidle = 0;
    if (g_clean)
        unclean(call_id);
}

void sl_fe_idle_forget(void)
{
    g_nidle = 0;
    g_clean = 0;
}

void sl_fe_idle_reset(void)
{
    sl_fe_idle_forget();
    g_work_seq = 0;
    memset(g_unclean_by_call, 0, sizeof g_unclean_by_call);
}

const uint32_t *sl_fe_idle_unclean_counts(void)
{
    return g_unclean_by_call;
}
