/* The channel thread: sl_server events, the session workers' sockets, the in-process workers'
 * outbox (eventfd), the agent's control socket, all in one zmq_poll loop. Decodes and checks
 * ClientMessages, ends a session on SessionClose, a lost peer, revocation or a protocol
 * violation (malformed messages end that session only). Admission is accept.c's, the sessions'
 * table sessions.c's, the worker processes' parent side workers.c's.
 *
 * Process mode (cfg->worker_exe, what sluice-backend runs): this process never loads the
 * driver. SessionOpen starts `worker_exe --session-worker FD ...` (worker.c; workers.c starts it)
 * for the session; the worker answers SessionAccept itself. Checked CallFrames (message bytes and
 * the calls' bulk, taken straight into the message for the worker) and CallbackDone go to the
 * worker through a SOCK_SEQPACKET socketpair; what it sends back goes to the guest. A worker that
 * dies ends its own session only (the guest gets CLOSE with the reason); ending a session closes
 * the socket, then SIGKILL after BE_WORKER_GRACE_MS. Thread mode (unit tests): sessions run on
 * threads of this process (session/session.c) with the api/devs given to be_server_run.
 *
 * Accounting (docs/accounting.md): the server makes the tenant's accounting page
 * (accounting/quota.c) before any worker and gives each session a slot in it and its instance's SLA
 * from the grant; it enforces the sessions-per-instance limit of the SLA (and --max-sessions per
 * tenant), reports session events to the agent, and takes the workers' usage records (BE_IPC_USAGE,
 * read until the worker exits, even after its session ended) into the control channel's queue. A
 * worker that dies before its final record gets a final record made by sessions.c (no figures,
 * measurement "none"). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/loop.h"
#include "accounting/quota.h"
#include "accounting/records.h"
#include "api/callback.h"
#include "daemon/accept.h"
#include "daemon/control.h"
#include "daemon/grants.h"
#include "daemon/ipc_tokens.h"
#include "daemon/sessions.h"
#include "daemon/state.h"
#include "daemon/workers.h"
#include "session/session.h"
#include "session/spin.h"
#include "sluice/relax.h"
#include "sluice/log.h"

/* Checks the calls' bulk and seq, then takes the bulk into the job (thread mode) or straight
 * into the message for the session's worker (process mode), without waiting for it: what has
 * not arrived yet comes in later polls (SL_EV_BULK, bulk_in). A frame refused here is refused
 * before any of its bulk is read: the disconnect drops what is owed. */
static void on_calls(struct be_server *srv, const sl_server_event *ev,
                     Sluice__Wire__ClientMessage *m)
{
    struct be_sess_node *n = be_sessions_find(srv, ev->peer);
    if (!n) {
        sl_wire_free_client(m);
        be_sessions_violation(srv, ev->peer, SL_ERR_PROTOCOL, "calls before SessionOpen");
        return;
    }
    const Sluice__Wire__CallFrame *f = m->calls;
    uint64_t total = 0;
    char why[160] = "";
    for (size_t i = 0; i < f->n_calls && !why[0]; i++) {
        if (f->calls[i]->bulk_length > BE_MAX_BULK_PER_CALL)
            snprintf(why, sizeof why, "call seq %llu announces %llu bytes of bulk, over 64 MiB",
                     (unsigned long long)f->calls[i]->seq,
                     (unsigned long long)f->calls[i]->bulk_length);
        total += f->calls[i]->bulk_length;
    }
    if (!why[0] && total != ev->bulk_len)
        snprintf(why, sizeof why,
                 "the calls' bulk lengths (%llu bytes) do not add up to the %llu "
                 "bytes announced",
                 (unsigned long long)total, (unsigned long long)ev->bulk_len);
    if (!why[0] && f->n_calls && f->calls[0]->seq <= n->last_seq) /* the codec checks within */
        snprintf(why, sizeof why,
                 "call seq %llu is not above the session's last seq %llu (reused or out of "
                 "order)",
                 (unsigned long long)f->calls[0]->seq, (unsigned long long)n->last_seq);
    if (why[0]) {
        sl_wire_free_client(m);
        be_sessions_violation(srv, ev->peer,
                              strstr(why, "over 64") ? SL_ERR_TOO_LARGE : SL_ERR_PROTOCOL, why);
        return;
    }
    if (f->n_calls)
        n->last_seq = f->calls[f->n_calls - 1]->seq;
    sl_error e;
    if (!n->s) {
        sl_code rc = be_workers_send(srv, n, ev->msg, ev->len, f, &e);
        sl_wire_free_client(m);
        if (rc != SL_OK) {
            be_sessions_violation(srv, ev->peer, e.code, e.msg);
            return;
        }
        be_workers_flush(n);
        return;
    }
    struct be_job *job = calloc(1, sizeof *job);
    if (job)
        job->bulk = calloc(f->n_calls, sizeof *job->bulk);
    struct iovec *seg = job && job->bulk ? calloc(f->n_calls + 1, sizeof *seg) : NULL;
    if (!seg) {
        if (job)
            free(job->bulk);
        free(job);
        sl_wire_free_client(m);
        be_sessions_violation(srv, ev->peer, SL_ERR_NOMEM, "out of memory");
        return;
    }
    job->msg = m;
    size_t k = 0;
    for (size_t i = 0; i < f->n_calls; i++) {
        uint64_t len = f->calls[i]->bulk_length;
        if (!len)
            continue;
        job->bulk[i] = malloc(len);
        if (!job->bulk[i]) {
            free(seg);
            be_job_free(job);
            be_sessions_violation(srv, ev->peer, SL_ERR_NOMEM, "no memory for the calls' bulk");
            return;
        }
        seg[k++] = (struct iovec){job->bulk[i], (size_t)len};
        job->bytes += len;
    }
    if (k) {
        n->job_pend = job;
        sl_code rc = sl_server_take_bulk(srv->srv, ev->peer, seg, k, &e);
        free(seg);
        if (rc != SL_OK) {
            n->job_pend = NULL;
            be_job_free(job);
            be_sessions_violation(srv, ev->peer, e.code, e.msg);
        }
        return;
    }
    free(seg);
    if (be_session_enqueue(n->s, job, &e) != SL_OK) {
        be_job_free(job);
        be_sessions_violation(srv, ev->peer, e.code, e.msg);
    }
}

/* The bulk of a session's CallFrame is all in: the frame goes on to its worker. */
static void bulk_in(struct be_server *srv, const sl_server_event *ev)
{
    struct be_sess_node *n = be_sessions_find(srv, ev->peer);
    if (!n)
        return;
    sl_error e;
    if (n->tx_pend) {
        struct be_tx *t = n->tx_pend;
        n->tx_pend = NULL;
        be_workers_queue(n, t);
        be_workers_flush(n);
    } else if (n->job_pend) {
        struct be_job *job = n->job_pend;
        n->job_pend = NULL;
        if (be_session_enqueue(n->s, job, &e) != SL_OK) {
            be_job_free(job);
            be_sessions_violation(srv, ev->peer, e.code, e.msg);
        }
    }
}

static void on_message(struct be_server *srv, const sl_server_event *ev)
{
    Sluice__Wire__ClientMessage *m = NULL;
    sl_error e;
    if (sl_wire_decode_client(ev->msg, ev->len, NULL, &m, &e) != SL_OK) {
        be_sessions_violation(srv, ev->peer, SL_ERR_PROTOCOL, e.msg);
        return;
    }
    if (m->kind_case == SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS) {
        on_calls(srv, ev, m); /* takes m */
        return;
    }
    if (ev->bulk_len) { /* only CallFrames carry bulk */
        be_sessions_violation(srv, ev->peer, SL_ERR_PROTOCOL,
                              "bulk with a message other than calls");
        sl_wire_free_client(m);
        return;
    }
    struct be_sess_node *n = be_sessions_find(srv, ev->peer);
    switch (m->kind_case) {
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_OPEN:
        be_accept_open(srv, ev, m->open);
        break;
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_CLOSE:
        if (n) {
            sl_server_disconnect(srv->srv, ev->peer, SL_ERR_CLOSED, "session closed", &e);
            be_sessions_end(srv, n, "SessionClose from the guest");
        }
        break;
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLBACK_DONE:
        if (n && m->callback_done && n->s) {
            be_callback_done(n->s, m->callback_done->id);
        } else if (n && m->callback_done) {
            if (be_workers_send(srv, n, ev->msg, ev->len, NULL, &e) != SL_OK)
                be_sessions_violation(srv, ev->peer, e.code, e.msg);
            else
                be_workers_flush(n);
        }
        break;
    default:
        be_sessions_violation(srv, ev->peer, SL_ERR_PROTOCOL, "unknown client message");
    }
    sl_wire_free_client(m);
}

/* A handshake that failed on the guest's certificate (none, expired, not yet valid, another
 * CA): the session was refused before anyone was known. Other handshake failures are noise
 * anyone can make (a scan, a flood): the channel counts them in its summary line, and they are
 * not reported one each. */
static int certificate_refusal(const sl_server_event *ev)
{
    sl_code c = ev->reason.code;
    return ev->identity && !ev->identity->authenticated &&
           (c == SL_ERR_CERT_EXPIRED || c == SL_ERR_UNKNOWN_CA || c == SL_ERR_NO_PEER_CERT);
}

/* The journal's fields for what one event is about (sluice/log.h). */
static void log_fields_for(struct be_server *srv, const sl_server_event *ev)
{
    struct be_sess_node *n = be_sessions_find(srv, ev->peer);
    const char *inst = n ? n->instance : ev->identity ? ev->identity->instance_id : NULL;
    char label[32];
    sl_log_session_label(srv->cfg->project, (unsigned long long)ev->peer, label, sizeof label);
    sl_log_set_thread_fields(&(sl_log_fields){.instance = inst, .session = label});
}

static void on_revoke(void *user, const char *uuid, const char *reason)
{
    struct be_server *srv = user;
    size_t n = sl_server_revoke_instance(srv->srv, uuid, reason);
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "instance %s revoked (%s): %zu live session%s ended", uuid,
           reason, n, n == 1 ? "" : "s");
}

/* A Grant (maybe a new SLA for an instance with live sessions: they follow it from their next
 * frame). */
static void on_grant(void *user, const char *uuid, const struct be_sla *sla)
{
    struct be_server *srv = user;
    if (srv->acct && be_acct_inst_set(srv->acct, uuid, sla) < 0)
        sl_log(SL_LOG_WARNING, BE_COMPONENT,
               "instance %s: the accounting page is full; its SLA applies from its next session",
               uuid);
}

/* Connected to an agent again (a restarted agent adopted us): it learns the live sessions. */
static void on_reconnected(void *user)
{
    struct be_server *srv = user;
    for (struct be_sess_node *n = srv->sessions; n; n = n->next)
        if (!n->ended)
            be_control_session(srv->ctl, SLUICE__CONTROL__SESSION_EVENT__KIND__OPENED, n->instance,
                               n->project, n->id, "live when the agent connected");
}

static void on_shutdown(void *user, const char *reason)
{
    struct be_server *srv = user;
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "shutdown asked by the agent: %s", reason);
    *srv->stop = 1;
}

static void handle_event(struct be_server *srv, const sl_server_event *ev)
{
    if (ev->kind != SL_EV_NONE)
        log_fields_for(srv, ev);
    switch (ev->kind) {
    case SL_EV_ACCEPTED:
        sl_log(SL_LOG_INFO, BE_COMPONENT, "peer %llu: instance %s project %s connected from %s",
               (unsigned long long)ev->peer, ev->identity->instance_id, ev->identity->project_id,
               ev->identity->address[0] ? ev->identity->address : "?");
        break;
    case SL_EV_MESSAGE:
        on_message(srv, ev);
        break;
    case SL_EV_BULK:
        bulk_in(srv, ev);
        break;
    case SL_EV_CLOSED: {
        struct be_sess_node *n = be_sessions_find(srv, ev->peer);
        if (n) {
            n->end_code = ev->reason.code; /* a revocation, say, for the direct channel */
            be_sessions_end(srv, n,
                            ev->reason.msg[0] ? ev->reason.msg : sl_code_name(ev->reason.code));
        } else if (certificate_refusal(ev))
            be_control_refused(srv->ctl, "certificate", "", srv->cfg->project, ev->reason.msg);
        break;
    }
    default:
        break;
    }
    sl_log_set_thread_fields(NULL);
}

/* Stopping: the agent gets up to 2 s to acknowledge the last usage records. */
static void flush_usage(struct be_server *srv)
{
    if (!srv->ctl)
        return;
    int64_t until = be_sessions_now_ms() + 2000;
    while (be_control_usage_waiting(srv->ctl) && be_sessions_now_ms() < until) {
        zmq_pollitem_t it = {be_control_socket(srv->ctl), 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, 100);
        be_control_process(srv->ctl);
    }
}

static volatile sig_atomic_t reload_requested;

void be_server_request_reload(void)
{
    reload_requested = 1;
}

static void reload_tls(struct be_server *srv, const struct be_config *cfg)
{
    reload_requested = 0;
    sl_tls_config tls = {
        .mode = SL_TLS_MUTUAL, .ca_file = cfg->ca, .cert_file = cfg->cert, .key_file = cfg->key};
    sl_error e = {0};
    if (sl_server_reload_tls(srv->srv, &tls, &e) == SL_OK)
        sl_log(SL_LOG_NOTICE, BE_COMPONENT,
               "project %s: certificate reloaded from %s; new sessions use it", cfg->project,
               cfg->cert);
    else
        sl_log(SL_LOG_ERR, BE_COMPONENT,
               "project %s: certificate reload failed, keeping the old one: %s", cfg->project,
               e.msg);
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
    srv->acct_fd = -1;
    pthread_mutex_init(&srv->out_mu, NULL);
    int rc = 1;
    sl_error e;
    srv->grants = be_grants_new();
    srv->tokens = be_ipc_tokens_new();
    if (srv->efd < 0 || !srv->grants || !srv->tokens) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "out of resources at start");
        goto out;
    }
    if (be_acct_shm_create(&srv->acct, &srv->acct_fd, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "accounting page: %s", e.msg);
        goto out;
    }
    /* the workers' staging slots take their page-locked bytes from it (bulk_pool.c) */
    unsigned budget = cfg->staging_budget ? cfg->staging_budget : BE_STAGING_BUDGET_MIB;
    srv->acct->pin_budget = (uint64_t)budget << 20;
    sl_log(SL_LOG_INFO, BE_COMPONENT,
           "large copies: up to %u page-locked slots of 16 MiB per session (--staging-slots), "
           "%u MiB across the sessions (--staging-budget)",
           cfg->staging_slots, budget);
    if (cfg->no_gpu_timing)
        sl_log(SL_LOG_WARNING, BE_COMPONENT,
               "accounting: --measure none: GPU time is NOT measured (records say \"none\") and "
               "GPU shares are NOT enforced; usage records every %u s",
               cfg->usage_interval_s ? cfg->usage_interval_s : BE_USAGE_INTERVAL_S);
    else
        sl_log(SL_LOG_INFO, BE_COMPONENT,
               "accounting: GPU time measured with timing events around each session's device "
               "work (\"events\"; CUPTI is not used), usage records every %u s",
               cfg->usage_interval_s ? cfg->usage_interval_s : BE_USAGE_INTERVAL_S);
    sl_log(SL_LOG_INFO, BE_COMPONENT,
           cfg->spin_us ? "idle session threads poll %u us before they sleep (--spin-us)"
                        : "session threads sleep as soon as they are idle (--spin-us %u)",
           cfg->spin_us);
    if (cfg->allow && be_grants_load_allow(srv->grants, cfg->allow, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "--allow: %s", e.msg);
        goto out;
    }
    sl_tls_config tls = {
        .mode = SL_TLS_MUTUAL, .ca_file = cfg->ca, .cert_file = cfg->cert, .key_file = cfg->key};
    sl_server_hooks hooks = {.accept = be_accept_hook, .user = srv};
    sl_channel_opts opts;
    sl_channel_opts_default(&opts);
    opts.max_message = SL_WIRE_MAX_MESSAGE;
    opts.max_bulk = BE_MAX_BULK_PER_FRAME;   /* more announced: refused before a byte is read */
    opts.max_out_queue = BE_MAX_REPLY_QUEUE; /* replies a guest lets wait (docs/backend.md) */
    if (sl_server_bind(cfg->listen, &tls, &opts, &hooks, &srv->srv, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "cannot listen on %s: %s", cfg->listen, e.msg);
        goto out;
    }
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "project %s: listening on %s", cfg->project,
           sl_server_endpoint(srv->srv));
    if (cfg->control) {
        struct be_control_hooks ch = {.revoke = on_revoke,
                                      .shutdown = on_shutdown,
                                      .grant = on_grant,
                                      .reconnected = on_reconnected,
                                      .user = srv};
        if (be_control_open(cfg->control, cfg->project, sl_server_endpoint(srv->srv), srv->grants,
                            &ch, &srv->ctl, &e) != SL_OK) {
            sl_log(SL_LOG_ERR, BE_COMPONENT, "--control %s: %s", cfg->control, e.msg);
            goto out;
        }
        if (cfg->control_key && be_control_require_key(srv->ctl, cfg->control_key, &e) != SL_OK) {
            sl_log(SL_LOG_ERR, BE_COMPONENT, "%s", e.msg);
            goto out;
        }
        if (cfg->usage_resend_s)
            be_control_set_resend(srv->ctl, (int64_t)cfg->usage_resend_s * 1000);
    }
    size_t cap = 0;
    zmq_pollitem_t *items = NULL;
    struct be_sess_node **owner = NULL;
    uint64_t spin_ns = (uint64_t)cfg->spin_us * 1000u, now = 0, active_at = 0, chores_at = 0;
    while (!*stop) {
        if (reload_requested)
            reload_tls(srv, cfg);
        size_t want = 3 + srv->live + 8;
        if (want > cap) {
            zmq_pollitem_t *ni = realloc(items, want * 2 * sizeof *ni);
            struct be_sess_node **no = ni ? realloc(owner, want * 2 * sizeof *no) : NULL;
            if (ni)
                items = ni;
            if (!no) {
                sl_log(SL_LOG_ERR, BE_COMPONENT, "out of memory");
                break;
            }
            owner = no;
            cap = want * 2;
        }
        size_t ni = 0;
        items[ni++] = (zmq_pollitem_t){NULL, sl_server_fd(srv->srv), ZMQ_POLLIN, 0};
        items[ni++] = (zmq_pollitem_t){NULL, srv->efd, ZMQ_POLLIN, 0};
        if (srv->ctl)
            items[ni++] = (zmq_pollitem_t){be_control_socket(srv->ctl), 0, ZMQ_POLLIN, 0};
        size_t first = ni;
        for (struct be_sess_node *n = srv->sessions; n && ni < cap; n = n->next)
            if (n->fd >= 0) {
                owner[ni] = n;
                items[ni++] = (zmq_pollitem_t){
                    NULL, n->fd, (short)(ZMQ_POLLIN | (n->tx_head ? ZMQ_POLLOUT : 0)), 0};
            }
        /* spin.c: for spin_us after the last event the loop polls without sleeping */
        int spinning = spin_ns && now - active_at < spin_ns;
        int np = zmq_poll(items, (int)ni, spinning ? 0 : sl_server_wait_ms(srv->srv, 100));
        if (np < 0 && errno != EINTR) {
            sl_log(SL_LOG_ERR, BE_COMPONENT, "poll: %s", zmq_strerror(errno));
            break;
        }
        int busy = np != 0;
        if (!busy && spinning)
            sl_cpu_relax();
        /* workers first (their replies), then the channel */
        for (size_t i = first; np > 0 && i < ni; i++) {
            if (items[i].revents & ZMQ_POLLOUT)
                be_workers_flush(owner[i]);
            if (items[i].revents & (ZMQ_POLLIN | ZMQ_POLLERR))
                be_workers_read(srv, owner[i], BE_READ_TURN);
        }
        be_sessions_drain_outbox(srv);
        for (int k = 0; k < 4096 && !*stop; k++) {
            sl_server_event ev;
            if (sl_server_poll(srv->srv, 0, &ev, &e) != SL_OK || ev.kind == SL_EV_NONE)
                break;
            busy = 1;
            handle_event(srv, &ev);
            be_sessions_drain_outbox(srv);
        }
        /* the control socket's timers and the workers' reaping (a waitpid per session) run
         * when something happened or every 10 ms, not on every empty poll (the loop turns
         * every 1 ms while a guest's queue is full, more often while spinning) */
        now = be_now_ns();
        if (busy)
            active_at = now;
        if (busy || now - chores_at >= 10000000u) {
            chores_at = now;
            if (srv->ctl)
                be_control_process(srv->ctl);
            be_workers_reap(srv, 0);
        }
    }
    free(items);
    free(owner);
    rc = 0;
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "stopping: closing %s sessions",
           srv->sessions ? "the live" : "no");
out:
    for (struct be_sess_node *n = srv->sessions; n; n = n->next)
        be_sessions_end(srv, n, "backend stopping");
    be_workers_reap(srv, 1);
    be_sessions_drain_outbox(srv);
    flush_usage(srv);
    sl_server_close(srv->srv);
    be_control_close(srv->ctl);
    be_acct_shm_unmap(srv->acct);
    if (srv->acct_fd >= 0)
        close(srv->acct_fd);
    be_grants_free(srv->grants);
    be_ipc_tokens_free(srv->tokens);
    if (srv->efd >= 0)
        close(srv->efd);
    pthread_mutex_destroy(&srv->out_mu);
    free(srv);
    return rc;
}
