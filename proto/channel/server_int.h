/* The server's state, shared by server.c (sessions, events), server_life.c (bind, close),
 * server_out.c (what waits to go out to each peer) and server_conn.c (the TCP connections
 * under the peers). Not installed. */
#ifndef SLUICE_CHANNEL_SERVER_INT_H
#define SLUICE_CHANNEL_SERVER_INT_H

#include "internal.h"

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
    qnode *qhead, *qtail; /* frames received, not yet given to the session */
    size_t qbytes;
    sl_error reason;
    sl_peer_identity ident;
    char address[64];   /* Peer-Address of the session's first frame */
    int fd;             /* its connection (ZMQ_SRCFD of the first frame), -1 unknown */
    char conn_addr[64]; /* that connection's remote address and port, when fd is known */
    unsigned conn_port;
    int64_t created_ms, last_in_ms, closed_ms;
    int gone;   /* a probe found its connection closed: report once its last frames are read */
    int probes; /* liveness probes still to send: its connection was reported closed (the
                 * monitor), so ask ZeroMQ whether the routing id is gone (server.c timers) */
    /* bulk of the current MESSAGE: when it started; where sl_server_take_bulk puts it */
    int64_t bulk_start_ms;
    struct iovec *bdst;
    size_t bn, bi, bgot; /* segments, the current one, bytes of it filled */
    int bulk_async;
    /* output (server_out.c): frames ZeroMQ did not take yet, then what is not encrypted yet */
    qnode *ohead, *otail;
    size_t obytes;
    ch_unit *uhead, *utail;
    size_t ubytes;
    int64_t out_since_ms; /* the output last moved (or began to wait) */
    int shut;             /* its connection was shut down */
    struct sl_server *srv;
    struct peer *next;
} peer;

/* A TCP connection the listener accepted (server_conn.c): known from the socket monitor before
 * any frame, so that connections that never finish a handshake can be counted and closed. */
typedef struct ch_conn {
    int fd;
    char addr[64];
    unsigned port;
    int64_t since_ms;
    sl_peer peer; /* the session on it, 0 none yet */
    int authed;   /* its session was accepted with a certificate: no longer counted */
    int shut;     /* shutdown() was called; waiting for ZeroMQ's CLOSED event */
    int seen;     /* its ACCEPTED event was read (else made from a first frame that came first) */
    struct ch_conn *next;
} ch_conn;

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
    ch_conn *conns;
    ch_unit *trash; /* units of closed peers, freed one at a time (server_out.c) */
    int64_t trash_at_ms;
    /* unauthenticated connections closed since the last summary in the log: over the limits,
     * out of time, failed the handshake (not for their certificate) */
    unsigned long evicted, expired, failed;
    int64_t next_summary_ms;
};

/* server.c */
peer *ch_srv_find_id(sl_server *s, sl_peer id);
void ch_srv_free_peer(sl_server *s, peer *victim);
/* The live (accepted, not closed) session id, or an error naming why not. */
sl_code ch_srv_live_peer(sl_server *s, sl_peer id, peer **out, sl_error *err);
/* Ends a session: tells the peer why when the TLS session still works; SL_EV_CLOSED follows.
 * quiet: log at debug only (the flood's peers: the summary counts them). */
void ch_srv_close_peer(peer *p, const sl_error *why, int quiet);

/* server_out.c */
sl_code ch_out_emit(void *ctx, uint8_t *buf, size_t len, sl_error *err);
/* Queues a unit (takes msg, and bulk: freed, or given back with release(arg) when release is
 * set) and sends what ZeroMQ takes now. */
sl_code ch_out_queue(sl_server *s, peer *p, uint8_t *msg, size_t len, uint8_t *bulk,
                     size_t bulk_len, void (*release)(void *), void *arg, sl_error *err);
/* Sends what waits for every peer, a frame per peer in turn, up to about budget frames or
 * budget_us microseconds; returns frames sent. */
int ch_out_pump(sl_server *s, int budget, int budget_us);
/* Before a CLOSE: graceful (code SL_ERR_CLOSED) writes what waits first; else drops it. */
void ch_out_before_close(peer *p, int graceful);
void ch_out_drop_units(peer *p);
/* Frees dropped units, about bytes of them (0: all). */
void ch_out_trash(sl_server *s, size_t bytes);
void ch_out_free(peer *p);
/* 0: output can move now; 1: some peer's ZeroMQ queue is full; -1: nothing waits. */
int ch_out_state(const sl_server *s);
/* Closes peers whose output did not move for io_timeout_ms. */
void ch_out_timers(sl_server *s, int64_t now);
size_t ch_out_bytes(const peer *p);

/* server_conn.c */
/* A monitor event: the connections' table, and probes for the session of a connection that
 * closed. */
void ch_conn_event(sl_server *s, int event, int fd);
/* Links a new peer to its connection (the fd of its first frame); may close other
 * unauthenticated connections to keep the limits. */
void ch_conn_bind_peer(sl_server *s, peer *p, int fd);
void ch_conn_authed(sl_server *s, const peer *p);
/* 0 when the connection p's first frame came on is no longer there: its descriptor closed, or
 * its number now another connection (another remote address or port) or another socket; 1
 * otherwise, and when its connection is not known (p->fd -1: the probes decide). */
int ch_conn_holds(const sl_server *s, const peer *p);
/* Shuts the TCP connection of p down (ZeroMQ then closes it); once. */
void ch_conn_shutdown(sl_server *s, peer *p);
/* Handshake deadline for connections without a session, eviction, the summary in the log. */
void ch_conn_timers(sl_server *s, int64_t now);
void ch_conn_free_all(sl_server *s);

#endif
