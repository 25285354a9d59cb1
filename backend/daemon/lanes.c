/* The session worker's bulk lanes. After the direct channel (direct.c) is open, the guest opens
 * the lanes SessionAccept offered (as many as its SessionOpen.lanes asked, SLUICE_LANES), each
 * a mutual-TLS channel server of this worker on a port of its own, each served by a thread of
 * its own: the TLS of a large copy is then done on several cores instead of the main thread's
 * one. Guest to worker: a call on the direct channel announces its bulk as k pieces
 * (Call.lane_pieces); the main thread reserves the call's place in the frame's blob
 * (sl_lane_asm_expect); each lane thread reads LaneBulk{seq, piece, offset, length} and
 * decrypts the piece straight into that place; the session thread runs the calls in seq order
 * and waits only for the pieces of the call at its head (session.c). Worker to guest: a reply
 * whose call asked for it (Call.reply_on_lanes) says Reply.lane_pieces and its bulk leaves as
 * LaneBulk pieces from the lane threads (be_lanes_send).
 *
 * Each lane accepts only the certificate the session was admitted with, only once the direct
 * channel is attached, only with its own single-use ticket (32 random bytes, compared in
 * constant time); a connection refused before its ticket is just refused (as on the direct
 * endpoint). A lane lost or broken after it opened (a wrong piece, a lost peer, tampering) ends
 * the session with the lane's reason: the bytes of a piece cannot be sent again on another
 * lane. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "daemon/lanes.h"
#include "bounds.h"
#include "daemon/ticket.h"
#include "session/bulk_pool.h"
#include "sluice/log.h"

#define LANE_CLAIM_WAIT_MS 10000 /* a piece may arrive before its call's announcement */

struct shared_bulk {
    uint8_t *buf;
    atomic_uint refs;
};

struct lane_out {
    struct lane_out *next;
    struct shared_bulk *b;
    uint64_t seq, off, len;
    uint32_t piece;
};

struct lane {
    struct be_lanes *l;
    unsigned idx;
    sl_server *srv;
    uint16_t port;
    uint8_t ticket[SL_LANE_TICKET];
    pthread_t th;
    int started;
    int efd;
    pthread_mutex_t mu;
    struct lane_out *head, *tail;
    sl_peer peer; /* lane thread only */
    int used;     /* the ticket opened the lane (it never opens another) */
    atomic_int up;
};

struct be_lanes {
    struct lane lane[SL_LANE_MAX];
    unsigned n;
    struct be_direct *d;
    char instance[64], project[64], fp[65];
    uint64_t sid;
    sl_lane_asm *in;
    atomic_int stop;
    atomic_int failed;
};

static void bulk_unref(struct shared_bulk *b)
{
    if (atomic_fetch_sub(&b->refs, 1) == 1) {
        be_bulk_free(b->buf); /* a slot of the session's page-locked pool, or malloc'd */
        free(b);
    }
}

/* The channel is done with a lent piece (sl_server_send_lend). */
static void bulk_lent_back(void *arg)
{
    bulk_unref(arg);
}

/* The lane is over: what waits on the assembly fails; the session ends with the lane's reason
 * unless the guest closed it as it closes the session. */
static void lane_broken(struct lane *ln, sl_code code, const char *why)
{
    struct be_lanes *l = ln->l;
    char msg[SL_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "bulk lane %u: %s", ln->idx, why);
    if (ln->peer) {
        sl_error e;
        sl_server_disconnect(ln->srv, ln->peer, code, msg, &e);
        ln->peer = 0;
    }
    atomic_store(&ln->up, 0);
    sl_lane_asm_fail(l->in, code ? code : SL_ERR_CLOSED, msg);
    if (!atomic_exchange(&l->failed, 1) && code != SL_ERR_CLOSED && !atomic_load(&l->stop)) {
        sl_log(SL_LOG_NOTICE, BE_COMPONENT, "session %llu: %s", (unsigned long long)l->sid, msg);
        be_direct_push_close(l->d, code, msg);
    }
}

static int lane_accept(void *user, const sl_peer_identity *id, sl_error *why)
{
    struct lane *ln = user;
    struct be_lanes *l = ln->l;
    const char *no = NULL;
    if (!id->authenticated || strcmp(id->instance_id, l->instance) ||
        strcmp(id->project_id, l->project) || (l->fp[0] && strcmp(id->fingerprint, l->fp)))
        no = "this session worker serves only the certificate its session was admitted with";
    else if (ln->used || !be_direct_attached(l->d))
        no = "this bulk lane opens once, after the session's direct channel";
    if (!no)
        return 0;
    sl_log(SL_LOG_NOTICE, BE_COMPONENT,
           "session %llu: bulk lane %u refused instance %s project %s from %s: %s",
           (unsigned long long)l->sid, ln->idx, id->instance_id, id->project_id,
           id->address[0] ? id->address : "?", no);
    sl_fail(why, SL_ERR_REFUSED, "%s", no);
    return 1;
}

/* The first message of a connection: SessionOpen{the lane's ticket}. */
static void lane_attach(struct lane *ln, const sl_server_event *ev)
{
    int seal = 0;
    const char *no =
        ln->peer
            ? "this bulk lane is open already"
            : be_ticket_check(ev, ln->ticket, sizeof ln->ticket, ln->used,
                              "a bulk lane opens with SessionOpen and the lane's ticket", &seal);
    if (no) {
        sl_error e;
        sl_log(SL_LOG_NOTICE, BE_COMPONENT, "session %llu: bulk lane %u refused peer %llu: %s",
               (unsigned long long)ln->l->sid, ln->idx, (unsigned long long)ev->peer, no);
        sl_server_disconnect(ln->srv, ev->peer, SL_ERR_REFUSED, no, &e);
        return;
    }
    if (be_ticket_accept(ln->srv, ev->peer, ln->l->sid, seal) != 0)
        return;
    ln->used = 1;
    ln->peer = ev->peer;
    atomic_store(&ln->up, 1);
    sl_log(SL_LOG_INFO, BE_COMPONENT, "session %llu: bulk lane %u of %u open (port %u%s)",
           (unsigned long long)ln->l->sid, ln->idx, ln->l->n, (unsigned)ln->port,
           seal ? ", sealed bulk" : "");
}

/* A piece from the guest: checked against its call's announcement, decrypted into its place. */
static void lane_piece(struct lane *ln, const sl_server_event *ev)
{
    Sluice__Wire__ClientMessage *m = NULL;
    sl_error e;
    if (sl_wire_decode_client(ev->msg, ev->len, NULL, &m, &e) != SL_OK) {
        lane_broken(ln, SL_ERR_PROTOCOL, e.msg);
        return;
    }
    if (m->kind_case != SLUICE__WIRE__CLIENT_MESSAGE__KIND_LANE ||
        m->lane->length != ev->bulk_len) {
        sl_wire_free_client(m);
        lane_broken(ln, SL_ERR_PROTOCOL, "a lane carries LaneBulk messages and their bytes only");
        return;
    }
    Sluice__Wire__LaneBulk lb = *m->lane;
    sl_wire_free_client(m);
    uint8_t *dst = NULL;
    if (sl_lane_asm_claim(ln->l->in, ln->idx, lb.seq, lb.piece, lb.offset, lb.length,
                          LANE_CLAIM_WAIT_MS, &dst, &e) != SL_OK ||
        sl_server_recv_bulk(ln->srv, ln->peer, dst, (size_t)lb.length, &e) != SL_OK) {
        lane_broken(ln, e.code, e.msg);
        return;
    }
    sl_lane_asm_arrived(ln->l->in, lb.seq, lb.piece);
}

/* Sends the pieces queued for this lane. 1 = did work. */
static int lane_flush(struct lane *ln)
{
    uint64_t v;
    ssize_t r = read(ln->efd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&ln->mu);
    struct lane_out *o = ln->head;
    ln->head = ln->tail = NULL;
    pthread_mutex_unlock(&ln->mu);
    int any = o != NULL;
    while (o) {
        struct lane_out *next = o->next;
        if (ln->peer) {
            Sluice__Wire__LaneBulk lb = SLUICE__WIRE__LANE_BULK__INIT;
            lb.seq = o->seq;
            lb.piece = o->piece;
            lb.offset = o->off;
            lb.length = o->len;
            Sluice__Wire__ServerMessage sm = SLUICE__WIRE__SERVER_MESSAGE__INIT;
            sm.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_LANE;
            sm.lane = &lb;
            uint8_t *buf = NULL;
            size_t len = 0;
            sl_error e;
            /* the piece is encrypted straight from the reply's buffer, which stays until the
             * last lane gives it back (a reference for each lent piece) */
            atomic_fetch_add(&o->b->refs, 1);
            if (sl_wire_encode_server(&sm, NULL, &buf, &len, &e) != SL_OK) {
                bulk_unref(o->b);
                lane_broken(ln, e.code, e.msg);
            } else if (sl_server_send_lend(ln->srv, ln->peer, buf, len, o->b->buf + o->off,
                                           (size_t)o->len, bulk_lent_back, o->b, &e) != SL_OK) {
                lane_broken(ln, e.code, e.msg);
            }
            free(buf);
        }
        bulk_unref(o->b);
        free(o);
        o = next;
    }
    return any;
}

static void lane_event(struct lane *ln, const sl_server_event *ev)
{
    int ours = ln->peer && ev->peer == ln->peer;
    switch (ev->kind) {
    case SL_EV_MESSAGE:
        if (ours)
            lane_piece(ln, ev);
        else
            lane_attach(ln, ev);
        break;
    case SL_EV_CLOSED:
        if (ours) {
            ln->peer = 0;
            lane_broken(ln, ev->reason.code ? ev->reason.code : SL_ERR_CLOSED,
                        ev->reason.msg[0] ? ev->reason.msg : "the guest closed the lane");
        }
        break;
    default:
        break;
    }
}

static void *lane_main(void *p)
{
    struct lane *ln = p;
    char name[16];
    snprintf(name, sizeof name, "sl-lane-%u", ln->idx);
    pthread_setname_np(pthread_self(), name);
    while (!atomic_load(&ln->l->stop)) {
        int busy = 0;
        for (int k = 0; k < 256; k++) {
            sl_server_event ev;
            sl_error e;
            if (sl_server_poll(ln->srv, 0, &ev, &e) != SL_OK || ev.kind == SL_EV_NONE)
                break;
            busy = 1;
            lane_event(ln, &ev);
        }
        busy |= lane_flush(ln);
        if (busy)
            continue;
        struct pollfd pf[2] = {{.fd = sl_server_fd(ln->srv), .events = POLLIN},
                               {.fd = ln->efd, .events = POLLIN}};
        poll(pf, 2, sl_server_wait_ms(ln->srv, 100));
    }
    return NULL;
}

sl_code be_lanes_open(const struct be_direct_cfg *c, unsigned n, struct be_direct *d,
                      struct be_lanes **out, sl_error *e)
{
    *out = NULL;
    if (n < 2 || n > SL_LANE_MAX)
        return sl_fail(e, SL_ERR_INVALID, "%u bulk lanes (2 to %u)", n, SL_LANE_MAX);
    struct be_lanes *l = calloc(1, sizeof *l);
    if (!l)
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    snprintf(l->instance, sizeof l->instance, "%s", c->instance);
    snprintf(l->project, sizeof l->project, "%s", c->project);
    snprintf(l->fp, sizeof l->fp, "%s", c->peer_sha256 ? c->peer_sha256 : "");
    l->sid = c->sid;
    l->d = d;
    for (unsigned i = 0; i < SL_LANE_MAX; i++)
        l->lane[i].efd = -1;
    if (sl_lane_asm_new(n, &l->in, e) != SL_OK)
        goto fail;
    sl_channel_opts opts;
    sl_channel_opts_default(&opts);
    opts.max_message = 4096; /* SessionOpen, LaneBulk */
    opts.chunk_size = SL_LANE_CHUNK;
    opts.max_bulk = BE_MAX_BULK_PER_CALL;
    opts.max_out_queue = BE_MAX_REPLY_QUEUE;
    opts.max_peers = 2;
    for (unsigned i = 0; i < n; i++) {
        struct lane *ln = &l->lane[i];
        ln->l = l;
        ln->idx = i;
        pthread_mutex_init(&ln->mu, NULL);
        l->n = i + 1;
        ln->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (ln->efd < 0) {
            sl_fail(e, SL_ERR_IO, "eventfd: %s", strerror(errno));
            goto fail;
        }
        if (getrandom(ln->ticket, sizeof ln->ticket, 0) != (ssize_t)sizeof ln->ticket) {
            sl_fail(e, SL_ERR_IO, "no random bytes for a lane's ticket: %s", strerror(errno));
            goto fail;
        }
        sl_server_hooks hooks = {.accept = lane_accept, .user = ln};
        if (be_direct_bind(c, &opts, &hooks, &ln->srv, &ln->port, e) != SL_OK)
            goto fail;
    }
    for (unsigned i = 0; i < n; i++) {
        if (pthread_create(&l->lane[i].th, NULL, lane_main, &l->lane[i]) != 0) {
            sl_fail(e, SL_ERR_IO, "no thread for bulk lane %u", i);
            goto fail;
        }
        l->lane[i].started = 1;
    }
    *out = l;
    return SL_OK;
fail:
    be_lanes_close(l, SL_ERR_CLOSED, "the lanes did not open");
    return e->code;
}

unsigned be_lanes_count(const struct be_lanes *l)
{
    return l ? l->n : 0;
}

uint16_t be_lanes_port(const struct be_lanes *l, unsigned i)
{
    return l->lane[i].port;
}

const uint8_t *be_lanes_ticket(const struct be_lanes *l, unsigned i)
{
    return l->lane[i].ticket;
}

sl_lane_asm *be_lanes_in(struct be_lanes *l)
{
    return l->in;
}

int be_lanes_up(const struct be_lanes *l)
{
    if (!l || atomic_load(&l->failed))
        return 0;
    for (unsigned i = 0; i < l->n; i++)
        if (!atomic_load(&l->lane[i].up))
            return 0;
    return 1;
}

void be_lanes_send(struct be_lanes *l, uint64_t seq, uint8_t *bulk, uint64_t blen, uint32_t k)
{
    struct shared_bulk *b = calloc(1, sizeof *b);
    if (!b || !sl_lane_layout_ok(blen, k, NULL)) {
        free(b);
        be_bulk_free(bulk);
        return;
    }
    b->buf = bulk;
    atomic_init(&b->refs, 1); /* the caller's, dropped below; one more per queued piece */
    for (uint32_t i = 0; i < k; i++) {
        struct lane_out *o = calloc(1, sizeof *o);
        if (!o)
            break;
        o->b = b;
        atomic_fetch_add(&b->refs, 1);
        o->seq = seq;
        o->piece = i;
        sl_lane_piece(blen, k, i, &o->off, &o->len);
        struct lane *ln = &l->lane[sl_lane_of(seq, i, l->n)];
        pthread_mutex_lock(&ln->mu);
        if (ln->tail)
            ln->tail->next = o;
        else
            ln->head = o;
        ln->tail = o;
        pthread_mutex_unlock(&ln->mu);
        uint64_t one = 1;
        ssize_t w = write(ln->efd, &one, sizeof one);
        (void)w;
    }
    /* a piece not queued (no memory) is never sent: the guest's wait ends with the session */
    bulk_unref(b);
}

void be_lanes_close(struct be_lanes *l, sl_code code, const char *why)
{
    if (!l)
        return;
    atomic_store(&l->stop, 1);
    if (l->in)
        sl_lane_asm_fail(l->in, code, why);
    for (unsigned i = 0; i < l->n; i++) {
        struct lane *ln = &l->lane[i];
        if (ln->efd >= 0) {
            uint64_t one = 1;
            ssize_t w = write(ln->efd, &one, sizeof one);
            (void)w;
        }
        if (ln->started)
            pthread_join(ln->th, NULL);
    }
    for (unsigned i = 0; i < l->n; i++) {
        struct lane *ln = &l->lane[i];
        if (ln->srv && ln->peer) {
            sl_error e;
            sl_server_disconnect(ln->srv, ln->peer, code, why, &e);
        }
        sl_server_close(ln->srv);
        for (struct lane_out *o = ln->head, *next; o; o = next) {
            next = o->next;
            bulk_unref(o->b);
            free(o);
        }
        if (ln->efd >= 0)
            close(ln->efd);
        pthread_mutex_destroy(&ln->mu);
    }
    sl_lane_asm_free(l->in);
    free(l);
}
