/* The opening of a session worker's own endpoints, the direct channel and the bulk lanes
 * (ticket.c): a connection's first message is SessionOpen with the endpoint's single-use
 * ticket, answered SessionAccept. */
#ifndef SLUICE_BE_DAEMON_TICKET_H
#define SLUICE_BE_DAEMON_TICKET_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/channel.h"

/* The first message ev of a connection, checked: SessionOpen carrying exactly the n bytes of
 * ticket (compared in constant time), and the endpoint not spent. NULL when it is (*seal: the
 * guest asks for sealed bulk); else why not, for the refusal (first: what the endpoint opens
 * with, when the message is no SessionOpen). */
const char *be_ticket_check(const sl_server_event *ev, const uint8_t *ticket, size_t n, int spent,
                            const char *first, int *seal);
/* Answers peer's accepted opening: SessionAccept{session sid, sealed_bulk seal}, then its bulk
 * sealed when asked. 0; -1 after a failure (the peer is disconnected with its reason). */
int be_ticket_accept(sl_server *srv, sl_peer peer, uint64_t sid, int seal);

#endif
