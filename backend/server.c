/* The channel thread: sl_server events, the workers' outbox (eventfd), the agent's control
 * socket, all in one zmq_poll loop. Decodes ClientMessages, takes each call's bulk into a job
 * buffer (bounded per call), queues CallFrames on the session, answers SessionOpen with the
 * device facts, ends a session on SessionClose, a lost peer, revocation or a protocol violation
 * (malformed messages end that session only). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include "backend.h"
#include "sluice/log.h"

struct be_out {
    struct be_out *next;
    sl_peer peer;
    uint8_t *msg;
    size_t len;
    uint8_t *bulk;
    size_t bulk_len;
    int close;
    sl_code code;
    char why[160];
};

struct be_sess_node {
    struct be_sess_node *next;
    sl_be_session *s;
    int ended; /* the channel session is gone; waiting for the worker */
};

struct be_server {
    const struct be_config *cfg;
    const struct sl_driver_api *api;
    const struct be_devices *devs;
    sl_server *srv;
    struct be_grants *grants;
    struct be_control *ctl;
    int efd;
    pthread_mutex_t out_mu;
    struct be_out *out_head, *out_tail;
    struct be_sess_node *sessions;
    uint64_t next_session;
    volatile int *stop;
};

/* ---------------------------------------------------------------- outbox */

static void out_push(struct be_server *srv, struct be_out *o)
{
    pthread_mutex_lock(&srv->out_mu);
    if (srv->out_tail)
        srv->out_tail->next = o;
    else
        srv->out_head = o;
    srv->out_tail = o;
    pthread_mutex_unlock(&srv->out_mu);
    uint64_t one = 1;
    ssize_t w = write(srv->efd, &one, sizeof one);
    (void)w;
}

void be_outbox_push_reply(struct be_server *srv, sl_peer peer, uint8_t *msg, size_t len,
                          uint8_t *bulk, size_t bulk_len)
{
    if (!srv) { /* a bare session in a test */
        free(msg);
        free(bulk);
        return;
    }
    struct be_out *o = calloc(1, sizeof *o);
    if (!o) {
        free(msg);
        free(bulk);
        return;
    }
    *o = (struct be_out){NULL, peer, msg, len, bulk, bulk_len, 0, SL_OK, ""};
    out_push(srv, o);
}

void be_outbox_push_close(struct be_server *srv, sl_peer peer, sl_code code, const char *why)
{
    if (!srv)
        return;
    struct be_out *o = calloc(1, sizeof *o);
    if (!o)
        return;
    o->peer = peer;
    o->close = 1;
    o->code = code;
    snprintf(o->why, sizeof o->why, "%s", why);
    out_push(srv, o);
}

static struct be_sess_node *find(struct be_server *srv, sl_peer peer)
{
    for (struct be_sess_node *n = srv->sessions; n; n = n->next)
        if (n->s->peer == peer && !n->ended)
            return n;
    return NULL;
}

static void drain_outbox(struct be_server *srv)
{
    uint64_t v;
    ssize_t r = read(srv->efd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&srv->out_mu);
    struct be_out *o = srv->out_head;
    srv->out_head = srv->out_tail = NULL;
    pthread_mutex_unlock(&srv->out_mu);
    while (o) {
        struct be_out *next = o->next;
        if (find(srv, o->peer)) {
            sl_error e;
            if (o->close) {
                sl_server_disconnect(srv->srv, o->peer, o->code, o->why, &e);
            } else {
                struct iovec iov = {o->bulk, o->bulk_len};
                if (sl_server_send(srv->srv, o->peer, o->msg, o->len, o->bulk_len ? &iov : NULL,
                                   o->bulk_len ? 1 : 0, &e) != SL_OK)
                    sl_log(SL_LOG_WARNING, BE_COMPONENT, "peer %llu: send: %s",
                           (unsigned long long)o->peer, e.msg);
            }
        }
        free(o->msg);
        free(o->bulk);
        free(o);
        o = next;
    }
}

/* ---------------------------------------------------------------- sessions */

static void end_session(struct be_server *srv, struct be_sess_node *n, const char *why)
{
    if (n->ended)
        return;
    n->ended = 1;
    sl_log(SL_LOG_INFO, BE_COMPONENT, "session %llu instance %s project %s: closing (%s)",
           (unsigned long long)n->s->id, n->s->instance, n->s->project, why);
    be_session_close(n->s);
    (void)srv;
}

static void reap(struct be_server *srv, int wait)
{
    for (struct be_sess_node **p = &srv->sessions; *p;) {
        struct be_sess_node *n = *p;
        if (n->ended && (wait || atomic_load(&n->s->finished))) {
            *p = n->next;
            be_session_free(n->s);
            free(n);
        } else {
            p = &n->next;
        }
    }
}

static void violation(struct be_server *srv, sl_peer peer, sl_code code, const char *why)
{
    sl_error e;
    struct be_sess_node *n = find(srv, peer);
    sl_log(SL_LOG_WARNING, BE_COMPONENT, "session %llu instance %s project %s: %s; ending it",
           n ? (unsigned long long)n->s->id : 0ULL, n ? n->s->instance : "?",
           n ? n->s->project : "?", why);
    sl_server_disconnect(srv->srv, peer, code, why, &e);
    if (n)
        end_session(srv, n, why);
}

static int send_msg(struct be_server *srv, sl_peer peer, Sluice__Wire__ServerMessage *m)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_error e;
    int rc = -1;
    if (sl_wire_encode_server(m, NULL, &buf, &len, &e) == SL_OK &&
        sl_server_send(srv->srv, peer, buf, len, NULL, 0, &e) == SL_OK)
        rc = 0;
    else
        sl_log(SL_LOG_WARNING, BE_COMPONENT, "peer %llu: send: %s", (unsigned long long)peer,
               e.msg);
    free(buf);
    return rc;
}

static void on_open(struct be_server *srv, const sl_server_event *ev,
                    const Sluice__Wire__SessionOpen *o)
{
    if (find(srv, ev->peer)) {
        violation(srv, ev->peer, SL_ERR_PROTOCOL, "a second SessionOpen");
        return;
    }
    if (o->protocol_version != 1) {
        violation(srv, ev->peer, SL_ERR_PROTOCOL, "protocol version not 1");
        return;
    }
    sl_be_session *s = be_session_new(++srv->next_session, srv->api, srv->devs);
    struct be_sess_node *n = s ? calloc(1, sizeof *n) : NULL;
    sl_error e;
    if (!n) {
        be_session_free(s);
        sl_server_disconnect(srv->srv, ev->peer, SL_ERR_NOMEM, "out of memory", &e);
        return;
    }
    s->peer = ev->peer;
    s->srv = srv;
    snprintf(s->instance, sizeof s->instance, "%s", ev->identity->instance_id);
    snprintf(s->project, sizeof s->project, "%s", ev->identity->project_id);
    if (be_session_start(s, &e) != SL_OK) {
        be_session_free(s);
        free(n);
        sl_server_disconnect(srv->srv, ev->peer, e.code, e.msg, &e);
        return;
    }
    n->s = s;
    n->next = srv->sessions;
    srv->sessions = n;

    int nd = srv->devs->count;
    Sluice__Wire__DeviceInfo *di = calloc(nd ? (size_t)nd : 1, sizeof *di);
    Sluice__Wire__DeviceInfo **dp = calloc(nd ? (size_t)nd : 1, sizeof *dp);
    if (!di || !dp) {
        free(di);
        free(dp);
        violation(srv, ev->peer, SL_ERR_NOMEM, "out of memory");
        return;
    }
    for (int i = 0; i < nd; i++) {
        const struct be_device *d = &srv->devs->dev[i];
        sluice__wire__device_info__init(&di[i]);
        di[i].ordinal = i;
        di[i].name = (char *)d->name;
        if (d->has_uuid)
            di[i].uuid = (ProtobufCBinaryData){16, (uint8_t *)d->uuid};
        di[i].total_mem = d->total_mem;
        di[i].attributes = d->attrs;
        di[i].n_attributes = d->n_attrs;
        if (d->has_luid)
            di[i].luid = (ProtobufCBinaryData){8, (uint8_t *)d->luid};
        di[i].luid_device_node_mask = d->luid_mask;
        di[i].primary_context = s->primary_ids[i];
        dp[i] = &di[i];
    }
    Sluice__Wire__SessionAccept acc = SLUICE__WIRE__SESSION_ACCEPT__INIT;
    acc.protocol_version = 1;
    acc.driver_version =
        (uint32_t)(srv->devs->driver_version < 13000 ? 13000 : srv->devs->driver_version);
    acc.session_id = s->id;
    acc.max_message_bytes = SL_WIRE_MAX_MESSAGE;
    acc.max_bulk_bytes = BE_MAX_BULK_PER_CALL;
    acc.devices = dp;
    acc.n_devices = (size_t)nd;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_ACCEPT;
    m.accept = &acc;
    send_msg(srv, ev->peer, &m);
    free(di);
    free(dp);
    sl_log(SL_LOG_NOTICE, BE_COMPONENT,
           "session %llu instance %s project %s: opened (guest pid %u on %.64s, %.80s, CUDA %u)",
           (unsigned long long)s->id, s->instance, s->project, o->pid,
           o->hostname ? o->hostname : "", o->client ? o->client : "", o->cuda_version);
}

/* Takes every call's bulk into its own buffer, then queues the frame. */
static void on_calls(struct be_server *srv, const sl_server_event *ev,
                     Sluice__Wire__ClientMessage *m)
{
    struct be_sess_node *n = find(srv, ev->peer);
    if (!n) {
        sl_server_recv_bulk(srv->srv, ev->peer, NULL, ev->bulk_len, NULL);
        sl_wire_free_client(m);
        violation(srv, ev->peer, SL_ERR_PROTOCOL, "calls before SessionOpen");
        return;
    }
    const Sluice__Wire__CallFrame *f = m->calls;
    uint64_t total = 0;
    for (size_t i = 0; i < f->n_calls; i++) {
        if (f->calls[i]->bulk_length > BE_MAX_BULK_PER_CALL) {
            sl_server_recv_bulk(srv->srv, ev->peer, NULL, ev->bulk_len, NULL);
            sl_wire_free_client(m);
            violation(srv, ev->peer, SL_ERR_TOO_LARGE, "a call with more than 64 MiB of bulk");
            return;
        }
        total += f->calls[i]->bulk_length;
    }
    if (total != ev->bulk_len) {
        sl_server_recv_bulk(srv->srv, ev->peer, NULL, ev->bulk_len, NULL);
        sl_wire_free_client(m);
        violation(srv, ev->peer, SL_ERR_PROTOCOL, "the calls' bulk lengths do not add up");
        return;
    }
    struct be_job *job = calloc(1, sizeof *job);
    if (job)
        job->bulk = calloc(f->n_calls, sizeof *job->bulk);
    if (!job || !job->bulk) {
        free(job);
        sl_server_recv_bulk(srv->srv, ev->peer, NULL, ev->bulk_len, NULL);
        sl_wire_free_client(m);
        violation(srv, ev->peer, SL_ERR_NOMEM, "out of memory");
        return;
    }
    job->msg = m;
    sl_error e;
    for (size_t i = 0; i < f->n_calls; i++) {
        uint64_t len = f->calls[i]->bulk_length;
        if (!len)
            continue;
        job->bulk[i] = malloc(len);
        if (!job->bulk[i] ||
            sl_server_recv_bulk(srv->srv, ev->peer, job->bulk[i], len, &e) != SL_OK) {
            /* the bytes still owed are discarded by the disconnect */
            be_job_free(job);
            violation(srv, ev->peer, SL_ERR_NOMEM, "bulk could not be taken");
            return;
        }
        job->bytes += len;
    }
    if (be_session_enqueue(n->s, job, &e) != SL_OK) {
        be_job_free(job);
        violation(srv, ev->peer, e.code, e.msg);
    }
}

static void on_message(struct be_server *srv, const sl_server_event *ev)
{
    Sluice__Wire__ClientMessage *m = NULL;
    sl_error e;
    if (sl_wire_decode_client(ev->msg, ev->len, NULL, &m, &e) != SL_OK) {
        sl_server_recv_bulk(srv->srv, ev->peer, NULL, ev->bulk_len, NULL);
        violation(srv, ev->peer, SL_ERR_PROTOCOL, e.msg);
        return;
    }
    if (m->kind_case == SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS) {
        on_calls(srv, ev, m); /* takes m */
        return;
    }
    if (ev->bulk_len)
        sl_server_recv_bulk(srv->srv, ev->peer, NULL, ev->bulk_len, NULL);
    struct be_sess_node *n = find(srv, ev->peer);
    switch (m->kind_case) {
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_OPEN:
        if (ev->bulk_len)
            violation(srv, ev->peer, SL_ERR_PROTOCOL, "bulk with SessionOpen");
        else
            on_open(srv, ev, m->open);
        break;
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_CLOSE:
        if (n) {
            sl_server_disconnect(srv->srv, ev->peer, SL_ERR_CLOSED, "session closed", &e);
            end_session(srv, n, "SessionClose from the guest");
        }
        break;
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLBACK_DONE:
        if (n && m->callback_done)
            be_callback_done(n->s, m->callback_done->id);
        break;
    default:
        violation(srv, ev->peer, SL_ERR_PROTOCOL, "unknown client message");
    }
    sl_wire_free_client(m);
}

static int accept_hook(void *user, const sl_peer_identity *id, sl_error *why)
{
    struct be_server *srv = user;
    char reason[200];
    if (be_grants_check(srv->grants, srv->cfg->project, id, reason, sizeof reason) == 0)
        return 0;
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "refused instance %s project %s from %s: %s",
           id->instance_id, id->project_id, id->address[0] ? id->address : "?", reason);
    sl_fail(why, SL_ERR_REFUSED, "%s", reason);
    return 1;
}

static void on_revoke(void *user, const char *uuid, const char *reason)
{
    struct be_server *srv = user;
    size_t n = sl_server_revoke_instance(srv->srv, uuid, reason);
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "instance %s revoked (%s): %zu live session%s ended", uuid,
           reason, n, n == 1 ? "" : "s");
}

static void on_shutdown(void *user, const char *reason)
{
    struct be_server *srv = user;
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "shutdown asked by the agent: %s", reason);
    *srv->stop = 1;
}

static void handle_event(struct be_server *srv, const sl_server_event *ev)
{
    switch (ev->kind) {
    case SL_EV_ACCEPTED:
        sl_log(SL_LOG_INFO, BE_COMPONENT, "peer %llu: instance %s project %s connected from %s",
               (unsigned long long)ev->peer, ev->identity->instance_id, ev->identity->project_id,
               ev->identity->address[0] ? ev->identity->address : "?");
        break;
    case SL_EV_MESSAGE:
        on_message(srv, ev);
        break;
    case SL_EV_CLOSED: {
        struct be_sess_node *n = find(srv, ev->peer);
        if (n)
            end_session(srv, n, ev->reason.msg[0] ? ev->reason.msg : sl_code_name(ev->reason.code));
        break;
    }
    default:
        break;
    }
}

int be_server_run(const struct be_config *cfg, const struct sl_driver_api *api,
                  const struct be_devices *devs, volatile int *stop)
{
    struct be_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return 1;
    srv->cfg = cfg;
    srv->api = api;
    srv->devs = devs;
    srv->stop = stop;
    srv->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&srv->out_mu, NULL);
    int rc = 1;
    sl_error e;
    srv->grants = be_grants_new();
    if (srv->efd < 0 || !srv->grants) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "out of resources at start");
        goto out;
    }
    if (cfg->allow && be_grants_load_allow(srv->grants, cfg->allow, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "--allow: %s", e.msg);
        goto out;
    }
    sl_tls_config tls = {
        .mode = SL_TLS_MUTUAL, .ca_file = cfg->ca, .cert_file = cfg->cert, .key_file = cfg->key};
    sl_server_hooks hooks = {.accept = accept_hook, .user = srv};
    sl_channel_opts opts;
    sl_channel_opts_default(&opts);
    opts.max_message = SL_WIRE_MAX_MESSAGE;
    if (sl_server_bind(cfg->listen, &tls, &opts, &hooks, &srv->srv, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "cannot listen on %s: %s", cfg->listen, e.msg);
        goto out;
    }
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "project %s: listening on %s", cfg->project,
           sl_server_endpoint(srv->srv));
    if (cfg->control) {
        struct be_control_hooks ch = {on_revoke, on_shutdown, srv};
        if (be_control_open(cfg->control, cfg->project, sl_server_endpoint(srv->srv), srv->grants,
                            &ch, &srv->ctl, &e) != SL_OK) {
            sl_log(SL_LOG_ERR, BE_COMPONENT, "--control %s: %s", cfg->control, e.msg);
            goto out;
        }
    }
    while (!*stop) {
        zmq_pollitem_t items[3] = {
            {NULL, sl_server_fd(srv->srv), ZMQ_POLLIN, 0},
            {NULL, srv->efd, ZMQ_POLLIN, 0},
            {srv->ctl ? be_control_socket(srv->ctl) : NULL, srv->ctl ? 0 : -1, ZMQ_POLLIN, 0},
        };
        int np = zmq_poll(items, srv->ctl ? 3 : 2, 100);
        if (np < 0 && errno != EINTR) {
            sl_log(SL_LOG_ERR, BE_COMPONENT, "poll: %s", zmq_strerror(errno));
            break;
        }
        drain_outbox(srv);
        for (int k = 0; k < 4096 && !*stop; k++) {
            sl_server_event ev;
            if (sl_server_poll(srv->srv, 0, &ev, &e) != SL_OK || ev.kind == SL_EV_NONE)
                break;
            handle_event(srv, &ev);
            drain_outbox(srv);
        }
        if (srv->ctl)
            be_control_process(srv->ctl);
        reap(srv, 0);
    }
    rc = 0;
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "stopping: closing %s sessions",
           srv->sessions ? "the live" : "no");
out:
    for (struct be_sess_node *n = srv->sessions; n; n = n->next)
        end_session(srv, n, "backend stopping");
    reap(srv, 1);
    drain_outbox(srv);
    sl_server_close(srv->srv);
    be_control_close(srv->ctl);
    be_grants_free(srv->grants);
    if (srv->efd >= 0)
        close(srv->efd);
    pthread_mutex_destroy(&srv->out_mu);
    free(srv);
    return rc;
}
