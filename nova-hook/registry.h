/* The registry's request handler: all the logic, no transport. A channel binding (or a test)
 * decodes a RegistryRequest, calls nh_registry_handle and sends the reply it fills. */
#ifndef NH_REGISTRY_H
#define NH_REGISTRY_H

#include <stdint.h>

#include "sluice/error.h"
#include "sluice_control.pb-c.h"
#include "store.h"

#define NH_REGISTRY_MAX_GPUS     64
#define NH_REGISTRY_MAX_SLOTS    4096
#define NH_REGISTRY_MAX_RECORDS  1024 /* usage records in one push */
#define NH_REGISTRY_MAX_CA_BYTES 16384

/* Who sent the request. host: the host name the channel authenticated (from the agent's
 * certificate); every request must then be about that host. NULL only for trusted local
 * callers (tests, tools). */
typedef struct nh_peer {
    const char *host;
    int64_t now; /* seconds since the epoch */
} nh_peer;

/* A reply and the memory it points to. usage_ack.record_ids point into the request's strings:
 * pack the reply before freeing the request. */
typedef struct nh_reply {
    Sluice__Control__RegistryReply msg;
    Sluice__Control__UsageAck ack;
    Sluice__Control__Pong pong;
    char detail[SL_ERROR_MSG_MAX];
    char **ids;
} nh_reply;

void nh_reply_init(nh_reply *r);
void nh_reply_free(nh_reply *r);

/* Handles one request. Refusals (bad input, wrong host, unknown agent) are replies with ok = 0
 * and a detail, and return SL_OK; a store failure is a reply with ok = 0 and returns the error
 * (the binding logs it). Usage records are acknowledged only after they are durably stored. */
sl_code nh_registry_handle(nh_store *s, const nh_peer *peer,
                           const Sluice__Control__RegistryRequest *req, nh_reply *rep, sl_error *e);

#endif
