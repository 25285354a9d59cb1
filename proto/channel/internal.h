/* Internal pieces of the channel library shared by client.c and server.c. Not installed. */
#ifndef SLUICE_CHANNEL_INTERNAL_H
#define SLUICE_CHANNEL_INTERNAL_H

#include "sluice/channel.h"

#include <openssl/ssl.h>
#include <stdint.h>
#include <zmq.h>

#define CH_LOG "channel"

/* ---- record.c: the framing inside the TLS stream (docs/channel.md) */
enum {
    REC_MESSAGE = 1, /* length = message bytes; aux = bulk bytes that follow */
    REC_BULK = 2,    /* length = chunk bytes; aux = offset of the chunk in the bulk */
    REC_CLOSE = 3,   /* length = reason text bytes; aux = sl_code */
    REC_READY = 4,   /* server -> client once accepted; length 0; aux = protocol version */
    REC_SEALED = 5,  /* sealed bulk: length = chunk bytes in the next frame; aux = offset */
};
#define REC_HDR_LEN   16
#define REC_VERSION   1
#define REC_CLOSE_MAX 1024

typedef struct rec_hdr {
    uint8_t kind, flags;
    uint16_t reserved;
    uint32_t length;
    uint64_t aux;
} rec_hdr;

void rec_encode(uint8_t out[REC_HDR_LEN], const rec_hdr *h);
void rec_decode(const uint8_t in[REC_HDR_LEN], rec_hdr *h);
/* Checks a header against what the reader expects next (bulk_left > 0: a BULK at offset
 * bulk_off); fills err with SL_ERR_PROTOCOL / SL_ERR_TOO_LARGE. */
sl_code rec_check(const rec_hdr *h, uint64_t bulk_left, uint64_t bulk_off, size_t max_message,
                  size_t max_chunk, sl_error *err);

/* ---- bio.c: zero-copy BIOs between OpenSSL and ZeroMQ messages */
typedef struct ch_in {
    zmq_msg_t msg; /* the frame being read; valid when loaded */
    size_t off;
    int loaded;
} ch_in;

typedef struct ch_out {
    uint8_t *buf; /* ciphertext for the next frame; handed to ZeroMQ without a copy */
    size_t len, cap;
    uint64_t grows;
} ch_out;

BIO *ch_bio_in(ch_in *in);
BIO *ch_bio_out(ch_out *out);
/* TLS 1.3 bytes added to `plain` bytes written with `writes` SSL_write calls. */
size_t ch_tls_overhead(size_t plain, size_t writes);

/* ---- frames.c: ciphertext frame buffers, reused (thread-safe: ZeroMQ's I/O thread frees) */
typedef struct ch_pool ch_pool;
/* A pool of buffers of cap bytes; at most keep of them wait for reuse. */
ch_pool *ch_pool_new(size_t cap, unsigned keep);
/* The owner is done: the waiting buffers are freed, those still out are freed when they come
 * back; the pool goes with the last of them. NULL is fine. */
void ch_pool_release(ch_pool *p);
void ch_pool_counts(ch_pool *p, uint64_t *reused, uint64_t *fresh);
/* A buffer of at least *cap bytes: from the pool (then *cap becomes the pool's size) when *cap
 * is above half of it and not over it, else from malloc. p may be NULL. */
uint8_t *ch_buf_alloc(ch_pool *p, size_t *cap);
/* A larger unpooled buffer with the first len bytes of buf (which is freed). */
uint8_t *ch_buf_grow(uint8_t *buf, size_t len, size_t cap);
/* Back to its pool, or freed. NULL is fine. Every buffer of ch_buf_alloc ends here. */
void ch_buf_free(void *buf);

/* ---- sealed.c: bulk sealed with keys exported from the TLS session (docs/channel.md) */
#define CH_SEAL_TAG 16
#define CH_SEAL_MIN (64 * 1024) /* bulk segments shorter go in TLS records on a sealed session */
typedef struct ch_seal ch_seal;
sl_code ch_seal_new(SSL *ssl, ch_seal **out, sl_error *err);
void ch_seal_free(ch_seal *k); /* NULL is fine */
/* Seals n bytes at p into out (n + CH_SEAL_TAG bytes), aad: their SEALED record's header. */
sl_code ch_seal_frame(ch_seal *k, const uint8_t aad[REC_HDR_LEN], const uint8_t *p, size_t n,
                      uint8_t *out, sl_error *err);
/* A SEALED record was read (its header bytes: aad): the next frame holds its len bytes. */
sl_code ch_seal_expect(ch_seal *k, const uint8_t aad[REC_HDR_LEN], uint32_t len, sl_error *err);
int ch_seal_awaits_frame(const ch_seal *k); /* NULL: 0 */
/* Moves the frame in when one is awaited; returns whether it did. */
int ch_seal_take(ch_seal *k, zmq_msg_t *frame);
/* Opens up to n bytes of the frame into to: SL_OK (*got may be 0), CH_AGAIN (no frame yet) or
 * an error; the frame's tag is checked with its last byte. */
int ch_seal_read(ch_seal *k, uint8_t *to, size_t n, size_t *got, sl_error *err);

/* ---- tls.c: contexts and error mapping */
SSL_CTX *ch_ctx_new(const sl_tls_config *cfg, int server, sl_error *err);
/* Maps the failure of an SSL_* call (ret, SSL_get_error) to an sl_error; established tells
 * whether the handshake had completed (then a bad record means tampering). */
sl_code ch_ssl_fail(SSL *ssl, int ret, int established, const char *what, sl_error *err);
/* Verify result of the peer certificate as an sl_error (SL_OK when fine). */
sl_code ch_verify_fail(SSL *ssl, sl_error *err);

/* ---- identity.c */
sl_code ch_identity(SSL *ssl, int mutual, sl_peer_identity *id, sl_error *err);

/* ---- session.c: one TLS session over frames, with the record reader/writer */
typedef sl_code (*ch_emit_fn)(void *ctx, uint8_t *buf, size_t len, sl_error *err);

typedef struct ch_sess {
    SSL *ssl;
    ch_in in;
    ch_out out;
    ch_pool *pool; /* for out.buf (frames.c); NULL: plain malloc */
    const sl_channel_opts *opts;
    ch_emit_fn emit; /* takes ownership of buf in every case */
    void *emit_ctx;
    int established;
    int broken; /* TLS failed: nothing more can be written */
    /* reader */
    uint8_t hdr[REC_HDR_LEN];
    size_t hdr_got;
    int have_hdr;
    rec_hdr cur;
    uint8_t *msg;
    size_t msg_cap, msg_got;
    uint64_t bulk_total, bulk_left; /* of the last MESSAGE */
    uint32_t rec_left;              /* bytes left in the current BULK record */
    int rec_sealed;                 /* the current bulk record is SEALED */
    uint8_t *scratch;               /* for discarded bulk */
    ch_seal *seal;                  /* sealed bulk agreed (sealed.c); NULL: bulk in TLS records */
    sl_channel_stats stats;
    char verify_when[48]; /* the date of a peer certificate that is not valid now (tls.c) */
} ch_sess;

/* An outgoing MESSAGE and its bulk, owned, written a frame at a time (ch_sess_send_step). */
typedef struct ch_unit {
    struct ch_unit *next;
    uint8_t *msg;
    size_t len;
    uint8_t *bulk;
    size_t bulk_len;
    void (*release)(void *arg); /* set: bulk is lent (sl_server_send_lend), given back so */
    void *rel_arg;
    size_t off;    /* bulk bytes written */
    uint64_t boff; /* the same, as the BULK records' offset */
    int started;   /* the MESSAGE is written */
} ch_unit;

enum { CH_AGAIN = -1 }; /* internal: needs another input frame */

sl_code ch_sess_init(ch_sess *s, SSL_CTX *ctx, int server, const sl_channel_opts *opts,
                     ch_emit_fn emit, void *emit_ctx, sl_error *err);
void ch_sess_free(ch_sess *s);
int ch_sess_wants_frame(const ch_sess *s);
void ch_sess_give_frame(ch_sess *s, zmq_msg_t *frame); /* moves the frame in */
int ch_sess_has_input(const ch_sess *s);
/* Handshake step: SL_OK done, CH_AGAIN needs input, else error. Flushes output. */
int ch_sess_handshake(ch_sess *s, sl_error *err);
/* Reads the next record that starts a unit: a MESSAGE (returns SL_OK, *kind REC_MESSAGE,
 * message in s->msg[0..cur.length)), READY, or a CLOSE (returns the peer's code and reason).
 * CH_AGAIN when more input is needed; progress is kept. */
int ch_sess_read_unit(ch_sess *s, int *kind, sl_error *err);
/* Reads up to want bulk bytes into dst (NULL: discard); *got accumulates. */
int ch_sess_read_bulk(ch_sess *s, uint8_t *dst, size_t want, size_t *got, sl_error *err);
sl_code ch_sess_send(ch_sess *s, const void *msg, size_t len, const struct iovec *bulk, size_t n,
                     sl_error *err);
/* Writes the next part of u and flushes it: the MESSAGE with the bulk that fits its frame,
 * then one frame of bulk per call; *done once all of u is out. */
sl_code ch_sess_send_step(ch_sess *s, ch_unit *u, int *done, sl_error *err);
sl_code ch_sess_send_ctl(ch_sess *s, int kind, uint64_t aux, const char *text, sl_error *err);
/* One record of any kind with up to REC_CLOSE_MAX payload bytes, flushed as a frame. */
sl_code ch_sess_send_record(ch_sess *s, int kind, uint64_t aux, const void *payload, size_t len,
                            sl_error *err);
sl_code ch_sess_flush(ch_sess *s, sl_error *err);
/* From now on this session's bulk goes sealed both ways (both ends call it at the point their
 * own exchange agreed on). */
sl_code ch_sess_seal(ch_sess *s, sl_error *err);

/* ---- zsock.c: ZeroMQ socket helpers */
sl_code ch_zsock_setup(void *sock, const sl_channel_opts *opts, int server, sl_error *err);
void ch_zfree(void *data, void *hint); /* zmq_msg_init_data free callback */
int64_t ch_now_ms(void);
int64_t ch_now_us(void);
/* Reads one monitor event; returns its number or 0; *value (may be NULL): its value (the
 * connection's file descriptor for ACCEPTED, DISCONNECTED, CLOSED), -1 if none. */
int ch_monitor_read(void *mon, int *value);

#endif
