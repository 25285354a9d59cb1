/* Session admission (accept.c). */
#ifndef SLUICE_BE_DAEMON_ACCEPT_H
#define SLUICE_BE_DAEMON_ACCEPT_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/state.h"
#include "session/devices.h"
#include "sluice/channel.h"
#include "sluice/error.h"
#include "sluice/wire.h"

struct be_direct; /* daemon/direct.h */
struct be_lanes;  /* daemon/lanes.h */
/* The encoded ServerMessage{accept} for session s on devs, with the worker's direct endpoint
 * (port and ticket) when direct is not NULL, and its bulk lanes' when lanes is not NULL. */
sl_code be_encode_accept(const struct be_devices *devs, const sl_be_session *s,
                         const struct be_direct *direct, const struct be_lanes *lanes,
                         uint8_t **buf, size_t *len, sl_error *e);
/* A SessionOpen from ev's peer: admitted (a worker process or an in-process session started) or
 * refused with the reason. */
void be_accept_open(struct be_server *srv, const sl_server_event *ev,
                    const Sluice__Wire__SessionOpen *o);
/* The channel's accept hook (user: the server): 0 when the peer's instance is granted. */
int be_accept_hook(void *user, const sl_peer_identity *id, sl_error *why);

#endif
