/* What waits to go out to each peer. The server never blocks on one peer: a MESSAGE and its
 * bulk are queued (ch_unit, owned) and encrypted a frame at a time as that peer's ZeroMQ queue
 * takes frames (the pump, from every poll); a frame ZeroMQ refuses (the peer's high-water mark
 * is reached: it does not read) waits in the peer's own list. A peer over max_out_queue, or
 * whose frames did not move for io_timeout_ms, is closed alone (docs/channel.md). */
#include "server_int.h"

#include "sluice/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define STEP_FRAMES    1                 /* frames one peer encrypts per turn of the pump */
#define GRACE_FLUSH    ((size_t)4 << 20) /* a graceful close writes what waits up to this */
#define TRASH_EVERY_MS 5                 /* a dropped unit is freed this often at most */

/* 0: ZeroMQ took the frame; else the errno (EAGAIN: the peer's queue is full). */
static int try_send(peer *p, zmq_msg_t *m)
{
    void *sock = p->srv->sock;
    if (zmq_send(sock, p->rid, p->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return errno; /* with ROUTER_MANDATORY nothing was queued */
    if (zmq_msg_send(m, sock, ZMQ_DONTWAIT) < 0)
        return errno ? errno : EIO;
    return 0;
}

size_t ch_out_bytes(const peer *p)
{
    return p->obytes + p->ubytes - (p->uhead ? p->uhead->off : 0);
}

sl_code ch_out_emit(void *ctx, uint8_t *buf, size_t len, sl_error *err)
{
    peer *p = ctx;
    zmq_msg_t m;
    if (zmq_msg_init_data(&m, buf, len, ch_zfree, NULL) != 0) {
        ch_buf_free(buf);
        return sl_fail(err, SL_ERR_NOMEM, "zmq_msg_init_data: %s", zmq_strerror(errno));
    }
    if (!p->ohead) {
        int e = try_send(p, &m);
        if (e == 0) {
            zmq_msg_close(&m);
            p->out_since_ms = ch_now_ms();
            return SL_OK;
        }
        if (e != EAGAIN) {
            zmq_msg_close(&m);
            if (e == EHOSTUNREACH)
                return sl_fail(err, SL_ERR_PEER_LOST, "peer is gone (its connection closed)");
            return sl_fail(err, SL_ERR_IO, "zmq send: %s", zmq_strerror(e));
        }
        p->out_since_ms = ch_now_ms(); /* from now on the peer owes us progress */
    }
    qnode *q = malloc(sizeof *q);
    if (!q) {
        zmq_msg_close(&m);
        return sl_fail(err, SL_ERR_NOMEM, "no memory to hold a frame");
    }
    zmq_msg_init(&q->m);
    zmq_msg_move(&q->m, &m);
    zmq_msg_close(&m);
    q->next = NULL;
    if (p->otail)
        p->otail->next = q;
    else
        p->ohead = q;
    p->otail = q;
    p->obytes += len;
    return SL_OK;
}

/* Hands waiting frames to ZeroMQ while it takes them; returns how many. */
static int flush_frames(peer *p)
{
    int n = 0;
    while (p->ohead && !p->shut) {
        qnode *q = p->ohead;
        size_t sz = zmq_msg_size(&q->m);
        int e = try_send(p, &q->m);
        if (e == EAGAIN)
            break;
        if (e == EHOSTUNREACH)
            p->gone = 1; /* reported by the next poll, after the peer's last frames */
        p->ohead = q->next;
        if (!p->ohead)
            p->otail = NULL;
        p->obytes -= sz;
        zmq_msg_close(&q->m);
        free(q);
        if (e)
            continue; /* gone: what waits is dropped frame by frame */
        p->out_since_ms = ch_now_ms();
        n++;
    }
    return n;
}

/* A unit's bulk is done with: freed, or given back to its lender. */
static void bulk_done(uint8_t *bulk, void (*release)(void *), void *arg)
{
    if (release)
        release(arg);
    else
        free(bulk);
}

static void unit_free(ch_unit *u)
{
    free(u->msg);
    bulk_done(u->bulk, u->release, u->rel_arg);
    free(u);
}

/* Units dropped at a close are freed a few at a time by the pump: a cut-off peer may leave
 * hundreds of MiB behind, and giving that back to the kernel at once would hold the thread up
 * for tens of milliseconds. */
void ch_out_drop_units(peer *p)
{
    sl_server *s = p->srv;
    while (p->uhead) {
        ch_unit *u = p->uhead;
        p->uhead = u->next;
        u->next = s->trash;
        s->trash = u;
    }
    p->utail = NULL;
    p->ubytes = 0;
}

void ch_out_trash(sl_server *s, size_t bytes)
{
    size_t freed = 0;
    while (s->trash && (freed < bytes || !bytes)) {
        ch_unit *u = s->trash;
        s->trash = u->next;
        freed += u->len + u->bulk_len;
        unit_free(u);
    }
}

void ch_out_free(peer *p)
{
    ch_out_drop_units(p);
    while (p->ohead) {
        qnode *q = p->ohead;
        p->ohead = q->next;
        zmq_msg_close(&q->m);
        free(q);
    }
    p->otail = NULL;
    p->obytes = 0;
}

/* Encrypts up to budget frames of p's units (only while ZeroMQ takes them, unless force). */
static int pump_peer(peer *p, int budget, int force)
{
    int n = flush_frames(p);
    while (budget-- > 0 && p->uhead && p->state == P_LIVE && p->have_sess && (force || !p->ohead)) {
        ch_unit *u = p->uhead;
        int done = 0;
        sl_error why;
        size_t before = p->sess.stats.frames_out;
        if (ch_sess_send_step(&p->sess, u, &done, &why) != SL_OK) {
            ch_srv_close_peer(p, &why, 0);
            return n;
        }
        n += (int)(p->sess.stats.frames_out - before);
        if (done) {
            p->uhead = u->next;
            if (!p->uhead)
                p->utail = NULL;
            p->ubytes -= u->len + u->bulk_len;
            unit_free(u);
        }
    }
    return n;
}

int ch_out_pump(sl_server *s, int budget, int budget_us)
{
    int total = 0;
    int64_t now = ch_now_ms();
    if (s->trash && now >= s->trash_at_ms) { /* one dropped unit every few ms */
        ch_out_trash(s, 1);
        s->trash_at_ms = now + TRASH_EVERY_MS;
    }
    int64_t until = ch_now_us() + budget_us;
    for (int progress = 1; progress && total < budget && ch_now_us() < until;) {
        progress = 0;
        for (peer *p = s->peers; p && total < budget && ch_now_us() < until; p = p->next) {
            if (!p->ohead && !p->uhead)
                continue;
            int n = pump_peer(p, STEP_FRAMES, 0);
            total += n;
            progress |= n > 0;
        }
    }
    return total;
}

sl_code ch_out_queue(sl_server *s, peer *p, uint8_t *msg, size_t len, uint8_t *bulk,
                     size_t bulk_len, void (*release)(void *), void *arg, sl_error *err)
{
    size_t waiting = ch_out_bytes(p);
    if (s->opts.max_out_queue && waiting + len + bulk_len > s->opts.max_out_queue) {
        free(msg);
        bulk_done(bulk, release, arg);
        sl_error why;
        sl_fail(&why, SL_ERR_TOO_LARGE,
                "the peer does not read what is sent to it: %.1f MiB would wait for it, over the "
                "%.1f MiB limit",
                (double)(waiting + len + bulk_len) / (1 << 20),
                (double)s->opts.max_out_queue / (1 << 20));
        ch_srv_close_peer(p, &why, 0);
        if (err)
            *err = why;
        return why.code;
    }
    ch_unit *u = calloc(1, sizeof *u);
    if (!u) {
        free(msg);
        bulk_done(bulk, release, arg);
        return sl_fail(err, SL_ERR_NOMEM, "no memory to queue a message");
    }
    u->msg = msg;
    u->len = len;
    u->bulk = bulk;
    u->bulk_len = bulk_len;
    u->release = release;
    u->rel_arg = arg;
    if (!p->uhead && !p->ohead)
        p->out_since_ms = ch_now_ms();
    if (p->utail)
        p->utail->next = u;
    else
        p->uhead = u;
    p->utail = u;
    p->ubytes += len + bulk_len;
    pump_peer(p, 1, 0); /* a short message goes at once; the rest in the polls */
    if (p->state != P_LIVE) {
        if (err)
            *err = p->reason;
        return p->reason.code ? p->reason.code : SL_ERR_CLOSED;
    }
    return SL_OK;
}

void ch_out_before_close(peer *p, int graceful)
{
    if (graceful && p->state == P_LIVE && ch_out_bytes(p) <= GRACE_FLUSH)
        pump_peer(p, 1 << 20, 1); /* the answer before the CLOSE (enrollment: reply, close) */
    ch_out_drop_units(p);
}

int ch_out_state(const sl_server *s)
{
    int st = s->trash ? 1 : -1; /* dropped units to free: come back soon */
    for (const peer *p = s->peers; p; p = p->next) {
        if (p->ohead && !p->shut)
            st = 1;
        else if (p->uhead && p->state == P_LIVE)
            return 0;
    }
    return st;
}

void ch_out_timers(sl_server *s, int64_t now)
{
    for (peer *p = s->peers; p; p = p->next) {
        if (p->state != P_LIVE || !p->ohead || now - p->out_since_ms <= s->opts.io_timeout_ms)
            continue;
        sl_error why;
        sl_fail(&why, SL_ERR_PEER_LOST,
                "the peer took nothing for %d ms: it does not read what is sent to it (%zu bytes "
                "wait)",
                s->opts.io_timeout_ms, ch_out_bytes(p));
        ch_srv_close_peer(p, &why, 0);
    }
}

/* ---------------------------------------------------------------- the API */

static uint8_t *dup_msg(const void *msg, size_t len)
{
    uint8_t *m = malloc(len);
    if (m)
        memcpy(m, msg, len);
    return m;
}

/* send_take (release NULL: bulk is malloc'd and freed) and send_lend (release(arg) gives it
 * back): one queueing. */
static sl_code send_owned(sl_server *s, sl_peer id, const void *msg, size_t len, void *bulk,
                          size_t bulk_len, void (*release)(void *), void *arg, sl_error *err)
{
    peer *p = NULL;
    sl_code rc = ch_srv_live_peer(s, id, &p, err);
    if (rc == SL_OK && (!msg || len == 0 || (bulk_len && !bulk)))
        rc = sl_fail(err, SL_ERR_INVALID, "a MESSAGE needs at least one byte, bulk a buffer");
    if (rc == SL_OK && len > s->opts.max_message)
        rc = sl_fail(err, SL_ERR_TOO_LARGE, "message of %zu bytes is over the %zu-byte limit", len,
                     s->opts.max_message);
    uint8_t *m = rc == SL_OK ? dup_msg(msg, len) : NULL;
    if (rc == SL_OK && !m)
        rc = sl_fail(err, SL_ERR_NOMEM, "no memory to queue a message");
    if (rc != SL_OK) {
        bulk_done(bulk, release, arg);
        return rc;
    }
    return ch_out_queue(s, p, m, len, bulk_len ? bulk : NULL, bulk_len, release, arg, err);
}

sl_code sl_server_send_take(sl_server *s, sl_peer id, const void *msg, size_t len, void *bulk,
                            size_t bulk_len, sl_error *err)
{
    return send_owned(s, id, msg, len, bulk, bulk_len, NULL, NULL, err);
}

sl_code sl_server_send_lend(sl_server *s, sl_peer id, const void *msg, size_t len, const void *bulk,
                            size_t bulk_len, void (*release)(void *arg), void *arg, sl_error *err)
{
    if (!release)
        return sl_fail(err, SL_ERR_INVALID, "a lent bulk needs its release");
    return send_owned(s, id, msg, len, (void *)bulk, bulk_len, release, arg, err);
}

sl_code sl_server_send(sl_server *s, sl_peer id, const void *msg, size_t len,
                       const struct iovec *bulk, size_t n, sl_error *err)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!bulk || (bulk[i].iov_len && !bulk[i].iov_base))
            return sl_fail(err, SL_ERR_INVALID, "bulk segment %zu has no buffer", i);
        total += bulk[i].iov_len;
    }
    uint8_t *b = total ? malloc(total) : NULL;
    if (total && !b)
        return sl_fail(err, SL_ERR_NOMEM, "no memory to queue %zu bulk bytes", total);
    for (size_t i = 0, off = 0; i < n; off += bulk[i].iov_len, i++)
        if (bulk[i].iov_len)
            memcpy(b + off, bulk[i].iov_base, bulk[i].iov_len);
    return sl_server_send_take(s, id, msg, len, b, total, err);
}

size_t sl_server_queued(const sl_server *s, sl_peer id)
{
    if (!s)
        return 0;
    for (const peer *p = s->peers; p; p = p->next)
        if (p->id == id)
            return ch_out_bytes(p);
    return 0;
}
