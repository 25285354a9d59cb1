/* A hostile channel client for tests (rawpeer.h). */
#include "rawpeer.h"

#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rawpeer {
    void *zctx, *sock;
    SSL_CTX *ctx;
    ch_sess sess;
    sl_channel_opts opts;
    int closed; /* the server's CLOSE was read */
};

static sl_code emit(void *ctx, uint8_t *buf, size_t len, sl_error *err)
{
    rawpeer *r = ctx;
    int rc = zmq_send(r->sock, buf, len, 0);
    ch_buf_free(buf);
    if (rc < 0)
        return sl_fail(err, SL_ERR_IO, "zmq_send: %s", zmq_strerror(errno));
    return SL_OK;
}

/* The next non-empty frame into the session; SL_ERR_TIMEOUT at the deadline. */
static sl_code next_frame(rawpeer *r, int64_t deadline, sl_error *err)
{
    for (;;) {
        long wait = (long)(deadline - ch_now_ms());
        if (wait < 0)
            return sl_fail(err, SL_ERR_TIMEOUT, "nothing from the server in time");
        zmq_pollitem_t it = {r->sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, wait) <= 0)
            continue;
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, r->sock, 0) < 0) {
            zmq_msg_close(&m);
            return sl_fail(err, SL_ERR_IO, "zmq recv: %s", zmq_strerror(errno));
        }
        if (zmq_msg_size(&m) == 0) {
            zmq_msg_close(&m);
            continue;
        }
        ch_sess_give_frame(&r->sess, &m);
        zmq_msg_close(&m);
        return SL_OK;
    }
}

sl_code raw_connect(const char *endpoint, const char *src, const sl_tls_config *cfg, int timeout_ms,
                    rawpeer **out, sl_error *err)
{
    *out = NULL;
    rawpeer *r = calloc(1, sizeof *r);
    if (!r)
        return sl_fail(err, SL_ERR_NOMEM, "no memory");
    sl_channel_opts_default(&r->opts);
    r->zctx = zmq_ctx_new();
    r->sock = zmq_socket(r->zctx, ZMQ_DEALER);
    int zero = 0, second = 1000;
    zmq_setsockopt(r->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(r->sock, ZMQ_SNDTIMEO, &second, sizeof second); /* the server may be gone */
    char ep[300];
    if (src) /* ZeroMQ's "tcp://SOURCE:0;HOST:PORT" */
        snprintf(ep, sizeof ep, "tcp://%s:0;%s", src, endpoint + strlen("tcp://"));
    else
        snprintf(ep, sizeof ep, "%s", endpoint);
    sl_code rc = SL_OK;
    if (zmq_connect(r->sock, ep) != 0)
        rc = sl_fail(err, SL_ERR_IO, "connect %s: %s", ep, zmq_strerror(errno));
    if (rc == SL_OK && !(r->ctx = ch_ctx_new(cfg, 0, err)))
        rc = err ? err->code : SL_ERR_CONFIG;
    if (rc == SL_OK)
        rc = ch_sess_init(&r->sess, r->ctx, 0, &r->opts, emit, r, err);
    int64_t deadline = ch_now_ms() + timeout_ms;
    int h = CH_AGAIN;
    while (rc == SL_OK && (h = ch_sess_handshake(&r->sess, err)) == CH_AGAIN)
        rc = next_frame(r, deadline, err);
    if (rc == SL_OK && h != SL_OK)
        rc = (sl_code)h;
    int kind = 0, u = CH_AGAIN;
    while (rc == SL_OK && (u = ch_sess_read_unit(&r->sess, &kind, err)) == CH_AGAIN)
        rc = next_frame(r, deadline, err);
    if (rc == SL_OK && u != SL_OK)
        rc = (sl_code)u;
    if (rc == SL_OK && kind != REC_READY)
        rc = sl_fail(err, SL_ERR_PROTOCOL, "record kind %d before READY", kind);
    if (rc != SL_OK) {
        raw_close(r);
        return rc;
    }
    *out = r;
    return SL_OK;
}

sl_code raw_record(rawpeer *r, int kind, uint64_t aux, const void *payload, size_t len,
                   sl_error *err)
{
    return ch_sess_send_record(&r->sess, kind, aux, payload, len, err);
}

sl_code raw_header(rawpeer *r, int kind, uint32_t length, uint64_t aux, sl_error *err)
{
    uint8_t h[REC_HDR_LEN];
    rec_hdr rh = {.kind = (uint8_t)kind, .length = length, .aux = aux};
    rec_encode(h, &rh);
    size_t put = 0;
    if (SSL_write_ex(r->sess.ssl, h, sizeof h, &put) != 1 || put != sizeof h)
        return sl_fail(err, SL_ERR_TLS, "TLS write of a record header failed");
    return ch_sess_flush(&r->sess, err);
}

sl_code raw_seal(rawpeer *r, sl_error *err)
{
    return ch_sess_seal(&r->sess, err);
}

sl_code raw_recv(rawpeer *r, int timeout_ms, const void **msg, size_t *len, sl_error *err)
{
    int64_t deadline = ch_now_ms() + timeout_ms;
    for (;;) {
        int kind = 0, u;
        if (r->sess.bulk_left) {
            size_t got = 0;
            while ((u = ch_sess_read_bulk(&r->sess, NULL, (size_t)r->sess.bulk_left, &got, err)) ==
                   CH_AGAIN) {
                sl_code rc = next_frame(r, deadline, err);
                if (rc != SL_OK)
                    return rc;
            }
            if (u != SL_OK)
                return (sl_code)u;
        }
        u = ch_sess_read_unit(&r->sess, &kind, err);
        if (u != CH_AGAIN && kind == REC_CLOSE)
            r->closed = 1;
        if (u == SL_OK && kind == REC_MESSAGE) {
            *msg = r->sess.msg;
            *len = r->sess.cur.length;
            return SL_OK;
        }
        if (u != CH_AGAIN)
            return u == SL_OK ? sl_fail(err, SL_ERR_PROTOCOL, "record kind %d", kind) : (sl_code)u;
        sl_code rc = next_frame(r, deadline, err);
        if (rc != SL_OK)
            return rc;
    }
}

int raw_peer_closed(const rawpeer *r)
{
    return r->closed;
}

void raw_close(rawpeer *r)
{
    if (!r)
        return;
    if (r->sess.ssl)
        ch_sess_free(&r->sess);
    SSL_CTX_free(r->ctx);
    zmq_close(r->sock);
    zmq_ctx_term(r->zctx);
    free(r);
}
