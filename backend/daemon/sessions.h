/* The channel thread's sessions (sessions.c): lookup, ending, freeing, protocol violations, the
 * workers' usage records and the outbox's drain. */
#ifndef SLUICE_BE_DAEMON_SESSIONS_H
#define SLUICE_BE_DAEMON_SESSIONS_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/state.h"
#include "sluice/channel.h"
#include "sluice/error.h"

/* CLOCK_MONOTONIC in ms. */
int64_t be_sessions_now_ms(void);
/* The live (not ended) session of peer; NULL when none. */
struct be_sess_node *be_sessions_find(struct be_server *srv, sl_peer peer);
/* The session of id, ended or not; NULL when none. */
struct be_sess_node *be_sessions_find_id(struct be_server *srv, uint64_t id);
/* A usage record from session n's worker (n NULL: an in-process session's, found by its id):
 * checked against the session, then queued for the agent or logged. */
void be_sessions_usage(struct be_server *srv, struct be_sess_node *n, const uint8_t *rec,
                       size_t len);
/* The final record of a session whose worker died before sending its own. */
void be_sessions_final_lost(struct be_server *srv, struct be_sess_node *n);
/* Sends or applies what the sessions' threads left in the outbox. */
void be_sessions_drain_outbox(struct be_server *srv);
/* Frees what waits for n's worker (and a frame whose bulk is still on its way). */
void be_sessions_tx_free(struct be_sess_node *n);
/* Ends n's session (idempotent): reported to the agent, its worker told (EOF, then SIGKILL after
 * BE_WORKER_GRACE_MS) or its thread closed. The node stays until it is reaped. */
void be_sessions_end(struct be_server *srv, struct be_sess_node *n, const char *why);
void be_sessions_node_free(struct be_server *srv, struct be_sess_node *n);
/* peer broke the protocol: it is disconnected with code and why, and its session ends. */
void be_sessions_violation(struct be_server *srv, sl_peer peer, sl_code code, const char *why);

#endif
