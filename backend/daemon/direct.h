/* The session worker's direct endpoint (direct.c): once the backend admitted a session, its
 * guest talks to the worker process itself, with no hop through the backend's channel thread
 * (docs/remoting.md, "The direct channel"). */
#ifndef SLUICE_BE_DAEMON_DIRECT_H
#define SLUICE_BE_DAEMON_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/channel.h"
#include "sluice/error.h"
#include "sluice/wire.h"

#define BE_DIRECT_TICKET 32 /* bytes of the single-use ticket */

struct be_direct;

struct be_direct_cfg {
    const char *listen;          /* tcp://ADDR:* (the backend's address, any free port) */
    unsigned port_min, port_max; /* else a free port of this range (--direct-ports); 0: any */
    const char *cert, *key, *ca; /* the backend's TLS material (mutual TLS, as its own port) */
    const char *instance, *project;
    const char *peer_sha256; /* the admitted certificate's SHA-256 (hex): only it may connect */
    uint64_t sid;
};

struct be_direct_hooks {
    /* A checked CallFrame or CallbackDone from the guest with the calls' bulk (each call's at
     * a BE_IPC_ALIGN offset, like the parent's messages); takes m and blob. 0 = go on. */
    int (*frame)(void *user, Sluice__Wire__ClientMessage *m, uint8_t *blob, uint64_t blob_len);
    /* The guest's direct channel ended (its close, a lost peer, a violation): code and why. */
    void (*ended)(void *user, sl_code code, const char *why);
    /* A call whose n bytes of bulk come as k pieces on the session's lanes (lanes.c) into dst
     * (inside the frame's blob): 0, or non-zero with why filled. NULL: the session has no
     * lanes, and such a call ends it. */
    int (*lanes)(void *user, uint64_t seq, uint8_t *dst, uint64_t n, uint32_t k, char *why,
                 size_t why_len);
    /* A buffer of len bytes for the bulk of a frame whose every bulk call copies host to device
     * (a slot of the session's page-locked pool), or NULL: the frame's blob is malloc'd. Freed
     * with be_bulk_free. NULL: always malloc'd. */
    uint8_t *(*staged)(void *user, uint64_t len);
    void *user;
};

/* Binds the endpoint and draws the ticket. */
sl_code be_direct_open(const struct be_direct_cfg *c, struct be_direct **out, sl_error *e);
/* Binds a mutual-TLS channel server for c's endpoint (a free port, or one of c's range) with
 * the backend's material: the direct endpoint's and each lane's (lanes.c). */
sl_code be_direct_bind(const struct be_direct_cfg *c, const sl_channel_opts *opts,
                       const sl_server_hooks *hooks, sl_server **srv, uint16_t *port, sl_error *e);
uint16_t be_direct_port(const struct be_direct *d);
const uint8_t *be_direct_ticket(const struct be_direct *d);
/* The descriptors the worker's loop waits on (the channel's, the queue's): 2. */
void be_direct_fds(const struct be_direct *d, int fds[2]);
int be_direct_wait_ms(const struct be_direct *d, int max_ms);
/* 1 once the guest opened the direct channel with the ticket (any thread). */
int be_direct_attached(const struct be_direct *d);
/* The guest took the backend's channel instead: no connection is accepted from now on. */
void be_direct_shut(struct be_direct *d);
/* The guest's calls come on the backend's channel while the direct one is attached: 1 when the
 * guest never sent anything on it (it gave up waiting for the ticket's answer, as under load,
 * and took the backend's channel): the direct channel is let go (shut, no end of the session)
 * and the calls are the session's; 0 when it was used (then the session must end). */
int be_direct_let_go_unused(struct be_direct *d);
/* Any thread: a message for the guest and its bulk (both malloc'd, taken), or the end of the
 * channel (code, why); sent by the worker's main thread at its next turn. */
void be_direct_push(struct be_direct *d, uint8_t *msg, size_t len, uint8_t *bulk, size_t blen);
void be_direct_push_close(struct be_direct *d, sl_code code, const char *why);
/* The worker's main thread: sends what waits, handles the channel's events. 1 = did work. */
int be_direct_turn(struct be_direct *d, const struct be_direct_hooks *h);
/* Closes the guest's channel with code and why (best effort), then everything. NULL is fine. */
void be_direct_close(struct be_direct *d, sl_code code, const char *why);

#endif
