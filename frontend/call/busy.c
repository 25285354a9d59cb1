/* Streams and events known busy (docs/remoting.md "Busy streams"). A program polling
 * cuStreamQuery on a stream whose kernel runs for 300 ms (or cuEventQuery on an event recorded
 * after it) asked the worker once per poll, a round trip each. Now the query asks the worker to
 * watch the stream or event (Call.watch); a NOT_READY answer that says Reply.watched makes it
 * known busy, and later queries of it are answered NOT_READY here, at once, until the worker's
 * StreamDone{the query's seq} says the work queued before it is done (the next query then asks
 * the driver again). The worker sends StreamDone before any
 * reply it sends after the work was done, so a wait on an event recorded after it, answered on
 * another thread, never leaves the stream looking busy here.
 *
 * Before asking here, a query reads what the transport holds (rpc.c: a StreamDone not
 * read yet, while no thread waits for a reply and reads). Not answered here: streams without a
 * handle of their own (the legacy and per-thread streams), and while the program has mapped or
 * managed memory, whose device writes reach the guest with replies. */
#include "call/busy.h"

#include <stdatomic.h>

#include "call/managed.h"
#include "call/mapped_sync.h"
#include "sluice/call_facts.h"
#include "sluice/stub_runtime.h"

#define BUSY_MAX 8
static struct known_busy {
    uint64_t ctx, obj, seq; /* obj: the stream's or the event's handle; seq: the query's */
    int event;
} g_busy[BUSY_MAX];
static size_t g_nbusy;

/* StreamDone that came before their query's answer reached its thread (the reader hands the
 * reply over, then may read the StreamDone before that thread runs). */
#define EARLY_MAX 16
static uint64_t g_early[EARLY_MAX];
static size_t g_nearly;

static atomic_uint_fast64_t g_answers;

/* The stream or event a query names: a stream with a handle of its own (not the legacy or
 * per-thread stream, which these sets do not tell apart), or an event. */
static int own_query(const Sluice__Wire__Call *c, uint64_t *h, int *event)
{
    const struct sl_call_info *ci = sl_call_lookup(c->call_id);
    *event = ci && ci->idle == SL_IDLE_QUERY_EVENT;
    if (*event)
        return (*h = sl_call_event(c)) != 0;
    return ci && ci->idle == SL_IDLE_QUERY_STREAM && sl_call_stream(c, h) && *h > 2u;
}

static struct known_busy *find(uint64_t ctx, uint64_t obj, int event)
{
    for (size_t i = 0; i < g_nbusy; i++)
        if (g_busy[i].ctx == ctx && g_busy[i].obj == obj && g_busy[i].event == event)
            return &g_busy[i];
    return NULL;
}

static void drop(struct known_busy *b)
{
    *b = g_busy[--g_nbusy];
}

/* obj is no longer known busy, in any context (an event recorded again, from any thread). */
static void drop_all(uint64_t obj, int event)
{
    for (size_t i = 0; i < g_nbusy;)
        if (g_busy[i].obj == obj && g_busy[i].event == event)
            drop(&g_busy[i]);
        else
            i++;
}

int sl_fe_busy_answer(Sluice__Wire__Call *c)
{
    uint64_t h;
    int event;
    if (!own_query(c, &h, &event) || sl_fe_mapped_any() || sl_fe_managed_any())
        return 0;
    if (find(c->context, h, event)) {
        atomic_fetch_add(&g_answers, 1);
        return 1;
    }
    c->watch = 1;
    return 0;
}

void sl_fe_busy_answered(const Sluice__Wire__Call *c, const Sluice__Wire__Reply *r)
{
    const struct sl_call_info *ci = sl_call_lookup(c->call_id);
    uint64_t h;
    int event;
    if (g_nbusy && ci && r->result == CUDA_SUCCESS) { /* what a synchronization says done */
        if (ci->idle == SL_IDLE_SYNC_CTX)
            g_nbusy = 0;
        else if ((ci->idle == SL_IDLE_SYNC_STREAM || ci->idle == SL_IDLE_COMPLETES_STREAM) &&
                 sl_call_stream(c, &h))
            drop_all(h, 0);
        else if (ci->blocks == SL_BLOCKS_EVENT && (h = sl_call_event(c)) != 0)
            drop_all(h, 1);
    }
    if (!r->watched || r->result != CUDA_ERROR_NOT_READY || !own_query(c, &h, &event))
        return;
    for (size_t i = 0; i < g_nearly; i++)
        if (g_early[i] == c->seq) {
            g_early[i] = g_early[--g_nearly];
            return;
        }
    struct known_busy *b = find(c->context, h, event);
    if (!b && g_nbusy < BUSY_MAX)
        b = &g_busy[g_nbusy++];
    if (b) /* none: not known busy, asked again (the worker watches 4 at most anyway) */
        *b = (struct known_busy){c->context, h, c->seq, event};
}

void sl_fe_busy_note(const Sluice__Wire__Call *c, const struct sl_call_info *ci)
{
    uint64_t h;
    if (!g_nbusy)
        return;
    int work = !ci || (ci->idle == SL_IDLE_WORK && !(ci->flags & SL_CALL_MEMO)) ||
               ci->idle == SL_IDLE_RECORD || ci->idle == SL_IDLE_WAIT ||
               ci->idle == SL_IDLE_COMPLETES_STREAM;
    if (!work)
        return;
    if (ci && ci->idle == SL_IDLE_RECORD) /* the event now stands for other work */
        drop_all(sl_call_event(c), 1);
    if (!sl_call_stream(c, &h)) {
        if (!ci || ci->idle == SL_IDLE_WORK)
            g_nbusy = 0; /* device work whose stream is not known: nothing stays known busy */
        return;
    }
    drop_all(h, 0);
}

void sl_fe_busy_done(uint64_t seq)
{
    for (size_t i = 0; i < g_nbusy; i++)
        if (g_busy[i].seq == seq) {
            drop(&g_busy[i]);
            return;
        }
    if (g_nearly == EARLY_MAX)
        g_nearly = 0; /* the oldest go: their queries were answered long ago */
    g_early[g_nearly++] = seq;
}

void sl_fe_busy_forget(void)
{
    g_nbusy = 0;
    g_nearly = 0;
}

int sl_fe_busy_known(void)
{
    return g_nbusy != 0;
}

uint64_t sl_fe_busy_answers(void)
{
    return atomic_load(&g_answers);
}
