/* The server end: a ROUTER holding one TLS session per ZeroMQ peer routing id. */
#include "internal.h"

#include "sluice/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RID_MAX   255
#define QUEUE_CAP ((size_t)256 << 20) /* frames held back for one peer */

enum peer_state { P_HANDSHAKE, P_LIVE, P_CLOSING, P_TOMB };

typedef struct qnode {
    zmq_msg_t m;
    struct qnode *next;
} qnode;

typedef struct peer {
    sl_peer id;
    uint8_t rid[RID_MAX];
    size_t rid_len;
    enum peer_state state;
    ch_sess sess;
    int have_sess;
    qnode *qhead, *qtail;
    size_t qbytes;
    sl_error reason;
    sl_peer_identity ident;
    char address[64]; /* Peer-Address of the session's first frame */
    int64_t created_ms, last_in_ms;
    int gone; /* a probe found its connection closed: report once its last frames are read */
    struct sl_server *srv;
    struct peer *next;
} peer;

struct sl_server {
    void *zctx, *sock, *mon;
    SSL_CTX *ctx;
    int mutual;
    sl_channel_opts opts;
    sl_server_hooks hooks;
    peer *peers;
    size_t npeers;
    sl_peer next_id;
    int64_t next_probe_ms;
    char endpoint[256];
    sl_channel_stats closed_stats;
};

static sl_code emit(void *ctx, uint8_t *buf, size_t len, sl_error *err)
{
    peer *p = ctx;
    void *sock = p->srv->sock;
    zmq_msg_t m;
    if (zmq_msg_init_data(&m, buf, len, ch_zfree, NULL) != 0) {
        free(buf);
        return sl_fail(err, SL_ERR_NOMEM, "zmq_msg_init_data: %s", zmq_strerror(errno));
    }
    if (zmq_send(sock, p->rid, p->rid_len, ZMQ_SNDMORE) < 0 || zmq_msg_send(&m, sock, 0) < 0) {
        int e = errno;
        zmq_msg_close(&m);
        if (e == EHOSTUNREACH)
            return sl_fail(err, SL_ERR_PEER_LOST, "peer is gone (its connection closed)");
        if (e == EAGAIN)
            return sl_fail(err, SL_ERR_PEER_LOST, "peer took no data for %d ms",
                           p->srv->opts.io_timeout_ms);
        return sl_fail(err, SL_ERR_IO, "zmq send: %s", zmq_strerror(e));
    }
    return SL_OK;
}

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

static void drop_sess(sl_server *s, peer *p)
{
    q_clear(p);
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

/* Ends a session: tells the peer why when the TLS session still works, else flushes the
 * alert OpenSSL wrote; the SL_EV_CLOSED is reported by the next poll. */
static void close_peer(peer *p, const sl_error *why)
{
    if (p->state == P_CLOSING || p->state == P_TOMB)
        return;
    p->reason = *why;
    sl_error ignore;
    if (p->have_sess) {
        int t = 0;
        zmq_setsockopt(p->srv->sock, ZMQ_SNDTIMEO, &t, sizeof t);
        if (p->sess.established && !p->sess.broken && why->code != SL_ERR_PEER_LOST)
            ch_sess_send_ctl(&p->sess, REC_CLOSE, why->code, why->msg, &ignore);
        else
            ch_sess_flush(&p->sess, &ignore);
        t = p->srv->opts.io_timeout_ms;
        zmq_setsockopt(p->srv->sock, ZMQ_SNDTIMEO, &t, sizeof t);
    }
    p->state = P_CLOSING;
    sl_log(why->code == SL_ERR_CLOSED ? SL_LOG_DEBUG : SL_LOG_NOTICE, CH_LOG,
           "session %llu%s%s closed: %s: %s", (unsigned long long)p->id,
           p->ident.authenticated ? " instance " : "", p->ident.instance_id,
           sl_code_name(why->code), why->msg);
}

static peer *find_rid(sl_server *s, const void *rid, size_t n)
{
    for (peer *p = s->peers; p; p = p->next)
        if (p->rid_len == n && memcmp(p->rid, rid, n) == 0)
            return p;
    return NULL;
}

static peer *find_id(sl_server *s, sl_peer id)
{
    for (peer *p = s->peers; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

static peer *new_peer(sl_server *s, const void *rid, size_t n)
{
    if (n == 0 || n > RID_MAX || s->npeers >= (size_t)s->opts.max_peers) {
        sl_log(SL_LOG_WARNING, CH_LOG, "dropping a frame from a new peer (%zu sessions)",
               s->npeers);
        return NULL;
    }
    peer *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    sl_error e;
    if (ch_sess_init(&p->sess, s->ctx, 1, &s->opts, emit, p, &e) != SL_OK) {
        free(p);
        return NULL;
    }
    p->have_sess = 1;
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

static void free_peer(sl_server *s, peer *victim)
{
    for (peer **pp = &s->peers; *pp; pp = &(*pp)->next)
        if (*pp == victim) {
            *pp = victim->next;
            break;
        }
    drop_sess(s, victim);
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
        while (ch_monitor_read(s->mon) != 0)
            s->next_probe_ms = 0; /* someone disconnected: find out who now */
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
    close_peer(p, &why);
    return SL_OK;
}

static int ready_to_drive(const peer *p)
{
    if (p->state == P_CLOSING || (p->gone && p->state != P_TOMB))
        return 1;
    if (p->state == P_TOMB || (p->state == P_LIVE && p->sess.bulk_left))
        return 0;
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
        close_peer(p, &why);
        ev_closed(s, p, ev);
        return 1;
    }
    int r;
    if (p->state == P_HANDSHAKE) {
        while ((r = ch_sess_handshake(&p->sess, &why)) == CH_AGAIN)
            if (!q_pop(p))
                return 0;
        if (r == SL_OK && ch_identity(p->sess.ssl, s->mutual, &p->ident, &why) == SL_OK) {
            memcpy(p->ident.address, p->address, sizeof p->ident.address);
            sl_error_clear(&why);
            if (s->hooks.accept && s->hooks.accept(s->hooks.user, &p->ident, &why) != 0) {
                if (why.code == SL_OK)
                    sl_fail(&why, SL_ERR_REFUSED, "refused by the server's accept hook");
                r = why.code;
            }
        } else if (r == SL_OK) {
            r = why.code;
        }
        if (r == SL_OK && ch_sess_send_ctl(&p->sess, REC_READY, REC_VERSION, NULL, &why) != SL_OK)
            r = why.code;
        if (r != SL_OK) {
            close_peer(p, &why);
            ev_closed(s, p, ev);
            return 1;
        }
        p->state = P_LIVE;
        ev->kind = SL_EV_ACCEPTED;
        ev->peer = p->id;
        ev->identity = &p->ident;
        sl_log(SL_LOG_INFO, CH_LOG, "session %llu accepted%s%s%s%s", (unsigned long long)p->id,
               p->ident.authenticated ? ": instance " : " (unauthenticated)", p->ident.instance_id,
               p->ident.authenticated ? " project " : "", p->ident.project_id);
        return 1;
    }
    if (p->sess.bulk_left)
        return 0;
    int kind = 0;
    while ((r = ch_sess_read_unit(&p->sess, &kind, &why)) == CH_AGAIN)
        if (!q_pop(p))
            return 0;
    if (r == SL_OK && kind != REC_MESSAGE)
        r = sl_fail(&why, SL_ERR_PROTOCOL, "client sent record kind %d", kind);
    if (r != SL_OK) {
        close_peer(p, &why);
        ev_closed(s, p, ev);
        return 1;
    }
    ev->kind = SL_EV_MESSAGE;
    ev->peer = p->id;
    ev->identity = &p->ident;
    ev->msg = p->sess.msg;
    ev->len = p->sess.cur.length;
    ev->bulk_len = p->sess.bulk_left;
    return 1;
}

/* Timers: handshake and idle timeouts, and liveness probes (an empty frame; with
 * ROUTER_MANDATORY a peer whose connection is gone answers EHOSTUNREACH). */
static void timers(sl_server *s)
{
    int64_t now = ch_now_ms();
    sl_error why;
    for (peer *p = s->peers, *nx; p; p = nx) {
        nx = p->next;
        if (p->state == P_HANDSHAKE && now - p->created_ms > s->opts.handshake_timeout_ms) {
            sl_fail(&why, SL_ERR_TIMEOUT, "no TLS handshake within %d ms",
                    s->opts.handshake_timeout_ms);
            close_peer(p, &why);
        } else if (p->state == P_LIVE && s->opts.idle_timeout_ms > 0 &&
                   now - p->last_in_ms > s->opts.idle_timeout_ms) {
            sl_fail(&why, SL_ERR_PEER_LOST, "peer silent for over %d ms", s->opts.idle_timeout_ms);
            close_peer(p, &why);
        }
    }
    if (now < s->next_probe_ms)
        return;
    s->next_probe_ms = now + s->opts.heartbeat_ivl_ms;
    for (peer *p = s->peers, *nx; p; p = nx) {
        nx = p->next;
        if (p->state == P_CLOSING)
            continue;
        if (zmq_send(s->sock, p->rid, p->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0) {
            zmq_send(s->sock, "", 0, ZMQ_DONTWAIT);
            continue;
        }
        if (errno != EHOSTUNREACH)
            continue; /* EAGAIN: queue full, so the peer is there */
        if (p->state == P_TOMB) {
            free_peer(s, p);
        } else if (!p->gone) {
            p->gone = 1; /* its last frames may still wait in the socket: read them first */
            for (int i = 0; i < 4096 && ingest(s, 0, &why) == SL_OK; i++)
                ;
        }
    }
}

sl_code sl_server_poll(sl_server *s, int timeout_ms, sl_server_event *ev, sl_error *err)
{
    if (!s || !ev)
        return sl_fail(err, SL_ERR_INVALID, "sl_server_poll: NULL argument");
    memset(ev, 0, sizeof *ev);
    int64_t deadline = timeout_ms < 0 ? -1 : ch_now_ms() + timeout_ms;
    for (;;) {
        timers(s);
        for (peer *p = s->peers, *nx; p; p = nx) {
            nx = p->next;
            if (ready_to_drive(p) && drive(s, p, ev)) {
                /* rotate, so a busy peer does not starve the others */
                if (s->peers != p && p->state != P_TOMB) {
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
                return SL_OK;
            }
        }
        int64_t now = ch_now_ms();
        long wait = (long)(s->next_probe_ms - now);
        if (deadline >= 0 && deadline - now < wait)
            wait = (long)(deadline - now);
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

static sl_code live_peer(sl_server *s, sl_peer id, peer **out, sl_error *err)
{
    if (!s)
        return sl_fail(err, SL_ERR_INVALID, "NULL server");
    peer *p = find_id(s, id);
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
    sl_code rc = live_peer(s, id, &p, err);
    if (rc)
        return rc;
    if (len > p->sess.bulk_left)
        return sl_fail(err, SL_ERR_INVALID, "asked for %zu bulk bytes, only %llu announced", len,
                       (unsigned long long)p->sess.bulk_left);
    size_t got = 0;
    for (;;) {
        sl_error why;
        int r = ch_sess_read_bulk(&p->sess, dest, len, &got, &why);
        if (r == SL_OK)
            return SL_OK;
        if (r == CH_AGAIN) {
            if (q_pop(p))
                continue;
            int64_t deadline = ch_now_ms() + s->opts.io_timeout_ms;
            while (!p->qhead && p->state == P_LIVE) {
                long wait = (long)(deadline - ch_now_ms());
                if (wait <= 0) {
                    sl_fail(&why, SL_ERR_TIMEOUT, "bulk stalled: nothing for %d ms",
                            s->opts.io_timeout_ms);
                    break;
                }
                rc = ingest(s, wait, err);
                if (rc != SL_OK && rc != SL_ERR_TIMEOUT)
                    return rc;
            }
            if (p->state == P_LIVE && p->qhead)
                continue;
            if (p->state != P_LIVE)
                why = p->reason;
            r = why.code;
        }
        close_peer(p, &why);
        if (err)
            *err = why;
        return (sl_code)r;
    }
}

sl_code sl_server_send(sl_server *s, sl_peer id, const void *msg, size_t len,
                       const struct iovec *bulk, size_t n, sl_error *err)
{
    peer *p = NULL;
    sl_code rc = live_peer(s, id, &p, err);
    if (rc)
        return rc;
    sl_error why;
    rc = ch_sess_send(&p->sess, msg, len, bulk, n, &why);
    if (rc != SL_OK && rc != SL_ERR_INVALID && !(rc == SL_ERR_TOO_LARGE && !p->sess.out.len))
        close_peer(p, &why);
    if (rc && err)
        *err = why;
    return rc;
}

sl_code sl_server_disconnect(sl_server *s, sl_peer id, sl_code code, const char *reason,
                             sl_error *err)
{
    peer *p = NULL;
    sl_code rc = live_peer(s, id, &p, err);
    if (rc)
        return rc;
    if (code <= SL_OK || code >= SL_CODE_COUNT)
        return sl_fail(err, SL_ERR_INVALID, "bad close code %d", (int)code);
    sl_error why;
    sl_fail(&why, code, "%s", reason ? reason : "closed by the server");
    close_peer(p, &why);
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
            close_peer(p, &why);
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

sl_code sl_server_bind(const char *endpoint, const sl_tls_config *cfg, const sl_channel_opts *opts,
                       const sl_server_hooks *hooks, sl_server **out, sl_error *err)
{
    sl_error_clear(err);
    if (!endpoint || !cfg || !out)
        return sl_fail(err, SL_ERR_INVALID, "sl_server_bind: NULL argument");
    *out = NULL;
    sl_server *s = calloc(1, sizeof *s);
    if (!s)
        return sl_fail(err, SL_ERR_NOMEM, "no memory for a server");
    if (opts)
        s->opts = *opts;
    else
        sl_channel_opts_default(&s->opts);
    if (hooks)
        s->hooks = *hooks;
    s->mutual = cfg->mode == SL_TLS_MUTUAL;
    sl_code rc = SL_OK;
    if (s->opts.chunk_size == 0 || s->opts.chunk_size + 65536 > s->opts.max_frame ||
        s->opts.max_peers < 1 || s->opts.heartbeat_ivl_ms < 1)
        rc = sl_fail(err, SL_ERR_INVALID, "bad options (chunk_size must be < max_frame - 64 KiB)");
    if (rc == SL_OK && !(s->ctx = ch_ctx_new(cfg, 1, err)))
        rc = err ? err->code : SL_ERR_CONFIG;
    if (rc == SL_OK && (!(s->zctx = zmq_ctx_new()) || !(s->sock = zmq_socket(s->zctx, ZMQ_ROUTER))))
        rc = sl_fail(err, SL_ERR_IO, "zmq socket: %s", zmq_strerror(errno));
    if (rc == SL_OK)
        rc = ch_zsock_setup(s->sock, &s->opts, 1, err);
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://sluice-smon-%p", (void *)s);
    if (rc == SL_OK && (zmq_socket_monitor(s->sock, mon, ZMQ_EVENT_DISCONNECTED) != 0 ||
                        !(s->mon = zmq_socket(s->zctx, ZMQ_PAIR)) || zmq_connect(s->mon, mon) != 0))
        rc = sl_fail(err, SL_ERR_IO, "socket monitor: %s", zmq_strerror(errno));
    if (rc == SL_OK && zmq_bind(s->sock, endpoint) != 0)
        rc = sl_fail(err, SL_ERR_IO, "cannot bind %s: %s", endpoint, zmq_strerror(errno));
    size_t el = sizeof s->endpoint;
    if (rc == SL_OK && zmq_getsockopt(s->sock, ZMQ_LAST_ENDPOINT, s->endpoint, &el) != 0)
        rc = sl_fail(err, SL_ERR_IO, "ZMQ_LAST_ENDPOINT: %s", zmq_strerror(errno));
    if (rc != SL_OK) {
        sl_server_close(s);
        return rc;
    }
    sl_log(SL_LOG_INFO, CH_LOG, "listening on %s (%s TLS)", s->endpoint,
           s->mutual ? "mutual" : "server-only");
    *out = s;
    return SL_OK;
}

const char *sl_server_endpoint(const sl_server *s)
{
    return s ? s->endpoint : "";
}

int sl_server_fd(const sl_server *s)
{
    int fd = -1;
    size_t l = sizeof fd;
    if (!s || zmq_getsockopt(s->sock, ZMQ_FD, &fd, &l) != 0)
        return -1;
    return fd;
}

size_t sl_server_peer_count(const sl_server *s)
{
    size_t n = 0;
    if (s)
        for (const peer *p = s->peers; p; p = p->next)
            n += p->state == P_LIVE || p->state == P_HANDSHAKE;
    return n;
}

void sl_server_stats(const sl_server *s, sl_channel_stats *st)
{
    if (!s || !st)
        return;
    *st = s->closed_stats;
    for (const peer *p = s->peers; p; p = p->next)
        if (p->have_sess) {
            st->frames_in += p->sess.stats.frames_in;
            st->frames_out += p->sess.stats.frames_out;
            st->bytes_in += p->sess.stats.bytes_in;
            st->bytes_out += p->sess.stats.bytes_out;
            st->buffer_grows += p->sess.stats.buffer_grows;
        }
}

sl_code sl_server_reload_tls(sl_server *s, const sl_tls_config *cfg, sl_error *err)
{
    if (!s)
        return sl_fail(err, SL_ERR_INVALID, "no server");
    SSL_CTX *ctx = ch_ctx_new(cfg, 1, err);
    if (!ctx)
        return err ? err->code : SL_ERR_CONFIG;
    SSL_CTX_free(s->ctx); /* live sessions hold their own reference */
    s->ctx = ctx;
    return SL_OK;
}

void sl_server_close(sl_server *s)
{
    if (!s)
        return;
    sl_error why;
    sl_fail(&why, SL_ERR_CLOSED, "server shutting down");
    for (peer *p = s->peers; p; p = p->next)
        if (p->state == P_LIVE)
            close_peer(p, &why);
    while (s->peers)
        free_peer(s, s->peers);
    if (s->sock) {
        zmq_socket_monitor(s->sock, NULL, 0);
        zmq_close(s->sock);
    }
    if (s->mon)
        zmq_close(s->mon);
    if (s->zctx)
        zmq_ctx_term(s->zctx);
    SSL_CTX_free(s->ctx);
    free(s);
}
