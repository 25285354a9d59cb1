/* The server end: a ROUTER holding one TLS session per ZeroMQ peer routing id. No call waits
 * on one peer: input is queued per peer and driven as it comes, bulk goes straight into the
 * segments sl_server_take_bulk names, output waits in the peer's own queue (server_out.c), and
 * the TCP connections under the peers are tracked for the handshake limits (server_conn.c). */
#include "server_int.h"

#include "sluice/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PUMP_BUDGET    8    /* frames encrypted per poll (2 MiB) before input is looked at */
#define PUMP_BUDGET_US 2000 /* or this long, whichever comes first */

static void q_clear(peer *p)
{
    while (p->qhead) {
        qnode *n = p->qhead;
        p->qhead = n->next;
        zmq_msg_close(&n->m);
        free(n);
    }
    p->qtail = NULL;
    p->qbytes = 0;
}

/* Moves the oldest held frame into the TLS session; 0 when none. */
static int q_pop(peer *p)
{
    qnode *n = p->qhead;
    if (!n)
        return 0;
    p->qhead = n->next;
    if (!p->qhead)
        p->qtail = NULL;
    p->qbytes -= zmq_msg_size(&n->m);
    ch_sess_give_frame(&p->sess, &n->m);
    zmq_msg_close(&n->m);
    free(n);
    return 1;
}

static void bulk_forget(peer *p)
{
    free(p->bdst);
    p->bdst = NULL;
    p->bn = p->bi = p->bgot = 0;
    p->bulk_async = 0;
}

static void drop_sess(sl_server *s, peer *p)
{
    q_clear(p);
    bulk_forget(p);
    ch_out_drop_units(p); /* frames already encrypted (the CLOSE) still go out */
    if (p->have_sess) {
        sl_channel_stats *a = &s->closed_stats, *b = &p->sess.stats;
        a->frames_in += b->frames_in;
        a->frames_out += b->frames_out;
        a->bytes_in += b->bytes_in;
        a->bytes_out += b->bytes_out;
        a->buffer_grows += b->buffer_grows;
        ch_sess_free(&p->sess);
    }
    p->have_sess = 0;
}

void ch_srv_close_peer(peer *p, const sl_error *why, int quiet)
{
    if (p->state == P_CLOSING || p->state == P_TOMB)
        return;
    p->reason = *why;
    bulk_forget(p); /* the server no longer writes into the caller's segments */
    sl_error ignore;
    if (p->have_sess) {
        ch_out_before_close(p, why->code == SL_ERR_CLOSED);
        if (p->sess.established && !p->sess.broken && why->code != SL_ERR_PEER_LOST)
            ch_sess_send_ctl(&p->sess, REC_CLOSE, why->code, why->msg, &ignore);
        else
            ch_sess_flush(&p->sess, &ignore);
    }
    p->state = P_CLOSING;
    p->closed_ms = ch_now_ms();
    sl_log(quiet || why->code == SL_ERR_CLOSED ? SL_LOG_DEBUG : SL_LOG_NOTICE, CH_LOG,
           "session %llu%s%s%s%s closed: %s: %s", (unsigned long long)p->id,
           p->ident.authenticated ? " instance " : "", p->ident.instance_id,
           p->address[0] ? " from " : "", p->address, sl_code_name(why->code), why->msg);
}

static peer *find_rid(sl_server *s, const void *rid, size_t n)
{
    for (peer *p = s->peers; p; p = p->next)
        if (p->rid_len == n && memcmp(p->rid, rid, n) == 0)
            return p;
    return NULL;
}

peer *ch_srv_find_id(sl_server *s, sl_peer id)
{
    for (peer *p = s->peers; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

static size_t authenticated(const sl_server *s)
{
    size_t n = 0;
    for (const peer *p = s->peers; p; p = p->next)
        n += p->state == P_LIVE && p->ident.authenticated;
    return n;
}

static peer *new_peer(sl_server *s, const void *rid, size_t n)
{
    /* sessions with a certificate have max_peers, the others max_unauth (server_conn.c keeps
     * that per connection); this bounds the list whatever the transport */
    size_t cap = (size_t)s->opts.max_peers +
                 (size_t)(s->opts.max_unauth > 0 ? s->opts.max_unauth : s->opts.max_peers);
    if (n == 0 || n > RID_MAX || s->npeers >= cap) {
        sl_log(SL_LOG_DEBUG, CH_LOG, "dropping a frame from a new peer (%zu sessions)", s->npeers);
        return NULL;
    }
    peer *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    sl_error e;
    if (ch_sess_init(&p->sess, s->ctx, 1, &s->opts, ch_out_emit, p, &e) != SL_OK) {
        free(p);
        return NULL;
    }
    p->have_sess = 1;
    p->fd = -1;
    memcpy(p->rid, rid, n);
    p->rid_len = n;
    p->id = ++s->next_id;
    p->srv = s;
    p->created_ms = p->last_in_ms = ch_now_ms();
    p->next = s->peers;
    s->peers = p;
    s->npeers++;
    return p;
}

void ch_srv_free_peer(sl_server *s, peer *victim)
{
    for (peer **pp = &s->peers; *pp; pp = &(*pp)->next)
        if (*pp == victim) {
            *pp = victim->next;
            break;
        }
    drop_sess(s, victim);
    ch_out_free(victim);
    free(victim);
    s->npeers--;
}

/* Receives one [routing id][payload] message into its peer's queue.
 * SL_OK: something arrived (or was handled); SL_ERR_TIMEOUT: nothing in time. */
static sl_code ingest(sl_server *s, long wait, sl_error *err)
{
    zmq_pollitem_t it[2] = {{s->sock, 0, ZMQ_POLLIN, 0}, {s->mon, 0, ZMQ_POLLIN, 0}};
    int n = zmq_poll(it, 2, wait);
    if (n < 0) {
        if (errno == EINTR)
            return SL_ERR_TIMEOUT;
        return sl_fail(err, SL_ERR_IO, "zmq_poll: %s", zmq_strerror(errno));
    }
    if (it[1].revents & ZMQ_POLLIN) {
        int ev, fd;
        while ((ev = ch_monitor_read(s->mon, &fd)) != 0) {
            if (ev == ZMQ_EVENT_DISCONNECTED)
                s->next_probe_ms = 0; /* someone disconnected: find out who now */
            ch_conn_event(s, ev, fd);
        }
    }
    if (!(it[0].revents & ZMQ_POLLIN))
        return SL_ERR_TIMEOUT;
    zmq_msg_t rid, m;
    zmq_msg_init(&rid);
    zmq_msg_init(&m);
    if (zmq_msg_recv(&rid, s->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&rid);
        zmq_msg_close(&m);
        return SL_OK;
    }
    int parts = 1;
    if (zmq_msg_more(&rid) && zmq_msg_recv(&m, s->sock, 0) >= 0) {
        parts = 2;
        while (zmq_msg_more(&m)) { /* DEALERs send single parts: drain the extra ones */
            zmq_msg_t x;
            zmq_msg_init(&x);
            int more = zmq_msg_recv(&x, s->sock, 0) >= 0 && zmq_msg_more(&x);
            zmq_msg_close(&x);
            parts++;
            if (!more)
                break;
        }
    }
    peer *p = find_rid(s, zmq_msg_data(&rid), zmq_msg_size(&rid));
    size_t sz = zmq_msg_size(&m);
    if (!p && parts == 2 && sz > 0 &&
        (p = new_peer(s, zmq_msg_data(&rid), zmq_msg_size(&rid))) != NULL) {
        const char *a = zmq_msg_gets(&m, "Peer-Address");
        if (a && strlen(a) < sizeof p->address)
            memcpy(p->address, a, strlen(a) + 1);
        ch_conn_bind_peer(s, p, zmq_msg_get(&m, ZMQ_SRCFD));
    }
    zmq_msg_close(&rid);
    if (!p || p->state == P_CLOSING || p->state == P_TOMB || sz == 0) {
        if (p && sz)
            sl_log(SL_LOG_DEBUG, CH_LOG, "ignoring %zu bytes from closed session %llu", sz,
                   (unsigned long long)p->id);
        zmq_msg_close(&m);
        return SL_OK;
    }
    p->last_in_ms = ch_now_ms();
    sl_error why;
    if (parts != 2)
        sl_fail(&why, SL_ERR_PROTOCOL, "peer sent a %d-part message; frames are single-part",
                parts - 1);
    else if (sz > s->opts.max_frame)
        sl_fail(&why, SL_ERR_TOO_LARGE, "peer sent a %zu-byte frame, over the %zu-byte limit", sz,
                s->opts.max_frame);
    else if (p->qbytes + sz > QUEUE_CAP)
        sl_fail(&why, SL_ERR_TOO_LARGE, "peer has over %zu bytes waiting", QUEUE_CAP);
    else {
        qnode *q = malloc(sizeof *q);
        if (q) {
            zmq_msg_init(&q->m);
            zmq_msg_move(&q->m, &m);
            q->next = NULL;
            if (p->qtail)
                p->qtail->next = q;
            else
                p->qhead = q;
            p->qtail = q;
            p->qbytes += sz;
            zmq_msg_close(&m);
            return SL_OK;
        }
        sl_fail(&why, SL_ERR_NOMEM, "no memory to hold a frame");
    }
    zmq_msg_close(&m);
    ch_srv_close_peer(p, &why, 0);
    return SL_OK;
}

static int ready_to_drive(const peer *p)
{
    if (p->state == P_CLOSING || (p->gone && p->state != P_TOMB))
        return 1;
    if (p->state == P_TOMB || (p->state == P_LIVE && p->sess.bulk_left && !p->bulk_async))
        return 0;
    if (p->state == P_LIVE && p->bulk_async && !p->sess.bulk_left)
        return 1; /* all in already: SL_EV_BULK to report */
    return p->qhead || ch_sess_has_input(&p->sess);
}

static void ev_closed(sl_server *s, peer *p, sl_server_event *ev)
{
    ev->kind = SL_EV_CLOSED;
    ev->peer = p->id;
    ev->identity = &p->ident;
    ev->reason = p->reason;
    p->state = P_TOMB; /* keeps swallowing the rid's frames until its connection is gone */
    drop_sess(s, p);
}

/* The handshake is done: identity, the accept hook, READY. */
static int accepted(sl_server *s, peer *p, sl_server_event *ev)
{
    sl_error why;
    sl_code r = ch_identity(p->sess.ssl, s->mutual, &p->ident, &why);
    if (r == SL_OK) {
        memcpy(p->ident.address, p->address, sizeof p->ident.address);
        sl_error_clear(&why);
        if (s->mutual && authenticated(s) >= (size_t)s->opts.max_peers)
            r = sl_fail(&why, SL_ERR_REFUSED, "the server has its maximum of %d sessions",
                        s->opts.max_peers);
        else if (s->hooks.accept && s->hooks.accept(s->hooks.user, &p->ident, &why) != 0) {
            if (why.code == SL_OK)
                sl_fail(&why, SL_ERR_REFUSED, "refused by the server's accept hook");
            r = why.code;
        }
    }
    if (r == SL_OK && ch_sess_send_ctl(&p->sess, REC_READY, REC_VERSION, NULL, &why) != SL_OK)
        r = why.code;
    if (r != SL_OK) {
        ch_srv_close_peer(p, &why, 0);
        ev_closed(s, p, ev);
        return 1;
    }
    p->state = P_LIVE;
    if (p->ident.authenticated)
        ch_conn_authed(s, p);
    ev->kind = SL_EV_ACCEPTED;
    ev->peer = p->id;
    ev->identity = &p->ident;
    sl_log(SL_LOG_INFO, CH_LOG, "session %llu accepted%s%s%s%s", (unsigned long long)p->id,
           p->ident.authenticated ? ": instance " : " (unauthenticated)", p->ident.instance_id,
           p->ident.authenticated ? " project " : "", p->ident.project_id);
    return 1;
}

/* Decrypts what has arrived of the bulk into the segments of sl_server_take_bulk:
 * SL_OK all in, CH_AGAIN more to come, else an error. */
static int bulk_async(peer *p, sl_error *why)
{
    while (p->bi < p->bn) {
        struct iovec *v = &p->bdst[p->bi];
        int r = ch_sess_read_bulk(&p->sess, v->iov_base, v->iov_len, &p->bgot, why);
        if (r == CH_AGAIN && q_pop(p))
            continue;
        if (r != SL_OK)
            return r;
        p->bi++;
        p->bgot = 0;
    }
    return SL_OK;
}

/* Advances one peer as far as its input allows; fills ev and returns 1 on an event. */
static int drive(sl_server *s, peer *p, sl_server_event *ev)
{
    sl_error why;
    if (p->state == P_CLOSING) {
        ev_closed(s, p, ev);
        return 1;
    }
    if (p->gone && !p->qhead && !ch_sess_has_input(&p->sess)) {
        sl_fail(&why, SL_ERR_PEER_LOST,
                "peer vanished (connection closed, or heartbeats timed out)");
        s->failed += p->state == P_HANDSHAKE; /* gone before its handshake: the summary */
        ch_srv_close_peer(p, &why, p->state == P_HANDSHAKE);
        ev_closed(s, p, ev);
        return 1;
    }
    int r;
    if (p->state == P_HANDSHAKE) {
        while ((r = ch_sess_handshake(&p->sess, &why)) == CH_AGAIN)
            if (!q_pop(p))
                return 0;
        if (r == SL_OK)
            return accepted(s, p, ev);
        /* a certificate refused is the guest's problem to hear of; anything else before the
         * handshake is noise anyone can make: counted in the summary line, not one each */
        int quiet = why.code != SL_ERR_CERT_EXPIRED && why.code != SL_ERR_UNKNOWN_CA &&
                    why.code != SL_ERR_NO_PEER_CERT && why.code != SL_ERR_REFUSED;
        s->failed += quiet;
        ch_srv_close_peer(p, &why, quiet);
        ev_closed(s, p, ev);
        return 1;
    }
    if (p->bulk_async || p->sess.bulk_left) {
        if (!p->bulk_async || (r = bulk_async(p, &why)) == CH_AGAIN)
            return 0;
        if (r == SL_OK) {
            bulk_forget(p);
            ev->kind = SL_EV_BULK;
            ev->peer = p->id;
            ev->identity = &p->ident;
            return 1;
        }
    } else {
        int kind = 0;
        while ((r = ch_sess_read_unit(&p->sess, &kind, &why)) == CH_AGAIN)
            if (!q_pop(p))
                return 0;
        if (r == SL_OK && kind != REC_MESSAGE)
            r = sl_fail(&why, SL_ERR_PROTOCOL, "client sent record kind %d", kind);
        if (r == SL_OK) {
            ev->kind = SL_EV_MESSAGE;
            ev->peer = p->id;
            ev->identity = &p->ident;
            ev->msg = p->sess.msg;
            ev->len = p->sess.cur.length;
            ev->bulk_len = p->sess.bulk_left;
            p->bulk_start_ms = ch_now_ms();
            return 1;
        }
    }
    ch_srv_close_peer(p, &why, 0);
    ev_closed(s, p, ev);
    return 1;
}

/* A bulk under the floor: after bulk_grace_ms, bulk_min_rate bytes a second must have come
 * (decrypted, or waiting in the peer's queue); a deadline no frame moves. */
static int bulk_too_slow(const sl_server *s, const peer *p, int64_t now, sl_error *why)
{
    if (p->state != P_LIVE || !p->sess.bulk_left || !s->opts.bulk_min_rate)
        return 0;
    int64_t t = now - p->bulk_start_ms - s->opts.bulk_grace_ms;
    if (t <= 0)
        return 0;
    uint64_t total = p->sess.bulk_total, need = (uint64_t)t * s->opts.bulk_min_rate / 1000;
    if (need > total)
        need = total;
    uint64_t have = total - p->sess.bulk_left + p->qbytes;
    if (have >= need)
        return 0;
    sl_fail(why, SL_ERR_TIMEOUT,
            "bulk too slow: %llu of %llu bytes in %lld ms, under the floor of %llu KiB/s after "
            "%d ms",
            (unsigned long long)(total - p->sess.bulk_left), (unsigned long long)total,
            (long long)(now - p->bulk_start_ms), (unsigned long long)(s->opts.bulk_min_rate >> 10),
            s->opts.bulk_grace_ms);
    return 1;
}

/* p's connection is gone: its session ends with SL_ERR_PEER_LOST once the frames it sent before
 * leaving are read (they may still wait in the socket: read them first). */
static void peer_gone(sl_server *s, peer *p)
{
    sl_error why;
    p->gone = 1;
    for (int i = 0; i < 4096 && ingest(s, 0, &why) == SL_OK; i++)
        ;
}

/* Timers: handshake and idle timeouts, slow bulk, output that does not move, connections that
 * never authenticate, tombstones' connections, and liveness probes (an empty frame; with
 * ROUTER_MANDATORY a peer whose connection is gone answers EHOSTUNREACH).
 * A probe goes only where a connection may be gone: the session of a connection the monitor
 * reported closed (a few probes, server_conn.c), a tombstone, a session whose connection is not
 * known. A live session is never probed on a schedule: the probes are frames its client must
 * read, and a client that reads nothing for a while (an idle guest; the guest's channel to the
 * backend while its calls go to the session worker directly) would find its receive queue full
 * of them after hwm intervals; ZeroMQ then stops reading that connection, its own heartbeat
 * times out because the answers are not read, and it drops a healthy session (issue 18).
 * Instead every heartbeat interval looks at each live session's connection itself (its
 * descriptor still that connection: ch_conn_holds, no frame sent): a session whose connection
 * is gone ends even when no probe found out (9 of 32 sessions outlived their killed guests by
 * 30 s once in e2e.teardown, each probed after its close and still routable). */
static void timers(sl_server *s)
{
    int64_t now = ch_now_ms();
    sl_error why;
    for (peer *p = s->peers, *nx; p; p = nx) {
        nx = p->next;
        if (p->state == P_HANDSHAKE && now - p->created_ms > s->opts.handshake_timeout_ms) {
            sl_fail(&why, SL_ERR_TIMEOUT, "no TLS handshake within %d ms",
                    s->opts.handshake_timeout_ms);
            ch_srv_close_peer(p, &why, 1);
            s->expired++;
            ch_conn_shutdown(s, p);
        } else if (p->state == P_LIVE && s->opts.idle_timeout_ms > 0 &&
                   now - p->last_in_ms > s->opts.idle_timeout_ms) {
            sl_fail(&why, SL_ERR_PEER_LOST, "peer silent for over %d ms", s->opts.idle_timeout_ms);
            ch_srv_close_peer(p, &why, 0);
        } else if (bulk_too_slow(s, p, now, &why)) {
            ch_srv_close_peer(p, &why, 0);
        } else if (p->state == P_TOMB && !p->shut && now - p->closed_ms > s->opts.linger_ms) {
            ch_out_free(p); /* what it did not take of the CLOSE */
            ch_conn_shutdown(s, p);
        }
    }
    ch_out_timers(s, now);
    ch_conn_timers(s, now);
    if (now < s->next_probe_ms)
        return;
    s->next_probe_ms = now + s->opts.heartbeat_ivl_ms;
    for (peer *p = s->peers, *nx; p; p = nx) {
        nx = p->next;
        if (p->state == P_LIVE && !p->gone && !ch_conn_holds(s, p)) {
            peer_gone(s, p); /* whatever the monitor said or the probes found */
            continue;
        }
        if (p->state == P_CLOSING || (p->state != P_TOMB && p->fd >= 0 && p->probes <= 0))
            continue;
        if (p->probes > 0)
            p->probes--;
        if (zmq_send(s->sock, p->rid, p->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0) {
            zmq_send(s->sock, "", 0, ZMQ_DONTWAIT);
            continue;
        }
        if (errno != EHOSTUNREACH)
            continue; /* EAGAIN: queue full, so the peer is there */
        if (p->state == P_TOMB)
            ch_srv_free_peer(s, p);
        else if (!p->gone)
            peer_gone(s, p);
    }
}

/* Moves a peer that had an event to the end, so a busy peer does not starve the others. */
static void rotate(sl_server *s, peer *p)
{
    if (s->peers == p && !p->next)
        return;
    for (peer **pp = &s->peers; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    peer **tail = &s->peers;
    while (*tail)
        tail = &(*tail)->next;
    p->next = NULL;
    *tail = p;
}

sl_code sl_server_poll(sl_server *s, int timeout_ms, sl_server_event *ev, sl_error *err)
{
    if (!s || !ev)
        return sl_fail(err, SL_ERR_INVALID, "sl_server_poll: NULL argument");
    memset(ev, 0, sizeof *ev);
    int64_t deadline = timeout_ms < 0 ? -1 : ch_now_ms() + timeout_ms;
    for (;;) {
        timers(s);
        ch_out_pump(s, PUMP_BUDGET, PUMP_BUDGET_US);
        for (peer *p = s->peers, *nx; p; p = nx) {
            nx = p->next;
            if (ready_to_drive(p) && drive(s, p, ev)) {
                if (p->state != P_TOMB)
                    rotate(s, p);
                return SL_OK;
            }
        }
        int64_t now = ch_now_ms();
        long wait = (long)(s->next_probe_ms - now);
        if (deadline >= 0 && deadline - now < wait)
            wait = (long)(deadline - now);
        int out = ch_out_state(s);
        if (out >= 0 && out < wait)
            wait = out; /* output to move now, or a full peer queue to try again soon */
        if (wait < 0)
            wait = 0;
        sl_code rc = ingest(s, wait, err);
        if (rc != SL_OK && rc != SL_ERR_TIMEOUT)
            return rc;
        if (rc == SL_ERR_TIMEOUT && deadline >= 0 && ch_now_ms() >= deadline) {
            timers(s);
            return SL_OK; /* SL_EV_NONE */
        }
    }
}

int sl_server_wait_ms(const sl_server *s, int max_ms)
{
    if (!s)
        return max_ms;
    int out = ch_out_state(s);
    if (out >= 0 && out < max_ms)
        return out;
    for (const peer *p = s->peers; p; p = p->next)
        if (p->state == P_LIVE && p->sess.bulk_left && p->bulk_async && p->qhead)
            return 0;
    return max_ms;
}

sl_code ch_srv_live_peer(sl_server *s, sl_peer id, peer **out, sl_error *err)
{
    if (!s)
        return sl_fail(err, SL_ERR_INVALID, "NULL server");
    peer *p = ch_srv_find_id(s, id);
    if (!p)
        return sl_fail(err, SL_ERR_INVALID, "no session %llu", (unsigned long long)id);
    if (p->state != P_LIVE) {
        if (p->state == P_HANDSHAKE)
            return sl_fail(err, SL_ERR_INVALID, "session %llu is not accepted yet",
                           (unsigned long long)id);
        return sl_fail(err, SL_ERR_CLOSED, "session %llu is closed (%s)", (unsigned long long)id,
                       p->reason.msg);
    }
    *out = p;
    return SL_OK;
}

sl_code sl_server_recv_bulk(sl_server *s, sl_peer id, void *dest, size_t len, sl_error *err)
{
    peer *p = NULL;
    sl_code rc = ch_srv_live_peer(s, id, &p, err);
    if (rc)
        return rc;
    if (p->bulk_async)
        return sl_fail(err, SL_ERR_INVALID, "the bulk was given to sl_server_take_bulk");
    if (len > p->sess.bulk_left)
        return sl_fail(err, SL_ERR_INVALID, "asked for %zu bulk bytes, only %llu announced", len,
                       (unsigned long long)p->sess.bulk_left);
    size_t got = 0;
    sl_error why;
    for (;;) {
        int r = ch_sess_read_bulk(&p->sess, dest, len, &got, &why);
        if (r == SL_OK)
            return SL_OK;
        if (r != CH_AGAIN)
            break;
        if (q_pop(p))
            continue;
        if (bulk_too_slow(s, p, ch_now_ms(), &why)) {
            r = why.code;
            break;
        }
        rc = ingest(s, 100, err);
        if (rc != SL_OK && rc != SL_ERR_TIMEOUT)
            return rc;
        if (p->state != P_LIVE) {
            why = p->reason;
            break;
        }
        ch_out_pump(s, PUMP_BUDGET, PUMP_BUDGET_US);
    }
    ch_srv_close_peer(p, &why, 0);
    if (err)
        *err = why;
    return why.code;
}

sl_code sl_server_take_bulk(sl_server *s, sl_peer id, const struct iovec *dst, size_t n,
                            sl_error *err)
{
    peer *p = NULL;
    sl_code rc = ch_srv_live_peer(s, id, &p, err);
    if (rc)
        return rc;
    if (p->bulk_async)
        return sl_fail(err, SL_ERR_INVALID, "the bulk was given to sl_server_take_bulk already");
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += dst[i].iov_len;
    if (!p->sess.bulk_left || total != p->sess.bulk_left || (n && !dst))
        return sl_fail(err, SL_ERR_INVALID, "segments of %llu bytes for %llu bulk bytes",
                       (unsigned long long)total, (unsigned long long)p->sess.bulk_left);
    p->bdst = malloc(n * sizeof *p->bdst);
    if (!p->bdst)
        return sl_fail(err, SL_ERR_NOMEM, "no memory for %zu segments", n);
    memcpy(p->bdst, dst, n * sizeof *dst);
    p->bn = n;
    p->bi = p->bgot = 0;
    p->bulk_async = 1;
    sl_error why;
    int r = bulk_async(p, &why);
    if (r == SL_OK || r == CH_AGAIN)
        return SL_OK; /* SL_OK: the next poll reports SL_EV_BULK */
    ch_srv_close_peer(p, &why, 0);
    return SL_OK; /* the next poll reports SL_EV_CLOSED */
}

sl_code sl_server_seal_bulk(sl_server *s, sl_peer id, sl_error *err)
{
    peer *p = NULL;
    sl_code rc = ch_srv_live_peer(s, id, &p, err);
    return rc ? rc : ch_sess_seal(&p->sess, err);
}

sl_code sl_server_disconnect(sl_server *s, sl_peer id, sl_code code, const char *reason,
                             sl_error *err)
{
    peer *p = NULL;
    sl_code rc = ch_srv_live_peer(s, id, &p, err);
    if (rc)
        return rc;
    if (code <= SL_OK || code >= SL_CODE_COUNT)
        return sl_fail(err, SL_ERR_INVALID, "bad close code %d", (int)code);
    sl_error why;
    sl_fail(&why, code, "%s", reason ? reason : "closed by the server");
    ch_srv_close_peer(p, &why, 0);
    return SL_OK;
}

size_t sl_server_revoke(sl_server *s, sl_peer_match match, void *user, const char *reason)
{
    size_t n = 0;
    if (!s || !match)
        return 0;
    for (peer *p = s->peers; p; p = p->next)
        if (p->state == P_LIVE && match(user, &p->ident)) {
            sl_error why;
            sl_fail(&why, SL_ERR_REVOKED, "access revoked: %s",
                    reason ? reason : "no reason given");
            ch_srv_close_peer(p, &why, 0);
            n++;
        }
    return n;
}

static int match_instance(void *user, const sl_peer_identity *id)
{
    return id->authenticated && strcmp(id->instance_id, (const char *)user) == 0;
}

size_t sl_server_revoke_instance(sl_server *s, const char *instance_id, const char *reason)
{
    if (!instance_id)
        return 0;
    return sl_server_revoke(s, match_instance, (void *)instance_id, reason);
}
