/* A session worker's endpoints open with a ticket (docs/remoting.md, "The direct channel" and
 * "Lanes and page-locked staging"): the checks and the answer the direct channel (direct.c) and
 * the bulk lanes (lanes.c) share. */
#include "daemon/ticket.h"

#include <stdlib.h>

#include "sluice/wire.h"

/* Constant time: a ticket's bytes do not tell by timing how many of them were right. */
static int ticket_ok(const uint8_t *want, size_t n, const ProtobufCBinaryData *t)
{
    if (t->len != n)
        return 0;
    volatile uint8_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (uint8_t)(t->data[i] ^ want[i]);
    return diff == 0;
}

const char *be_ticket_check(const sl_server_event *ev, const uint8_t *ticket, size_t n, int spent,
                            const char *first, int *seal)
{
    Sluice__Wire__ClientMessage *m = NULL;
    sl_error e;
    const char *no = NULL;
    *seal = 0;
    if (ev->bulk_len || sl_wire_decode_client(ev->msg, ev->len, NULL, &m, &e) != SL_OK ||
        m->kind_case != SLUICE__WIRE__CLIENT_MESSAGE__KIND_OPEN)
        no = first;
    else if (spent || !ticket_ok(ticket, n, &m->open->ticket))
        no = "wrong or already used ticket";
    else
        *seal = m->open->sealed_bulk;
    if (m)
        sl_wire_free_client(m);
    return no;
}

int be_ticket_accept(sl_server *srv, sl_peer peer, uint64_t sid, int seal)
{
    sl_error e;
    Sluice__Wire__SessionAccept acc = SLUICE__WIRE__SESSION_ACCEPT__INIT;
    acc.protocol_version = 1;
    acc.session_id = sid;
    acc.sealed_bulk = seal;
    Sluice__Wire__ServerMessage sm = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    sm.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_ACCEPT;
    sm.accept = &acc;
    uint8_t *buf = NULL;
    size_t len = 0;
    /* sealed from the answer on: the guest seals once it read it (docs/channel.md) */
    int rc = sl_wire_encode_server(&sm, NULL, &buf, &len, &e) == SL_OK &&
                     sl_server_send(srv, peer, buf, len, NULL, 0, &e) == SL_OK &&
                     (!seal || sl_server_seal_bulk(srv, peer, &e) == SL_OK)
                 ? 0
                 : -1;
    free(buf);
    if (rc)
        sl_server_disconnect(srv, peer, e.code, e.msg, &e);
    return rc;
}
