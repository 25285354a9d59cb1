/* One TLS session carried over ZeroMQ frames: handshake, record reader and writer. Transport
 * agnostic: frames come in through ch_sess_give_frame, go out through the emit callback. */
#include "internal.h"

#include <openssl/err.h>
#include <stdlib.h>
#include <string.h>

#define SCRATCH_LEN (64 * 1024)
#define STAGE_LEN   (16384 - REC_HDR_LEN)
/* frames kept for reuse per session: ZeroMQ holds a few in flight (its pipe, the socket) */
#define CH_POOL_KEEP 4

sl_code ch_sess_init(ch_sess *s, SSL_CTX *ctx, int server, const sl_channel_opts *opts,
                     ch_emit_fn emit, void *emit_ctx, sl_error *err)
{
    memset(s, 0, sizeof *s);
    s->opts = opts;
    s->emit = emit;
    s->emit_ctx = emit_ctx;
    s->ssl = SSL_new(ctx);
    BIO *rb = ch_bio_in(&s->in), *wb = ch_bio_out(&s->out);
    if (!s->ssl || !rb || !wb) {
        BIO_free(rb);
        BIO_free(wb);
        SSL_free(s->ssl);
        s->ssl = NULL;
        return sl_fail(err, SL_ERR_NOMEM, "cannot create a TLS session");
    }
    SSL_set_bio(s->ssl, rb, wb);
    /* a full frame (reserve, write_bulk): a chunk with its record headers and TLS overhead;
     * without a pool the session still works, on fresh buffers */
    s->pool = ch_pool_new(opts->chunk_size + ch_tls_overhead(opts->chunk_size, 8) + 4 * REC_HDR_LEN,
                          CH_POOL_KEEP);
    SSL_set_app_data(s->ssl, s); /* tls.c's verify callback notes dates here */
    if (server)
        SSL_set_accept_state(s->ssl);
    else
        SSL_set_connect_state(s->ssl);
    return SL_OK;
}

void ch_sess_free(ch_sess *s)
{
    SSL_free(s->ssl);
    s->ssl = NULL;
    if (s->in.loaded)
        zmq_msg_close(&s->in.msg);
    s->in.loaded = 0;
    ch_buf_free(s->out.buf);
    ch_pool_release(s->pool);
    s->pool = NULL;
    ch_seal_free(s->seal);
    s->seal = NULL;
    free(s->msg);
    free(s->scratch);
    s->out.buf = s->msg = s->scratch = NULL;
}

int ch_sess_wants_frame(const ch_sess *s)
{
    if (s->rec_sealed)
        return ch_seal_awaits_frame(s->seal);
    return !s->in.loaded || s->in.off >= zmq_msg_size((zmq_msg_t *)&s->in.msg);
}

void ch_sess_give_frame(ch_sess *s, zmq_msg_t *frame)
{
    size_t size = zmq_msg_size(frame);
    if (s->rec_sealed && ch_seal_take(s->seal, frame)) {
        s->stats.frames_in++;
        s->stats.bytes_in += size;
        return;
    }
    if (s->in.loaded)
        zmq_msg_close(&s->in.msg);
    zmq_msg_init(&s->in.msg);
    zmq_msg_move(&s->in.msg, frame);
    s->in.off = 0;
    s->in.loaded = 1;
    s->stats.frames_in++;
    s->stats.bytes_in += zmq_msg_size(&s->in.msg);
}

int ch_sess_has_input(const ch_sess *s)
{
    return !ch_sess_wants_frame(s) || (s->ssl && SSL_pending(s->ssl) > 0);
}

sl_code ch_sess_seal(ch_sess *s, sl_error *err)
{
    if (s->broken || !s->established)
        return sl_fail(err, SL_ERR_CLOSED, "no TLS session to seal bulk on");
    if (s->seal)
        return SL_OK;
    return ch_seal_new(s->ssl, &s->seal, err);
}

sl_code ch_sess_flush(ch_sess *s, sl_error *err)
{
    if (!s->out.len)
        return SL_OK;
    uint8_t *buf = s->out.buf;
    size_t len = s->out.len;
    s->stats.buffer_grows += s->out.grows;
    s->out.buf = NULL;
    s->out.len = s->out.cap = 0;
    s->out.grows = 0;
    s->stats.frames_out++;
    s->stats.bytes_out += len;
    return s->emit(s->emit_ctx, buf, len, err);
}

/* Makes room for `plain` bytes written in `writes` SSL_write calls; a new buffer is sized
 * for `hint` plaintext bytes (what the caller still means to write), capped at one chunk. */
static sl_code reserve(ch_sess *s, size_t plain, size_t writes, size_t hint, sl_error *err)
{
    size_t need = plain + ch_tls_overhead(plain, writes);
    if (s->out.cap - s->out.len >= need)
        return SL_OK;
    sl_code rc = ch_sess_flush(s, err);
    if (rc != SL_OK)
        return rc;
    size_t chunk = s->opts->chunk_size;
    size_t cap = hint < chunk ? hint : chunk;
    cap += ch_tls_overhead(cap, writes + 2) + REC_HDR_LEN;
    if (cap < need)
        cap = need;
    ch_buf_free(s->out.buf);
    s->out.buf = ch_buf_alloc(s->pool, &cap);
    if (!s->out.buf) {
        s->out.cap = 0;
        return sl_fail(err, SL_ERR_NOMEM, "cannot allocate a %zu-byte frame", cap);
    }
    s->out.cap = cap;
    return SL_OK;
}

static sl_code tls_write(ch_sess *s, const void *p, size_t n, sl_error *err)
{
    size_t put = 0;
    ERR_clear_error();
    int r = SSL_write_ex(s->ssl, p, n, &put);
    if (r != 1 || put != n) {
        s->broken = 1;
        return ch_ssl_fail(s->ssl, r, s->established, "TLS write", err);
    }
    return SL_OK;
}

/* Pulls decrypted bytes: SL_OK with *got > 0, CH_AGAIN, or an error. */
static int pull(ch_sess *s, void *dst, size_t n, size_t *got, sl_error *err)
{
    ERR_clear_error();
    int r = SSL_read_ex(s->ssl, dst, n, got);
    if (r == 1)
        return SL_OK;
    int e = SSL_get_error(s->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        return CH_AGAIN;
    s->broken = 1;
    sl_code c = ch_ssl_fail(s->ssl, r, s->established, "TLS read", err);
    sl_error ignore;
    ch_sess_flush(s, &ignore); /* the alert, if OpenSSL wrote one */
    return c;
}

int ch_sess_handshake(ch_sess *s, sl_error *err)
{
    if (s->broken)
        return sl_fail(err, SL_ERR_TLS, "TLS session already failed");
    ERR_clear_error();
    if (reserve(s, 8192, 1, 8192, err) != SL_OK)
        return err ? err->code : SL_ERR_NOMEM;
    int r = SSL_do_handshake(s->ssl);
    int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(s->ssl, r);
    sl_error fl;
    sl_code fr = ch_sess_flush(s, &fl);
    if (r == 1) {
        if (fr != SL_OK) {
            if (err)
                *err = fl;
            return fr;
        }
        s->established = 1;
        return SL_OK;
    }
    if (e == SSL_ERROR_WANT_READ) {
        if (fr != SL_OK) {
            if (err)
                *err = fl;
            return fr;
        }
        return CH_AGAIN;
    }
    s->broken = 1;
    return ch_ssl_fail(s->ssl, r, 0, "TLS handshake", err);
}

static int read_header(ch_sess *s, uint64_t bulk_left, uint64_t bulk_off, sl_error *err)
{
    while (s->hdr_got < REC_HDR_LEN) {
        size_t got = 0;
        int r = pull(s, s->hdr + s->hdr_got, REC_HDR_LEN - s->hdr_got, &got, err);
        if (r != SL_OK)
            return r;
        s->hdr_got += got;
    }
    rec_decode(s->hdr, &s->cur);
    s->hdr_got = 0;
    if (s->cur.kind == REC_SEALED && !s->seal)
        return sl_fail(err, SL_ERR_PROTOCOL, "a SEALED record on a session without sealed bulk");
    sl_code rc =
        rec_check(&s->cur, bulk_left, bulk_off, s->opts->max_message, s->opts->max_frame, err);
    if (rc != SL_OK)
        return rc;
    if (s->cur.kind == REC_MESSAGE && s->opts->max_bulk && s->cur.aux > s->opts->max_bulk)
        return sl_fail(err, SL_ERR_TOO_LARGE,
                       "MESSAGE announces %llu bulk bytes, over the %llu-byte limit",
                       (unsigned long long)s->cur.aux, (unsigned long long)s->opts->max_bulk);
    s->have_hdr = 1;
    s->msg_got = 0;
    if (s->cur.length > s->msg_cap && s->cur.kind != REC_BULK && s->cur.kind != REC_SEALED) {
        uint8_t *m = malloc(s->cur.length);
        if (!m)
            return sl_fail(err, SL_ERR_NOMEM, "cannot allocate a %u-byte message", s->cur.length);
        free(s->msg);
        s->msg = m;
        s->msg_cap = s->cur.length;
    }
    return SL_OK;
}

static int read_payload(ch_sess *s, sl_error *err)
{
    while (s->msg_got < s->cur.length) {
        size_t got = 0;
        int r = pull(s, s->msg + s->msg_got, s->cur.length - s->msg_got, &got, err);
        if (r != SL_OK)
            return r;
        s->msg_got += got;
    }
    s->have_hdr = 0;
    return SL_OK;
}

static sl_code peer_closed(ch_sess *s, sl_error *err)
{
    return sl_fail(err, (sl_code)s->cur.aux, "peer closed the session (%s): %.*s",
                   sl_code_name((sl_code)s->cur.aux), (int)s->cur.length,
                   s->msg ? (const char *)s->msg : "");
}

int ch_sess_read_unit(ch_sess *s, int *kind, sl_error *err)
{
    if (s->bulk_left)
        return sl_fail(err, SL_ERR_PROTOCOL,
                       "next message requested while %llu bulk bytes are unread",
                       (unsigned long long)s->bulk_left);
    int r;
    if (!s->have_hdr && (r = read_header(s, 0, 0, err)) != SL_OK)
        return r;
    if ((r = read_payload(s, err)) != SL_OK)
        return r;
    *kind = s->cur.kind;
    if (s->cur.kind == REC_CLOSE)
        return peer_closed(s, err);
    if (s->cur.kind == REC_MESSAGE)
        s->bulk_total = s->bulk_left = s->cur.aux;
    return SL_OK;
}

int ch_sess_read_bulk(ch_sess *s, uint8_t *dst, size_t want, size_t *got, sl_error *err)
{
    while (*got < want) {
        int r;
        if (s->rec_left == 0) {
            if (!s->have_hdr &&
                (r = read_header(s, s->bulk_left, s->bulk_total - s->bulk_left, err)) != SL_OK)
                return r;
            if (s->cur.kind == REC_CLOSE) {
                if ((r = read_payload(s, err)) != SL_OK)
                    return r;
                return peer_closed(s, err);
            }
            if (s->cur.kind != REC_BULK && s->cur.kind != REC_SEALED)
                return sl_fail(err, SL_ERR_PROTOCOL, "record kind %u inside bulk data",
                               s->cur.kind);
            if (s->cur.kind == REC_SEALED) {
                /* it ends its frame: the next frame is the sealed chunk */
                if (!ch_sess_wants_frame(s) || SSL_pending(s->ssl) > 0)
                    return sl_fail(err, SL_ERR_PROTOCOL, "a SEALED record not last in its frame");
                if ((r = ch_seal_expect(s->seal, s->hdr, s->cur.length, err)) != SL_OK)
                    return r;
                s->rec_sealed = 1;
            }
            s->rec_left = s->cur.length;
            s->have_hdr = 0;
        }
        size_t n = want - *got;
        if (n > s->rec_left)
            n = s->rec_left;
        uint8_t *to;
        if (dst) {
            to = dst + *got;
        } else {
            if (!s->scratch && !(s->scratch = malloc(SCRATCH_LEN)))
                return sl_fail(err, SL_ERR_NOMEM, "no memory to discard bulk");
            to = s->scratch;
            if (n > SCRATCH_LEN)
                n = SCRATCH_LEN;
        }
        size_t k = 0;
        if (s->rec_sealed)
            r = ch_seal_read(s->seal, to, n, &k, err);
        else
            r = pull(s, to, n, &k, err);
        if (r != SL_OK) {
            if (r != CH_AGAIN)
                s->broken = 1;
            return r;
        }
        s->rec_left -= (uint32_t)k;
        if (s->rec_left == 0)
            s->rec_sealed = 0;
        s->bulk_left -= k;
        *got += k;
    }
    return SL_OK;
}

/* A record's header and, unless p is NULL (it follows), its length bytes of payload at `at`,
 * for one tls_write of what is staged; returns the bytes put there. */
static size_t stage_record(uint8_t *at, int kind, size_t length, uint64_t aux, const void *p)
{
    rec_hdr rh = {.kind = (uint8_t)kind, .length = (uint32_t)length, .aux = aux};
    rec_encode(at, &rh);
    if (!p)
        return REC_HDR_LEN;
    if (length)
        memcpy(at + REC_HDR_LEN, p, length);
    return REC_HDR_LEN + length;
}

static sl_code write_hdr(ch_sess *s, int kind, uint32_t length, uint64_t aux, sl_error *err)
{
    uint8_t h[REC_HDR_LEN];
    rec_hdr rh = {.kind = (uint8_t)kind, .length = length, .aux = aux};
    rec_encode(h, &rh);
    return tls_write(s, h, sizeof h, err);
}

/* Checks a MESSAGE and its bulk before anything is written; *total: the bulk bytes. */
static sl_code send_check(ch_sess *s, const void *msg, size_t len, const struct iovec *bulk,
                          size_t n, uint64_t *total, sl_error *err)
{
    if (s->broken)
        return sl_fail(err, SL_ERR_CLOSED, "TLS session already failed");
    if (!msg || len == 0)
        return sl_fail(err, SL_ERR_INVALID, "a MESSAGE needs at least one byte");
    if (len > s->opts->max_message)
        return sl_fail(err, SL_ERR_TOO_LARGE, "message of %zu bytes is over the %zu-byte limit",
                       len, s->opts->max_message);
    if (n && !bulk)
        return sl_fail(err, SL_ERR_INVALID, "bulk count %zu without segments", n);
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        if (bulk[i].iov_len && !bulk[i].iov_base)
            return sl_fail(err, SL_ERR_INVALID, "bulk segment %zu has no buffer", i);
        *total += bulk[i].iov_len;
    }
    return SL_OK;
}

/* The MESSAGE record(s); a short message stays in the frame buffer for the first bulk bytes. */
static sl_code write_message(ch_sess *s, const void *msg, size_t len, uint64_t total, sl_error *err)
{
    size_t chunk = s->opts->chunk_size;
    size_t hint = REC_HDR_LEN + len + (total > chunk ? chunk : (size_t)total) + REC_HDR_LEN;
    sl_code rc;
    if (len <= STAGE_LEN) { /* one record for header + message */
        uint8_t stage[REC_HDR_LEN + STAGE_LEN];
        size_t at = stage_record(stage, REC_MESSAGE, len, total, msg);
        if ((rc = reserve(s, at, 1, hint, err)) == SL_OK)
            rc = tls_write(s, stage, at, err);
        return rc;
    }
    if ((rc = reserve(s, REC_HDR_LEN, 1, hint, err)) != SL_OK ||
        (rc = write_hdr(s, REC_MESSAGE, (uint32_t)len, total, err)) != SL_OK)
        return rc;
    for (size_t off = 0; off < len;) {
        size_t k = len - off < chunk ? len - off : chunk;
        if ((rc = reserve(s, k, 1, len - off, err)) != SL_OK ||
            (rc = tls_write(s, (const uint8_t *)msg + off, k, err)) != SL_OK)
            return rc;
        off += k;
    }
    return SL_OK;
}

/* A short MESSAGE and its short bulk in one TLS record: the MESSAGE record, then one BULK record
 * of all the segments (a 64-byte copy, a 4-byte .item() answer). Three TLS records, each
 * encrypted and decrypted on its own, cost more than the copy into the stage. Returns 0 when
 * they do not fit: the caller writes them the long way. */
static int write_joined(ch_sess *s, const void *msg, size_t len, const struct iovec *bulk, size_t n,
                        uint64_t total, sl_code *rc, sl_error *err)
{
    uint8_t stage[REC_HDR_LEN + STAGE_LEN];
    if (!total || total > s->opts->chunk_size || len + total + REC_HDR_LEN > STAGE_LEN)
        return 0;
    size_t at = stage_record(stage, REC_MESSAGE, len, total, msg);
    at += stage_record(stage + at, REC_BULK, total, 0, NULL); /* its segments follow */
    for (size_t i = 0; i < n; i++) {
        if (bulk[i].iov_len)
            memcpy(stage + at, bulk[i].iov_base, bulk[i].iov_len);
        at += bulk[i].iov_len;
    }
    *rc = reserve(s, at, 1, at, err);
    if (*rc == SL_OK)
        *rc = tls_write(s, stage, at, err);
    return 1;
}

/* Sealed bulk: per chunk a SEALED record that ends its frame (after what the frame holds
 * already: the MESSAGE), then the chunk sealed as a frame of its own. A segment under
 * CH_SEAL_MIN goes in TLS records as before, in the MESSAGE's frame: a frame of its own would
 * cost a small copy more than the copies it saves. */
static sl_code seal_bulk(ch_sess *s, const uint8_t *p, size_t left, uint64_t *boff, int one_frame,
                         size_t *used, sl_error *err)
{
    size_t chunk = s->opts->chunk_size;
    sl_code rc;
    *used = 0;
    while (left) {
        size_t k = left < chunk ? left : chunk;
        uint8_t h[REC_HDR_LEN];
        rec_hdr rh = {.kind = REC_SEALED, .length = (uint32_t)k, .aux = *boff};
        rec_encode(h, &rh);
        if ((rc = reserve(s, REC_HDR_LEN, 1, REC_HDR_LEN, err)) != SL_OK ||
            (rc = tls_write(s, h, sizeof h, err)) != SL_OK || (rc = ch_sess_flush(s, err)) != SL_OK)
            return rc;
        size_t cap = k + CH_SEAL_TAG;
        uint8_t *buf = ch_buf_alloc(s->pool, &cap);
        if (!buf)
            return sl_fail(err, SL_ERR_NOMEM, "cannot allocate a %zu-byte frame", k + CH_SEAL_TAG);
        if ((rc = ch_seal_frame(s->seal, h, p, k, buf, err)) != SL_OK) {
            ch_buf_free(buf);
            s->broken = 1;
            return rc;
        }
        s->stats.frames_out++;
        s->stats.bytes_out += k + CH_SEAL_TAG;
        if ((rc = s->emit(s->emit_ctx, buf, k + CH_SEAL_TAG, err)) != SL_OK)
            return rc;
        p += k;
        left -= k;
        *boff += k;
        *used += k;
        if (one_frame)
            return SL_OK;
    }
    return SL_OK;
}

/* BULK records for left bytes at p, at offset *boff of total bulk bytes; a full frame is
 * flushed. one_frame: returns after the first flush. *used: bytes written. */
static sl_code write_bulk(ch_sess *s, const uint8_t *p, size_t left, uint64_t *boff, uint64_t total,
                          int one_frame, size_t *used, sl_error *err)
{
    if (s->seal && left >= CH_SEAL_MIN)
        return seal_bulk(s, p, left, boff, one_frame, used, err);
    size_t chunk = s->opts->chunk_size;
    sl_code rc;
    *used = 0;
    while (left) {
        /* fill what is left of the current frame, else start a new one */
        size_t room = s->out.cap - s->out.len, k = 0;
        size_t ovh = REC_HDR_LEN + ch_tls_overhead(room, 2);
        if (room > ovh && (room - ovh >= left || room - ovh >= 4096))
            k = room - ovh;
        if (k == 0) {
            k = chunk;
            uint64_t rest = total - *boff;
            if ((rc = reserve(s, REC_HDR_LEN + k, 2, rest < chunk ? (size_t)rest : chunk, err)) !=
                SL_OK)
                return rc;
        }
        if (k > left)
            k = left;
        if ((rc = write_hdr(s, REC_BULK, (uint32_t)k, *boff, err)) != SL_OK ||
            (rc = tls_write(s, p, k, err)) != SL_OK)
            return rc;
        p += k;
        left -= k;
        *boff += k;
        *used += k;
        if (s->out.len >= chunk) {
            if ((rc = ch_sess_flush(s, err)) != SL_OK)
                return rc;
            if (one_frame)
                return SL_OK;
        }
    }
    return SL_OK;
}

sl_code ch_sess_send(ch_sess *s, const void *msg, size_t len, const struct iovec *bulk, size_t n,
                     sl_error *err)
{
    uint64_t total = 0, boff = 0;
    sl_code rc = send_check(s, msg, len, bulk, n, &total, err);
    if (rc == SL_OK && write_joined(s, msg, len, bulk, n, total, &rc, err))
        return rc == SL_OK ? ch_sess_flush(s, err) : rc;
    if (rc == SL_OK)
        rc = write_message(s, msg, len, total, err);
    for (size_t i = 0; rc == SL_OK && i < n; i++) {
        size_t used;
        rc = write_bulk(s, bulk[i].iov_base, bulk[i].iov_len, &boff, total, 0, &used, err);
    }
    return rc == SL_OK ? ch_sess_flush(s, err) : rc;
}

sl_code ch_sess_send_step(ch_sess *s, ch_unit *u, int *done, sl_error *err)
{
    sl_code rc;
    *done = 0;
    if (!u->started) {
        uint64_t total;
        struct iovec iov = {u->bulk, u->bulk_len};
        size_t n = u->bulk_len ? 1 : 0;
        if ((rc = send_check(s, u->msg, u->len, &iov, n, &total, err)))
            return rc;
        if (write_joined(s, u->msg, u->len, &iov, n, total, &rc, err)) {
            if (rc != SL_OK)
                return rc;
            u->off = u->boff = u->bulk_len;
        } else if ((rc = write_message(s, u->msg, u->len, total, err))) {
            return rc;
        }
        u->started = 1;
    }
    if (u->off < u->bulk_len) {
        size_t used = 0;
        rc = write_bulk(s, u->bulk + u->off, u->bulk_len - u->off, &u->boff, u->bulk_len, 1, &used,
                        err);
        u->off += used;
        if (rc != SL_OK)
            return rc;
    }
    if (u->off < u->bulk_len)
        return SL_OK;
    *done = 1;
    return ch_sess_flush(s, err);
}

sl_code ch_sess_send_record(ch_sess *s, int kind, uint64_t aux, const void *payload, size_t len,
                            sl_error *err)
{
    if (s->broken || !s->established)
        return sl_fail(err, SL_ERR_CLOSED, "no TLS session to send on");
    if (len > REC_CLOSE_MAX)
        return sl_fail(err, SL_ERR_INVALID, "a control record carries at most %d bytes",
                       REC_CLOSE_MAX);
    uint8_t stage[REC_HDR_LEN + REC_CLOSE_MAX];
    size_t at = stage_record(stage, kind, len, aux, payload ? payload : "");
    sl_code rc = reserve(s, at, 1, at, err);
    if (rc == SL_OK)
        rc = tls_write(s, stage, at, err);
    if (rc == SL_OK)
        rc = ch_sess_flush(s, err);
    return rc;
}

sl_code ch_sess_send_ctl(ch_sess *s, int kind, uint64_t aux, const char *text, sl_error *err)
{
    size_t tl = text ? strlen(text) : 0;
    return ch_sess_send_record(s, kind, aux, text, tl > REC_CLOSE_MAX ? REC_CLOSE_MAX : tl, err);
}
