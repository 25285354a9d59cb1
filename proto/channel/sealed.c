/* Sealed bulk (docs/channel.md, "Sealed bulk"). Once both ends of a session agreed to it
 * (sl_client_seal_bulk / sl_server_seal_bulk, after an exchange of their own), bulk bytes no
 * longer go as TLS records: a SEALED record inside the TLS stream announces a chunk (its length
 * and offset, as a BULK record would) and ends its frame; the next frame is the chunk sealed
 * with AES-128-GCM under a key exported from the TLS 1.3 session (RFC 8446, section 7.5), its
 * 16-byte tag last. The nonce is a 4-byte exported salt and the frame's number in that
 * direction, which both ends count; the announcing header is the additional data. Encryption
 * then reads the plaintext once and writes the frame once, where OpenSSL's record layer copies
 * it twice more on each side (16 KiB at a time); that copying, not the cipher, set the lanes'
 * rate (docs/performance.md, "Where a bulk copy's time goes").
 *
 * Every 2^20 frames of a direction (256 GiB of 256 KiB chunks) that direction's key and salt are
 * exported again for the next epoch, well inside AES-GCM's limits for one key (RFC 8446, 5.5). */
#include "internal.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#define SEAL_LABEL       "EXPORTER-sluice-sealed-bulk"
#define SEAL_KEY_LEN     16
#define SEAL_SALT_LEN    4
#define SEAL_EPOCH_SHIFT 20

typedef struct seal_dir {
    EVP_CIPHER_CTX *ctx;
    uint8_t salt[SEAL_SALT_LEN];
    uint64_t n; /* frames sealed or opened: the nonce's counter */
    int client_to_server;
} seal_dir;

struct ch_seal {
    SSL *ssl;
    seal_dir out, in;
    /* the frame being opened */
    int pending; /* a SEALED header was read: its frame is awaited or being opened */
    int loaded;
    zmq_msg_t frame;
    uint32_t len, off; /* plaintext bytes in the frame; opened so far */
    uint8_t aad[REC_HDR_LEN];
    /* where the frame's bytes were opened to so far (runs of contiguous bytes): unauthenticated
     * until its tag holds, wiped when it does not */
    struct opened {
        uint8_t *p;
        size_t n;
    } * opened;
    size_t nopened, capopened;
};

/* The key and salt of the direction's current epoch, into its context. */
static sl_code rekey(SSL *ssl, seal_dir *d, int enc, sl_error *err)
{
    uint8_t ctx[9], km[SEAL_KEY_LEN + SEAL_SALT_LEN];
    uint64_t epoch = d->n >> SEAL_EPOCH_SHIFT;
    ctx[0] = (uint8_t)d->client_to_server;
    for (int i = 0; i < 8; i++)
        ctx[1 + i] = (uint8_t)(epoch >> (56 - 8 * i));
    if (SSL_export_keying_material(ssl, km, sizeof km, SEAL_LABEL, sizeof SEAL_LABEL - 1, ctx,
                                   sizeof ctx, 1) != 1)
        return sl_fail(err, SL_ERR_TLS, "cannot export the sealed bulk's key from the session");
    memcpy(d->salt, km + SEAL_KEY_LEN, SEAL_SALT_LEN);
    int ok = enc ? EVP_EncryptInit_ex(d->ctx, NULL, NULL, km, NULL)
                 : EVP_DecryptInit_ex(d->ctx, NULL, NULL, km, NULL);
    OPENSSL_cleanse(km, sizeof km);
    return ok == 1 ? SL_OK : sl_fail(err, SL_ERR_TLS, "cannot key the sealed bulk's cipher");
}

static sl_code dir_init(SSL *ssl, seal_dir *d, int c2s, int enc, sl_error *err)
{
    d->client_to_server = c2s;
    if (!(d->ctx = EVP_CIPHER_CTX_new()))
        return sl_fail(err, SL_ERR_NOMEM, "no cipher context for sealed bulk");
    int ok = enc ? EVP_EncryptInit_ex(d->ctx, EVP_aes_128_gcm(), NULL, NULL, NULL)
                 : EVP_DecryptInit_ex(d->ctx, EVP_aes_128_gcm(), NULL, NULL, NULL);
    if (ok != 1 || EVP_CIPHER_CTX_ctrl(d->ctx, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) != 1)
        return sl_fail(err, SL_ERR_TLS, "AES-128-GCM is not available for sealed bulk");
    return rekey(ssl, d, enc, err);
}

sl_code ch_seal_new(SSL *ssl, ch_seal **out, sl_error *err)
{
    ch_seal *k = calloc(1, sizeof *k);
    if (!k)
        return sl_fail(err, SL_ERR_NOMEM, "no memory for sealed bulk");
    int server = SSL_is_server(ssl);
    k->ssl = ssl;
    sl_code rc = dir_init(ssl, &k->out, !server, 1, err);
    if (rc == SL_OK)
        rc = dir_init(ssl, &k->in, server, 0, err);
    if (rc != SL_OK) {
        ch_seal_free(k);
        return rc;
    }
    *out = k;
    return SL_OK;
}

void ch_seal_free(ch_seal *k)
{
    if (!k)
        return;
    EVP_CIPHER_CTX_free(k->out.ctx);
    EVP_CIPHER_CTX_free(k->in.ctx);
    if (k->loaded)
        zmq_msg_close(&k->frame);
    free(k->opened);
    free(k);
}

/* The nonce of the direction's next frame; a new epoch rekeys first. */
static sl_code next_nonce(ch_seal *k, seal_dir *d, int enc, uint8_t iv[12], sl_error *err)
{
    if (d->n && (d->n & ((1ull << SEAL_EPOCH_SHIFT) - 1)) == 0) {
        sl_code rc = rekey(k->ssl, d, enc, err);
        if (rc != SL_OK)
            return rc;
    }
    memcpy(iv, d->salt, SEAL_SALT_LEN);
    for (int i = 0; i < 8; i++)
        iv[SEAL_SALT_LEN + i] = (uint8_t)(d->n >> (56 - 8 * i));
    return SL_OK;
}

sl_code ch_seal_frame(ch_seal *k, const uint8_t aad[REC_HDR_LEN], const uint8_t *p, size_t n,
                      uint8_t *out, sl_error *err)
{
    uint8_t iv[12];
    int l1 = 0, l2 = 0;
    sl_code rc = next_nonce(k, &k->out, 1, iv, err);
    if (rc != SL_OK)
        return rc;
    EVP_CIPHER_CTX *c = k->out.ctx;
    if (EVP_EncryptInit_ex(c, NULL, NULL, NULL, iv) != 1 ||
        EVP_EncryptUpdate(c, NULL, &l1, aad, REC_HDR_LEN) != 1 ||
        EVP_EncryptUpdate(c, out, &l1, p, (int)n) != 1 ||
        EVP_EncryptFinal_ex(c, out + l1, &l2) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, CH_SEAL_TAG, out + n) != 1)
        return sl_fail(err, SL_ERR_TLS, "sealing a bulk frame failed");
    k->out.n++;
    return SL_OK;
}

sl_code ch_seal_expect(ch_seal *k, const uint8_t aad[REC_HDR_LEN], uint32_t len, sl_error *err)
{
    if (k->pending)
        return sl_fail(err, SL_ERR_PROTOCOL, "a SEALED record while another one's frame is due");
    memcpy(k->aad, aad, REC_HDR_LEN);
    k->len = len;
    k->off = 0;
    k->pending = 1;
    return SL_OK;
}

int ch_seal_awaits_frame(const ch_seal *k)
{
    return k && k->pending && !k->loaded;
}

int ch_seal_take(ch_seal *k, zmq_msg_t *frame)
{
    if (!ch_seal_awaits_frame(k))
        return 0;
    zmq_msg_init(&k->frame);
    zmq_msg_move(&k->frame, frame);
    k->loaded = 1;
    return 1;
}

/* The frame's nonce, additional data and tag, before its first byte is opened. */
static sl_code open_start(ch_seal *k, sl_error *err)
{
    uint8_t iv[12];
    size_t size = zmq_msg_size(&k->frame);
    if (size != (size_t)k->len + CH_SEAL_TAG)
        return sl_fail(err, SL_ERR_TAMPERED,
                       "a sealed bulk frame of %zu bytes where %u were announced: frames were "
                       "lost, reordered, duplicated or modified",
                       size, k->len + CH_SEAL_TAG);
    sl_code rc = next_nonce(k, &k->in, 0, iv, err);
    if (rc != SL_OK)
        return rc;
    int l = 0;
    EVP_CIPHER_CTX *c = k->in.ctx;
    uint8_t *tag = (uint8_t *)zmq_msg_data(&k->frame) + k->len;
    if (EVP_DecryptInit_ex(c, NULL, NULL, NULL, iv) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, CH_SEAL_TAG, tag) != 1 ||
        EVP_DecryptUpdate(c, NULL, &l, k->aad, REC_HDR_LEN) != 1)
        return sl_fail(err, SL_ERR_TLS, "opening a sealed bulk frame failed");
    return SL_OK;
}

/* Notes that n bytes at p are about to be opened (joined to the last run when they follow it);
 * 0 when there is no memory to note them (nothing is opened then). */
static int note_opened(ch_seal *k, uint8_t *p, size_t n)
{
    struct opened *last = k->nopened ? &k->opened[k->nopened - 1] : NULL;
    if (last && last->p + last->n == p) {
        last->n += n;
        return 1;
    }
    if (k->nopened == k->capopened) {
        size_t cap = k->capopened ? 2 * k->capopened : 4;
        struct opened *o = realloc(k->opened, cap * sizeof *o);
        if (!o)
            return 0;
        k->opened = o;
        k->capopened = cap;
    }
    k->opened[k->nopened++] = (struct opened){p, n};
    return 1;
}

/* The frame cannot be authenticated: what was opened of it is wiped, so that no byte the peer
 * did not send stays in a destination (a failed copy leaves zeros, never forged data). */
static sl_code wipe_opened(ch_seal *k, sl_code code, const char *what, sl_error *err)
{
    for (size_t i = 0; i < k->nopened; i++)
        memset(k->opened[i].p, 0, k->opened[i].n);
    k->nopened = 0;
    return sl_fail(err, code, "%s", what);
}

int ch_seal_read(ch_seal *k, uint8_t *to, size_t n, size_t *got, sl_error *err)
{
    *got = 0;
    if (!k->loaded)
        return CH_AGAIN;
    sl_code rc;
    if (k->off == 0 && (rc = open_start(k, err)) != SL_OK)
        return rc;
    size_t left = k->len - k->off;
    if (n > left)
        n = left;
    if (n && !note_opened(k, to, n))
        return sl_fail(err, SL_ERR_NOMEM, "no memory to open a sealed bulk frame");
    int l = 0;
    const uint8_t *src = (const uint8_t *)zmq_msg_data(&k->frame) + k->off;
    if (n && EVP_DecryptUpdate(k->in.ctx, to, &l, src, (int)n) != 1)
        return wipe_opened(k, SL_ERR_TLS, "opening a sealed bulk frame failed", err);
    k->off += (uint32_t)n;
    if (k->off == k->len) {
        /* the tag: what was written into the destination is the peer's only if it holds */
        if (EVP_DecryptFinal_ex(k->in.ctx, to + n, &l) != 1)
            return wipe_opened(k, SL_ERR_TAMPERED,
                               "a sealed bulk frame failed authentication: frames were lost, "
                               "reordered, duplicated or modified",
                               err);
        zmq_msg_close(&k->frame);
        k->loaded = k->pending = 0;
        k->nopened = 0;
        k->in.n++;
    }
    *got = n;
    return SL_OK;
}
