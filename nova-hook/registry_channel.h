/* The registry's channel binding: agents reach nh_registry_handle() over the Sluice channel in
 * mutual-TLS mode. The authenticated host is the agent certificate's subject CN; its OU must be
 * NH_AGENT_OU. One RegistryRequest per MESSAGE, one RegistryReply back; no bulk. */
#ifndef NH_REGISTRY_CHANNEL_H
#define NH_REGISTRY_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/error.h"
#include "store.h"

#define NH_AGENT_OU            "sluice-agent"
#define NH_REGCHAN_MAX_MESSAGE (1u << 20) /* largest RegistryRequest accepted, bytes */
#define NH_REGCHAN_MAX_ALLOWED 64         /* entries in the host allow-list */

typedef struct nh_regchan_opts {
    const char *endpoint;                    /* "tcp://IPV4:PORT" or "tcp://IPV4:*" */
    const char *ca_pem, *cert_pem, *key_pem; /* the agents' CA; our certificate and key */
    const char *allowed_hosts;               /* comma-separated agent host names; NULL or "": any */
    nh_store *store;
} nh_regchan_opts;

typedef struct nh_regchan nh_regchan;

sl_code nh_regchan_start(const nh_regchan_opts *o, nh_regchan **out, sl_error *e);
/* The bound endpoint with the real port. */
const char *nh_regchan_endpoint(const nh_regchan *c);
/* Waits up to timeout_ms for one channel event and handles it. A misbehaving peer is
 * disconnected and logged; only a failure of the channel itself is returned. */
sl_code nh_regchan_poll(nh_regchan *c, int timeout_ms, sl_error *e);
/* Closes every session and frees everything. NULL is fine. */
void nh_regchan_stop(nh_regchan *c);

/* The message path without the transport (tests): decodes req_len bytes, runs the handler for
 * host at time now, and returns the packed reply in *out (malloc'd). SL_ERR_PROTOCOL for an
 * undecodable or oversized request (the binding then drops the peer). A store failure still
 * yields a reply (ok = 0) and returns SL_OK; *store_err then holds it (code SL_OK otherwise). */
sl_code nh_regchan_process(nh_store *s, const char *host, int64_t now, const void *req,
                           size_t req_len, uint8_t **out, size_t *out_len, sl_error *store_err,
                           sl_error *e);

#endif
