/* The Sluice channel: TLS 1.3 inside ZeroMQ frames, DEALER (client) <-> ROUTER (server).
 *
 * Every ZeroMQ message carries TLS records; inside the TLS stream a small record framing
 * (docs/channel.md) carries MESSAGEs (one encoded protobuf message each) optionally followed by
 * BULK bytes (memcpy data, module images) that the receiver decrypts straight into the
 * destination the caller names. There is no plaintext mode.
 *
 * Threading: one sl_client or sl_server is used by one thread at a time. For parallel bulk,
 * open several independent channels ("lanes") on several threads.
 * Errors are values: every call fills an sl_error and returns its code; nothing exits. */
#ifndef SLUICE_CHANNEL_H
#define SLUICE_CHANNEL_H

#include "sluice/error.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

typedef enum sl_tls_mode {
    SL_TLS_MUTUAL = 0,      /* both sides present certificates chaining to the configured CA */
    SL_TLS_SERVER_ONLY = 1, /* enrollment: the client verifies the server and sends no cert */
} sl_tls_mode;

/* Credentials. For each of ca/cert/key give either a file path or an in-memory PEM string
 * (the *_pem field wins when both are set). A client in SL_TLS_SERVER_ONLY mode needs only
 * the CA; everyone else needs all three. The strings are read during the call that takes the
 * config and need not outlive it. */
typedef struct sl_tls_config {
    sl_tls_mode mode;
    const char *ca_file, *cert_file, *key_file;
    const char *ca_pem, *cert_pem, *key_pem;
    /* client only: the name or IP address the server certificate must carry (SAN);
     * NULL: the host part of the endpoint ("tcp://HOST:port"). */
    const char *server_name;
} sl_tls_config;

/* Tunables; sl_channel_opts_default() fills the documented defaults. */
typedef struct sl_channel_opts {
    size_t max_message;       /* largest MESSAGE accepted or sent (16 MiB) */
    size_t max_frame;         /* largest ZeroMQ frame accepted (4 MiB) */
    size_t chunk_size;        /* plaintext bytes per ZeroMQ frame when streaming (256 KiB) */
    int hwm;                  /* ZeroMQ SNDHWM/RCVHWM in frames (64); full queues block */
    int handshake_timeout_ms; /* TLS handshake + acceptance, per attempt (10000) */
    int io_timeout_ms;        /* client: a blocked send or a stalled bulk transfer; server: a
                               * peer that takes none of what waits for it (30000) */
    int heartbeat_ivl_ms;     /* ZMTP PING interval (1000) */
    int heartbeat_timeout_ms; /* no traffic for this long: connection dropped (5000) */
    int connect_attempts;     /* client: handshake attempts before giving up (3) */
    int connect_backoff_ms;   /* client: first retry delay, doubled each time (200) */
    int idle_timeout_ms;      /* server: reap sessions silent this long, 0 = never (0) */
    int max_peers;            /* server: concurrent sessions with a certificate (1024); those
                               * without one are bounded by max_unauth */
    int linger_ms;            /* close: time left to deliver the CLOSE record (500) */
    int spin_us;              /* client: a wait for the server polls without sleeping this long
                               * before it blocks (0); saves the wake-up of a sleeping thread */
    /* Limits that keep one peer from stalling or crowding out the others (docs/channel.md,
     * "One peer never stalls the others"); 0 turns each off. */
    uint64_t max_bulk;       /* largest bulk one MESSAGE may announce (1 GiB); more: the
                              * session ends at once with SL_ERR_TOO_LARGE, nothing is read */
    uint64_t bulk_min_rate;  /* server: bytes/s a bulk must arrive at, after bulk_grace_ms
                              * (1 MiB/s); slower: SL_ERR_TIMEOUT */
    int bulk_grace_ms;       /* server: time before the floor applies to a bulk (2000) */
    size_t max_out_queue;    /* server: bytes held for a peer that ZeroMQ did not take yet
                              * (256 MiB); more: that session ends with SL_ERR_TOO_LARGE
                              * (io_timeout_ms applies either way) */
    int max_unauth;          /* server: connections not (yet) authenticated (256): in the
                              * handshake, or every connection in server-only mode; more: the
                              * oldest is closed */
    int max_unauth_per_addr; /* server: the same per source address (32) */
} sl_channel_opts;

void sl_channel_opts_default(sl_channel_opts *o);

/* What the server learned about a peer from its certificate (mutual mode): the instance uuid
 * is the subject CN, the project id is the subject OU. In server-only mode authenticated == 0
 * and the certificate strings are empty. address is filled in both modes. */
typedef struct sl_peer_identity {
    int authenticated;
    char instance_id[64]; /* subject CN */
    char project_id[64];  /* subject OU */
    char serial[80];      /* certificate serial, lower-case hex */
    char fingerprint[65]; /* SHA-256 of the DER certificate, lower-case hex */
    int64_t not_after;    /* certificate notAfter, seconds since the epoch (UTC) */
    char address[64];     /* source IP of the peer's connection (ZeroMQ "Peer-Address" of its
                           * first frame), both modes; empty when unknown (e.g. ipc://) */
} sl_peer_identity;

/* Counters (for tests and the benchmark). */
typedef struct sl_channel_stats {
    uint64_t frames_out, frames_in, bytes_out, bytes_in;
    uint64_t buffer_grows; /* times a ciphertext buffer had to grow after reservation (0 ideal) */
} sl_channel_stats;

/* ---------------------------------------------------------------- client (DEALER) */
typedef struct sl_client sl_client;

/* Connects to endpoint ("tcp://127.0.0.1:5555"), runs the TLS handshake and waits until the
 * server accepted the peer. Retries connect+handshake up to opts->connect_attempts times with
 * backoff on timeouts and lost connections; certificate errors and refusals are final.
 * opts may be NULL (defaults). */
sl_code sl_client_connect(const char *endpoint, const sl_tls_config *cfg,
                          const sl_channel_opts *opts, sl_client **out, sl_error *err);

/* Sends one MESSAGE (1..max_message bytes) followed by the n bulk segments, in order, as one
 * unit. An error ends the session. */
sl_code sl_client_send(sl_client *c, const void *msg, size_t len, const struct iovec *bulk,
                       size_t n, sl_error *err);

/* Receives the next MESSAGE. *msg stays valid until the next recv/close. *bulk_len (may be
 * NULL) is the number of BULK bytes that follow it: they must all be taken with
 * sl_client_recv_bulk before the next recv. timeout_ms < 0 waits forever; SL_ERR_TIMEOUT
 * leaves the session usable. A session that ended answers every call with its reason, and
 * never with SL_ERR_TIMEOUT: one the peer closed for a timeout (its bulk too slow) answers
 * SL_ERR_CLOSED, the message naming the timeout. */
sl_code sl_client_recv(sl_client *c, const void **msg, size_t *len, uint64_t *bulk_len,
                       int timeout_ms, sl_error *err);

/* Decrypts the next len bulk bytes straight into dest (dest NULL: discard them). */
sl_code sl_client_recv_bulk(sl_client *c, void *dest, size_t len, sl_error *err);

/* Sealed bulk (docs/channel.md): from this call on, the session's bulk goes both ways as
 * frames sealed with AES-128-GCM under keys exported from its TLS session, one pass over the
 * bytes instead of TLS records. Both ends must call it at the same point of their exchange (a
 * request and its answer: the answering end before it sends any bulk after the answer, the
 * asking end once it read the answer); a SEALED record on a session that did not is a
 * protocol violation. The server's peer: sl_server_seal_bulk. */
sl_code sl_client_seal_bulk(sl_client *c, sl_error *err);

/* The negotiated cipher suite, e.g. "TLS_AES_128_GCM_SHA256". */
const char *sl_client_cipher(const sl_client *c);
void sl_client_stats(const sl_client *c, sl_channel_stats *st);

/* Waiting for input without holding the client (a client is used by one thread at a time):
 * sl_client_fds gives the file descriptors that become readable when input may have arrived
 * (ZeroMQ's ZMQ_FD of the socket and of its connection monitor: edge-triggered), at most n of
 * them, and returns how many. Before waiting on them, a thread must see sl_client_has_input
 * answer 0 (it then holds the client): input already buffered in the channel, or the socket's
 * pending input, signals no edge; any operation on the client (a send too) may consume one. */
int sl_client_fds(const sl_client *c, int *fds, int n);
int sl_client_has_input(sl_client *c);

/* Sends CLOSE (best effort) and frees everything. NULL is fine. */
void sl_client_close(sl_client *c);

/* ---------------------------------------------------------------- server (ROUTER) */
typedef struct sl_server sl_server;
typedef uint64_t sl_peer; /* a session handle; never reused within one server */

typedef struct sl_server_hooks {
    /* Called once per completed handshake. Return 0 to accept; non-zero refuses: fill *why
     * (code SL_ERR_REFUSED or another, and a message) and the peer is sent a CLOSE with it. */
    int (*accept)(void *user, const sl_peer_identity *id, sl_error *why);
    void *user;
} sl_server_hooks;

typedef enum sl_event_kind {
    SL_EV_NONE = 0, /* nothing happened before the timeout */
    SL_EV_ACCEPTED, /* a peer completed the handshake and was accepted */
    SL_EV_MESSAGE,  /* a MESSAGE arrived (msg, len, bulk_len) */
    SL_EV_CLOSED,   /* a session ended (reason); after this the peer handle is dead */
    SL_EV_BULK,     /* the bulk given to sl_server_take_bulk has all arrived */
} sl_event_kind;

typedef struct sl_server_event {
    sl_event_kind kind;
    sl_peer peer;
    const sl_peer_identity *identity; /* valid until the poll after this peer's CLOSED */
    const void *msg;                  /* MESSAGE: valid until the next poll */
    size_t len;
    uint64_t bulk_len; /* MESSAGE: bulk bytes to take with sl_server_recv_bulk */
    sl_error reason;   /* CLOSED: why (peer's CLOSE, timeout, tampering, revocation...) */
} sl_server_event;

/* Binds a ROUTER to endpoint ("tcp://127.0.0.1:*" picks a port: see sl_server_endpoint). */
sl_code sl_server_bind(const char *endpoint, const sl_tls_config *cfg, const sl_channel_opts *opts,
                       const sl_server_hooks *hooks, sl_server **out, sl_error *err);

/* The bound endpoint with the real port, e.g. "tcp://127.0.0.1:40123". */
const char *sl_server_endpoint(const sl_server *s);

/* Waits up to timeout_ms (< 0: forever) for the next event. Runs timers too (handshake
 * timeouts, dead-peer probes), so call it at least every heartbeat interval. Frames of a peer
 * whose bulk is not yet consumed are held back until it is. */
sl_code sl_server_poll(sl_server *s, int timeout_ms, sl_server_event *ev, sl_error *err);

/* Decrypts the next len bulk bytes of peer's current MESSAGE into dest (NULL: discard),
 * waiting for them: this thread blocks on this one peer (for at most the bulk floor's time,
 * see bulk_min_rate). Frames of other peers arriving meanwhile are queued for later polls.
 * A server of many peers uses sl_server_take_bulk instead. */
sl_code sl_server_recv_bulk(sl_server *s, sl_peer peer, void *dest, size_t len, sl_error *err);

/* Non-blocking: names where all the bulk of peer's current MESSAGE goes (the n segments in
 * order; their lengths add up to exactly the bulk announced; a NULL base discards that
 * segment), decrypts what has arrived and returns at once. A later poll reports SL_EV_BULK
 * when the last byte is in, or SL_EV_CLOSED when the session ends first (the peer trickled
 * under the floor, tampered, left...). The segments must stay valid until one of the two, or
 * until sl_server_disconnect/sl_server_close; the segment list itself is copied. */
sl_code sl_server_take_bulk(sl_server *s, sl_peer peer, const struct iovec *dst, size_t n,
                            sl_error *err);

/* sl_client_seal_bulk for peer's session. */
sl_code sl_server_seal_bulk(sl_server *s, sl_peer peer, sl_error *err);

/* Queues MESSAGE msg followed by the n bulk segments for peer, both copied, and returns at
 * once: the bytes are encrypted and handed to ZeroMQ as fast as the peer takes them (a frame
 * at a time, in the polls that follow). A peer that lets more than max_out_queue bytes wait,
 * or takes nothing for io_timeout_ms while bytes wait, is closed (SL_ERR_TOO_LARGE /
 * SL_ERR_PEER_LOST); the error is returned when this send is the one over the bound. */
sl_code sl_server_send(sl_server *s, sl_peer peer, const void *msg, size_t len,
                       const struct iovec *bulk, size_t n, sl_error *err);

/* The same, but takes bulk (bulk_len bytes from malloc) instead of copying it: the server
 * frees it with free() once sent or dropped, in every case (errors included). */
sl_code sl_server_send_take(sl_server *s, sl_peer peer, const void *msg, size_t len, void *bulk,
                            size_t bulk_len, sl_error *err);

/* The same, but lends bulk: it is encrypted straight from the caller's buffer, which must stay
 * valid and unchanged until the server calls release(arg), exactly once, on its own thread (or
 * before this returns, on an error), when the bytes are sent or dropped. */
sl_code sl_server_send_lend(sl_server *s, sl_peer peer, const void *msg, size_t len,
                            const void *bulk, size_t bulk_len, void (*release)(void *arg),
                            void *arg, sl_error *err);

/* Bytes queued for peer that ZeroMQ has not taken yet (0 for an unknown peer). */
size_t sl_server_queued(const sl_server *s, sl_peer peer);

/* Closes, with a CLOSE(SL_ERR_REVOKED, reason) to the peer, every established session whose
 * identity match() accepts; each yields an SL_EV_CLOSED later. Returns how many. */
typedef int (*sl_peer_match)(void *user, const sl_peer_identity *id);
size_t sl_server_revoke(sl_server *s, sl_peer_match match, void *user, const char *reason);
/* Convenience: match on the instance id (CN). */
size_t sl_server_revoke_instance(sl_server *s, const char *instance_id, const char *reason);

/* Closes one session (CLOSE with code and reason to the peer); SL_EV_CLOSED follows. */
sl_code sl_server_disconnect(sl_server *s, sl_peer peer, sl_code code, const char *reason,
                             sl_error *err);

/* For an external event loop: a file descriptor that becomes readable (edge-triggered, as
 * ZMQ_FD) when the socket may have input. Call sl_server_poll(s, 0, ...) until SL_EV_NONE. */
int sl_server_fd(const sl_server *s);
/* For an external event loop: the longest it may wait before the next sl_server_poll, at most
 * max_ms: 0 while queued output can go on now, 1 while a peer's ZeroMQ queue is full (there is
 * no per-peer writable event to wait for), else max_ms. */
int sl_server_wait_ms(const sl_server *s, int max_ms);
size_t sl_server_peer_count(const sl_server *s);
void sl_server_stats(const sl_server *s, sl_channel_stats *st);

/* Sends CLOSE to every established peer (best effort) and frees everything. NULL is fine. */
void sl_server_close(sl_server *s);

/* Loads new TLS material (a renewed certificate) for the handshakes of sessions accepted from
 * now on; live sessions keep theirs. On failure the server keeps the old material and says
 * why. */
sl_code sl_server_reload_tls(sl_server *s, const sl_tls_config *cfg, sl_error *err);

#endif
