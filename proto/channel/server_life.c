/* The server's life: bind, the state it reports, new TLS material, close. */
#include "server_int.h"

#include "sluice/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        s->opts.max_peers < 1 || s->opts.heartbeat_ivl_ms < 1 || s->opts.max_unauth < 0 ||
        s->opts.max_unauth_per_addr < 0 || s->opts.bulk_grace_ms < 0 || s->opts.linger_ms < 0)
        rc = sl_fail(err, SL_ERR_INVALID,
                     "bad options (chunk_size must be < max_frame - 64 KiB; counts and times "
                     "not negative)");
    if (rc == SL_OK && !(s->ctx = ch_ctx_new(cfg, 1, err)))
        rc = err ? err->code : SL_ERR_CONFIG;
    if (rc == SL_OK && (!(s->zctx = zmq_ctx_new()) || !(s->sock = zmq_socket(s->zctx, ZMQ_ROUTER))))
        rc = sl_fail(err, SL_ERR_IO, "zmq socket: %s", zmq_strerror(errno));
    if (rc == SL_OK)
        rc = ch_zsock_setup(s->sock, &s->opts, 1, err);
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://sluice-smon-%p", (void *)s);
    int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED;
    int unbounded = 0; /* a flood's ACCEPTED and CLOSED events must not be dropped */
    if (rc == SL_OK && (zmq_socket_monitor(s->sock, mon, events) != 0 ||
                        !(s->mon = zmq_socket(s->zctx, ZMQ_PAIR)) ||
                        zmq_setsockopt(s->mon, ZMQ_RCVHWM, &unbounded, sizeof unbounded) != 0 ||
                        zmq_connect(s->mon, mon) != 0))
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
            ch_srv_close_peer(p, &why, 0);
    for (peer *p = s->peers; p; p = p->next) /* the CLOSEs, as far as ZeroMQ takes them */
        while (p->ohead && zmq_send(s->sock, p->rid, p->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0) {
            qnode *q = p->ohead;
            p->ohead = q->next;
            p->obytes -= zmq_msg_size(&q->m);
            zmq_msg_send(&q->m, s->sock, ZMQ_DONTWAIT);
            zmq_msg_close(&q->m);
            free(q);
        }
    while (s->peers)
        ch_srv_free_peer(s, s->peers);
    ch_out_trash(s, 0);
    ch_conn_free_all(s);
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
