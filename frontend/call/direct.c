/* The session worker's direct channel, the guest's side: once the backend admitted the session
 * (SessionOpen -> SessionAccept on its port, connection.c), the guest connects to the port
 * SessionAccept named on the same host, with the same certificate, and presents the session's
 * single-use ticket; the worker answers SessionAccept and from then on takes the session's
 * calls itself (backend/daemon/direct.c). If that fails (a firewall, VM networking), the
 * session goes on over the backend's channel: one log line says so. $SLUICE_DIRECT=0 skips the
 * attempt. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call/direct.h"
#include "call/env.h"
#include "component.h"
#include "sluice/log.h"
#include "sluice/wire.h"

#define DIRECT_TIMEOUT_MS 3000 /* the handshake of the one attempt */
/* The ticket's answer, once the handshake showed the worker reachable: a loaded host (64
 * sessions starting together) answers late, and giving up means the slower path for the whole
 * session (the worker lets the unused channel go: docs/remoting.md, "The direct channel") */
#define DIRECT_ANSWER_MS 15000

sl_code sl_fe_open_exchange(sl_client *c, Sluice__Wire__SessionOpen *open, int timeout_ms,
                            Sluice__Wire__ServerMessage **out, sl_error *err)
{
    Sluice__Wire__ClientMessage m = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_OPEN;
    m.open = open;
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_code sc = sl_wire_encode_client(&m, NULL, &buf, &len, err);
    if (sc)
        return sc;
    sc = sl_client_send(c, buf, len, NULL, 0, err);
    free(buf);
    if (sc)
        return sc;
    const void *msg;
    uint64_t blen = 0;
    sc = sl_client_recv(c, &msg, &len, &blen, timeout_ms, err);
    if (sc)
        return sc;
    if (blen)
        return sl_fail(err, SL_ERR_PROTOCOL, "the answer to SessionOpen came with bulk");
    return sl_wire_decode_server(msg, len, NULL, out, err);
}

/* SessionOpen{ticket}, asking for sealed bulk (docs/channel.md) unless SLUICE_SEALED_BULK=0;
 * sealed when the worker's SessionAccept agrees. */
static sl_code present_ticket(sl_client *c, const uint8_t *ticket, size_t ticket_len, sl_error *err)
{
    bool seal = sl_fe_env_uint("SLUICE_SEALED_BULK", 1, 1) != 0;
    Sluice__Wire__SessionOpen open = SLUICE__WIRE__SESSION_OPEN__INIT;
    open.protocol_version = 1;
    open.ticket = (ProtobufCBinaryData){ticket_len, (uint8_t *)ticket};
    open.sealed_bulk = seal;
    Sluice__Wire__ServerMessage *sm = NULL;
    sl_code sc = sl_fe_open_exchange(c, &open, DIRECT_ANSWER_MS, &sm, err);
    if (sc)
        return sc;
    if (sm->kind_case != SLUICE__WIRE__SERVER_MESSAGE__KIND_ACCEPT)
        sc = sl_fail(err, SL_ERR_PROTOCOL, "the worker answered message kind %d, not SessionAccept",
                     (int)sm->kind_case);
    else if (seal && sm->accept->sealed_bulk) /* the worker seals from its answer on */
        sc = sl_client_seal_bulk(c, err);
    sl_wire_free_server(sm);
    return sc;
}

sl_client *sl_fe_worker_connect(const char *endpoint, const sl_tls_config *tls,
                                const sl_channel_opts *opts, uint32_t port, const uint8_t *ticket,
                                size_t ticket_len, char *ep, size_t ep_len, sl_error *err)
{
    const char *colon = strrchr(endpoint, ':');
    if (!colon || !port || port > 65535 ||
        snprintf(ep, ep_len, "%.*s:%u", (int)(colon - endpoint), endpoint, (unsigned)port) >=
            (int)ep_len) {
        sl_fail(err, SL_ERR_CONFIG, "no endpoint for port %u of %s", (unsigned)port, endpoint);
        return NULL;
    }
    sl_channel_opts o = *opts;
    o.connect_attempts = 1; /* same host: the certificate's name is the same (SAN) */
    if (o.handshake_timeout_ms > DIRECT_TIMEOUT_MS)
        o.handshake_timeout_ms = DIRECT_TIMEOUT_MS;
    sl_client *c = NULL;
    if (sl_client_connect(ep, tls, &o, &c, err) == SL_OK &&
        present_ticket(c, ticket, ticket_len, err) == SL_OK)
        return c;
    sl_client_close(c);
    return NULL;
}

sl_client *sl_fe_direct_open(const char *endpoint, const sl_tls_config *tls,
                             const sl_channel_opts *opts, uint32_t port, const uint8_t *ticket,
                             size_t ticket_len)
{
    if (!port || !ticket_len || !sl_fe_env_uint("SLUICE_DIRECT", 1, 1))
        return NULL;
    char ep[600];
    sl_error err;
    sl_client *c =
        sl_fe_worker_connect(endpoint, tls, opts, port, ticket, ticket_len, ep, sizeof ep, &err);
    if (c) {
        sl_log(SL_LOG_DEBUG, SL_FE_COMPONENT, "the session's calls go to its worker at %s", ep);
        return c;
    }
    if (!strrchr(endpoint, ':') || port > 65535)
        return NULL;
    sl_log(SL_LOG_WARNING, SL_FE_COMPONENT,
           "the session worker's direct endpoint %s cannot be used (%s); the calls go through "
           "the backend's channel (slower; SLUICE_DIRECT=0 skips this attempt)",
           ep, err.msg);
    return NULL;
}

void sl_fe_direct_why(sl_client *parent, sl_error *err)
{
    if (!parent || err->code == SL_ERR_TIMEOUT)
        return;
    const void *msg;
    size_t len;
    uint64_t blen;
    sl_error why;
    sl_code sc = sl_client_recv(parent, &msg, &len, &blen, 2000, &why);
    if (sc != SL_OK && sc != SL_ERR_TIMEOUT && sc != SL_ERR_PEER_LOST)
        sl_fail(err, sc, "the backend ended the session: %s", why.msg);
}
