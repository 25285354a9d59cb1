/* The call layer (docs/remoting.md "Synchronous and asynchronous calls"): seq numbers, the
 * pending CallFrame, coalescing, flushes, back-pressure through slFence, deferred errors,
 * device printf output, host callbacks, and the stub runtime of sluice/stub_runtime.h.
 *
 * One mutex (g_io) covers the pending frame (kept encoded: frame.c) and the channel. A thread
 * making a synchronous call appends it to the pending frame, sends the frame and reads until
 * its reply arrives, running the host callbacks and writing the printf output it reads on the
 * way.
 *
 * Async calls wait in the pending frame at most flush_us (docs/remoting.md): the GPU must not
 * sit idle while work it could run waits here for a synchronizing call. An async call goes out
 * at once when nothing was sent for flush_us (the link was quiet), else with the frame when the
 * frame's oldest call has waited the current window; a thread of its own sends a frame that no
 * later call came to send (after at least 250 us), and with limits.sender every frame of async
 * calls, so that the program does not wait while frames are encrypted (see "the sender thread"
 * below). The window opens after each reply (every
 * call sent has run, the GPU may be idle): the first async call goes at once, the next frame
 * waits start_us, then twice as long, up to flush_us. Under a steady stream of calls this
 * makes one frame per flush_us; after a synchronization the GPU gets the next work at once. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fe.h"
#include "sluice/fe_calls.h"
#include "sluice/log.h"
#include "sluice/relax.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define SMALL_BULK ((size_t)64 << 10) /* async bulk up to this is copied and coalesced */

static pthread_mutex_t g_io = PTHREAD_MUTEX_INITIALIZER;
static struct sl_fe_transport g_tr;
static int g_attached, g_dead;
static uint64_t g_seq;

static struct sl_fe_frame g_pf; /* the pending frame */

/* The outbox: a frame older than the pending one, handed to the sender thread. */
enum outbox_state { OB_EMPTY, OB_READY, OB_SENDING };
static struct sl_fe_frame g_ob;
static enum outbox_state g_ob_state;
static atomic_int g_ob_ready; /* OB_READY, for the sender thread while it polls without g_io */
static int g_pf_due;          /* the pending frame is due: it goes when the outbox's send ends */
static pthread_cond_t g_sent_cv = PTHREAD_COND_INITIALIZER; /* the outbox became empty */

static size_t g_inflight_calls; /* async calls sent or pending since the last reply */
static uint64_t g_inflight_bulk;

static struct sl_fe_rpc_limits g_lim = {256,
                                        (size_t)4 << 20,
                                        4096,
                                        (uint64_t)256 << 20,
                                        SL_FE_FLUSH_US_DEFAULT,
                                        SL_FE_START_US_DEFAULT,
                                        0,
                                        0};
static struct sl_fe_rpc_stats g_stats;
static uint32_t g_sync_by_call[SL_CALL_ID_MAX + 1];   /* synchronous calls made, per call id */
static uint32_t g_forget_by_call[SL_CALL_ID_MAX + 1]; /* the memo emptied, per call id */
static int g_capture_begun;   /* a stream capture was begun in this process */
static uint64_t g_forget_seq; /* the seq sent when the memo was last emptied */
static _Thread_local int t_in_callback;

static pthread_cond_t g_sender_cv; /* wakes the sender thread */
static pthread_once_t g_sender_once = PTHREAD_ONCE_INIT;
static int g_sender_started, g_sender_ok, g_sender_idle;
static uint64_t g_pend_t0_ns, g_last_send_ns;
static uint64_t g_win_ns; /* the current window (see the top of the file) */

static void waiters_fail(void); /* the replies section below */
static void wake_reader(void);
static int g_reader_polling; /* the reader waits for input on the descriptors, without g_io */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sl_fe_rpc_set_limits(const struct sl_fe_rpc_limits *l)
{
    pthread_mutex_lock(&g_io);
    g_lim = *l;
    if (g_sender_started)
        pthread_cond_signal(&g_sender_cv);
    pthread_mutex_unlock(&g_io);
}

unsigned sl_fe_rpc_flush_us_from_env(int sender)
{
    return sl_fe_env_uint("SLUICE_FLUSH_US",
                          sender ? SL_FE_FLUSH_US_SENDER : SL_FE_FLUSH_US_DEFAULT,
                          SL_FE_FLUSH_US_MAX);
}

unsigned sl_fe_rpc_start_us_from_env(int sender)
{
    return sl_fe_env_uint("SLUICE_FLUSH_START_US",
                          sender ? SL_FE_START_US_SENDER : SL_FE_START_US_DEFAULT,
                          SL_FE_FLUSH_US_MAX);
}

int sl_fe_rpc_sender_from_env(int dflt)
{
    return (int)sl_fe_env_uint("SLUICE_SENDER", dflt != 0, 1);
}

/* The window a pending frame waits now, and the next one once it went out by time. */
static uint64_t window_ns(void)
{
    uint64_t flush = (uint64_t)g_lim.flush_us * 1000u;
    return g_lim.start_us && g_win_ns < flush ? g_win_ns : flush;
}

static void window_grow(void)
{
    uint64_t flush = (uint64_t)g_lim.flush_us * 1000u, start = (uint64_t)g_lim.start_us * 1000u;
    g_win_ns = g_win_ns ? 2 * g_win_ns : start;
    if (g_win_ns > flush)
        g_win_ns = flush;
}

void sl_fe_rpc_stats(struct sl_fe_rpc_stats *st)
{
    pthread_mutex_lock(&g_io);
    *st = g_stats;
    pthread_mutex_unlock(&g_io);
}

static size_t top_of(const uint32_t *table, uint32_t *ids, uint64_t *counts, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&g_io);
    for (uint32_t id = 0; id <= SL_CALL_ID_MAX; id++) {
        uint64_t c = table[id];
        if (!c)
            continue;
        size_t at = n < max ? n++ : max; /* insertion into the top max, largest first */
        while (at > 0 && counts[at - 1] < c) {
            if (at < max) {
                ids[at] = ids[at - 1];
                counts[at] = counts[at - 1];
            }
            at--;
        }
        if (at < max) {
            ids[at] = id;
            counts[at] = c;
        }
    }
    pthread_mutex_unlock(&g_io);
    return n;
}

size_t sl_fe_rpc_top_sync(uint32_t *ids, uint64_t *counts, size_t max)
{
    return top_of(g_sync_by_call, ids, counts, max);
}

size_t sl_fe_rpc_top_forget(uint32_t *ids, uint64_t *counts, size_t max)
{
    return top_of(g_forget_by_call, ids, counts, max);
}

size_t sl_fe_rpc_top_unclean(uint32_t *ids, uint64_t *counts, size_t max)
{
    return top_of(sl_fe_idle_unclean_counts(), ids, counts, max);
}

int sl_fe_in_callback(void)
{
    return t_in_callback;
}

/* Drops the frames not sent yet (the session is new or gone); a frame the sender thread is
 * sending stays its own. */
static void pending_clear(void)
{
    g_last_send_ns = 0;
    g_pf_due = 0;
    sl_fe_frame_clear(&g_pf);
    if (g_ob_state == OB_READY) {
        sl_fe_frame_clear(&g_ob);
        g_ob_state = OB_EMPTY;
        atomic_store(&g_ob_ready, 0);
    }
}

/* Waits until the sender thread is not using the transport (g_io held). */
static void outbox_settle(void)
{
    while (g_ob_state == OB_SENDING)
        pthread_cond_wait(&g_sent_cv, &g_io);
}

void sl_fe_rpc_attach(const struct sl_fe_transport *tr)
{
    pthread_mutex_lock(&g_io);
    outbox_settle();
    g_tr = *tr;
    g_attached = 1;
    g_dead = 0;
    g_seq = 0;
    g_inflight_calls = 0;
    g_inflight_bulk = 0;
    g_win_ns = 0;
    sl_fe_idle_forget();
    pending_clear();
    pthread_mutex_unlock(&g_io);
}

void sl_fe_rpc_detach(void)
{
    pthread_mutex_lock(&g_io);
    outbox_settle(); /* the caller closes the transport next */
    g_dead = 1;
    pending_clear();
    waiters_fail();
    while (g_reader_polling) { /* the reader waits on the transport's descriptors */
        wake_reader();
        pthread_cond_wait(&g_sent_cv, &g_io);
    }
    pthread_mutex_unlock(&g_io);
}

void sl_fe_rpc_reset(void)
{
    pthread_mutex_lock(&g_io);
    outbox_settle();
    g_attached = 0;
    g_dead = 0;
    g_seq = 0;
    g_inflight_calls = 0;
    g_inflight_bulk = 0;
    g_win_ns = 0;
    memset(&g_stats, 0, sizeof g_stats);
    memset(g_sync_by_call, 0, sizeof g_sync_by_call);
    memset(g_forget_by_call, 0, sizeof g_forget_by_call);
    g_capture_begun = 0;
    g_forget_seq = 0;
    sl_fe_idle_reset();
    sl_fe_memo_clear();
    pending_clear();
    sl_fe_frame_free(&g_pf);
    sl_fe_frame_free(&g_ob);
    pthread_mutex_unlock(&g_io);
}

/* Appends call (already given seq/context/bulk_length) to the pending frame. */
static CUresult pending_append(const Sluice__Wire__Call *call)
{
    sl_error e;
    if (sl_wire_check_call(call, NULL, &e)) {
        sl_log(SL_LOG_ERR, SL_FE_COMPONENT, "refusing to send call %u: %s", call->call_id, e.msg);
        return CUDA_ERROR_INVALID_VALUE;
    }
    uint64_t t0 = g_pf.calls ? g_pend_t0_ns : now_ns();
    if (sl_fe_frame_append(&g_pf, call))
        return CUDA_ERROR_OUT_OF_MEMORY;
    g_pend_t0_ns = t0;
    const struct sl_call_info *ci = sl_call_lookup(call->call_id);
    sl_fe_idle_note(call, ci);
    return CUDA_SUCCESS;
}

/* Queues slMappedWrite (mapped.c found bytes the program changed) with its bytes copied. */
static CUresult mapped_emit(uint64_t dptr, uint64_t offset, const void *data, size_t len)
{
    Sluice__Cuda__SlMappedWriteRequest req = SLUICE__CUDA__SL_MAPPED_WRITE_REQUEST__INIT;
    req.dptr = dptr;
    req.offset = offset;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(slMappedWrite, &call, &req);
    call.seq = ++g_seq;
    call.context = sl_fe_current_ctx_id();
    call.bulk_length = len;
    if (sl_fe_frame_reserve_bulk(&g_pf, len)) {
        g_seq--;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = pending_append(&call);
    if (rc != CUDA_SUCCESS) {
        g_seq--;
        return rc;
    }
    sl_fe_frame_add_bulk(&g_pf, data, len);
    g_inflight_calls++;
    g_inflight_bulk += len;
    return CUDA_SUCCESS;
}

/* An allocation the backend refused with a reason (the instance's memory quota): said to the
 * tenant, the first time and then every 100th, since the program sees only "out of memory". */
static void refused(uint32_t call_id, const char *detail)
{
    static atomic_ulong count;
    unsigned long n = atomic_fetch_add(&count, 1) + 1;
    if ((n - 1) % 100)
        return;
    const struct sl_call_info *ci = sl_call_lookup(call_id);
    sl_log(SL_LOG_WARNING, SL_FE_COMPONENT, "%s: out of memory: %s%s (%lu so far)",
           ci ? ci->name : "allocation", detail,
           strstr(detail, "quota") ? "; the quota comes with the instance's flavor: free GPU "
                                     "memory first, or use a flavor with a larger quota"
                                   : "",
           n);
}

static CUresult lost(const char *what, const sl_error *e)
{
    if (!g_dead)
        sl_log(SL_LOG_ERR, SL_FE_COMPONENT,
               "connection to the backend lost (%s: %s); CUDA calls now fail with "
               "CUDA_ERROR_DEVICE_UNAVAILABLE; %s",
               what, e ? e->msg : "closed", sl_fe_advice(e ? e->code : SL_ERR_CLOSED));
    g_dead = 1;
    sl_fe_idle_forget();
    pending_clear();
    waiters_fail();
    return CUDA_ERROR_DEVICE_UNAVAILABLE;
}

/* ------------------------------------------------------------------ sending */
/* Sends f with extra segments (g_io held, the transport this thread's). */
static CUresult frame_out(struct sl_fe_frame *f, const struct iovec *extra, size_t n_extra)
{
    size_t calls = f->calls;
    sl_error e;
    sl_code rc = sl_fe_frame_send(f, &g_tr, extra, n_extra, &e);
    g_stats.frames_sent++;
    g_stats.calls_sent += calls;
    g_last_send_ns = now_ns();
    wake_reader();
    return rc ? lost("send", &e) : CUDA_SUCCESS;
}

/* Empties the outbox before a send of this thread, the older frame first: waits while the
 * sender thread sends it, sends it here when the thread has not taken it yet. */
static CUresult outbox_drain(void)
{
    outbox_settle();
    if (g_ob_state == OB_READY) {
        g_ob_state = OB_EMPTY;
        atomic_store(&g_ob_ready, 0);
        return frame_out(&g_ob, NULL, 0);
    }
    return g_dead ? CUDA_ERROR_DEVICE_UNAVAILABLE : CUDA_SUCCESS;
}

/* Sends the outbox, then the pending frame followed by its copied bulk and the extra
 * segments. */
static CUresult pending_send(const struct iovec *extra, size_t n_extra)
{
    CUresult rc = outbox_drain();
    if (rc != CUDA_SUCCESS || g_pf.calls == 0)
        return rc;
    g_pf_due = 0;
    return frame_out(&g_pf, extra, n_extra);
}

/* ------------------------------------------------------------------ the sender thread */
/* One thread, started the first time an async call waits, sends
 * - with limits.sender, each frame of async calls that is due (its window passed or it is
 *   full): the program hands it over as the outbox and goes on while the frame is encrypted
 *   and sent (3 us and more a frame: docs/performance.md). A frame that becomes due while the
 *   outbox is being sent goes when that send ends, with every call that joined it meanwhile;
 * - always, a pending frame whose oldest call has waited flush_us (at least FLUSHER_MIN_US:
 *   while calls keep coming, the calls send the frames and this thread wakes at most that
 *   often) and that no later call sent.
 * Every other send (a synchronous call, a large bulk, a fence) first empties the outbox
 * (outbox_drain): frames leave in seq order, and the transport, whose socket is not
 * thread-safe, is used by one thread at a time, handed over under g_io. After a send the
 * thread polls sender_spin_us for the next frame before it sleeps: a hand-over then costs the
 * program no system call. */
#define FLUSHER_MIN_US 250u

static void sender_cv_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&g_sender_cv, &a);
    pthread_condattr_destroy(&a);
}

static void sender_forked(void)
{
    g_sender_started = 0; /* the child has no sender thread */
    g_sender_ok = 0;
    g_sender_idle = 0;
    if (g_ob_state == OB_SENDING) { /* it was the parent's thread's, half sent */
        sl_fe_frame_clear(&g_ob);
        g_ob_state = OB_EMPTY;
    }
}

/* Moves the pending frame into the empty outbox, for the sender thread. */
static void outbox_fill(void)
{
    struct sl_fe_frame empty = g_ob;
    g_ob = g_pf;
    g_pf = empty;
    g_ob_state = OB_READY;
    g_pf_due = 0;
    g_last_send_ns = now_ns();
    atomic_store_explicit(&g_ob_ready, 1, memory_order_release);
    if (g_sender_idle)
        pthread_cond_signal(&g_sender_cv);
}

/* The sender thread sends the outbox, without g_io while it encrypts. */
static void outbox_send(void)
{
    struct sl_fe_transport tr = g_tr;
    size_t calls = g_ob.calls;
    g_ob_state = OB_SENDING;
    atomic_store(&g_ob_ready, 0);
    pthread_mutex_unlock(&g_io);
    sl_error e;
    sl_code rc = sl_fe_frame_send(&g_ob, &tr, NULL, 0, &e);
    pthread_mutex_lock(&g_io);
    g_ob_state = OB_EMPTY;
    g_stats.frames_sent++;
    g_stats.frames_handed++;
    g_stats.calls_sent += calls;
    if (rc)
        lost("send", &e); /* the next call reports it */
    wake_reader();
    pthread_cond_broadcast(&g_sent_cv);
}

/* When the sender thread sends a pending frame that no later call sent (0: never). */
static uint64_t flush_due_ns(void)
{
    if (!g_pf.calls || !g_lim.flush_us)
        return 0;
    unsigned us = g_lim.flush_us > FLUSHER_MIN_US ? g_lim.flush_us : FLUSHER_MIN_US;
    return g_pend_t0_ns + (uint64_t)us * 1000u;
}

static void *sender_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "sluice-send");
    uint64_t last = 0; /* when this thread's last send ended */
    pthread_mutex_lock(&g_io);
    for (;;) {
        int live = g_attached && !g_dead;
        uint64_t due = live ? flush_due_ns() : 0;
        if (live && g_ob_state == OB_EMPTY && g_pf.calls && (g_pf_due || (due && now_ns() >= due)))
            outbox_fill();
        if (live && g_ob_state == OB_READY) {
            outbox_send();
            last = now_ns();
            continue;
        }
        uint64_t spin = live && g_lim.sender ? (uint64_t)g_lim.sender_spin_us * 1000u : 0;
        uint64_t until = last + spin;
        if (due && due < until)
            until = due;
        if (spin && now_ns() < until) {
            pthread_mutex_unlock(&g_io);
            while (!atomic_load_explicit(&g_ob_ready, memory_order_acquire) && now_ns() < until)
                sl_cpu_relax();
            pthread_mutex_lock(&g_io);
            if (now_ns() >= last + spin)
                last = 0; /* polled long enough: sleep next */
            continue;
        }
        g_sender_idle = 1;
        if (due) {
            struct timespec ts = {(time_t)(due / 1000000000u), (long)(due % 1000000000u)};
            pthread_cond_timedwait(&g_sender_cv, &g_io, &ts);
        } else {
            pthread_cond_wait(&g_sender_cv, &g_io);
        }
        g_sender_idle = 0;
    }
    return NULL;
}

/* Starts the sender thread (g_io held) the first time an async call waits; without it (no
 * thread could be made) frames still go out from the program's threads, when full and at
 * synchronizing calls. */
static void sender_start(void)
{
    pthread_once(&g_sender_once, sender_cv_init);
    static int atfork_done;
    if (!atfork_done && pthread_atfork(NULL, NULL, sender_forked) == 0)
        atfork_done = 1;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the program's signals are not for this thread */
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int err = pthread_create(&t, &at, sender_main, NULL);
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    g_sender_started = 1; /* also after a failure: tried once */
    g_sender_ok = err == 0;
    if (err)
        sl_log(SL_LOG_WARNING, SL_FE_COMPONENT,
               "no sender thread (%s): async calls wait for the next synchronizing call",
               strerror(err));
}

/* The pending frame is due (its window passed, or it is full): handed to the sender thread,
 * or sent here without one. */
static CUresult frame_due(int full)
{
    if (!g_lim.sender)
        return pending_send(NULL, 0);
    if (!g_sender_started)
        sender_start();
    if (!g_sender_ok)
        return pending_send(NULL, 0);
    if (g_ob_state == OB_EMPTY) {
        outbox_fill();
        return CUDA_SUCCESS;
    }
    if (full)
        return pending_send(NULL, 0); /* waits for the outbox */
    g_pf_due = 1;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ receiving */
static void write_stdout(const ProtobufCBinaryData *d)
{
    if (!d->len)
        return;
    fflush(stdout);
    size_t off = 0;
    while (off < d->len) {
        ssize_t w = write(1, d->data + off, d->len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}

static CUresult send_callback_done(uint64_t id)
{
    Sluice__Wire__CallbackDone done = SLUICE__WIRE__CALLBACK_DONE__INIT;
    Sluice__Wire__ClientMessage m = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    done.id = id;
    m.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLBACK_DONE;
    m.callback_done = &done;
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_error e;
    if (sl_wire_encode_client(&m, NULL, &buf, &len, &e))
        return lost("encode callback_done", &e);
    sl_code rc = g_tr.send(g_tr.t, buf, len, NULL, 0, &e);
    free(buf);
    wake_reader();
    return rc ? lost("send", &e) : CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ replies
 * Replies come back in any order across threads: the backend completes a blocking wait off its
 * call path (docs/remoting.md "Threads"), so a thread waiting in cuStreamSynchronize never holds
 * up another thread's calls. A thread that waits registers its waiters (one per call it made);
 * one waiting thread at a time reads the channel for every thread (the reader) and hands each
 * reply to its waiter; the others poll their waiters' flags for spin_us, then sleep. When the
 * reader's own replies are in, it passes the role on. g_io is held except while the reader waits
 * for input on the transport's descriptors, while a waiter polls or sleeps, and while a host
 * callback runs. */
struct waiter {
    struct waiter *next;
    uint64_t seq;
    void *out;
    size_t out_cap;
    size_t out_len;
    int out_overflow;
    Sluice__Wire__Reply *reply;
    atomic_int done;
    pthread_cond_t *cv; /* its thread sleeps on it */
};

static struct waiter *g_waiters; /* every waiter not answered yet */
static int g_reading;            /* a thread is the reader */
static int g_wake_fd = -1;       /* an eventfd that wakes the reader from that wait */
static pthread_once_t g_wake_once = PTHREAD_ONCE_INIT;

static void wake_init(void)
{
    g_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

/* After this thread used the transport (g_io held): a send may have taken the descriptors'
 * edge, so a reader waiting on them looks again. */
static void wake_reader(void)
{
    if (g_reader_polling && g_wake_fd >= 0) {
        uint64_t one = 1;
        if (write(g_wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
            sl_log(SL_LOG_DEBUG, SL_FE_COMPONENT, "waking the reader: %s", strerror(errno));
    }
}

static void waiters_add(struct waiter *w, size_t n, pthread_cond_t *cv)
{
    for (size_t i = 0; i < n; i++) {
        w[i].cv = cv;
        atomic_init(&w[i].done, 0);
        w[i].next = g_waiters;
        g_waiters = &w[i];
    }
}

static void waiters_remove(struct waiter *w, size_t n)
{
    for (struct waiter **pp = &g_waiters; *pp;) {
        int mine = *pp >= w && *pp < w + n;
        if (mine)
            *pp = (*pp)->next;
        else
            pp = &(*pp)->next;
    }
}

static struct waiter *waiter_of(uint64_t seq)
{
    for (struct waiter *w = g_waiters; w; w = w->next)
        if (w->seq == seq && !atomic_load(&w->done))
            return w;
    return NULL;
}

static int all_done(struct waiter *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!atomic_load_explicit(&w[i].done, memory_order_acquire))
            return 0;
    return 1;
}

/* The transport failed: every waiter wakes and finds g_dead. */
static void waiters_fail(void)
{
    for (struct waiter *w = g_waiters; w; w = w->next)
        pthread_cond_signal(w->cv);
}

/* A ReplyFrame's replies go to their waiters; their bulk into the waiters' buffers. */
static CUresult take_replies(Sluice__Wire__ReplyFrame *f, uint64_t owed)
{
    sl_error e;
    for (size_t i = 0; i < f->n_replies; i++) {
        Sluice__Wire__Reply *r = f->replies[i];
        write_stdout(&r->stdout_data);
        for (size_t k = 0; k < r->n_mapped; k++)
            sl_fe_mapped_apply(r->mapped[k]->dptr, r->mapped[k]->offset, r->mapped[k]->data.data,
                               r->mapped[k]->data.len);
        if (r->failed_seq) {
            g_stats.deferred_errors++;
            sl_log(SL_LOG_DEBUG, SL_FE_COMPONENT,
                   "deferred error %d of call seq %llu reported at seq %llu", r->result,
                   (unsigned long long)r->failed_seq, (unsigned long long)r->seq);
        }
        if (r->bulk_length > owed) {
            sl_fail(&e, SL_ERR_PROTOCOL, "reply bulk over the announced bulk");
            return lost("protocol", &e);
        }
        struct waiter *w = waiter_of(r->seq);
        if (r->bulk_length) {
            size_t take = 0;
            if (w && w->out) {
                take = r->bulk_length <= w->out_cap ? (size_t)r->bulk_length : w->out_cap;
                if (r->bulk_length > w->out_cap)
                    w->out_overflow = 1;
            }
            if (take && g_tr.recv_bulk(g_tr.t, w->out, take, &e))
                return lost("receive bulk", &e);
            if (r->bulk_length > take &&
                g_tr.recv_bulk(g_tr.t, NULL, (size_t)(r->bulk_length - take), &e))
                return lost("receive bulk", &e);
            owed -= r->bulk_length;
            if (w)
                w->out_len = take;
        }
        if (w) {
            w->reply = r;
            f->replies[i] = NULL; /* detached: freed by sl_fe_reply_free */
            atomic_store_explicit(&w->done, 1, memory_order_release);
            pthread_cond_signal(w->cv);
        }
        /* every call up to this reply has been run by the backend */
        g_inflight_calls = 0;
        g_inflight_bulk = 0;
        g_win_ns = 0;
    }
    if (owed && g_tr.recv_bulk(g_tr.t, NULL, (size_t)owed, &e))
        return lost("receive bulk", &e);
    return CUDA_SUCCESS;
}

/* Reads and handles the messages the transport has (g_io held, this thread the reader);
 * timeout_ms 0: only what is there now. */
static CUresult read_messages(int timeout_ms)
{
    for (;;) {
        outbox_settle(); /* the sender thread's send in flight ends first: one user at a time */
        if (g_dead)
            return CUDA_ERROR_DEVICE_UNAVAILABLE;
        const void *msg;
        size_t len;
        uint64_t blen = 0;
        sl_error e;
        sl_code rc = g_tr.recv(g_tr.t, &msg, &len, &blen, timeout_ms, &e);
        if (rc == SL_ERR_TIMEOUT)
            return CUDA_SUCCESS;
        if (rc)
            return lost("receive", &e);
        Sluice__Wire__ServerMessage *m = NULL;
        if (sl_wire_decode_server(msg, len, NULL, &m, &e))
            return lost("decode", &e);
        CUresult res = CUDA_SUCCESS;
        switch (m->kind_case) {
        case SLUICE__WIRE__SERVER_MESSAGE__KIND_CALLBACK: {
            uint64_t id = m->callback->id, fnid = m->callback->fn;
            t_in_callback = 1; /* no CUDA call from a host function (CUDA's rule too) */
            pthread_mutex_unlock(&g_io);
            int ran = sl_fe_callback_run(fnid);
            pthread_mutex_lock(&g_io);
            t_in_callback = 0;
            if (ran)
                g_stats.callbacks_run++;
            else
                sl_log(SL_LOG_WARNING, SL_FE_COMPONENT, "host callback %llu unknown; answered",
                       (unsigned long long)fnid);
            outbox_settle();
            res = g_dead ? CUDA_ERROR_DEVICE_UNAVAILABLE : send_callback_done(id);
            if (blen && res == CUDA_SUCCESS && g_tr.recv_bulk(g_tr.t, NULL, (size_t)blen, &e))
                res = lost("receive bulk", &e);
            break;
        }
        case SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES:
            res = take_replies(m->replies, blen);
            break;
        case SLUICE__WIRE__SERVER_MESSAGE__KIND_CLOSE: {
            sl_error ce;
            sl_fail(&ce, SL_ERR_CLOSED, "backend closed the session: %s",
                    m->close->detail ? m->close->detail : "");
            res = lost("session", &ce);
            break;
        }
        default: {
            sl_error pe;
            sl_fail(&pe, SL_ERR_PROTOCOL, "unexpected server message %d", (int)m->kind_case);
            res = lost("protocol", &pe);
            break;
        }
        }
        sl_wire_free_server(m);
        if (res != CUDA_SUCCESS)
            return res;
        if (timeout_ms)
            return CUDA_SUCCESS; /* one blocking read at a time: the caller looks at its waiters */
    }
}

/* Waits on the transport's descriptors without g_io, polling for spin_ns first. Returns with
 * g_io held. */
static void await_input(int *fds, int nfds, uint64_t spin_until)
{
    struct pollfd p[4];
    for (int i = 0; i < nfds; i++)
        p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    g_reader_polling = 1;
    pthread_mutex_unlock(&g_io);
    for (;;) {
        int spin = now_ns() < spin_until;
        int n = poll(p, (nfds_t)nfds, spin ? 0 : 10);
        if (n != 0 || !spin)
            break;
        sl_cpu_relax();
    }
    if (g_wake_fd >= 0) {
        uint64_t v;
        while (read(g_wake_fd, &v, sizeof v) > 0)
            ;
    }
    pthread_mutex_lock(&g_io);
    g_reader_polling = 0;
    pthread_cond_broadcast(&g_sent_cv); /* detach waits for the reader to leave the descriptors */
}

/* This thread reads for everyone until its n waiters are answered (g_io held). */
static CUresult reader_turn(struct waiter *w, size_t n)
{
    uint64_t spin_until = now_ns() + (uint64_t)g_lim.sender_spin_us * 1000u;
    for (;;) {
        int fds[4], nfds = 0;
        if (g_tr.fds && g_tr.has_input) {
            nfds = g_tr.fds(g_tr.t, fds, 3);
            pthread_once(&g_wake_once, wake_init);
            if (g_wake_fd >= 0)
                fds[nfds++] = g_wake_fd;
        }
        CUresult rc = read_messages(nfds ? 0 : 10); /* no descriptors: a short blocking read */
        if (rc != CUDA_SUCCESS || all_done(w, n))
            return rc;
        if (!nfds || !g_tr.has_input(g_tr.t))
            await_input(fds, nfds, spin_until); /* no descriptors: lets the others in for 10 ms */
    }
}

/* Until the replies to the n waiters (registered, their calls sent) are in (g_io held). */
static CUresult wait_replies(struct waiter *w, size_t n, pthread_cond_t *cv)
{
    CUresult rc = CUDA_SUCCESS;
    while (!all_done(w, n)) {
        if (g_dead) {
            rc = CUDA_ERROR_DEVICE_UNAVAILABLE;
            break;
        }
        if (!g_reading) {
            g_reading = 1;
            rc = reader_turn(w, n);
            g_reading = 0;
            for (struct waiter *o = g_waiters; o; o = o->next) /* the next reader */
                if (!atomic_load(&o->done) && (o < w || o >= w + n)) {
                    pthread_cond_signal(o->cv);
                    break;
                }
            if (rc != CUDA_SUCCESS)
                break;
            continue;
        }
        uint64_t until = now_ns() + (uint64_t)g_lim.sender_spin_us * 1000u;
        pthread_mutex_unlock(&g_io);
        while (!all_done(w, n) && now_ns() < until)
            sl_cpu_relax();
        pthread_mutex_lock(&g_io);
        if (!all_done(w, n) && g_reading && !g_dead)
            pthread_cond_wait(cv, &g_io);
    }
    waiters_remove(w, n);
    if (rc != CUDA_SUCCESS) {
        waiters_fail();
        for (size_t i = 0; i < n; i++) {
            if (w[i].reply)
                sl_wire_reply_free(w[i].reply);
            w[i].reply = NULL;
        }
    }
    return rc;
}

/* A call's encoded arguments in hex, up to 24 bytes ("-" when they are longer than 64 or
 * absent): debug logs, to tell which question a call asked. */
static void args_hex(const Sluice__Wire__Call *call, char *out, size_t cap)
{
    uint8_t buf[64];
    size_t n = 0;
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&sluice__wire__call__descriptor, call->args_case);
    const ProtobufCMessage *rq = f && f->type == PROTOBUF_C_TYPE_MESSAGE
                                     ? *(ProtobufCMessage *const *)((const char *)call + f->offset)
                                     : NULL;
    if (rq && protobuf_c_message_get_packed_size(rq) <= sizeof buf)
        n = protobuf_c_message_pack(rq, buf);
    size_t k = 0;
    for (size_t i = 0; i < n && k + 3 <= cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%02x", buf[i]);
    out[k] = 0;
    if (!k && cap > 1)
        snprintf(out, cap, "-");
}

/* ------------------------------------------------------------------ what the memo forgets */
static void forget_counted(uint32_t call_id)
{
    sl_fe_memo_clear();
    g_forget_seq = g_seq; /* an answer to a call up to here may be stale now */
    if (call_id <= SL_CALL_ID_MAX)
        g_forget_by_call[call_id]++;
}

/* Before call goes out: an `unmemo` call empties the memo; an `uncapture` one forgets the
 * capture answers, unless no capture was ever begun in this process (a stream can join a
 * capture by waiting on an event only when some stream captures: cuDNN waits on events every
 * step, and each wait used to cost a cuStreamIsCapturing round trip). */
static void forget_before(const Sluice__Wire__Call *call, uint32_t flags)
{
    if (flags & SL_CALL_UNMEMO)
        forget_counted(call->call_id);
    if (!(flags & SL_CALL_UNCAPTURE))
        return;
    if (flags & SL_CALL_CAPTURE_BEGIN)
        g_capture_begun = 1;
    if (g_capture_begun)
        sl_fe_memo_uncapture();
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

/* After an answer with an error (it may have changed state: an invalidated capture...). */
static void forget_after_error(uint32_t call_id)
{
    forget_counted(call_id);
    sl_fe_idle_after_error(call_id);
}

/* ------------------------------------------------------------------ entry points */
static CUresult begin(void)
{
    if (t_in_callback)
        return CUDA_ERROR_NOT_PERMITTED;
    for (;;) {
        pthread_mutex_lock(&g_io);
        if (g_attached)
            break;
        pthread_mutex_unlock(&g_io);
        CUresult rc = sl_fe_ensure_session();
        if (rc != CUDA_SUCCESS)
            return rc;
        pthread_mutex_lock(&g_io);
        if (!g_attached) {
            pthread_mutex_unlock(&g_io);
            return CUDA_ERROR_DEVICE_UNAVAILABLE;
        }
        break;
    }
    if (g_dead) {
        pthread_mutex_unlock(&g_io);
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    }
    return CUDA_SUCCESS; /* g_io held */
}

static uint64_t bulk_total(const struct iovec *in, size_t n)
{
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++)
        t += in[i].iov_len;
    return t;
}

static CUresult call_locked(Sluice__Wire__Call *call, const struct iovec *in, size_t n, void *out,
                            size_t out_cap, size_t *out_len, Sluice__Wire__Reply **reply)
{
    const struct sl_call_info *ci = sl_call_lookup(call->call_id);
    uint32_t flags = ci ? ci->flags : 0;
    int memo = (flags & SL_CALL_MEMO) && !n && !out;
    if (!call->context)
        call->context = sl_fe_current_ctx_id();
    /* memo + unmemo: an idempotent setter (cuFuncSetAttribute...): the same call again after
     * nothing else changed is a no-op, answered here; any other call of it forgets first. */
    if (memo && sl_fe_memo_get(call, reply)) {
        g_stats.memo_hits++;
        return CUDA_SUCCESS;
    }
    if (sl_fe_idle_can_answer(call)) {
        Sluice__Wire__Reply *r = malloc(sizeof *r);
        if (r) {
            sluice__wire__reply__init(r);
            r->call_id = call->call_id;
            g_stats.memo_hits++;
            *reply = r;
            uint64_t unsent = call->seq;
            call->seq = g_seq; /* as a synchronization that travelled now */
            sl_fe_idle_answered(call);
            call->seq = unsent;
            return CUDA_SUCCESS;
        }
    }
    /* the frame in flight first: waiting for it lets other threads append to the pending frame,
     * which must not then hold a call whose bulk follows the frame (pending_send) */
    CUresult rc = outbox_drain();
    if (rc != CUDA_SUCCESS)
        return rc;
    forget_before(call, flags);
    if ((rc = sl_fe_mapped_sync_out(mapped_emit)) != CUDA_SUCCESS)
        return rc;
    call->seq = ++g_seq;
    call->bulk_length = bulk_total(in, n);
    rc = pending_append(call);
    if (rc != CUDA_SUCCESS) {
        g_seq--;
        return rc;
    }
    rc = pending_send(in, n);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct waiter w = {.seq = call->seq, .out = out, .out_cap = out_cap};
    pthread_cond_t cv;
    pthread_cond_init(&cv, NULL);
    waiters_add(&w, 1, &cv);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = wait_replies(&w, 1, &cv); /* g_io released while waiting */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_cond_destroy(&cv);
    g_stats.sync_calls++;
    if (call->call_id <= SL_CALL_ID_MAX)
        g_sync_by_call[call->call_id]++;
    g_stats.wait_ns +=
        (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
    if (rc != CUDA_SUCCESS)
        return rc;
    if (out_len)
        *out_len = w.out_len;
    *reply = w.reply;
    if (sl_log_enabled(SL_LOG_DEBUG)) {
        const struct sl_call_info *ci = sl_call_lookup(call->call_id);
        char args[2 * 24 + 1];
        args_hex(call, args, sizeof args);
        sl_log(SL_LOG_DEBUG, SL_FE_COMPONENT, "%s seq %llu ctx %llx args %s -> %d%s%s",
               ci ? ci->name : "?", (unsigned long long)call->seq,
               (unsigned long long)call->context, args, w.reply->result,
               w.reply->detail && *w.reply->detail ? ": " : "",
               w.reply->detail ? w.reply->detail : "");
    }
    if (w.reply->result == CUDA_ERROR_OUT_OF_MEMORY && w.reply->detail && *w.reply->detail)
        refused(call->call_id, w.reply->detail);
    if (w.out_overflow && w.reply->result == CUDA_SUCCESS)
        w.reply->result = CUDA_ERROR_INVALID_VALUE;
    if (changes_state(call, w.reply)) {
        forget_after_error(call->call_id);
    } else {
        /* other threads' calls may have gone out while this one waited: an answer is kept
         * only if nothing sent after it made it stale (docs/frontend-internals.md) */
        if (memo && g_forget_seq < call->seq)
            sl_fe_memo_put(call, w.reply);
        sl_fe_idle_answered(call);
    }
    return CUDA_SUCCESS;
}

CUresult sl_fe_call_bulk(Sluice__Wire__Call *call, const struct iovec *in, size_t n, void *out,
                         size_t out_cap, size_t *out_len, Sluice__Wire__Reply **reply)
{
    *reply = NULL;
    if (n > 7)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = begin();
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = call_locked(call, in, n, out, out_cap, out_len, reply);
    pthread_mutex_unlock(&g_io);
    return rc;
}

CUresult sl_fe_call_batch(Sluice__Wire__Call *const *calls, size_t n, void *const *out,
                          const size_t *out_cap, size_t *out_len, Sluice__Wire__Reply **replies)
{
    for (size_t i = 0; i < n && i < SL_FE_BATCH_MAX; i++)
        replies[i] = NULL;
    if (n == 0 || n > SL_FE_BATCH_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = begin();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct waiter ws[SL_FE_BATCH_MAX];
    size_t k = 0;
    if ((rc = outbox_drain()) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&g_io);
        return rc;
    }
    if ((rc = sl_fe_mapped_sync_out(mapped_emit)) == CUDA_SUCCESS) {
        for (; k < n; k++) {
            const struct sl_call_info *ci = sl_call_lookup(calls[k]->call_id);
            forget_before(calls[k], ci ? ci->flags : 0);
            if (!calls[k]->context)
                calls[k]->context = sl_fe_current_ctx_id();
            calls[k]->seq = ++g_seq;
            calls[k]->bulk_length = 0;
            if ((rc = pending_append(calls[k])) != CUDA_SUCCESS) {
                g_seq--;
                break;
            }
            ws[k] = (struct waiter){.seq = calls[k]->seq, .out = out[k], .out_cap = out_cap[k]};
        }
    }
    /* what was appended is sent and answered, also when a later call could not be */
    CUresult io = pending_send(NULL, 0);
    pthread_cond_t cv;
    pthread_cond_init(&cv, NULL);
    if (io == CUDA_SUCCESS && k) {
        waiters_add(ws, k, &cv);
        io = wait_replies(ws, k, &cv);
    }
    pthread_cond_destroy(&cv);
    g_stats.sync_calls += k;
    for (size_t i = 0; i < k; i++)
        if (calls[i]->call_id <= SL_CALL_ID_MAX)
            g_sync_by_call[calls[i]->call_id]++;
    if (io != CUDA_SUCCESS) {
        pthread_mutex_unlock(&g_io);
        return io;
    }
    for (size_t i = 0; i < k; i++) {
        if (ws[i].out_overflow && ws[i].reply->result == CUDA_SUCCESS)
            ws[i].reply->result = CUDA_ERROR_INVALID_VALUE;
        if (changes_state(calls[i], ws[i].reply))
            forget_after_error(calls[i]->call_id);
        out_len[i] = ws[i].out_len;
        replies[i] = ws[i].reply;
    }
    pthread_mutex_unlock(&g_io);
    return rc;
}

CUresult sl_fe_call(Sluice__Wire__Call *call, Sluice__Wire__Reply **reply)
{
    return sl_fe_call_bulk(call, NULL, 0, NULL, 0, NULL, reply);
}

CUresult sl_fe_pod_out(CUresult rc, const ProtobufCBinaryData *pod, void *dst, size_t size)
{
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pod || pod->len != size)
        return CUDA_ERROR_UNKNOWN; /* not the answer this call has */
    memcpy(dst, pod->data, size);
    return CUDA_SUCCESS;
}

void sl_fe_reply_free(Sluice__Wire__Reply *reply)
{
    if (reply)
        sl_wire_reply_free(reply);
}

/* slFence with g_io held. */
static CUresult fence_locked(void)
{
    Sluice__Cuda__SlFenceRequest req = SLUICE__CUDA__SL_FENCE_REQUEST__INIT;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(slFence, &call, &req);
    Sluice__Wire__Reply *rep = NULL;
    g_stats.fences++;
    CUresult rc = call_locked(&call, NULL, 0, NULL, 0, NULL, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult sl_fe_fence(void)
{
    CUresult rc = begin();
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = fence_locked();
    pthread_mutex_unlock(&g_io);
    return rc;
}

CUresult sl_fe_enqueue_async_bulk(Sluice__Wire__Call *call, const struct iovec *in, size_t n)
{
    if (n > 7)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = begin();
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t blen = bulk_total(in, n);
    int direct = blen > SMALL_BULK; /* its bulk follows the frame: the frame in flight first */
    if (direct && (rc = outbox_drain()) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&g_io);
        return rc;
    }
    const struct sl_call_info *info = sl_call_lookup(call->call_id);
    forget_before(call, info ? info->flags : 0);
    if ((rc = sl_fe_mapped_sync_out(mapped_emit)) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&g_io);
        return rc;
    }
    call->seq = ++g_seq;
    if (!call->context)
        call->context = sl_fe_current_ctx_id();
    call->bulk_length = blen;
    if (!direct && blen) {
        if (sl_fe_frame_reserve_bulk(&g_pf, blen)) {
            g_seq--;
            pthread_mutex_unlock(&g_io);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    rc = pending_append(call);
    if (rc != CUDA_SUCCESS) {
        g_seq--;
        pthread_mutex_unlock(&g_io);
        return rc;
    }
    if (!direct) {
        for (size_t i = 0; i < n; i++)
            sl_fe_frame_add_bulk(&g_pf, in[i].iov_base, in[i].iov_len);
    }
    g_inflight_calls++;
    g_inflight_bulk += blen;
    g_stats.async_calls++;
    if (sl_log_enabled(SL_LOG_DEBUG)) {
        const struct sl_call_info *ci = sl_call_lookup(call->call_id);
        char args[2 * 24 + 1];
        args_hex(call, args, sizeof args);
        sl_log(SL_LOG_DEBUG, SL_FE_COMPONENT, "%s seq %llu args %s%s queued (async)",
               ci ? ci->name : "?", (unsigned long long)call->seq, args,
               call->per_thread_stream ? " ptsz" : "");
    }
    uint64_t wait_ns = (uint64_t)g_lim.flush_us * 1000u, now = wait_ns ? now_ns() : 0;
    if (direct)
        rc = pending_send(in, n); /* the guest's buffer is encrypted before send returns */
    else if (g_pf.calls >= g_lim.frame_calls || g_pf.bulk_len >= g_lim.frame_bulk)
        rc = frame_due(1);
    else if (wait_ns && !g_pf_due && /* else it goes when the sender thread's send ends */
             (now - g_last_send_ns >= wait_ns || now - g_pend_t0_ns >= window_ns())) {
        rc = frame_due(0);
        window_grow();
    } else if (wait_ns && !g_sender_started)
        sender_start();
    else if (wait_ns && g_pf.calls == 1 && g_sender_idle)
        pthread_cond_signal(&g_sender_cv);
    if (rc == CUDA_SUCCESS &&
        (g_inflight_calls >= g_lim.inflight_calls || g_inflight_bulk >= g_lim.inflight_bulk))
        rc = fence_locked();
    pthread_mutex_unlock(&g_io);
    return rc;
}

CUresult sl_fe_enqueue_async(Sluice__Wire__Call *call)
{
    return sl_fe_enqueue_async_bulk(call, NULL, 0);
}

/* ------------------------------------------------------------------ unsupported */
struct seen {
    struct seen *next;
    const char *name;
};
static struct seen *g_seen;
static pthread_mutex_t g_seen_lock = PTHREAD_MUTEX_INITIALIZER;

/* Logs once per name; reason NULL: "not supported by Sluice". */
static CUresult refuse_once(const char *name, const char *reason)
{
    pthread_mutex_lock(&g_seen_lock);
    struct seen *s = g_seen;
    while (s && strcmp(s->name, name) != 0)
        s = s->next;
    if (!s) {
        s = malloc(sizeof *s);
        if (s) {
            s->name = name;
            s->next = g_seen;
            g_seen = s;
        }
        if (reason)
            sl_log(SL_LOG_WARNING, SL_FE_COMPONENT,
                   "%s is not offered by Sluice (%s): returning CUDA_ERROR_NOT_SUPPORTED", name,
                   reason);
        else
            sl_log(SL_LOG_WARNING, SL_FE_COMPONENT,
                   "%s is not supported by Sluice: returning CUDA_ERROR_NOT_SUPPORTED", name);
    }
    pthread_mutex_unlock(&g_seen_lock);
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult sl_fe_unsupported(const char *name)
{
    return refuse_once(name, NULL);
}

CUresult sl_fe_refused(const char *name, const char *reason)
{
    return refuse_once(name, reason);
}
