/* The send window and the sender thread (docs/remoting.md "Synchronous and asynchronous
 * calls"): when a frame of calls leaves, and from which thread.
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
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "call/frame.h"
#include "call/rpc_replies.h"
#include "call/rpc_sender.h"
#include "call/rpc_session.h"
#include "call/rpc_state.h"
#include "component.h"
#include "sluice/log.h"
#include "sluice/relax.h"

static pthread_once_t g_sender_once = PTHREAD_ONCE_INIT;
static int g_sender_ok; /* the sender thread runs */

/* The window a pending frame waits now, and the next one once it went out by time. */
static uint64_t window_ns(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    uint64_t flush = (uint64_t)rs->lim.flush_us * 1000u;
    return rs->lim.start_us && rs->win_ns < flush ? rs->win_ns : flush;
}

static void window_grow(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    uint64_t flush = (uint64_t)rs->lim.flush_us * 1000u, start = (uint64_t)rs->lim.start_us * 1000u;
    rs->win_ns = rs->win_ns ? 2 * rs->win_ns : start;
    if (rs->win_ns > flush)
        rs->win_ns = flush;
}

/* ------------------------------------------------------------------ the frames not sent */
/* Drops the frames not sent yet (the session is new or gone); a frame the sender thread is
 * sending stays its own. */
void sl_fe_pending_clear(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    rs->last_send_ns = 0;
    rs->pf_due = 0;
    sl_fe_frame_clear(&rs->pf);
    if (rs->ob_state == OB_READY) {
        sl_fe_frame_clear(&rs->ob);
        rs->ob_state = OB_EMPTY;
        atomic_store(&rs->ob_ready, 0);
    }
}

/* Waits until the sender thread is not using the transport (the lock held). */
void sl_fe_outbox_settle(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    while (rs->ob_state == OB_SENDING)
        pthread_cond_wait(&rs->sent_cv, &rs->io);
}

/* ------------------------------------------------------------------ sending */
/* Sends f with extra segments (the lock held, the transport this thread's). */
static CUresult frame_out(struct sl_fe_frame *f, const struct iovec *extra, size_t n_extra)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    size_t calls = f->calls;
    sl_error e;
    sl_code rc = sl_fe_frame_send(f, &rs->tr, extra, n_extra, &e);
    rs->stats.frames_sent++;
    rs->stats.calls_sent += calls;
    rs->last_send_ns = sl_fe_now_ns();
    sl_fe_wake_reader();
    return rc ? sl_fe_rpc_lost("send", &e) : CUDA_SUCCESS;
}

/* Empties the outbox before a send of this thread, the older frame first: waits while the
 * sender thread sends it, sends it here when the thread has not taken it yet. */
CUresult sl_fe_outbox_drain(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    sl_fe_outbox_settle();
    if (rs->ob_state == OB_READY) {
        rs->ob_state = OB_EMPTY;
        atomic_store(&rs->ob_ready, 0);
        return frame_out(&rs->ob, NULL, 0);
    }
    return rs->dead ? CUDA_ERROR_DEVICE_UNAVAILABLE : CUDA_SUCCESS;
}

/* Before a synchronous call joins the pending frame: the outbox not taken by the sender thread
 * yet (a lone async call held for hold_us) goes in front of the pending frame, in the frame of
 * that call, instead of in a frame of its own before it; else as sl_fe_outbox_drain. The caller
 * sends the pending frame next. */
CUresult sl_fe_outbox_join(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    sl_fe_outbox_settle();
    if (rs->ob_state == OB_READY && rs->ob.calls + rs->pf.calls < rs->lim.frame_calls &&
        rs->ob.bulk_len + rs->pf.bulk_len <= rs->lim.frame_bulk &&
        sl_fe_frame_join(&rs->ob, &rs->pf) == 0) {
        struct sl_fe_frame joined = rs->ob;
        rs->ob = rs->pf; /* the emptied one */
        rs->pf = joined;
        rs->ob_state = OB_EMPTY;
        atomic_store(&rs->ob_ready, 0);
        rs->stats.frames_joined++;
        return rs->dead ? CUDA_ERROR_DEVICE_UNAVAILABLE : CUDA_SUCCESS;
    }
    return sl_fe_outbox_drain();
}

/* Sends the outbox, then the pending frame followed by its copied bulk and the extra
 * segments. */
CUresult sl_fe_pending_send(const struct iovec *extra, size_t n_extra)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    CUresult rc = sl_fe_outbox_drain();
    if (rc != CUDA_SUCCESS || rs->pf.calls == 0)
        return rc;
    rs->pf_due = 0;
    return frame_out(&rs->pf, extra, n_extra);
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
 * (sl_fe_outbox_drain): frames leave in seq order, and the transport, whose socket is not
 * thread-safe, is used by one thread at a time, handed over under the lock. After a send the
 * thread polls sender_spin_us for the next frame before it sleeps: a hand-over then costs the
 * program no system call. A frame of one call that went due by time (a launch after a
 * synchronization, the link quiet) is held hold_us before the thread takes it: a synchronous
 * call right behind it then takes it along (sl_fe_outbox_join), one frame instead of two. */
#define FLUSHER_MIN_US 250u

static void sender_cv_init(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&rs->sender_cv, &a);
    pthread_condattr_destroy(&a);
}

static void sender_forked(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    rs->sender_started = 0; /* the child has no sender thread */
    g_sender_ok = 0;
    rs->sender_idle = 0;
    if (rs->ob_state == OB_SENDING) { /* it was the parent's thread's, half sent */
        sl_fe_frame_clear(&rs->ob);
        rs->ob_state = OB_EMPTY;
    }
}

/* Moves the pending frame into the empty outbox, for the sender thread (from hold_ns on). */
static void outbox_fill(uint64_t hold_ns)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    struct sl_fe_frame empty = rs->ob;
    rs->ob = rs->pf;
    rs->pf = empty;
    rs->ob_state = OB_READY;
    rs->pf_due = 0;
    rs->last_send_ns = sl_fe_now_ns();
    rs->ob_hold_ns = hold_ns ? rs->last_send_ns + hold_ns : 0;
    atomic_store_explicit(&rs->ob_ready, 1, memory_order_release);
    if (rs->sender_idle)
        pthread_cond_signal(&rs->sender_cv);
}

/* The sender thread sends the outbox, without the lock while it encrypts. */
static void outbox_send(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    struct sl_fe_transport tr = rs->tr;
    size_t calls = rs->ob.calls;
    rs->ob_state = OB_SENDING;
    atomic_store(&rs->ob_ready, 0);
    pthread_mutex_unlock(&rs->io);
    sl_error e;
    sl_code rc = sl_fe_frame_send(&rs->ob, &tr, NULL, 0, &e);
    pthread_mutex_lock(&rs->io);
    rs->ob_state = OB_EMPTY;
    rs->stats.frames_sent++;
    rs->stats.frames_handed++;
    rs->stats.calls_sent += calls;
    if (rc)
        sl_fe_rpc_lost("send", &e); /* the next call reports it */
    sl_fe_wake_reader();
    pthread_cond_broadcast(&rs->sent_cv);
}

/* When the sender thread sends a pending frame that no later call sent (0: never). */
static uint64_t flush_due_ns(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    if (!rs->pf.calls || !rs->lim.flush_us)
        return 0;
    unsigned us = rs->lim.flush_us > FLUSHER_MIN_US ? rs->lim.flush_us : FLUSHER_MIN_US;
    return rs->pend_t0_ns + (uint64_t)us * 1000u;
}

static void *sender_main(void *arg)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    (void)arg;
    pthread_setname_np(pthread_self(), "sluice-send");
    uint64_t last = 0; /* when this thread's last send ended */
    pthread_mutex_lock(&rs->io);
    for (;;) {
        int live = rs->attached && !rs->dead;
        uint64_t due = live ? flush_due_ns() : 0;
        if (live && rs->ob_state == OB_EMPTY && rs->pf.calls &&
            (rs->pf_due || (due && sl_fe_now_ns() >= due)))
            outbox_fill(0);
        if (live && rs->ob_state == OB_READY && sl_fe_now_ns() >= rs->ob_hold_ns) {
            outbox_send();
            last = sl_fe_now_ns();
            continue;
        }
        if (live && rs->ob_state == OB_READY) { /* held: a synchronous call may take it along */
            uint64_t hold = rs->ob_hold_ns;
            pthread_mutex_unlock(&rs->io);
            while (atomic_load_explicit(&rs->ob_ready, memory_order_acquire) &&
                   sl_fe_now_ns() < hold)
                sl_cpu_relax();
            pthread_mutex_lock(&rs->io);
            continue;
        }
        uint64_t spin = live && rs->lim.sender ? (uint64_t)rs->lim.sender_spin_us * 1000u : 0;
        uint64_t until = last + spin;
        if (due && due < until)
            until = due;
        if (spin && sl_fe_now_ns() < until) {
            pthread_mutex_unlock(&rs->io);
            while (!atomic_load_explicit(&rs->ob_ready, memory_order_acquire) &&
                   sl_fe_now_ns() < until)
                sl_cpu_relax();
            pthread_mutex_lock(&rs->io);
            if (sl_fe_now_ns() >= last + spin)
                last = 0; /* polled long enough: sleep next */
            continue;
        }
        rs->sender_idle = 1;
        if (due) {
            struct timespec ts = {(time_t)(due / 1000000000u), (long)(due % 1000000000u)};
            pthread_cond_timedwait(&rs->sender_cv, &rs->io, &ts);
        } else {
            pthread_cond_wait(&rs->sender_cv, &rs->io);
        }
        rs->sender_idle = 0;
    }
    return NULL;
}

/* Starts the sender thread (the lock held) the first time an async call waits; without it (no
 * thread could be made) frames still go out from the program's threads, when full and at
 * synchronizing calls. */
static void sender_start(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
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
    rs->sender_started = 1; /* also after a failure: tried once */
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
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    if (!rs->lim.sender)
        return sl_fe_pending_send(NULL, 0);
    if (!rs->sender_started)
        sender_start();
    if (!g_sender_ok)
        return sl_fe_pending_send(NULL, 0);
    if (rs->ob_state == OB_EMPTY) {
        outbox_fill(!full && rs->pf.calls == 1 ? (uint64_t)rs->lim.hold_us * 1000u : 0);
        return CUDA_SUCCESS;
    }
    if (full)
        return sl_fe_pending_send(NULL, 0); /* waits for the outbox */
    rs->pf_due = 1;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ after an async call */
CUresult sl_fe_frame_queued(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    CUresult rc = CUDA_SUCCESS;
    uint64_t wait_ns = (uint64_t)rs->lim.flush_us * 1000u, now = wait_ns ? sl_fe_now_ns() : 0;
    if (rs->pf.calls >= rs->lim.frame_calls || rs->pf.bulk_len >= rs->lim.frame_bulk)
        rc = frame_due(1);
    else if (wait_ns && !rs->pf_due && /* else it goes when the sender thread's send ends */
             (now - rs->last_send_ns >= wait_ns || now - rs->pend_t0_ns >= window_ns())) {
        rc = frame_due(0);
        window_grow();
    } else if (wait_ns && !rs->sender_started)
        sender_start();
    else if (wait_ns && rs->pf.calls == 1 && rs->sender_idle)
        pthread_cond_signal(&rs->sender_cv);
    return rc;
}
