/* Zero-copy BIOs. The read BIO hands OpenSSL the bytes of the received ZeroMQ frame in place;
 * the write BIO appends ciphertext to a buffer the session sized beforehand from the plaintext
 * length (ch_tls_overhead) and later hands to ZeroMQ with zmq_msg_init_data. Neither ever
 * copies into an intermediate memory BIO. */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static BIO_METHOD *meth_in, *meth_out;
static pthread_once_t meth_once = PTHREAD_ONCE_INIT;

static int in_read(BIO *b, char *dst, size_t n, size_t *got)
{
    ch_in *in = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (!in->loaded || in->off >= zmq_msg_size(&in->msg)) {
        BIO_set_retry_read(b);
        *got = 0;
        return 0;
    }
    size_t avail = zmq_msg_size(&in->msg) - in->off;
    size_t k = n < avail ? n : avail;
    memcpy(dst, (const uint8_t *)zmq_msg_data(&in->msg) + in->off, k);
    in->off += k;
    *got = k;
    return 1;
}

static long in_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)num;
    (void)ptr;
    ch_in *in = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_PENDING:
        return in->loaded ? (long)(zmq_msg_size(&in->msg) - in->off) : 0;
    case BIO_CTRL_FLUSH:
        return 1;
    case BIO_CTRL_EOF:
        return 0;
    default:
        return 0;
    }
}

static int out_write(BIO *b, const char *src, size_t n, size_t *put)
{
    ch_out *out = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (out->cap - out->len < n) {
        /* only reached when the reservation was short (handshake, alerts) */
        size_t cap = out->cap ? out->cap : 4096;
        while (cap - out->len < n)
            cap *= 2;
        uint8_t *nb = ch_buf_grow(out->buf, out->len, cap);
        if (!nb)
            return 0;
        out->buf = nb;
        out->cap = cap;
        out->grows++;
    }
    memcpy(out->buf + out->len, src, n);
    out->len += n;
    *put = n;
    return 1;
}

static long out_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)num;
    (void)ptr;
    ch_out *out = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return 1;
    case BIO_CTRL_WPENDING:
        return (long)out->len;
    default:
        return 0;
    }
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static void make_methods(void)
{
    int t = BIO_get_new_index();
    meth_in = BIO_meth_new(t | BIO_TYPE_SOURCE_SINK, "sluice-frame-in");
    if (meth_in) {
        BIO_meth_set_read_ex(meth_in, in_read);
        BIO_meth_set_ctrl(meth_in, in_ctrl);
        BIO_meth_set_create(meth_in, bio_create);
    }
    t = BIO_get_new_index();
    meth_out = BIO_meth_new(t | BIO_TYPE_SOURCE_SINK, "sluice-frame-out");
    if (meth_out) {
        BIO_meth_set_write_ex(meth_out, out_write);
        BIO_meth_set_ctrl(meth_out, out_ctrl);
        BIO_meth_set_create(meth_out, bio_create);
    }
}

static BIO *make(BIO_METHOD **m, void *data)
{
    pthread_once(&meth_once, make_methods);
    if (!*m)
        return NULL;
    BIO *b = BIO_new(*m);
    if (b)
        BIO_set_data(b, data);
    return b;
}

BIO *ch_bio_in(ch_in *in)
{
    return make(&meth_in, in);
}

BIO *ch_bio_out(ch_out *out)
{
    return make(&meth_out, out);
}

size_t ch_tls_overhead(size_t plain, size_t writes)
{
    /* TLS 1.3 record: 5-byte header + 1 inner content type + 16-byte AEAD tag, no padding;
     * each SSL_write starts a new record, then one record per 16 KiB */
    return (plain / 16384 + writes + 1) * 22;
}
