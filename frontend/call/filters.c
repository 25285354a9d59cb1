/* The call filters (docs/frontend-internals.md "The call filters"): each in its own file, all
 * of them called from here only, in the one order of the list below, hook by hook:
 * - answer: a synchronous call is answered here (the memo, the idle streams, then the busy
 *   streams);
 * - before: a call is about to go (the memo forgets what an unmemo/uncapture call changes);
 * - sync_out: calls are about to go (the mapped ranges' changed bytes go first, then managed
 *   memory's dirty pages);
 * - appended: a call joined the pending frame (the idle streams note its work);
 * - reply: a reply was read (device printf output, then the mapped ranges' bytes);
 * - failed / answered: a call's answer reached its thread, with an error that may have
 *   changed state (the memo and the idle streams forget) or without (they keep it);
 * - callback: the backend asks for a host function; stream_done: a watched stream's work is
 *   done (the busy streams);
 * - the live allocations (allocs.c) learn what synchronous allocations answered and forget
 *   what a call releases; the frees of what their cache gave up go last in sync_out;
 * - session: the session is new or gone; reset: the tests start again.
 * The hooks here only adapt each filter's own functions; its state stays in its file. */
#include <stdlib.h>

#include "call/allocs.h"
#include "call/busy.h"
#include "call/callbacks.h"
#include "call/filters.h"
#include "call/idle.h"
#include "call/managed.h"
#include "call/mapped_sync.h"
#include "call/memo.h"
#include "call/printf.h"

struct filter {
    const char *name;
    int (*answer)(Sluice__Wire__Call *call, int memo, uint64_t seq_now,
                  Sluice__Wire__Reply **reply);
    void (*before)(const Sluice__Wire__Call *call, uint32_t flags, uint64_t seq_now);
    CUresult (*sync_out)(const struct sl_fe_emit *emit);
    void (*appended)(const Sluice__Wire__Call *call, const struct sl_call_info *ci);
    void (*reply)(const Sluice__Wire__Reply *r);
    void (*failed)(uint32_t call_id, uint64_t seq_now);
    void (*answered)(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *r, int memo);
    int (*callback)(uint64_t fn);
    void (*session)(void);
    void (*reset)(void);
};

/* ------------------------------------------------------------------ memo (memo.c) */
static int memo_answer(Sluice__Wire__Call *call, int memo, uint64_t seq_now,
                       Sluice__Wire__Reply **reply)
{
    (void)seq_now;
    /* memo + unmemo: an idempotent setter (cuFuncSetAttribute...): the same call again after
     * nothing else changed is a no-op, answered here; any other call of it forgets first. */
    return memo && sl_fe_memo_get(call, reply);
}

static void memo_answered(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *r, int memo)
{
    if (memo)
        sl_fe_memo_answered(call, r);
}

/* A reply to call made here, with result (NULL: out of memory, the call then travels). */
static Sluice__Wire__Reply *local_reply(const Sluice__Wire__Call *call, CUresult result)
{
    Sluice__Wire__Reply *r = malloc(sizeof *r);
    if (!r)
        return NULL;
    sluice__wire__reply__init(r);
    r->call_id = call->call_id;
    r->result = (int32_t)result;
    return r;
}

/* ------------------------------------------------------------------ idle streams (idle.c) */
static int idle_answer(Sluice__Wire__Call *call, int memo, uint64_t seq_now,
                       Sluice__Wire__Reply **reply)
{
    (void)memo;
    if (!sl_fe_idle_can_answer(call) || !(*reply = local_reply(call, CUDA_SUCCESS)))
        return 0;
    uint64_t unsent = call->seq;
    call->seq = seq_now; /* as a synchronization that travelled now */
    sl_fe_idle_answered(call);
    call->seq = unsent;
    return 1;
}

static void idle_failed(uint32_t call_id, uint64_t seq_now)
{
    (void)seq_now;
    sl_fe_idle_after_error(call_id);
}

static void idle_answered(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *r, int memo)
{
    (void)r;
    (void)memo;
    sl_fe_idle_answered(call);
}

/* ------------------------------------------------------------------ busy streams (busy.c) */
static int busy_answer(Sluice__Wire__Call *call, int memo, uint64_t seq_now,
                       Sluice__Wire__Reply **reply)
{
    (void)memo;
    (void)seq_now;
    return sl_fe_busy_answer(call) && (*reply = local_reply(call, CUDA_ERROR_NOT_READY)) != NULL;
}

static void busy_failed(uint32_t call_id, uint64_t seq_now)
{
    (void)call_id;
    (void)seq_now;
    sl_fe_busy_forget();
}

static void busy_answered(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *r, int memo)
{
    (void)memo;
    sl_fe_busy_answered(call, r);
}

/* ------------------------------------------------------------------ printf output (printf.c) */
static void printf_reply(const Sluice__Wire__Reply *r)
{
    sl_fe_printf_write(&r->stdout_data, &r->stderr_data);
}

/* ------------------------------------------------------------------ mapped (mapped_sync.c) */
static CUresult mapped_sync_out(const struct sl_fe_emit *emit)
{
    return sl_fe_mapped_sync_out(emit->mapped);
}

static void mapped_reply(const Sluice__Wire__Reply *r)
{
    for (size_t k = 0; k < r->n_mapped; k++)
        sl_fe_mapped_apply(r->mapped[k]->dptr, r->mapped[k]->offset, r->mapped[k]->data.data,
                           r->mapped[k]->data.len);
}

/* ------------------------------------------------------------------ managed (managed.c) */
/* Device work sent since the last invalidation (the call layer's lock): it may have written
 * managed memory, so the guest's pages are invalidated when the next answer comes. */
static int g_managed_work;

static CUresult managed_sync_out(const struct sl_fe_emit *emit)
{
    int work = g_managed_work; /* the pushes themselves leave the guest's pages current */
    CUresult rc = sl_fe_managed_sync_out(emit->managed);
    g_managed_work = work;
    return rc;
}

static void managed_appended(const Sluice__Wire__Call *call, const struct sl_call_info *ci)
{
    (void)call;
    if (!ci || (ci->idle == SL_IDLE_WORK && !(ci->flags & SL_CALL_MEMO)))
        g_managed_work = 1;
}

static void managed_settle(void)
{
    if (g_managed_work) {
        g_managed_work = 0;
        sl_fe_managed_invalidate();
    }
}

static void managed_failed(uint32_t call_id, uint64_t seq_now)
{
    (void)call_id;
    (void)seq_now;
    managed_settle();
}

static void managed_answered(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *r, int memo)
{
    (void)call;
    (void)r;
    (void)memo;
    managed_settle();
}

static void managed_forget(void)
{
    g_managed_work = 0;
}

/* ------------------------------------------------------------------ allocs (allocs.c) */
static CUresult allocs_sync_out(const struct sl_fe_emit *emit)
{
    return sl_fe_allocs_sync_out(emit->release);
}

static void allocs_answered(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *r, int memo)
{
    (void)memo;
    sl_fe_allocs_answered(call, r);
}

/* ------------------------------------------------------------------ the order */
static const struct filter g_filters[] = {
    {.name = "memo",
     .answer = memo_answer,
     .before = sl_fe_memo_before,
     .failed = sl_fe_memo_forget,
     .answered = memo_answered,
     .reset = sl_fe_memo_reset},
    {.name = "idle",
     .answer = idle_answer,
     .appended = sl_fe_idle_note,
     .failed = idle_failed,
     .answered = idle_answered,
     .session = sl_fe_idle_forget,
     .reset = sl_fe_idle_reset},
    {.name = "busy",
     .answer = busy_answer,
     .appended = sl_fe_busy_note,
     .failed = busy_failed,
     .answered = busy_answered,
     .session = sl_fe_busy_forget,
     .reset = sl_fe_busy_forget},
    {.name = "printf", .reply = printf_reply},
    {.name = "mapped", .sync_out = mapped_sync_out, .reply = mapped_reply},
    {.name = "managed",
     .sync_out = managed_sync_out,
     .appended = managed_appended,
     .failed = managed_failed,
     .answered = managed_answered,
     .session = managed_forget,
     .reset = managed_forget},
    {.name = "callbacks", .callback = sl_fe_callback_run_asked},
    {.name = "allocs",
     .before = sl_fe_allocs_before,
     .sync_out = allocs_sync_out,
     .appended = sl_fe_allocs_appended,
     .answered = allocs_answered,
     .session = sl_fe_allocs_clear,
     .reset = sl_fe_allocs_clear},
};
#define N_FILTERS (sizeof g_filters / sizeof *g_filters)

/* ------------------------------------------------------------------ the hooks */
int sl_fe_filters_answer(Sluice__Wire__Call *call, int memo, uint64_t seq_now,
                         Sluice__Wire__Reply **reply)
{
    for (size_t i = 0; i < N_FILTERS; i++)
        if (g_filters[i].answer && g_filters[i].answer(call, memo, seq_now, reply))
            return 1;
    return 0;
}

void sl_fe_filters_before(const Sluice__Wire__Call *call, uint32_t flags, uint64_t seq_now)
{
    for (size_t i = 0; i < N_FILTERS; i++)
        if (g_filters[i].before)
            g_filters[i].before(call, flags, seq_now);
}

CUresult sl_fe_filters_sync_out(const struct sl_fe_emit *emit)
{
    for (size_t i = 0; i < N_FILTERS; i++) {
        CUresult rc = g_filters[i].sync_out ? g_filters[i].sync_out(emit) : CUDA_SUCCESS;
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

void sl_fe_filters_appended(const Sluice__Wire__Call *call, const struct sl_call_info *ci)
{
    for (size_t i = 0; i < N_FILTERS; i++)
        if (g_filters[i].appended)
            g_filters[i].appended(call, ci);
}

void sl_fe_filters_reply(const Sluice__Wire__Reply *r)
{
    for (size_t i = 0; i < N_FILTERS; i++)
        if (g_filters[i].reply)
            g_filters[i].reply(r);
}

/* An answer with an error may have changed state (an invalidated capture...); "not ready"
 * changes nothing (CUDA: "not actually an error"; programs poll with cuStreamQuery /
 * cuEventQuery), nor does a result the table names an answer of the call (answers=, e.g.
 * slLoadImage's "send the bytes": the backend lacks an image, module.c). */
static int changes_state(const Sluice__Wire__Call *c, const Sluice__Wire__Reply *r)
{
    if (r->failed_seq)
        return 1;
    const struct sl_call_info *ci = sl_call_lookup(c->call_id);
    if (ci && ci->answers && r->result == ci->answers)
        return 0;
    return r->result != CUDA_SUCCESS && r->result != CUDA_ERROR_NOT_READY;
}

static void failed(uint32_t call_id, uint64_t seq_now)
{
    for (size_t i = 0; i < N_FILTERS; i++)
        if (g_filters[i].failed)
            g_filters[i].failed(call_id, seq_now);
}

void sl_fe_filters_answered(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *r, int memo,
                            uint64_t seq_now)
{
    if (changes_state(call, r)) {
        failed(call->call_id, seq_now);
        return;
    }
    for (size_t i = 0; i < N_FILTERS; i++)
        if (g_filters[i].answered)
            g_filters[i].answered(call, r, memo);
}

void sl_fe_filters_answered_batch(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *r,
                                  uint64_t seq_now)
{
    if (changes_state(call, r)) /* an answer without an error teaches nothing of a batch */
        failed(call->call_id, seq_now);
    else
        managed_settle(); /* the batch's answers came after the work sent before it */
}

void sl_fe_filters_stream_done(uint64_t seq)
{
    sl_fe_busy_done(seq);
}

int sl_fe_filters_callback(uint64_t fn)
{
    for (size_t i = 0; i < N_FILTERS; i++)
        if (g_filters[i].callback && g_filters[i].callback(fn))
            return 1;
    return 0;
}

void sl_fe_filters_session(void)
{
    for (size_t i = 0; i < N_FILTERS; i++)
        if (g_filters[i].session)
            g_filters[i].session();
}

void sl_fe_filters_reset(void)
{
    for (size_t i = 0; i < N_FILTERS; i++)
        if (g_filters[i].reset)
            g_filters[i].reset();
}
