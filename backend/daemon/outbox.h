/* The outbox: what a session's worker thread sends through the channel thread (replies, and the
 * end of a session found late), or in a session worker process through its sink to the parent. */
#ifndef SLUICE_BE_DAEMON_OUTBOX_H
#define SLUICE_BE_DAEMON_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/channel.h"
#include "sluice/error.h"
#include "sluice/wire.h"

struct be_server;

void be_outbox_push_reply(struct be_server *srv, sl_peer peer, uint8_t *msg, size_t len,
                          uint8_t *bulk, size_t bulk_len);
/* m encoded and pushed as a reply without bulk (a host callback's request, a StreamDone). */
sl_code be_outbox_push_message(struct be_server *srv, sl_peer peer,
                               const Sluice__Wire__ServerMessage *m, sl_error *e);
/* Ends a session from the worker side (protocol violation found late). */
void be_outbox_push_close(struct be_server *srv, sl_peer peer, sl_code code, const char *why);
/* An in-process session's usage record (thread mode; user: the server), taken by the channel
 * thread (sessions.c). */
void be_outbox_usage(void *user, const uint8_t *rec, size_t len);
/* In a session worker process (srv == NULL) the outbox goes to this sink instead; it takes msg
 * and bulk (malloc'd). */
typedef void (*be_outbox_sink)(int close_it, sl_code code, const char *why, uint8_t *msg,
                               size_t len, uint8_t *bulk, size_t blen);
void be_outbox_set_sink(be_outbox_sink f);

#endif
