/* The channel thread: sl_server events, the session workers' sockets, the in-process workers'
 * outbox (eventfd), the agent's control socket, all in one zmq_poll loop. Decodes and checks
 * ClientMessages, ends a session on SessionClose, a lost peer, revocation or a protocol
 * violation (malformed messages end that session only).
 *
 * Process mode (cfg->worker_exe, what sluice-backend runs): this process never loads the
 * driver. SessionOpen starts `worker_exe --session-worker FD ...` (worker.c) for the session;
 * the worker answers SessionAccept itself. Checked CallFrames (message bytes and the calls' bulk,
 * taken straight into the message for the worker) and CallbackDone go to the worker through a
 * SOCK_SEQPACKET socketpair; what it sends back goes to the guest. A worker that dies ends its
 * own session only (the guest gets CLOSE with the reason); ending a session closes the socket,
 * then SIGKILL after BE_WORKER_GRACE_MS. Thread mode (unit tests): sessions run on threads of
 * this process (session.c) with the api/devs given to be_server_run.
 *
 * Accounting (docs/accounting.md): the server makes the tenant's accounting page (quota.c)
 * before any worker and gives each session a slot in it and its instance's SLA from the grant;
 * it enforces the sessions-per-instance limit of the SLA (and --max-sessions per tenant),
 * reports session events to the agent, and takes the workers' usage records (BE_IPC_USAGE, read
 * until the worker exits, even after its session ended) into the control channel's queue. A
 * worker that dies before its final record gets a final record made here (no figures,
 * measurement "none"). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "backend.h"
#include "sluice/relax.h"
#include "sluice/log.h"

struct be_out {
    struct be_out *next;
    sl_peer peer;
    uint8_t *msg;
    size_t len;
    uint8_t *bulk;
    size_t bulk_len;
    int usage; /* msg is an encoded UsageRecord (an in-process session's) */
    int close;
    sl_code code;
    char why[160];
};

struct be_tx {
    struct be_tx *next;
    uint8_t *buf; /* be_ipc_hdr + message + bulk */
    size_t len, off;
};

struct be_sess_node {
    struct be_sess_node *next;
    sl_peer peer;
    uint64_t id;
    char instance[64], project[64];
    sl_be_session *s; /* thread mode */
    /* process mode */
    pid_t pid; /* 0 once reaped */
    int fd;    /* socket to the worker, -1 once closed */
    struct be_ipc_rx rx;
    struct be_tx *tx_head, *tx_tail;
    size_t tx_bytes;
    int64_t kill_at; /* ms (monotonic) after which the worker gets SIGKILL; 0 = not asked */
    int killed;
    int ended;         /* the channel session is gone; waiting for the worker */
    uint64_t last_seq; /* of the session's last call: seq must go up across frames too */
    /* a CallFrame whose bulk the channel is still receiving (sl_server_take_bulk): queued
     * for the worker (process mode) or the session thread at SL_EV_BULK */
    struct be_tx *tx_pend;
    struct be_job *job_pend;
    /* accounting: the slot and instance entry in the accounting page, what the last usage
     * record said (a worker that dies without its final record gets one from here) */
    int acct_slot, acct_inst;
    int got_final;
    int64_t last_end_ns;
    char gpu_uuid[48];
    char flavor[256];
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
    unsigned live;
    struct be_acct_shm *acct; /* the tenant's accounting page (quota.c) */
    int acct_fd;
};

static int64_t now_ms(void);
static void worker_read(struct be_server *srv, struct be_sess_node *n, size_t budget);

static be_outbox_sink sink; /* a session worker process: the outbox goes to its parent */

void be_outbox_set_sink(be_outbox_sink f)
{
    sink = f;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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
    if (!srv) { /* a session worker process, or a bare session in a test */
        if (sink)
            sink(0, SL_OK, NULL, msg, len, bulk, bulk_len);
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
    *o = (struct be_out){NULL, peer, msg, len, bulk, bulk_len, 0, 0, SL_OK, ""};
    out_push(srv, o);
}

/* An in-process session's usage record (thread mode), taken by the channel thread. */
static void outbox_usage(void *user, const uint8_t *rec, size_t len)
{
    struct be_server *srv = user;
    struct be_out *o = calloc(1, sizeof *o);
    uint8_t *copy = o ? malloc(len ? len : 1) : NULL;
    if (!copy) {
        free(o);
        return;
    }
    memcpy(copy, rec, len);
    o->msg = copy;
    o->len = len;
    o->usage = 1;
    out_push(srv, o);
}

void be_outbox_push_close(struct be_server *srv, sl_peer peer, sl_code code, const char *why)
{
    if (!srv) {
        if (sink)
            sink(1, code, why, NULL, 0, NULL, 0);
        return;
    }
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
        if (n->peer == peer && !n->ended)
            return n;
    return NULL;
}

static struct be_sess_node *find_id(struct be_server *srv, uint64_t id)
{
    for (struct be_sess_node *n = srv->sessions; n; n = n->next)
        if (n->id == id)
            return n;
    return NULL;
}

/* A usage record from session n's worker (or an in-process session, n found by its id): checked
 * against the session it comes from, then queued for the agent or logged. */
static void on_usage(struct be_server *srv, struct be_sess_node *n, const uint8_t *rec, size_t len)
{
    Sluice__Control__UsageRecord *r = sluice__control__usage_record__unpack(NULL, len, rec);
    int in_process = !n; /* thread mode: the session (and its node) may be gone already */
    if (r && !n)
        n = find_id(srv, r->session_id);
    if (!r || (!n && !in_process) ||
        (n &&
         (r->session_id != n->id || !r->instance_uuid || strcmp(r->instance_uuid, n->instance))) ||
        !r->project_id || strcmp(r->project_id, srv->cfg->project)) {
        sl_log(SL_LOG_WARNING, BE_COMPONENT,
               "session %llu: a usage record that is not the session's was dropped",
               n ? (unsigned long long)n->id : 0ULL);
        if (r)
            sluice__control__usage_record__free_unpacked(r, NULL);
        return;
    }
    if (n) {
        n->got_final |= r->final;
        n->last_end_ns = r->interval_end_ns;
        snprintf(n->gpu_uuid, sizeof n->gpu_uuid, "%s", r->gpu_uuid ? r->gpu_uuid : "");
        snprintf(n->flavor, sizeof n->flavor, "%s", r->flavor ? r->flavor : "");
    }
    if (srv->ctl)
        be_control_usage(srv->ctl, rec, len);
    else
        be_usage_log(r);
    sluice__control__usage_record__free_unpacked(r, NULL);
}

/* The final record of a session whose worker died before sending its own. */
static void final_for_lost(struct be_server *srv, struct be_sess_node *n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    struct be_usage u = {.instance = n->instance,
                         .project = srv->cfg->project,
                         .flavor = n->flavor,
                         .gpu_uuid = n->gpu_uuid,
                         .measurement = "none",
                         .session_id = n->id,
                         .start_ns = n->last_end_ns && n->last_end_ns <= now ? n->last_end_ns : now,
                         .end_ns = now,
                         .final = 1};
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_error e;
    if (be_usage_encode(&u, &buf, &len, &e) != SL_OK)
        return;
    sl_log(SL_LOG_WARNING, BE_COMPONENT,
           "session %llu instance %s: its worker ended without a final usage record; the work of "
           "its last interval is not accounted",
           (unsigned long long)n->id, n->instance);
    on_usage(srv, n, buf, len);
    free(buf);
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
        if (o->usage) {
            on_usage(srv, NULL, o->msg, o->len);
        } else if (find(srv, o->peer)) {
            sl_error e;
            if (o->close) {
                sl_server_disconnect(srv->srv, o->peer, o->code, o->why, &e);
            } else {
                if (sl_server_send_take(srv->srv, o->peer, o->msg, o->len, o->bulk, o->bulk_len,
                                        &e) != SL_OK)
                    sl_log(SL_LOG_WARNING, BE_COMPONENT, "peer %llu: send: %s",
                           (unsigned long long)o->peer, e.msg);
                o->bulk = NULL; /* the channel has it */
            }
        }
        free(o->msg);
        free(o->bulk);
        free(o);
        o = next;
    }
}

/* ---------------------------------------------------------------- sessions */

static void tx_free(struct be_sess_node *n)
{
    for (struct be_tx *t = n->tx_head, *x; t; t = x) {
        x = t->next;
        free(t->buf);
        free(t);
    }
    n->tx_head = n->tx_tail = NULL;
    n->tx_bytes = 0;
    if (n->tx_pend) {
        free(n->tx_pend->buf);
        free(n->tx_pend);
        n->tx_pend = NULL;
    }
    if (n->job_pend) {
        be_job_free(n->job_pend);
        n->job_pend = NULL;
    }
}

static void end_session(struct be_server *srv, struct be_sess_node *n, const char *why)
{
    if (n->ended)
        return;
    n->ended = 1;
    srv->live--;
    sl_log(SL_LOG_INFO, BE_COMPONENT, "session %llu instance %s project %s: closing (%s)",
           (unsigned long long)n->id, n->instance, n->project, why);
    be_control_session(srv->ctl, SLUICE__CONTROL__SESSION_EVENT__KIND__CLOSED, n->instance,
                       n->project, n->id, why);
    if (n->s) {
        tx_free(n); /* a job whose bulk was still on its way */
        be_session_close(n->s);
        return;
    }
    /* the worker sees EOF, sends its final usage record, frees everything and exits (we read
     * until it has); SIGKILL if it takes too long */
    tx_free(n);
    if (n->fd >= 0 && shutdown(n->fd, SHUT_WR) != 0) {
        close(n->fd);
        n->fd = -1;
    }
    n->kill_at = now_ms() + BE_WORKER_GRACE_MS;
}

static void node_free(struct be_server *srv, struct be_sess_node *n)
{
    if (n->s)
        be_session_free(n->s);
    if (srv->acct && n->acct_slot >= 0)
        be_acct_slot_release(srv->acct, n->acct_slot); /* its memory is free again */
    tx_free(n);
    be_ipc_rx_free(&n->rx);
    if (n->fd >= 0)
        close(n->fd);
    free(n);
}

/* A worker process exited with status st. */
static void worker_exited(struct be_server *srv, struct be_sess_node *n, int st)
{
    char how[96];
    if (WIFSIGNALED(st))
        snprintf(how, sizeof how, "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(how, sizeof how, "exit status %d", WEXITSTATUS(st));
    n->pid = 0;
    if (n->fd >= 0) /* what it wrote before exiting (its final usage record): all of it */
        worker_read(srv, n, 0);
    if (n->fd >= 0) {
        close(n->fd);
        n->fd = -1;
    }
    if (!n->got_final)
        final_for_lost(srv, n);
    if (n->ended) {
        sl_log(n->killed ? SL_LOG_WARNING : SL_LOG_INFO, BE_COMPONENT,
               "session %llu instance %s project %s: worker ended (%s%s)",
               (unsigned long long)n->id, n->instance, n->project, how,
               n->killed ? ", killed after the grace period" : "");
        return;
    }
    char why[160];
    snprintf(why, sizeof why, "session worker died: %s; session ended", how);
    sl_log(SL_LOG_WARNING, BE_COMPONENT, "session %llu instance %s project %s: %s",
           (unsigned long long)n->id, n->instance, n->project, why);
    sl_error e;
    sl_server_disconnect(srv->srv, n->peer, SL_ERR_CLOSED, why, &e);
    end_session(srv, n, why);
}

static void reap(struct be_server *srv, int wait)
{
    for (;;) {
        int pending = 0;
        for (struct be_sess_node **p = &srv->sessions; *p;) {
            struct be_sess_node *n = *p;
            if (n->pid > 0) {
                int st;
                pid_t r = waitpid(n->pid, &st, WNOHANG);
                if (r == n->pid || (r < 0 && errno == ECHILD)) {
                    if (r < 0)
                        st = 0;
                    worker_exited(srv, n, st);
                } else if (n->ended && !n->killed && now_ms() >= n->kill_at) {
                    kill(n->pid, SIGKILL);
                    n->killed = 1;
                }
            }
            if (n->pid > 0 && n->ended && n->fd >= 0)
                worker_read(srv, n, BE_READ_TURN); /* its last usage records */
            int done = n->s ? (wait || atomic_load(&n->s->finished)) : n->pid == 0;
            if (n->ended && done) {
                *p = n->next;
                if (n->s && wait && !atomic_load(&n->s->finished)) {
                    be_session_free(n->s); /* joins: its final record is in the outbox */
                    n->s = NULL;
                    drain_outbox(srv);
                }
                node_free(srv, n);
            } else {
                pending += n->ended;
                p = &n->next;
            }
        }
        if (!wait || !pending)
            return;
        usleep(20000);
    }
}

static void violation(struct be_server *srv, sl_peer peer, sl_code code, const char *why)
{
    sl_error e;
    struct be_sess_node *n = find(srv, peer);
    sl_log(SL_LOG_WARNING, BE_COMPONENT, "session %llu instance %s project %s: %s; ending it",
           n ? (unsigned long long)n->id : 0ULL, n ? n->instance : "?", n ? n->project : "?", why);
    sl_server_disconnect(srv->srv, peer, code, why, &e);
    if (n)
        end_session(srv, n, why);
}

sl_code be_encode_accept(const struct be_devices *devs, const sl_be_session *s, uint8_t **buf,
                         size_t *len, sl_error *e)
{
    int nd = devs ? devs->count : 0;
    Sluice__Wire__DeviceInfo *di = calloc(nd ? (size_t)nd : 1, sizeof *di);
    Sluice__Wire__DeviceInfo **dp = calloc(nd ? (size_t)nd : 1, sizeof *dp);
    if (!di || !dp) {
        free(di);
        free(dp);
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < nd; i++) {
        const struct be_device *d = &devs->dev[i];
        sluice__wire__device_info__init(&di[i]);
        di[i].ordinal = i;
        di[i].name = (char *)d->name;
        if (d->has_uuid)
            di[i].uuid = (ProtobufCBinaryData){16, (uint8_t *)d->uuid};
        di[i].total_mem = be_acct_total_mem(s, d->total_mem); /* min(device, quota) */
        di[i].attributes = d->attrs;
        di[i].n_attributes = d->n_attrs;
        if (d->has_luid)
            di[i].luid = (ProtobufCBinaryData){8, (uint8_t *)d->luid};
        di[i].luid_device_node_mask = d->luid_mask;
        di[i].primary_context = s->primary_ids[i];
        dp[i] = &di[i];
    }
    int dv = devs ? devs->driver_version : 0;
    Sluice__Wire__SessionAccept acc = SLUICE__WIRE__SESSION_ACCEPT__INIT;
    acc.protocol_version = 1;
    acc.driver_version = (uint32_t)(dv < 13000 ? 13000 : dv);
    acc.session_id = s->id;
    acc.max_message_bytes = SL_WIRE_MAX_MESSAGE;
    acc.max_bulk_bytes = BE_MAX_BULK_PER_CALL;
    acc.devices = dp;
    acc.n_devices = (size_t)nd;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_ACCEPT;
    m.accept = &acc;
    sl_code rc = sl_wire_encode_server(&m, NULL, buf, len, e);
    free(di);
    free(dp);
    return rc;
}

/* Starts `worker_exe --session-worker FD ...` for n. */
static sl_code spawn_worker(struct be_server *srv, struct be_sess_node *n, sl_error *e)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return sl_fail(e, SL_ERR_IO, "socketpair: %s", strerror(errno));
    int sz = 4 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    char fdstr[16], idstr[24], afd[16], aslot[16], ainst[16], ival[16], spin[16];
    snprintf(fdstr, sizeof fdstr, "%d", sv[1]);
    snprintf(idstr, sizeof idstr, "%llu", (unsigned long long)n->id);
    snprintf(afd, sizeof afd, "%d", srv->acct ? srv->acct_fd : -1);
    snprintf(aslot, sizeof aslot, "%d", n->acct_slot);
    snprintf(ainst, sizeof ainst, "%d", n->acct_inst);
    snprintf(ival, sizeof ival, "%u",
             srv->cfg->usage_interval_s ? srv->cfg->usage_interval_s : BE_USAGE_INTERVAL_S);
    snprintf(spin, sizeof spin, "%u", srv->cfg->spin_us);
    char *argv[] = {(char *)srv->cfg->worker_exe,
                    "--session-worker",
                    fdstr,
                    "--driver",
                    (char *)srv->cfg->driver,
                    "--session-id",
                    idstr,
                    "--instance",
                    n->instance,
                    "--project",
                    n->project,
                    "--acct-fd",
                    afd,
                    "--acct-slot",
                    aslot,
                    "--acct-inst",
                    ainst,
                    "--usage-interval",
                    ival,
                    "--measure",
                    srv->cfg->no_gpu_timing ? "none" : "events",
                    "--spin-us",
                    spin,
                    srv->cfg->image_dir ? "--image-dir" : NULL,
                    (char *)srv->cfg->image_dir,
                    NULL};
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return sl_fail(e, SL_ERR_IO, "fork: %s", strerror(errno));
    }
    if (pid == 0) { /* only async-signal-safe calls until exec */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        fcntl(sv[1], F_SETFD, 0);
        if (srv->acct)
            fcntl(srv->acct_fd, F_SETFD, 0); /* the accounting page, inherited */
        execv(srv->cfg->worker_exe, argv);
        _exit(127);
    }
    close(sv[1]);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    n->pid = pid;
    n->fd = sv[0];
    if (srv->acct)
        be_acct_slot_set_pid(srv->acct, n->acct_slot, (int)pid);
    return SL_OK;
}

/* Queues one message for n's worker: header, msg, then the calls' bulk, each call's at a
 * 16-byte aligned offset (BE_IPC_ALIGN: parameter buffers keep the alignment a malloc'd buffer
 * has). f: the frame, NULL without bulk. The bulk is taken from the channel straight into the
 * buffer without waiting (sl_server_take_bulk): the message waits in n->tx_pend until the last
 * byte is in (SL_EV_BULK, bulk_in). */
static sl_code worker_send(struct be_server *srv, struct be_sess_node *n, const void *msg,
                           size_t len, const Sluice__Wire__CallFrame *f, sl_error *e)
{
    uint64_t bulk_len = 0;
    size_t nseg = 0;
    for (size_t i = 0; f && i < f->n_calls; i++)
        if (f->calls[i]->bulk_length) {
            bulk_len = BE_IPC_ALIGN(bulk_len) + f->calls[i]->bulk_length;
            nseg++;
        }
    struct be_ipc_hdr h = {BE_IPC_MSG, 0, len, bulk_len};
    size_t total = sizeof h + len + (size_t)bulk_len;
    if (n->tx_bytes + total > BE_MAX_QUEUED_BYTES + ((size_t)64 << 20))
        return sl_fail(e, SL_ERR_TOO_LARGE, "the session's worker does not keep up");
    struct be_tx *t = calloc(1, sizeof *t);
    uint8_t *buf = t ? malloc(total) : NULL;
    struct iovec *seg = buf && nseg ? calloc(nseg, sizeof *seg) : NULL;
    if (!buf || (nseg && !seg)) {
        free(buf);
        free(t);
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    }
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, msg, len);
    uint8_t *bulk = buf + sizeof h + len;
    uint64_t off = 0;
    size_t k = 0;
    for (size_t i = 0; f && i < f->n_calls; i++) {
        uint64_t bl = f->calls[i]->bulk_length;
        if (!bl)
            continue;
        uint64_t at = BE_IPC_ALIGN(off);
        memset(bulk + off, 0, (size_t)(at - off));
        seg[k++] = (struct iovec){bulk + at, (size_t)bl};
        off = at + bl;
    }
    t->buf = buf;
    t->len = total;
    if (nseg) {
        n->tx_pend = t;
        sl_code rc = sl_server_take_bulk(srv->srv, n->peer, seg, nseg, e);
        free(seg);
        if (rc != SL_OK) {
            n->tx_pend = NULL;
            free(buf);
            free(t);
        }
        return rc;
    }
    if (n->tx_tail)
        n->tx_tail->next = t;
    else
        n->tx_head = t;
    n->tx_tail = t;
    n->tx_bytes += total;
    return SL_OK;
}

/* Writes what the worker's socket takes now. */
static void worker_flush(struct be_sess_node *n)
{
    while (n->fd >= 0 && n->tx_head) {
        struct be_tx *t = n->tx_head;
        size_t k = t->len - t->off < BE_IPC_RECORD ? t->len - t->off : BE_IPC_RECORD;
        ssize_t w = send(n->fd, t->buf + t->off, k, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* full (POLLOUT later) or gone (EOF on read, then reaped) */
        t->off += (size_t)w;
        if (t->off == t->len) {
            n->tx_head = t->next;
            if (!n->tx_head)
                n->tx_tail = NULL;
            n->tx_bytes -= t->len;
            free(t->buf);
            free(t);
        }
    }
}

/* What n's worker sent: messages for the guest, or the end of the session. */
static void worker_read(struct be_server *srv, struct be_sess_node *n, size_t budget)
{
    sl_error e;
    n->rx.budget = budget; /* a 64 MiB reply is not read in one go: other sessions first */
    n->rx.until_ns = budget ? be_now_ns() + BE_READ_TURN_NS : 0;
    n->rx.spent = 0;
    while (n->fd >= 0) {
        int r = be_ipc_read(n->fd, &n->rx, 1);
        if (r == 2)
            return;
        if (r < 0) { /* the worker is gone (reap() says how) or talks nonsense */
            if (r == -1 && n->pid > 0)
                kill(n->pid, SIGKILL);
            close(n->fd);
            n->fd = -1;
            tx_free(n);
            return;
        }
        if (n->rx.hdr.type == BE_IPC_USAGE) {
            on_usage(srv, n, n->rx.msg, (size_t)n->rx.hdr.msg_len);
        } else if (!n->ended) {
            if (n->rx.hdr.type == BE_IPC_SEND) {
                /* the reply's bulk goes to the channel as it is: sent as fast as the guest
                 * reads, never waited for here */
                uint8_t *bulk = n->rx.bulk;
                n->rx.bulk = NULL;
                if (sl_server_send_take(srv->srv, n->peer, n->rx.msg, (size_t)n->rx.hdr.msg_len,
                                        bulk, (size_t)n->rx.hdr.bulk_len, &e) != SL_OK)
                    sl_log(SL_LOG_WARNING, BE_COMPONENT, "session %llu: send: %s",
                           (unsigned long long)n->id, e.msg);
            } else if (n->rx.hdr.type == BE_IPC_CLOSE) {
                sl_code code = n->rx.hdr.code > 0 ? (sl_code)n->rx.hdr.code : SL_ERR_PROTOCOL;
                violation(srv, n->peer, code, (const char *)n->rx.msg);
            }
        }
        be_ipc_rx_next(&n->rx);
    }
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
    sl_error e;
    unsigned max = srv->cfg->max_sessions ? srv->cfg->max_sessions : BE_DEFAULT_MAX_SESSIONS;
    const char *inst = ev->identity->instance_id;
    struct be_sla sla;
    be_grants_sla(srv->grants, inst, &sla);
    unsigned of_inst = 0;
    for (struct be_sess_node *x = srv->sessions; x; x = x->next)
        of_inst += !x->ended && !strcmp(x->instance, inst);
    char why[200] = "";
    if (srv->live >= max)
        snprintf(why, sizeof why, "the backend serves its maximum of %u sessions; try later", max);
    else if (sla.max_sessions && of_inst >= sla.max_sessions)
        snprintf(why, sizeof why,
                 "instance %.40s has its maximum of %u session%s (flavor %.60s); try later", inst,
                 sla.max_sessions, sla.max_sessions == 1 ? "" : "s",
                 sla.flavor[0] ? sla.flavor : "?");
    if (why[0]) {
        sl_log(SL_LOG_WARNING, BE_COMPONENT, "refused a session of instance %s project %s: %s",
               inst, ev->identity->project_id, why);
        be_control_session(srv->ctl, SLUICE__CONTROL__SESSION_EVENT__KIND__REFUSED, inst,
                           ev->identity->project_id, 0, why);
        sl_server_disconnect(srv->srv, ev->peer, SL_ERR_REFUSED, why, &e);
        return;
    }
    struct be_sess_node *n = calloc(1, sizeof *n);
    if (!n) {
        sl_server_disconnect(srv->srv, ev->peer, SL_ERR_NOMEM, "out of memory", &e);
        return;
    }
    n->fd = -1;
    n->acct_slot = n->acct_inst = -1;
    n->peer = ev->peer;
    n->id = ++srv->next_session;
    snprintf(n->instance, sizeof n->instance, "%s", ev->identity->instance_id);
    snprintf(n->project, sizeof n->project, "%s", ev->identity->project_id);
    snprintf(n->flavor, sizeof n->flavor, "%s", sla.flavor);
    if (srv->acct) {
        n->acct_inst = be_acct_inst_set(srv->acct, inst, &sla);
        n->acct_slot = be_acct_slot_take(srv->acct, n->acct_inst);
        if (n->acct_inst < 0 || n->acct_slot < 0) {
            sl_log(SL_LOG_ERR, BE_COMPONENT,
                   "refused a session of instance %s: the accounting page is full", inst);
            node_free(srv, n);
            sl_server_disconnect(srv->srv, ev->peer, SL_ERR_REFUSED,
                                 "the backend cannot account for another session; try later", &e);
            return;
        }
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (srv->cfg->worker_exe) {
        if (spawn_worker(srv, n, &e) != SL_OK) {
            sl_log(SL_LOG_ERR, BE_COMPONENT, "session %llu instance %s: no worker: %s",
                   (unsigned long long)n->id, n->instance, e.msg);
            node_free(srv, n);
            sl_server_disconnect(srv->srv, ev->peer, e.code, e.msg, &e);
            return;
        }
        /* the worker answers SessionAccept once it has loaded the driver */
    } else {
        sl_be_session *s = be_session_new(n->id, srv->api, srv->devs);
        if (!s) {
            node_free(srv, n);
            sl_server_disconnect(srv->srv, ev->peer, SL_ERR_NOMEM, "out of memory", &e);
            return;
        }
        s->peer = ev->peer;
        s->srv = srv;
        memcpy(s->instance, n->instance, sizeof s->instance);
        memcpy(s->project, n->project, sizeof s->project);
        s->spin_ns = (uint64_t)srv->cfg->spin_us * 1000u;
        n->s = s;
        struct be_acct_cfg ac = {.interval_ns = (int64_t)(srv->cfg->usage_interval_s
                                                              ? srv->cfg->usage_interval_s
                                                              : BE_USAGE_INTERVAL_S) *
                                                1000000000LL,
                                 .shm = srv->acct,
                                 .slot = n->acct_slot,
                                 .inst = n->acct_inst,
                                 .no_timing = srv->cfg->no_gpu_timing,
                                 .emit = outbox_usage,
                                 .user = srv};
        if (be_acct_attach(s, &ac, &e) != SL_OK || be_session_start(s, &e) != SL_OK) {
            node_free(srv, n);
            sl_server_disconnect(srv->srv, ev->peer, e.code, e.msg, &e);
            return;
        }
    }
    n->next = srv->sessions;
    srv->sessions = n;
    srv->live++;
    be_control_session(srv->ctl, SLUICE__CONTROL__SESSION_EVENT__KIND__OPENED, n->instance,
                       n->project, n->id, "");
    if (n->s) {
        if (be_encode_accept(srv->devs, n->s, &buf, &len, &e) != SL_OK) {
            violation(srv, ev->peer, SL_ERR_NOMEM, "out of memory");
            return;
        }
        if (sl_server_send(srv->srv, ev->peer, buf, len, NULL, 0, &e) != SL_OK)
            sl_log(SL_LOG_WARNING, BE_COMPONENT, "peer %llu: send: %s",
                   (unsigned long long)ev->peer, e.msg);
        free(buf);
    }
    sl_log(SL_LOG_NOTICE, BE_COMPONENT,
           "session %llu instance %s project %s: opened (guest pid %u on %.64s, %.80s, CUDA %u)%s",
           (unsigned long long)n->id, n->instance, n->project, o->pid,
           o->hostname ? o->hostname : "", o->client ? o->client : "", o->cuda_version,
           n->pid ? "; worker process started" : "");
    if (n->pid)
        sl_log(SL_LOG_INFO, BE_COMPONENT, "session %llu: worker pid %d", (unsigned long long)n->id,
               (int)n->pid);
}

/* Checks the calls' bulk and seq, then takes the bulk into the job (thread mode) or straight
 * into the message for the session's worker (process mode), without waiting for it: what has
 * not arrived yet comes in later polls (SL_EV_BULK, bulk_in). A frame refused here is refused
 * before any of its bulk is read: the disconnect drops what is owed. */
static void on_calls(struct be_server *srv, const sl_server_event *ev,
                     Sluice__Wire__ClientMessage *m)
{
    struct be_sess_node *n = find(srv, ev->peer);
    if (!n) {
        sl_wire_free_client(m);
        violation(srv, ev->peer, SL_ERR_PROTOCOL, "calls before SessionOpen");
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
        violation(srv, ev->peer, strstr(why, "over 64") ? SL_ERR_TOO_LARGE : SL_ERR_PROTOCOL, why);
        return;
    }
    if (f->n_calls)
        n->last_seq = f->calls[f->n_calls - 1]->seq;
    sl_error e;
    if (!n->s) {
        sl_code rc = worker_send(srv, n, ev->msg, ev->len, f, &e);
        sl_wire_free_client(m);
        if (rc != SL_OK) {
            violation(srv, ev->peer, e.code, e.msg);
            return;
        }
        worker_flush(n);
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
        violation(srv, ev->peer, SL_ERR_NOMEM, "out of memory");
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
            violation(srv, ev->peer, SL_ERR_NOMEM, "no memory for the calls' bulk");
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
            violation(srv, ev->peer, e.code, e.msg);
        }
        return;
    }
    free(seg);
    if (be_session_enqueue(n->s, job, &e) != SL_OK) {
        be_job_free(job);
        violation(srv, ev->peer, e.code, e.msg);
    }
}

/* The bulk of a session's CallFrame is all in: the frame goes on to its worker. */
static void bulk_in(struct be_server *srv, const sl_server_event *ev)
{
    struct be_sess_node *n = find(srv, ev->peer);
    if (!n)
        return;
    sl_error e;
    if (n->tx_pend) {
        struct be_tx *t = n->tx_pend;
        n->tx_pend = NULL;
        if (n->tx_tail)
            n->tx_tail->next = t;
        else
            n->tx_head = t;
        n->tx_tail = t;
        n->tx_bytes += t->len;
        worker_flush(n);
    } else if (n->job_pend) {
        struct be_job *job = n->job_pend;
        n->job_pend = NULL;
        if (be_session_enqueue(n->s, job, &e) != SL_OK) {
            be_job_free(job);
            violation(srv, ev->peer, e.code, e.msg);
        }
    }
}

static void on_message(struct be_server *srv, const sl_server_event *ev)
{
    Sluice__Wire__ClientMessage *m = NULL;
    sl_error e;
    if (sl_wire_decode_client(ev->msg, ev->len, NULL, &m, &e) != SL_OK) {
        violation(srv, ev->peer, SL_ERR_PROTOCOL, e.msg);
        return;
    }
    if (m->kind_case == SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS) {
        on_calls(srv, ev, m); /* takes m */
        return;
    }
    if (ev->bulk_len) { /* only CallFrames carry bulk */
        violation(srv, ev->peer, SL_ERR_PROTOCOL, "bulk with a message other than calls");
        sl_wire_free_client(m);
        return;
    }
    struct be_sess_node *n = find(srv, ev->peer);
    switch (m->kind_case) {
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_OPEN:
        on_open(srv, ev, m->open);
        break;
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_CLOSE:
        if (n) {
            sl_server_disconnect(srv->srv, ev->peer, SL_ERR_CLOSED, "session closed", &e);
            end_session(srv, n, "SessionClose from the guest");
        }
        break;
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLBACK_DONE:
        if (n && m->callback_done && n->s) {
            be_callback_done(n->s, m->callback_done->id);
        } else if (n && m->callback_done) {
            if (worker_send(srv, n, ev->msg, ev->len, NULL, &e) != SL_OK)
                violation(srv, ev->peer, e.code, e.msg);
            else
                worker_flush(n);
        }
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
        struct be_sess_node *n = find(srv, ev->peer);
        if (n)
            end_session(srv, n, ev->reason.msg[0] ? ev->reason.msg : sl_code_name(ev->reason.code));
        break;
    }
    default:
        break;
    }
}

/* Stopping: the agent gets up to 2 s to acknowledge the last usage records. */
static void flush_usage(struct be_server *srv)
{
    if (!srv->ctl)
        return;
    int64_t until = now_ms() + 2000;
    while (be_control_usage_waiting(srv->ctl) && now_ms() < until) {
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
    if (srv->efd < 0 || !srv->grants) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "out of resources at start");
        goto out;
    }
    if (be_acct_shm_create(&srv->acct, &srv->acct_fd, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "accounting page: %s", e.msg);
        goto out;
    }
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
    sl_server_hooks hooks = {.accept = accept_hook, .user = srv};
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
                worker_flush(owner[i]);
            if (items[i].revents & (ZMQ_POLLIN | ZMQ_POLLERR))
                worker_read(srv, owner[i], BE_READ_TURN);
        }
        drain_outbox(srv);
        for (int k = 0; k < 4096 && !*stop; k++) {
            sl_server_event ev;
            if (sl_server_poll(srv->srv, 0, &ev, &e) != SL_OK || ev.kind == SL_EV_NONE)
                break;
            busy = 1;
            handle_event(srv, &ev);
            drain_outbox(srv);
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
            reap(srv, 0);
        }
    }
    free(items);
    free(owner);
    rc = 0;
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "stopping: closing %s sessions",
           srv->sessions ? "the live" : "no");
out:
    for (struct be_sess_node *n = srv->sessions; n; n = n->next)
        end_session(srv, n, "backend stopping");
    reap(srv, 1);
    drain_outbox(srv);
    flush_usage(srv);
    sl_server_close(srv->srv);
    be_control_close(srv->ctl);
    be_acct_shm_unmap(srv->acct);
    if (srv->acct_fd >= 0)
        close(srv->acct_fd);
    be_grants_free(srv->grants);
    if (srv->efd >= 0)
        close(srv->efd);
    pthread_mutex_destroy(&srv->out_mu);
    free(srv);
    return rc;
}
