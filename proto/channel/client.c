/* The client end: a DEALER carrying one TLS session to the server's ROUTER. */
#include "internal.h"

#include "sluice/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct sl_client {
    void *zctx, *sock, *mon;
    SSL_CTX *ctx;
    ch_sess sess;
    int have_sess;
    sl_channel_opts opts;
    int dead;
    sl_error dead_err;
    char endpoint[256];
};

static sl_code emit(void *ctx, uint8_t *buf, size_t len, sl_error *err)
{
    sl_client *c = ctx;
    zmq_msg_t m;
    if (zmq_msg_init_data(&m, buf, len, ch_zfree, NULL) != 0) {
        ch_buf_free(buf);
        return sl_fail(err, SL_ERR_NOMEM, "zmq_msg_init_data: %s", zmq_strerror(errno));
    }
    if (zmq_msg_send(&m, c->sock, 0) < 0) {
        int e = errno;
        zmq_msg_close(&m);
        if (e == EAGAIN)
            return sl_fail(err, SL_ERR_PEER_LOST, "server took no data for %d ms",
                           c->opts.io_timeout_ms);
        return sl_fail(err, SL_ERR_IO, "zmq send: %s", zmq_strerror(e));
    }
    return SL_OK;
}

/* Waits for the next non-empty frame and hands it to the session. deadline < 0: forever.
 * For the first opts.spin_us it polls without sleeping: a reply to a short call then costs no
 * wake-up of this thread (tens of microseconds on a virtual machine's idle CPU). */
static sl_code wait_frame(sl_client *c, int64_t deadline, sl_error *err)
{
    int64_t spin_end = c->opts.spin_us > 0 ? ch_now_us() + c->opts.spin_us : 0;
    for (;;) {
        zmq_pollitem_t it[2] = {{c->sock, 0, ZMQ_POLLIN, 0}, {c->mon, 0, ZMQ_POLLIN, 0}};
        long wait = -1;
        if (spin_end && ch_now_us() < spin_end)
            wait = 0;
        else if (deadline >= 0) {
            wait = (long)(deadline - ch_now_ms());
            if (wait < 0)
                wait = 0;
        }
        int n = zmq_poll(it, 2, wait);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return sl_fail(err, SL_ERR_IO, "zmq_poll: %s", zmq_strerror(errno));
        }
        /* frames first: what the server sent before the connection went (its CLOSE, say)
         * is read before the loss is reported */
        if (!(it[0].revents & ZMQ_POLLIN) && (it[1].revents & ZMQ_POLLIN)) {
            int ev = ch_monitor_read(c->mon, NULL);
            if (ev == ZMQ_EVENT_DISCONNECTED)
                return sl_fail(err, SL_ERR_PEER_LOST,
                               "connection to %s lost (closed, or heartbeats timed out)",
                               c->endpoint);
        }
        if (it[0].revents & ZMQ_POLLIN) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, c->sock, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&m);
                if (errno == EAGAIN || errno == EINTR)
                    continue;
                return sl_fail(err, SL_ERR_IO, "zmq recv: %s", zmq_strerror(errno));
            }
            size_t sz = zmq_msg_size(&m);
            int more = zmq_msg_more(&m);
            if (more || sz > c->opts.max_frame) {
                zmq_msg_close(&m);
                if (more)
                    return sl_fail(err, SL_ERR_PROTOCOL, "server sent a multipart message");
                return sl_fail(err, SL_ERR_TOO_LARGE, "frame of %zu bytes over the %zu limit", sz,
                               c->opts.max_frame);
            }
            if (sz == 0) { /* the server's liveness probe */
                zmq_msg_close(&m);
                continue;
            }
            ch_sess_give_frame(&c->sess, &m);
            zmq_msg_close(&m);
            return SL_OK;
        }
        if (deadline >= 0 && ch_now_ms() >= deadline)
            return sl_fail(err, SL_ERR_TIMEOUT, "nothing from %s in time", c->endpoint);
    }
}

static void teardown(sl_client *c)
{
    if (c->have_sess)
        ch_sess_free(&c->sess);
    c->have_sess = 0;
    if (c->sock) {
        zmq_socket_monitor(c->sock, NULL, 0);
        zmq_close(c->sock);
    }
    if (c->mon)
        zmq_close(c->mon);
    c->sock = c->mon = NULL;
}

static sl_code set_server_name(sl_client *c, const sl_tls_config *cfg, sl_error *err)
{
    char host[256];
    if (cfg->server_name) {
        snprintf(host, sizeof host, "%s", cfg->server_name);
    } else {
        const char *p = strstr(c->endpoint, "://");
        p = p ? p + 3 : c->endpoint;
        const char *colon = strrchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        if (n && p[0] == '[' && p[n - 1] == ']') {
            p++;
            n -= 2;
        }
        if (n == 0 || n >= sizeof host)
            return sl_fail(err, SL_ERR_INVALID, "no host in endpoint %s", c->endpoint);
        memcpy(host, p, n);
        host[n] = '\0';
    }
    unsigned char a[16];
    int ok;
    if (inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1)
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->sess.ssl), host);
    else
        ok = SSL_set1_host(c->sess.ssl, host) && SSL_set_tlsext_host_name(c->sess.ssl, host);
    if (ok != 1)
        return sl_fail(err, SL_ERR_CONFIG, "cannot expect server name %s", host);
    return SL_OK;
}

static sl_code attempt(sl_client *c, const sl_tls_config *cfg, sl_error *err)
{
    char mon[64];
    c->sock = zmq_socket(c->zctx, ZMQ_DEALER);
    if (!c->sock)
        return sl_fail(err, SL_ERR_IO, "zmq_socket: %s", zmq_strerror(errno));
    snprintf(mon, sizeof mon, "inproc://sluice-mon-%p", c->sock);
    sl_code rc = ch_zsock_setup(c->sock, &c->opts, 0, err);
    if (rc)
        return rc;
    if (zmq_socket_monitor(c->sock, mon, ZMQ_EVENT_DISCONNECTED) != 0 ||
        !(c->mon = zmq_socket(c->zctx, ZMQ_PAIR)) || zmq_connect(c->mon, mon) != 0)
        return sl_fail(err, SL_ERR_IO, "socket monitor: %s", zmq_strerror(errno));
    if (zmq_connect(c->sock, c->endpoint) != 0)
        return sl_fail(err, SL_ERR_INVALID, "cannot connect to %s: %s", c->endpoint,
                       zmq_strerror(errno));
    if ((rc = ch_sess_init(&c->sess, c->ctx, 0, &c->opts, emit, c, err)))
        return rc;
    c->have_sess = 1;
    if ((rc = set_server_name(c, cfg, err)))
        return rc;
    int64_t deadline = ch_now_ms() + c->opts.handshake_timeout_ms;
    int r;
    while ((r = ch_sess_handshake(&c->sess, err)) == CH_AGAIN)
        if ((rc = wait_frame(c, deadline, err)))
            return rc;
    if (r != SL_OK)
        return r;
    int kind = 0; /* wait for READY: the server verified us and its accept hook agreed */
    while ((r = ch_sess_read_unit(&c->sess, &kind, err)) == CH_AGAIN)
        if ((rc = wait_frame(c, deadline, err)))
            return rc;
    if (r != SL_OK)
        return r;
    if (kind != REC_READY)
        return sl_fail(err, SL_ERR_PROTOCOL, "server sent record kind %d before READY", kind);
    return SL_OK;
}

sl_code sl_client_connect(const char *endpoint, const sl_tls_config *cfg,
                          const sl_channel_opts *opts, sl_client **out, sl_error *err)
{
    sl_error_clear(err);
    if (!endpoint || !cfg || !out)
        return sl_fail(err, SL_ERR_INVALID, "sl_client_connect: NULL argument");
    *out = NULL;
    if (strlen(endpoint) >= sizeof((sl_client *)0)->endpoint)
        return sl_fail(err, SL_ERR_INVALID, "endpoint too long");
    sl_client *c = calloc(1, sizeof *c);
    if (!c)
        return sl_fail(err, SL_ERR_NOMEM, "no memory for a client");
    if (opts)
        c->opts = *opts;
    else
        sl_channel_opts_default(&c->opts);
    strcpy(c->endpoint, endpoint);
    if (c->opts.chunk_size == 0 || c->opts.chunk_size + 65536 > c->opts.max_frame ||
        c->opts.connect_attempts < 1) {
        free(c);
        return sl_fail(err, SL_ERR_INVALID,
                       "bad options (chunk_size must be < max_frame - 64 KiB)");
    }
    sl_error cerr;
    c->ctx = ch_ctx_new(cfg, 0, &cerr);
    c->zctx = c->ctx ? zmq_ctx_new() : NULL;
    if (!c->zctx) {
        if (c->ctx)
            sl_fail(&cerr, SL_ERR_IO, "zmq_ctx_new failed");
        if (err)
            *err = cerr;
        sl_code rc = cerr.code;
        SSL_CTX_free(c->ctx);
        free(c);
        return rc;
    }
    sl_code rc = SL_ERR_TIMEOUT;
    int backoff = c->opts.connect_backoff_ms;
    for (int i = 1; i <= c->opts.connect_attempts; i++) {
        sl_error e;
        sl_error_clear(&e);
        rc = attempt(c, cfg, &e);
        if (rc == SL_OK) {
            sl_log(SL_LOG_DEBUG, CH_LOG, "connected to %s (%s)", endpoint,
                   SSL_get_cipher_name(c->sess.ssl));
            *out = c;
            return SL_OK;
        }
        teardown(c);
        int retry =
            (rc == SL_ERR_TIMEOUT || rc == SL_ERR_PEER_LOST) && i < c->opts.connect_attempts;
        sl_log(retry ? SL_LOG_INFO : SL_LOG_WARNING, CH_LOG, "connect %s attempt %d/%d: %s: %s",
               endpoint, i, c->opts.connect_attempts, sl_code_name(rc), e.msg);
        if (!retry) {
            if (rc == SL_ERR_TIMEOUT || rc == SL_ERR_PEER_LOST)
                sl_fail(err, rc, "no session with %s after %d attempts: %s", endpoint, i, e.msg);
            else if (err)
                *err = e;
            break;
        }
        struct timespec ts = {backoff / 1000, (long)(backoff % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        backoff *= 2;
    }
    zmq_ctx_term(c->zctx);
    SSL_CTX_free(c->ctx);
    free(c);
    return rc;
}

/* Ends the session with its reason. A session ended for a timeout (the peer closed it because
 * this side was too slow, or a transfer stalled) answers SL_ERR_CLOSED from then on: every
 * caller reads SL_ERR_TIMEOUT as "nothing yet, the session goes on". */
static sl_code die(sl_client *c, sl_code rc, sl_error *err)
{
    if (rc == SL_ERR_TIMEOUT) {
        rc = SL_ERR_CLOSED;
        if (err)
            err->code = rc;
    }
    if (!c->dead) {
        c->dead = 1;
        if (err)
            c->dead_err = *err;
        else
            sl_fail(&c->dead_err, rc, "session ended (%s)", sl_code_name(rc));
        sl_log(SL_LOG_WARNING, CH_LOG, "session with %s ended: %s: %s", c->endpoint,
               sl_code_name(rc), c->dead_err.msg);
    }
    return rc;
}

static sl_code check_live(sl_client *c, sl_error *err)
{
    if (!c)
        return sl_fail(err, SL_ERR_INVALID, "NULL client");
    if (c->dead) {
        if (err)
            *err = c->dead_err;
        return c->dead_err.code;
    }
    return SL_OK;
}

sl_code sl_client_send(sl_client *c, const void *msg, size_t len, const struct iovec *bulk,
                       size_t n, sl_error *err)
{
    sl_code rc = check_live(c, err);
    if (rc)
        return rc;
    rc = ch_sess_send(&c->sess, msg, len, bulk, n, err);
    if (rc == SL_ERR_INVALID || (rc == SL_ERR_TOO_LARGE && !c->sess.out.len))
        return rc; /* refused before anything was written */
    return rc ? die(c, rc, err) : SL_OK;
}

sl_code sl_client_recv(sl_client *c, const void **msg, size_t *len, uint64_t *bulk_len,
                       int timeout_ms, sl_error *err)
{
    sl_code rc = check_live(c, err);
    if (rc)
        return rc;
    if (!msg || !len)
        return sl_fail(err, SL_ERR_INVALID, "sl_client_recv: NULL argument");
    int64_t deadline = timeout_ms < 0 ? -1 : ch_now_ms() + timeout_ms;
    for (;;) {
        int kind = 0;
        int r = ch_sess_read_unit(&c->sess, &kind, err);
        if (r == SL_OK) {
            if (kind != REC_MESSAGE)
                return die(c, sl_fail(err, SL_ERR_PROTOCOL, "unexpected record kind %d", kind),
                           err);
            *msg = c->sess.msg;
            *len = c->sess.cur.length;
            if (bulk_len)
                *bulk_len = c->sess.bulk_left;
            return SL_OK;
        }
        if (r != CH_AGAIN)
            return die(c, (sl_code)r, err);
        rc = wait_frame(c, deadline, err);
        if (rc == SL_ERR_TIMEOUT)
            return rc;
        if (rc)
            return die(c, rc, err);
    }
}

sl_code sl_client_recv_bulk(sl_client *c, void *dest, size_t len, sl_error *err)
{
    sl_code rc = check_live(c, err);
    if (rc)
        return rc;
    if (len > c->sess.bulk_left)
        return sl_fail(err, SL_ERR_INVALID, "asked for %zu bulk bytes, only %llu announced", len,
                       (unsigned long long)c->sess.bulk_left);
    size_t got = 0;
    for (;;) {
        int r = ch_sess_read_bulk(&c->sess, dest, len, &got, err);
        if (r == SL_OK)
            return SL_OK;
        if (r != CH_AGAIN)
            return die(c, (sl_code)r, err);
        if ((rc = wait_frame(c, ch_now_ms() + c->opts.io_timeout_ms, err)))
            return die(c, rc, err);
    }
}

int sl_client_fds(const sl_client *c, int *fds, int n)
{
    int k = 0;
    void *socks[2] = {c ? c->sock : NULL, c ? c->mon : NULL};
    for (int i = 0; i < 2 && k < n; i++) {
        int fd = -1;
        size_t sz = sizeof fd;
        if (socks[i] && zmq_getsockopt(socks[i], ZMQ_FD, &fd, &sz) == 0 && fd >= 0)
            fds[k++] = fd;
    }
    return k;
}

int sl_client_has_input(sl_client *c)
{
    if (!c || c->dead)
        return 1; /* the next recv reports it at once */
    if (c->have_sess && ch_sess_has_input(&c->sess))
        return 1;
    void *socks[2] = {c->sock, c->mon};
    for (int i = 0; i < 2; i++) {
        int ev = 0;
        size_t sz = sizeof ev;
        if (zmq_getsockopt(socks[i], ZMQ_EVENTS, &ev, &sz) == 0 && (ev & ZMQ_POLLIN))
            return 1;
    }
    return 0;
}

sl_code sl_client_seal_bulk(sl_client *c, sl_error *err)
{
    sl_code rc = check_live(c, err);
    return rc ? rc : ch_sess_seal(&c->sess, err);
}

const char *sl_client_cipher(const sl_client *c)
{
    return c && c->sess.ssl ? SSL_get_cipher_name(c->sess.ssl) : "";
}

void sl_client_stats(const sl_client *c, sl_channel_stats *st)
{
    if (c && st)
        *st = c->sess.stats;
}

void sl_client_close(sl_client *c)
{
    if (!c)
        return;
    if (!c->dead && c->sess.established && !c->sess.broken) {
        int t = c->opts.linger_ms; /* never block long on a full queue at close */
        zmq_setsockopt(c->sock, ZMQ_SNDTIMEO, &t, sizeof t);
        sl_error ignore;
        ch_sess_send_ctl(&c->sess, REC_CLOSE, SL_ERR_CLOSED, "client closed the channel", &ignore);
    }
    teardown(c);
    zmq_ctx_term(c->zctx);
    SSL_CTX_free(c->ctx);
    free(c);
}
