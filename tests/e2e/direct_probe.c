/* sluice-direct-probe: attacks on a session worker's direct endpoint (docs/security.md, "The
 * session worker's endpoint"), for tests/e2e/direct.py. Test tool only; guests written on the
 * wire directly. One JSON object per line on stdout, one per check:
 *
 *   wrong_identity   another instance's certificate (--other-cert) at the worker's port
 *   other_cert       another certificate of the session's own instance (--twin-cert)
 *   garbage          4 KiB of random bytes on a plain TCP connection to the port
 *   wrong_ticket     the session's certificate with a ticket one bit off
 *   attach           the session's certificate and ticket: accepted
 *   call             a cuCtxSynchronize round trip on the direct channel
 *   reused_ticket    the same certificate and ticket again, while the channel is open
 *   parent_call      a call on the backend's channel while the direct one is open (ends it)
 *   after_end        the port, once the session ended
 *   revoke_ready     (--victim-cert) a session of a third instance on its direct channel; the
 *                    test revokes the instance now
 *   revoke           how that channel ended
 *   fresh            a new session of --cert, direct, a round trip: the others did not harm it
 *   gave_up_at_once  a new session whose guest attaches its direct channel, closes it unused (as
 *                    one whose wait for the ticket's answer timed out) and at once makes a call
 *                    on the backend's channel: answered there
 *   gave_up_later    the same with 300 ms between the close and the call
 *
 * Each: {"check": NAME, "code": "ok" | sl_code name, "why": text}. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sluice/channel.h"
#include "sluice/wire.h"

static const char *endpoint, *ca;

struct sess {
    sl_client *parent, *direct;
    uint32_t port;
    uint8_t ticket[32];
    uint64_t ctx, seq;
};

static sl_tls_config tls(const char *cert, const char *key)
{
    return (sl_tls_config){
        .mode = SL_TLS_MUTUAL, .ca_file = ca, .cert_file = cert, .key_file = key};
}

static void report(const char *check, sl_code rc, const char *why)
{
    printf("{\"check\": \"%s\", \"code\": \"%s\", \"why\": \"", check,
           rc == SL_OK ? "ok" : sl_code_name(rc));
    for (const char *p = why ? why : ""; *p; p++)
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if ((unsigned char)*p >= 0x20)
            putchar(*p);
    printf("\"}\n");
    fflush(stdout);
}

static sl_code send_client(sl_client *c, Sluice__Wire__ClientMessage *cm, sl_error *e)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_code rc = sl_wire_encode_client(cm, NULL, &buf, &len, e);
    if (rc == SL_OK)
        rc = sl_client_send(c, buf, len, NULL, 0, e);
    free(buf);
    return rc;
}

/* The next ServerMessage (its bulk skipped). */
static sl_code recv_server(sl_client *c, Sluice__Wire__ServerMessage **sm, sl_error *e)
{
    const void *msg;
    size_t len;
    uint64_t blen;
    sl_code rc = sl_client_recv(c, &msg, &len, &blen, 10000, e);
    if (rc == SL_OK && blen)
        rc = sl_client_recv_bulk(c, NULL, blen, e);
    return rc == SL_OK ? sl_wire_decode_server(msg, len, NULL, sm, e) : rc;
}

/* SessionOpen (with a ticket: on the direct endpoint) and its SessionAccept. */
static sl_code open_on(sl_client *c, struct sess *s, const uint8_t *ticket, sl_error *e)
{
    Sluice__Wire__SessionOpen open = SLUICE__WIRE__SESSION_OPEN__INIT;
    open.protocol_version = 1;
    open.cuda_version = 13000;
    open.client = "sluice-direct-probe";
    if (ticket)
        open.ticket = (ProtobufCBinaryData){32, (uint8_t *)ticket};
    Sluice__Wire__ClientMessage cm = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    cm.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_OPEN;
    cm.open = &open;
    Sluice__Wire__ServerMessage *sm = NULL;
    sl_code rc = send_client(c, &cm, e);
    if (rc == SL_OK)
        rc = recv_server(c, &sm, e);
    if (rc != SL_OK)
        return rc;
    if (sm->kind_case != SLUICE__WIRE__SERVER_MESSAGE__KIND_ACCEPT)
        rc = sl_fail(e, SL_ERR_PROTOCOL, "no SessionAccept");
    else if (!ticket && (!sm->accept->n_devices || !sm->accept->direct_port ||
                         sm->accept->direct_ticket.len != 32))
        rc = sl_fail(e, SL_ERR_PROTOCOL, "SessionAccept without a device or a direct endpoint");
    else if (!ticket) {
        s->ctx = sm->accept->devices[0]->primary_context;
        s->port = sm->accept->direct_port;
        memcpy(s->ticket, sm->accept->direct_ticket.data, 32);
    }
    sl_wire_free_server(sm);
    return rc;
}

static void direct_ep(const struct sess *s, char *ep, size_t n)
{
    snprintf(ep, n, "%.*s:%u", (int)(strrchr(endpoint, ':') - endpoint), endpoint, s->port);
}

static sl_code connect_direct(const struct sess *s, const char *cert, const char *key,
                              const uint8_t *ticket, sl_client **out, sl_error *e)
{
    char ep[300];
    direct_ep(s, ep, sizeof ep);
    sl_channel_opts o;
    sl_channel_opts_default(&o);
    o.connect_attempts = 1;
    o.handshake_timeout_ms = 2000;
    sl_tls_config t = tls(cert, key);
    *out = NULL;
    sl_code rc = sl_client_connect(ep, &t, &o, out, e);
    if (rc == SL_OK)
        rc = open_on(*out, (struct sess *)s, ticket, e);
    if (rc != SL_OK) {
        sl_client_close(*out);
        *out = NULL;
    }
    return rc;
}

static sl_code session(const char *cert, const char *key, struct sess *s, sl_error *e)
{
    memset(s, 0, sizeof *s);
    sl_tls_config t = tls(cert, key);
    sl_code rc = sl_client_connect(endpoint, &t, NULL, &s->parent, e);
    if (rc == SL_OK)
        rc = open_on(s->parent, s, NULL, e);
    if (rc == SL_OK)
        rc = connect_direct(s, cert, key, s->ticket, &s->direct, e);
    return rc;
}

/* cuCtxSynchronize on c and its reply. */
static sl_code round_trip(sl_client *c, struct sess *s, sl_error *e)
{
    Sluice__Cuda__CuCtxSynchronizeRequest rq = SLUICE__CUDA__CU_CTX_SYNCHRONIZE_REQUEST__INIT;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.seq = ++s->seq;
    call.call_id = SL_CALL_cuCtxSynchronize;
    call.context = s->ctx;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_CTX_SYNCHRONIZE;
    call.cu_ctx_synchronize = &rq;
    Sluice__Wire__Call *calls[1] = {&call};
    Sluice__Wire__CallFrame f = SLUICE__WIRE__CALL_FRAME__INIT;
    f.calls = calls;
    f.n_calls = 1;
    Sluice__Wire__ClientMessage cm = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    cm.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS;
    cm.calls = &f;
    Sluice__Wire__ServerMessage *sm = NULL;
    sl_code rc = send_client(c, &cm, e);
    if (rc == SL_OK)
        rc = recv_server(c, &sm, e);
    if (rc == SL_OK && (sm->kind_case != SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES ||
                        sm->replies->n_replies != 1 || sm->replies->replies[0]->result != 0))
        rc = sl_fail(e, SL_ERR_PROTOCOL, "no successful reply to cuCtxSynchronize");
    sl_wire_free_server(sm);
    return rc;
}

static void garbage(const struct sess *s)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    uint8_t junk[4096];
    if (getrandom(junk, sizeof junk, 0) != (ssize_t)sizeof junk)
        memset(junk, 0x5a, sizeof junk);
    int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             write(fd, junk, sizeof junk) == (ssize_t)sizeof junk;
    usleep(200000);
    if (fd >= 0)
        close(fd);
    report("garbage", ok ? SL_OK : SL_ERR_IO, ok ? "4096 bytes sent" : "could not send");
}

int main(int argc, char **argv)
{
    const char *cert = NULL, *key = NULL, *ocert = NULL, *okey = NULL, *tcert = NULL, *tkey = NULL,
               *vcert = NULL, *vkey = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--endpoint"))
            endpoint = v;
        else if (!strcmp(a, "--ca"))
            ca = v;
        else if (!strcmp(a, "--cert"))
            cert = v;
        else if (!strcmp(a, "--key"))
            key = v;
        else if (!strcmp(a, "--other-cert"))
            ocert = v;
        else if (!strcmp(a, "--other-key"))
            okey = v;
        else if (!strcmp(a, "--twin-cert"))
            tcert = v;
        else if (!strcmp(a, "--twin-key"))
            tkey = v;
        else if (!strcmp(a, "--victim-cert"))
            vcert = v;
        else if (!strcmp(a, "--victim-key"))
            vkey = v;
    }
    if (!endpoint || !ca || !cert || !key || !ocert || !okey || !tcert || !tkey || !vcert ||
        !vkey) {
        fprintf(stderr, "usage: sluice-direct-probe --endpoint EP --ca F --cert F --key F "
                        "--other-cert F --other-key F --twin-cert F --twin-key F --victim-cert F "
                        "--victim-key F\n");
        return 2;
    }
    struct sess s;
    sl_error e = {0};
    memset(&s, 0, sizeof s);
    sl_tls_config t = tls(cert, key);
    sl_code rc = sl_client_connect(endpoint, &t, NULL, &s.parent, &e);
    if (rc == SL_OK)
        rc = open_on(s.parent, &s, NULL, &e);
    report("admitted", rc, e.msg);
    if (rc != SL_OK)
        return 1;
    sl_client *c = NULL;
    e.msg[0] = 0;
    report("wrong_identity", connect_direct(&s, ocert, okey, s.ticket, &c, &e), e.msg);
    sl_client_close(c);
    e.msg[0] = 0;
    report("other_cert", connect_direct(&s, tcert, tkey, s.ticket, &c, &e), e.msg);
    sl_client_close(c);
    garbage(&s);
    uint8_t bad[32];
    memcpy(bad, s.ticket, 32);
    bad[7] ^= 1;
    e.msg[0] = 0;
    report("wrong_ticket", connect_direct(&s, cert, key, bad, &c, &e), e.msg);
    sl_client_close(c);
    e.msg[0] = 0;
    report("attach", connect_direct(&s, cert, key, s.ticket, &s.direct, &e), e.msg);
    e.msg[0] = 0;
    report("call", s.direct ? round_trip(s.direct, &s, &e) : SL_ERR_CLOSED, e.msg);
    e.msg[0] = 0;
    report("reused_ticket", connect_direct(&s, cert, key, s.ticket, &c, &e), e.msg);
    sl_client_close(c);
    /* a call on the backend's channel while the direct one is open: the session ends, and the
     * direct channel says why */
    e.msg[0] = 0;
    rc = round_trip(s.parent, &s, &e);
    if (rc == SL_OK) {
        report("parent_call", SL_OK, "answered");
    } else {
        sl_error d = {0};
        Sluice__Wire__ServerMessage *sm = NULL;
        sl_code drc = s.direct ? recv_server(s.direct, &sm, &d) : SL_ERR_CLOSED;
        sl_wire_free_server(sm);
        report("parent_call", drc == SL_OK ? rc : drc, drc == SL_OK ? e.msg : d.msg);
    }
    sl_client_close(s.direct);
    sl_client_close(s.parent);
    usleep(1500000); /* the worker exits */
    e.msg[0] = 0;
    report("after_end", connect_direct(&s, cert, key, s.ticket, &c, &e), e.msg);
    sl_client_close(c);

    struct sess v;
    e.msg[0] = 0;
    rc = session(vcert, vkey, &v, &e);
    report("revoke_ready", rc, e.msg);
    if (rc == SL_OK) {
        Sluice__Wire__ServerMessage *sm = NULL;
        e.msg[0] = 0;
        rc = recv_server(v.direct, &sm, &e);
        sl_wire_free_server(sm);
        report("revoke", rc, e.msg);
    }
    sl_client_close(v.direct);
    sl_client_close(v.parent);

    struct sess f;
    e.msg[0] = 0;
    rc = session(cert, key, &f, &e);
    if (rc == SL_OK)
        rc = round_trip(f.direct, &f, &e);
    report("fresh", rc, e.msg);
    sl_client_close(f.direct);
    sl_client_close(f.parent);

    /* a guest that gave up on its direct channel unused (its wait for the ticket's answer timed
     * out under load) and took the backend's channel: the session goes on there */
    for (int later = 0; later < 2; later++) {
        struct sess g;
        e.msg[0] = 0;
        rc = session(cert, key, &g, &e);
        sl_client_close(g.direct);
        if (later)
            usleep(300000);
        if (rc == SL_OK)
            rc = round_trip(g.parent, &g, &e);
        report(later ? "gave_up_later" : "gave_up_at_once", rc, e.msg);
        sl_client_close(g.parent);
    }
    return 0;
}
