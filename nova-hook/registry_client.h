/* The agent's side of the registry channel: connect with the agent certificate (CN = the
 * agent's host name, OU = sluice-agent), send a RegistryRequest, wait for the RegistryReply of
 * the same seq. Depends only on sluice_channel and sluice_control (library
 * novahook_regclient), so the agent links it without nova-hook's server code.
 * One nh_regclient is used by one thread at a time. */
#ifndef NH_REGISTRY_CLIENT_H
#define NH_REGISTRY_CLIENT_H

#include <stdint.h>

#include "sluice/channel.h"
#include "sluice/error.h"
#include "sluice_control.pb-c.h"

#define NH_REGCLIENT_MAX_REPLY (1u << 20) /* largest RegistryReply accepted, bytes */

typedef struct nh_regclient nh_regclient;

/* endpoint: "tcp://HOST:PORT" of sluice-novahook's registry_listen. tls must be SL_TLS_MUTUAL.
 * opts may be NULL (channel defaults). */
sl_code nh_regclient_connect(const char *endpoint, const sl_tls_config *tls,
                             const sl_channel_opts *opts, nh_regclient **out, sl_error *e);

/* Sets req->seq to the next sequence number, sends req and waits up to timeout_ms (< 0:
 * forever) for the reply with that seq; late replies to earlier requests are skipped. A reply
 * with ok = 0 is a refusal, still SL_OK here: read (*reply)->detail. On SL_ERR_TIMEOUT the
 * request may or may not have been applied: resend it (every request is idempotent; usage
 * records are deduplicated by record_id). Any other error ends the session: reconnect.
 * Free *reply with nh_regclient_reply_free. */
sl_code nh_regclient_call(nh_regclient *c, Sluice__Control__RegistryRequest *req, int timeout_ms,
                          Sluice__Control__RegistryReply **reply, sl_error *e);

void nh_regclient_reply_free(Sluice__Control__RegistryReply *r);

/* The underlying channel (tests, stats). */
sl_client *nh_regclient_channel(nh_regclient *c);

/* Closes the session (NULL is fine). */
void nh_regclient_close(nh_regclient *c);

#endif
