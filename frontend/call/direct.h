/* The session worker's direct channel, the guest's side (direct.c; docs/remoting.md "The direct
 * channel"). */
#ifndef SLUICE_FRONTEND_CALL_DIRECT_H
#define SLUICE_FRONTEND_CALL_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/channel.h"
#include "sluice/wire.h"

/* Sends SessionOpen on c and decodes the answer (no bulk allowed) into *out (free it with
 * sl_wire_free_server): the backend's admission and the worker's direct channel both open so. */
sl_code sl_fe_open_exchange(sl_client *c, Sluice__Wire__SessionOpen *open, int timeout_ms,
                            Sluice__Wire__ServerMessage **out, sl_error *err);

/* Opens the channel to the worker of the session just admitted through endpoint ("tcp://HOST:
 * PORT", the backend's): the same host, the port the backend offered, the same TLS material,
 * then SessionOpen{ticket}. NULL when $SLUICE_DIRECT=0, when no port was offered, or when it
 * fails (one log line says why: the calls then take the backend's channel). */
sl_client *sl_fe_direct_open(const char *endpoint, const sl_tls_config *tls,
                             const sl_channel_opts *opts, uint32_t port, const uint8_t *ticket,
                             size_t ticket_len);

/* Connects to the session worker's port on the host of endpoint (ep: the endpoint used) with
 * the session's TLS material and presents ticket (SessionOpen{ticket}, answered SessionAccept):
 * the direct channel's and each bulk lane's opening (lanes.c), asking for sealed bulk
 * (SessionOpen.sealed_bulk) unless SLUICE_SEALED_BULK=0. NULL and err on failure. */
sl_client *sl_fe_worker_connect(const char *endpoint, const sl_tls_config *tls,
                                const sl_channel_opts *opts, uint32_t port, const uint8_t *ticket,
                                size_t ticket_len, char *ep, size_t ep_len, sl_error *err);

/* The direct channel failed (err): the backend's channel (parent) may say why the session
 * ended (its worker died, a revocation): waits up to 2 s for its CLOSE and, when one came,
 * puts its reason into err. */
void sl_fe_direct_why(sl_client *parent, sl_error *err);

#endif
