/* Replies (docs/remoting.md "Threads"): each reaches the thread that waits for it, in any
 * order; one waiting thread at a time reads the transport for all, and host callbacks and
 * printf output arrive on the way. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "call/filters.h"
#include "call/lanes.h"
#include "call/rpc_replies.h"
#include "call/rpc_sender.h"
#include "call/rpc_session.h"
#include "call/rpc_state.h"
#include "component.h"
#include "sluice/log.h"
#include "sluice/relax.h"
#include "sluice/wire.h"

static CUresult send_callback_done(uint64_t id)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    Sluice__Wire__CallbackDone done = SLUICE__WIRE__CALLBACK_DONE__INIT;
    Sluice__Wire__ClientMessage m = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    done.id = id;
    m.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLBACK_DONE;
    m.callback_done = &done;
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_error e;
    if (sl_wire_encode_client(&m, NULL, &buf, &len, &e))
        return sl_fe_rpc_lost("encode callback_done", &e);
    sl_code rc = rs->tr.send(rs->tr.t, buf, len, NULL, 0, &e);
    free(buf);
    sl_fe_wake_reader();
    return rc ? sl_fe_rpc_lost("send", &e) : CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ replies
 * Replies come back in any order across threads: the backend completes a blocking wait off its
 * call path (docs/remoting.md "Threads"), so a thread waiting in cuStreamSynchronize never holds
 * up another thread's calls. A thread that waits registers its waiters (one per call it made);
 * one waiting thread at a time reads the channel for every thread (the reader) and hands each
 * reply to its waiter; the others poll their waiters' flags for spin_us, then sleep. When the
 * reader's own replies are in, it passes the role on. The lock is held except while the reader
 * waits for input on the transport's descriptors, while a waiter polls or sleeps, and while a host
 * callback runs. */
static struct sl_fe_waiter *g_waiters; /* every waiter not answered yet */
static int g_reading;                  /* a thread is the reader */
static int g_wake_fd = -1;             /* an eventfd that wakes the reader from that wait */
static pthread_once_t g_wake_once = PTHREAD_ONCE_INIT;

static void wake_init(void)
{
    g_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

/* After this thread used the transport (the lock held): a send may have taken the descriptors'
 * edge, so a reader waiting on them looks again. */
void sl_fe_wake_reader(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    if (rs->reader_polling && g_wake_fd >= 0) {
        uint64_t one = 1;
        if (write(g_wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
            sl_log(SL_LOG_DEBUG, SL_FE_COMPONENT, "waking the reader: %s", strerror(errno));
    }
}

void sl_fe_waiters_add(struct sl_fe_waiter *w, size_t n, pthread_cond_t *cv)
{
    for (size_t i = 0; i < n; i++) {
        w[i].cv = cv;
        w[i].waiting = 0;
        atomic_init(&w[i].done, 0);
        w[i].next = g_waiters;
        g_waiters = &w[i];
    }
}

void sl_fe_waiters_remove(struct sl_fe_waiter *w, size_t n)
{
    for (struct sl_fe_waiter **pp = &g_waiters; *pp;) {
        int mine = *pp >= w && *pp < w + n;
        if (mine)
            *pp = (*pp)->next;
        else
            pp = &(*pp)->next;
    }
}

static struct sl_fe_waiter *waiter_of(uint64_t seq)
{
    for (struct sl_fe_waiter *w = g_waiters; w; w = w->next)
        if (w->seq == seq && !atomic_load(&w->done))
            return w;
    return NULL;
}

static int all_done(struct sl_fe_waiter *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!atomic_load_explicit(&w[i].done, memory_order_acquire))
            return 0;
    return 1;
}

/* The transport failed: every waiter wakes and finds the session dead. */
void sl_fe_waiters_fail(void)
{
    for (struct sl_fe_waiter *w = g_waiters; w; w = w->next)
        pthread_cond_signal(w->cv);
}

/* A ReplyFrame's replies go to their waiters; their bulk into the waiters' buffers. */
static CUresult take_replies(Sluice__Wire__ReplyFrame *f, uint64_t owed)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    sl_error e;
    for (size_t i = 0; i < f->n_replies; i++) {
        Sluice__Wire__Reply *r = f->replies[i];
        sl_fe_filters_reply(r);
        if (r->failed_seq) {
            rs->stats.deferred_errors++;
            sl_log(SL_LOG_DEBUG, SL_FE_COMPONENT,
                   "deferred error %d of call seq %llu reported at seq %llu", r->result,
                   (unsigned long long)r->failed_seq, (unsigned long long)r->seq);
        }
        if (!r->lane_pieces && r->bulk_length > owed) {
            sl_fail(&e, SL_ERR_PROTOCOL, "reply bulk over the announced bulk");
            return sl_fe_rpc_lost("protocol", &e);
        }
        struct sl_fe_waiter *w = waiter_of(r->seq);
        if (r->lane_pieces) { /* its bulk comes on the lanes, straight into the destination */
            if (!w || !w->out || r->bulk_length > w->out_cap) {
                sl_fail(&e, SL_ERR_PROTOCOL,
                        "reply seq %llu sends %llu bytes on the lanes where "
                        "none were asked for",
                        (unsigned long long)r->seq, (unsigned long long)r->bulk_length);
                return sl_fe_rpc_lost("protocol", &e);
            }
            if (sl_fe_lanes_recv(r->seq, w->out, r->bulk_length, r->lane_pieces, &e) != SL_OK)
                return sl_fe_rpc_lost("bulk lane", &e);
            w->out_len = (size_t)r->bulk_length;
        } else if (r->bulk_length) {
            size_t take = 0;
            if (w && w->out) {
                take = r->bulk_length <= w->out_cap ? (size_t)r->bulk_length : w->out_cap;
                if (r->bulk_length > w->out_cap)
                    w->out_overflow = 1;
            }
            if (take && rs->tr.recv_bulk(rs->tr.t, w->out, take, &e))
                return sl_fe_rpc_lost("receive bulk", &e);
            if (r->bulk_length > take &&
                rs->tr.recv_bulk(rs->tr.t, NULL, (size_t)(r->bulk_length - take), &e))
                return sl_fe_rpc_lost("receive bulk", &e);
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
        /* every call up to this reply has been run by the backend (a wait's late reply says
         * nothing of the calls sent after it) */
        if (r->seq >= rs->inflight_seq) {
            rs->inflight_calls = 0;
            rs->inflight_bulk = 0;
        }
        rs->win_ns = 0;
    }
    if (owed && rs->tr.recv_bulk(rs->tr.t, NULL, (size_t)owed, &e))
        return sl_fe_rpc_lost("receive bulk", &e);
    return CUDA_SUCCESS;
}

/* Reads and handles the messages the transport has (the lock held, this thread the reader);
 * timeout_ms 0: only what is there now. */
static CUresult read_messages(int timeout_ms)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    for (;;) {
        /* the sender thread's send in flight ends first: one user at a time */
        sl_fe_outbox_settle();
        if (rs->dead)
            return CUDA_ERROR_DEVICE_UNAVAILABLE;
        const void *msg;
        size_t len;
        uint64_t blen = 0;
        sl_error e;
        sl_code rc = rs->tr.recv(rs->tr.t, &msg, &len, &blen, timeout_ms, &e);
        if (rc == SL_ERR_TIMEOUT)
            return CUDA_SUCCESS;
        if (rc)
            return sl_fe_rpc_lost("receive", &e);
        Sluice__Wire__ServerMessage *m = NULL;
        if (sl_wire_decode_server(msg, len, NULL, &m, &e))
            return sl_fe_rpc_lost("decode", &e);
        CUresult res = CUDA_SUCCESS;
        switch (m->kind_case) {
        case SLUICE__WIRE__SERVER_MESSAGE__KIND_CALLBACK: {
            uint64_t id = m->callback->id, fnid = m->callback->fn;
            pthread_mutex_unlock(&rs->io);
            int ran = sl_fe_filters_callback(fnid);
            pthread_mutex_lock(&rs->io);
            if (ran)
                rs->stats.callbacks_run++;
            else
                sl_log(SL_LOG_WARNING, SL_FE_COMPONENT, "host callback %llu unknown; answered",
                       (unsigned long long)fnid);
            sl_fe_outbox_settle();
            res = rs->dead ? CUDA_ERROR_DEVICE_UNAVAILABLE : send_callback_done(id);
            if (blen && res == CUDA_SUCCESS && rs->tr.recv_bulk(rs->tr.t, NULL, (size_t)blen, &e))
                res = sl_fe_rpc_lost("receive bulk", &e);
            break;
        }
        case SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES:
            res = take_replies(m->replies, blen);
            break;
        case SLUICE__WIRE__SERVER_MESSAGE__KIND_STREAM_DONE:
            sl_fe_filters_stream_done(m->stream_done->seq);
            if (blen && rs->tr.recv_bulk(rs->tr.t, NULL, (size_t)blen, &e))
                res = sl_fe_rpc_lost("receive bulk", &e);
            break;
        case SLUICE__WIRE__SERVER_MESSAGE__KIND_CLOSE: {
            sl_error ce;
            sl_fail(&ce, SL_ERR_CLOSED, "backend closed the session: %s",
                    m->close->detail ? m->close->detail : "");
            res = sl_fe_rpc_lost("session", &ce);
            break;
        }
        default: {
            sl_error pe;
            sl_fail(&pe, SL_ERR_PROTOCOL, "unexpected server message %d", (int)m->kind_case);
            res = sl_fe_rpc_lost("protocol", &pe);
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

/* Waits on the transport's descriptors without the lock, polling for spin_ns first. Returns with
 * the lock held. */
static void await_input(int *fds, int nfds, uint64_t spin_until)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    struct pollfd p[4];
    for (int i = 0; i < nfds; i++)
        p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    rs->reader_polling = 1;
    pthread_mutex_unlock(&rs->io);
    for (;;) {
        int spin = sl_fe_now_ns() < spin_until;
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
    pthread_mutex_lock(&rs->io);
    rs->reader_polling = 0;
    pthread_cond_broadcast(&rs->sent_cv); /* detach waits for the reader to leave the descriptors */
}

/* This thread reads for everyone until its n waiters are answered (the lock held). */
static CUresult reader_turn(struct sl_fe_waiter *w, size_t n)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    uint64_t spin_until = sl_fe_now_ns() + (uint64_t)rs->lim.sender_spin_us * 1000u;
    int fds[4], nfds = 0; /* fixed for the turn: detach waits for the reader to leave them */
    if (rs->tr.fds && rs->tr.has_input) {
        nfds = rs->tr.fds(rs->tr.t, fds, 3);
        pthread_once(&g_wake_once, wake_init);
        if (g_wake_fd >= 0)
            fds[nfds++] = g_wake_fd;
    }
    for (;;) {
        CUresult rc = read_messages(nfds ? 0 : 10); /* no descriptors: a short blocking read */
        if (rc != CUDA_SUCCESS || all_done(w, n))
            return rc;
        if (!nfds || !rs->tr.has_input(rs->tr.t))
            await_input(fds, nfds, spin_until); /* no descriptors: lets the others in for 10 ms */
    }
}

void sl_fe_read_pending(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    if (g_reading || rs->dead)
        return; /* the reader hands out what comes */
    g_reading = 1;
    read_messages(0); /* a failure marks the session dead: the next call reports it */
    g_reading = 0;
}

/* Until the replies to the n waiters (registered, their calls sent) are in (the lock held). */
CUresult sl_fe_wait_replies(struct sl_fe_waiter *w, size_t n, pthread_cond_t *cv)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    CUresult rc = CUDA_SUCCESS;
    for (size_t i = 0; i < n; i++)
        w[i].waiting = 1;
    while (!all_done(w, n)) {
        if (rs->dead) {
            rc = CUDA_ERROR_DEVICE_UNAVAILABLE;
            break;
        }
        if (!g_reading) {
            g_reading = 1;
            rc = reader_turn(w, n);
            g_reading = 0;
            /* the next reader: a thread that waits (one still sending its call's lane
             * pieces becomes the reader itself when it comes to wait, if none is) */
            for (struct sl_fe_waiter *o = g_waiters; o; o = o->next)
                if (o->waiting && !atomic_load(&o->done) && (o < w || o >= w + n)) {
                    pthread_cond_signal(o->cv);
                    break;
                }
            if (rc != CUDA_SUCCESS)
                break;
            continue;
        }
        uint64_t until = sl_fe_now_ns() + (uint64_t)rs->lim.sender_spin_us * 1000u;
        pthread_mutex_unlock(&rs->io);
        while (!all_done(w, n) && sl_fe_now_ns() < until)
            sl_cpu_relax();
        pthread_mutex_lock(&rs->io);
        if (!all_done(w, n) && g_reading && !rs->dead)
            pthread_cond_wait(cv, &rs->io);
    }
    sl_fe_waiters_remove(w, n);
    if (rc != CUDA_SUCCESS) {
        sl_fe_waiters_fail();
        for (size_t i = 0; i < n; i++) {
            if (w[i].reply)
                sl_wire_reply_free(w[i].reply);
            w[i].reply = NULL;
        }
    }
    return rc;
}
