/* The session worker's direct endpoint. After the backend admitted a session (mutual TLS on its
 * port, grants, limits, the accounting slot), the worker binds a channel server of its own on
 * the backend's address with a free port and tells the guest that port and a random single-use
 * ticket in SessionAccept (which goes through the backend as before). The guest connects with
 * the certificate the session was admitted with (the accept hook refuses any other: another
 * instance, project or certificate), sends SessionOpen{ticket}, and from then on its calls and
 * their replies go guest <-> worker, each direction crossing one TLS stream that this worker's
 * main thread encrypts and decrypts: no process hop, no shared channel thread of the tenant.
 * A wrong or used ticket is refused; once one guest is attached, or the guest took the
 * backend's channel instead (be_direct_shut), every connection is refused; the session's end
 * (revocation included) closes the channel. The worker's loop (worker.c) waits on
 * be_direct_fds and calls be_direct_turn. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "daemon/direct.h"
#include "bounds.h"
#include "daemon/ipc.h"
#include "daemon/ticket.h"
#include "session/bulk_pool.h"
#include "sluice/channel.h"
#include "sluice/log.h"

struct d_out {
    struct d_out *next;
    uint8_t *msg, *bulk;
    size_t len, blen;
    int close;
    sl_code code;
    char why[200];
};

struct be_direct {
    sl_server *srv;
    uint16_t port;
    uint8_t ticket[BE_DIRECT_TICKET];
    char instance[64], project[64], fp[65];
    uint64_t sid;
    int efd;
    pthread_mutex_t mu;
    struct d_out *head, *tail;
    _Atomic int attached;
    _Atomic int shut;
    int used;     /* the ticket opened a channel (it never opens another) */
    sl_peer peer; /* the attached guest, 0 when none (any more) */
    int ended;    /* the attached channel is over (reported through hooks->ended once) */
    int spoke;    /* the attached guest sent something on it */
    uint64_t last_seq;
    /* a CallFrame whose bulk is still arriving (sl_server_take_bulk) */
    Sluice__Wire__ClientMessage *pend;
    uint8_t *pend_blob;
    uint64_t pend_len;
};

/* The accept hook: the certificate the session was admitted with, and nothing else. */
static int d_accept(void *user, const sl_peer_identity *id, sl_error *why)
{
    struct be_direct *d = user;
    const char *no = NULL;
    if (!id->authenticated || strcmp(id->instance_id, d->instance) ||
        strcmp(id->project_id, d->project) || (d->fp[0] && strcmp(id->fingerprint, d->fp)))
        no = "this session worker serves only the certificate its session was admitted with";
    else if (atomic_load(&d->shut) || d->used)
        no = "this session's direct channel is closed (already open, not taken, or ended)";
    if (!no)
        return 0;
    sl_log(SL_LOG_NOTICE, BE_COMPONENT,
           "session %llu: direct endpoint refused instance %s project %s from %s: %s",
           (unsigned long long)d->sid, id->instance_id, id->project_id,
           id->address[0] ? id->address : "?", no);
    sl_fail(why, SL_ERR_REFUSED, "%s", no);
    return 1;
}

sl_code be_direct_bind(const struct be_direct_cfg *c, const sl_channel_opts *opts,
                       const sl_server_hooks *hooks, sl_server **srv, uint16_t *port_out,
                       sl_error *e)
{
    *srv = NULL;
    sl_tls_config tls = {
        .mode = SL_TLS_MUTUAL, .ca_file = c->ca, .cert_file = c->cert, .key_file = c->key};
    if (!c->port_min) {
        if (sl_server_bind(c->listen, &tls, opts, hooks, srv, e) != SL_OK)
            return e->code;
    } else { /* the operator's range (a firewall opens it): a free port from a random start */
        unsigned n = c->port_max - c->port_min + 1, tries = n < 512 ? n : 512, r = 0;
        size_t base = strlen(c->listen) - 1; /* the '*' */
        char ep[300];
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
            r = (unsigned)getpid();
        sl_fail(e, SL_ERR_IO, "no free port in %u..%u", c->port_min, c->port_max);
        for (unsigned k = 0; k < tries && !*srv && base < 250; k++) {
            snprintf(ep, sizeof ep, "%.*s%u", (int)base, c->listen, c->port_min + (r + k) % n);
            sl_error be;
            if (sl_server_bind(ep, &tls, opts, hooks, srv, &be) == SL_OK)
                break;
            if (be.code == SL_ERR_CONFIG) { /* the TLS material, not the port */
                *e = be;
                break;
            }
        }
        if (!*srv)
            return e->code;
    }
    const char *ep = sl_server_endpoint(*srv);
    const char *colon = ep ? strrchr(ep, ':') : NULL;
    unsigned long port = colon ? strtoul(colon + 1, NULL, 10) : 0;
    if (!port || port > 65535) {
        sl_fail(e, SL_ERR_IO, "no port in the bound endpoint %s", ep ? ep : "?");
        sl_server_close(*srv);
        *srv = NULL;
        return e->code;
    }
    *port_out = (uint16_t)port;
    return SL_OK;
}

sl_code be_direct_open(const struct be_direct_cfg *c, struct be_direct **out, sl_error *e)
{
    *out = NULL;
    struct be_direct *d = calloc(1, sizeof *d);
    if (!d)
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    snprintf(d->instance, sizeof d->instance, "%s", c->instance);
    snprintf(d->project, sizeof d->project, "%s", c->project);
    snprintf(d->fp, sizeof d->fp, "%s", c->peer_sha256 ? c->peer_sha256 : "");
    d->sid = c->sid;
    pthread_mutex_init(&d->mu, NULL);
    d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (d->efd < 0) {
        sl_fail(e, SL_ERR_IO, "eventfd: %s", strerror(errno));
        goto fail;
    }
    if (getrandom(d->ticket, sizeof d->ticket, 0) != (ssize_t)sizeof d->ticket) {
        sl_fail(e, SL_ERR_IO, "no random bytes for the ticket: %s", strerror(errno));
        goto fail;
    }
    sl_server_hooks hooks = {.accept = d_accept, .user = d};
    sl_channel_opts opts;
    sl_channel_opts_default(&opts);
    opts.max_message = SL_WIRE_MAX_MESSAGE;
    opts.max_bulk = BE_MAX_BULK_PER_FRAME;
    opts.max_out_queue = BE_MAX_REPLY_QUEUE;
    opts.max_peers = 4;
    if (be_direct_bind(c, &opts, &hooks, &d->srv, &d->port, e) != SL_OK)
        goto fail;
    *out = d;
    return SL_OK;
fail:
    be_direct_close(d, SL_ERR_CLOSED, "");
    return e->code;
}

uint16_t be_direct_port(const struct be_direct *d)
{
    return d->port;
}

const uint8_t *be_direct_ticket(const struct be_direct *d)
{
    return d->ticket;
}

void be_direct_fds(const struct be_direct *d, int fds[2])
{
    fds[0] = sl_server_fd(d->srv);
    fds[1] = d->efd;
}

int be_direct_wait_ms(const struct be_direct *d, int max_ms)
{
    return sl_server_wait_ms(d->srv, max_ms);
}

int be_direct_attached(const struct be_direct *d)
{
    return atomic_load(&d->attached);
}

void be_direct_shut(struct be_direct *d)
{
    atomic_store(&d->shut, 1);
}

static void d_queue(struct be_direct *d, struct d_out *o)
{
    pthread_mutex_lock(&d->mu);
    if (d->tail)
        d->tail->next = o;
    else
        d->head = o;
    d->tail = o;
    pthread_mutex_unlock(&d->mu);
    uint64_t one = 1;
    ssize_t w = write(d->efd, &one, sizeof one);
    (void)w;
}

/* The channel is done with a lent slot (sl_server_send_lend). */
static void slot_back(void *slot)
{
    be_bulk_free(slot);
}

void be_direct_push(struct be_direct *d, uint8_t *msg, size_t len, uint8_t *bulk, size_t blen)
{
    struct d_out *o = calloc(1, sizeof *o);
    if (!o) {
        free(msg);
        be_bulk_free(bulk);
        return;
    }
    *o = (struct d_out){.msg = msg, .len = len, .bulk = bulk, .blen = blen};
    d_queue(d, o);
}

void be_direct_push_close(struct be_direct *d, sl_code code, const char *why)
{
    struct d_out *o = calloc(1, sizeof *o);
    if (!o)
        return;
    o->close = 1;
    o->code = code;
    snprintf(o->why, sizeof o->why, "%s", why);
    d_queue(d, o);
}

static void d_pend_free(struct be_direct *d)
{
    if (d->pend)
        sl_wire_free_client(d->pend);
    be_bulk_free(d->pend_blob);
    d->pend = NULL;
    d->pend_blob = NULL;
}

/* The attached channel is over: the peer is disconnected (when we end it) and the session told
 * once. */
static void d_end(struct be_direct *d, const struct be_direct_hooks *h, int disconnect,
                  sl_code code, const char *why)
{
    if (disconnect && d->peer) {
        sl_error e;
        sl_server_disconnect(d->srv, d->peer, code, why, &e);
    }
    d->peer = 0;
    atomic_store(&d->shut, 1);
    d_pend_free(d);
    if (!d->ended) {
        d->ended = 1;
        if (h)
            h->ended(h->user, code, why);
    }
}

/* The attached channel the guest never used is over: shut, the guest's calls the backend's
 * channel's, the session not told (it goes on). */
static void d_unused(struct be_direct *d, int disconnect, const char *why)
{
    d_end(d, NULL, disconnect, SL_ERR_CLOSED, why); /* no hooks: the session is not told */
    atomic_store(&d->attached, 0);
    sl_log(SL_LOG_INFO, BE_COMPONENT,
           "session %llu: the guest left its direct channel unused (%s): its calls take the "
           "backend's channel",
           (unsigned long long)d->sid, why);
}

int be_direct_let_go_unused(struct be_direct *d)
{
    if (d->spoke || !atomic_load(&d->attached))
        return 0;
    d_unused(d, 1, "its calls came on the backend's channel");
    return 1;
}

/* What waits for the guest goes to the channel. */
static int d_flush(struct be_direct *d, const struct be_direct_hooks *h)
{
    uint64_t v;
    ssize_t r = read(d->efd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&d->mu);
    struct d_out *o = d->head;
    d->head = d->tail = NULL;
    pthread_mutex_unlock(&d->mu);
    int any = o != NULL;
    while (o) {
        struct d_out *next = o->next;
        sl_error e;
        if (o->close) {
            d_end(d, h, 1, o->code, o->why);
        } else if (d->peer) {
            /* a page-locked slot is lent (the channel gives it back to its pool when sent),
             * malloc'd bulk given (the channel frees it) */
            sl_code rc =
                o->bulk && be_bulk_is_slot(o->bulk)
                    ? sl_server_send_lend(d->srv, d->peer, o->msg, o->len, o->bulk, o->blen,
                                          slot_back, o->bulk, &e)
                    : sl_server_send_take(d->srv, d->peer, o->msg, o->len, o->bulk, o->blen, &e);
            if (rc != SL_OK)
                sl_log(SL_LOG_WARNING, BE_COMPONENT, "session %llu: direct send: %s",
                       (unsigned long long)d->sid, e.msg);
            o->bulk = NULL; /* the channel has it */
        }
        free(o->msg);
        be_bulk_free(o->bulk);
        free(o);
        o = next;
    }
    return any;
}

/* The first message of a connection: SessionOpen{ticket}. */
static void d_attach(struct be_direct *d, const sl_server_event *ev)
{
    int seal = 0;
    const char *no = be_ticket_check(
        ev, d->ticket, sizeof d->ticket, d->used || atomic_load(&d->shut),
        "the direct channel opens with SessionOpen and the session's ticket", &seal);
    if (no) {
        sl_error e;
        sl_log(SL_LOG_NOTICE, BE_COMPONENT,
               "session %llu: direct endpoint refused peer %llu (%s): %s",
               (unsigned long long)d->sid, (unsigned long long)ev->peer,
               ev->identity && ev->identity->address[0] ? ev->identity->address : "?", no);
        sl_server_disconnect(d->srv, ev->peer, SL_ERR_REFUSED, no, &e);
        return;
    }
    if (be_ticket_accept(d->srv, ev->peer, d->sid, seal) != 0)
        return;
    d->used = 1;
    d->peer = ev->peer;
    atomic_store(&d->attached, 1);
    sl_log(SL_LOG_INFO, BE_COMPONENT,
           "session %llu: the guest's calls come on the direct channel%s",
           (unsigned long long)d->sid, seal ? " (sealed bulk)" : "");
}

/* A CallFrame's checks (those of the backend's channel thread, loop.c), then its bulk is taken
 * into one buffer laid out as the parent's messages are (each call's at a BE_IPC_ALIGN
 * offset); the frame goes to the session when all of it is in. */
static void d_calls(struct be_direct *d, const struct be_direct_hooks *h, const sl_server_event *ev,
                    Sluice__Wire__ClientMessage *m)
{
    const Sluice__Wire__CallFrame *f = m->calls;
    uint64_t total = 0, blob = 0;
    size_t nseg = 0;
    int htod = 1; /* every bulk call copies host to device: its blob may be page-locked */
    char why[160] = "";
    for (size_t i = 0; i < f->n_calls && !why[0]; i++) {
        uint64_t bl = f->calls[i]->bulk_length;
        if (bl)
            htod &= f->calls[i]->args_case == SLUICE__WIRE__CALL__ARGS_CU_MEMCPY_HTO_D_V2 ||
                    f->calls[i]->args_case == SLUICE__WIRE__CALL__ARGS_CU_MEMCPY_HTO_DASYNC_V2;
        if (bl > BE_MAX_BULK_PER_CALL)
            snprintf(why, sizeof why, "call seq %llu announces %llu bytes of bulk, over 64 MiB",
                     (unsigned long long)f->calls[i]->seq, (unsigned long long)bl);
        else if (f->calls[i]->lane_pieces && !h->lanes)
            snprintf(why, sizeof why, "call seq %llu sends its bulk on lanes the session has not",
                     (unsigned long long)f->calls[i]->seq);
        if (bl)
            blob = BE_IPC_ALIGN(blob) + bl;
        if (bl && !f->calls[i]->lane_pieces) { /* a lane call's bulk comes on its lanes */
            total += bl;
            nseg++;
        }
    }
    if (!why[0] && blob > BE_MAX_BULK_PER_FRAME) /* the lanes' bulk counts too */
        snprintf(why, sizeof why, "the calls of one frame announce %llu bytes of bulk, over %llu",
                 (unsigned long long)blob, (unsigned long long)BE_MAX_BULK_PER_FRAME);
    if (!why[0] && total != ev->bulk_len)
        snprintf(why, sizeof why,
                 "the calls' bulk lengths (%llu bytes) do not add up to the %llu bytes announced",
                 (unsigned long long)total, (unsigned long long)ev->bulk_len);
    if (!why[0] && f->n_calls && f->calls[0]->seq <= d->last_seq)
        snprintf(why, sizeof why,
                 "call seq %llu is not above the session's last seq %llu (reused or out of order)",
                 (unsigned long long)f->calls[0]->seq, (unsigned long long)d->last_seq);
    if (why[0]) {
        sl_wire_free_client(m);
        d_end(d, h, 1, strstr(why, ", over ") ? SL_ERR_TOO_LARGE : SL_ERR_PROTOCOL, why);
        return;
    }
    if (f->n_calls)
        d->last_seq = f->calls[f->n_calls - 1]->seq;
    if (!blob) {
        if (h->frame(h->user, m, NULL, 0) != 0)
            d_end(d, h, 1, SL_ERR_PROTOCOL, "the session refused a frame");
        return;
    }
    uint8_t *buf = htod && h->staged ? h->staged(h->user, blob) : NULL;
    if (!buf)
        buf = malloc((size_t)blob);
    struct iovec *seg = buf ? calloc(nseg ? nseg : 1, sizeof *seg) : NULL;
    if (!seg) {
        be_bulk_free(buf);
        sl_wire_free_client(m);
        d_end(d, h, 1, SL_ERR_NOMEM, "no memory for the calls' bulk");
        return;
    }
    uint64_t off = 0;
    size_t k = 0;
    for (size_t i = 0; i < f->n_calls; i++) {
        const Sluice__Wire__Call *c = f->calls[i];
        uint64_t bl = c->bulk_length;
        if (!bl)
            continue;
        uint64_t at = BE_IPC_ALIGN(off);
        memset(buf + off, 0, (size_t)(at - off));
        if (!c->lane_pieces) {
            seg[k++] = (struct iovec){buf + at, (size_t)bl};
        } else if (h->lanes(h->user, c->seq, buf + at, bl, c->lane_pieces, why, sizeof why)) {
            /* the lanes' threads write into buf: it goes (with the frame) only to the session,
             * which waits for the pieces before it runs the call; a refused announcement ends
             * the session, and a lane blocked on it ends with it */
            free(seg);
            sl_wire_free_client(m);
            d_end(d, h, 1, SL_ERR_PROTOCOL, why);
            be_bulk_free(buf);
            return;
        }
        off = at + bl;
    }
    if (!nseg) {
        free(seg);
        if (h->frame(h->user, m, buf, blob) != 0)
            d_end(d, h, 1, SL_ERR_PROTOCOL, "the session refused a frame");
        return;
    }
    d->pend = m;
    d->pend_blob = buf;
    d->pend_len = blob;
    sl_error e;
    sl_code rc = sl_server_take_bulk(d->srv, d->peer, seg, nseg, &e);
    free(seg);
    if (rc != SL_OK)
        d_end(d, h, 1, e.code, e.msg);
}

static void d_message(struct be_direct *d, const struct be_direct_hooks *h,
                      const sl_server_event *ev)
{
    Sluice__Wire__ClientMessage *m = NULL;
    sl_error e;
    d->spoke = 1;
    if (sl_wire_decode_client(ev->msg, ev->len, NULL, &m, &e) != SL_OK) {
        d_end(d, h, 1, SL_ERR_PROTOCOL, e.msg);
        return;
    }
    switch (m->kind_case) {
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS:
        d_calls(d, h, ev, m); /* takes m */
        return;
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLBACK_DONE:
        if (ev->bulk_len)
            break;
        if (h->frame(h->user, m, NULL, 0) != 0)
            d_end(d, h, 1, SL_ERR_PROTOCOL, "the session refused a frame");
        return;
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_CLOSE:
        sl_wire_free_client(m);
        d_end(d, h, 1, SL_ERR_CLOSED, "SessionClose from the guest");
        return;
    default:
        break;
    }
    sl_wire_free_client(m);
    d_end(d, h, 1, SL_ERR_PROTOCOL,
          ev->bulk_len ? "bulk with a message other than calls"
                       : "unexpected message on the direct channel");
}

int be_direct_turn(struct be_direct *d, const struct be_direct_hooks *h)
{
    int busy = d_flush(d, h);
    for (int k = 0; k < 4096; k++) {
        sl_server_event ev;
        sl_error e;
        if (sl_server_poll(d->srv, 0, &ev, &e) != SL_OK || ev.kind == SL_EV_NONE)
            break;
        busy = 1;
        int ours = d->peer && ev.peer == d->peer;
        switch (ev.kind) {
        case SL_EV_MESSAGE:
            if (ours)
                d_message(d, h, &ev);
            else
                d_attach(d, &ev);
            break;
        case SL_EV_BULK:
            if (ours && d->pend) {
                Sluice__Wire__ClientMessage *m = d->pend;
                uint8_t *blob = d->pend_blob;
                d->pend = NULL;
                d->pend_blob = NULL;
                if (h->frame(h->user, m, blob, d->pend_len) != 0)
                    d_end(d, h, 1, SL_ERR_PROTOCOL, "the session refused a frame");
            }
            break;
        case SL_EV_CLOSED:
            /* closed by the guest before its first call (it gave up waiting for the answer):
             * not the session's end; a guest that vanished (killed) ends it as before */
            if (ours && !d->spoke && ev.reason.code != SL_ERR_PEER_LOST)
                d_unused(d, 0, "closed before its first message");
            else if (ours)
                d_end(d, h, 0, ev.reason.code ? ev.reason.code : SL_ERR_CLOSED,
                      ev.reason.msg[0] ? ev.reason.msg : "the guest closed the direct channel");
            break;
        default:
            break;
        }
        busy |= d_flush(d, h);
    }
    return busy;
}

void be_direct_close(struct be_direct *d, sl_code code, const char *why)
{
    if (!d)
        return;
    if (d->srv && d->peer) {
        sl_error e;
        sl_server_disconnect(d->srv, d->peer, code, why, &e);
        d->peer = 0; /* sl_server_close sends the CLOSE as far as ZeroMQ takes it */
    }
    d_pend_free(d);
    d_flush(d, NULL);
    sl_server_close(d->srv);
    if (d->efd >= 0)
        close(d->efd);
    pthread_mutex_destroy(&d->mu);
    free(d);
}
