/* Session worker processes, the parent's side: starting `worker_exe --session-worker FD ...`
 * (worker.c) for a session, queueing messages and the calls' bulk for it, writing what its socket
 * takes, reading what it sends (replies for the guest, the end of its session, usage records)
 * and reaping it. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/workers.h"
#include "accounting/quota.h"
#include "accounting/records.h"
#include "daemon/config.h"
#include "daemon/control.h"
#include "daemon/ipc_tokens.h"
#include "daemon/sessions.h"
#include "daemon/state.h"
#include "session/session.h"
#include "session/spin.h"
#include "sluice/log.h"

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
        be_workers_read(srv, n, 0);
    if (n->fd >= 0) {
        close(n->fd);
        n->fd = -1;
    }
    if (!n->got_final)
        be_sessions_final_lost(srv, n);
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
    be_sessions_end(srv, n, why);
}

/* Gives the memory the ended sessions' buffers held back to the system: glibc keeps freed
 * memory in its heap (free chunks below a live one are never given back by free()), so without
 * this the server's RSS stays at its high-water mark after its sessions close (docs/backend.md,
 * "Memory"). Once BE_TRIM_AFTER_MS have passed since the last session's node was freed: sessions
 * that end together cost one trim. */
static void trim_memory(struct be_server *srv)
{
    if (!srv->trim_due || be_sessions_now_ms() - srv->trim_due < BE_TRIM_AFTER_MS)
        return;
    srv->trim_due = 0;
    malloc_trim(0);
}

void be_workers_reap(struct be_server *srv, int wait)
{
    trim_memory(srv);
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
                } else if (n->ended && !n->killed && be_sessions_now_ms() >= n->kill_at) {
                    kill(n->pid, SIGKILL);
                    n->killed = 1;
                    sl_log(SL_LOG_WARNING, BE_COMPONENT,
                           "session %llu instance %s project %s: its worker did not end within "
                           "%d ms of the session's close: killed",
                           (unsigned long long)n->id, n->instance, n->project, BE_WORKER_GRACE_MS);
                    be_control_session(
                        srv->ctl, SLUICE__CONTROL__SESSION_EVENT__KIND__WORKER_KILLED, n->instance,
                        n->project, n->id, "killed after the grace period");
                }
            }
            if (n->pid > 0 && n->ended && n->fd >= 0)
                be_workers_read(srv, n, BE_READ_TURN); /* its last usage records */
            int done = n->s ? (wait || atomic_load(&n->s->finished)) : n->pid == 0;
            if (n->ended && done) {
                *p = n->next;
                if (n->s && wait && !atomic_load(&n->s->finished)) {
                    be_session_free(n->s); /* joins: its final record is in the outbox */
                    n->s = NULL;
                    be_sessions_drain_outbox(srv);
                }
                be_sessions_node_free(srv, n);
                srv->trim_due = be_sessions_now_ms();
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

/* Starts `worker_exe --session-worker FD ...` for n. */
sl_code be_workers_spawn(struct be_server *srv, struct be_sess_node *n, sl_error *e)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return sl_fail(e, SL_ERR_IO, "socketpair: %s", strerror(errno));
    int sz = 4 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    char fdstr[16], idstr[24], afd[16], aslot[16], ainst[16], ival[16], spin[16], slots[16];
    snprintf(fdstr, sizeof fdstr, "%d", sv[1]);
    snprintf(idstr, sizeof idstr, "%llu", (unsigned long long)n->id);
    snprintf(afd, sizeof afd, "%d", srv->acct ? srv->acct_fd : -1);
    snprintf(aslot, sizeof aslot, "%d", n->acct_slot);
    snprintf(ainst, sizeof ainst, "%d", n->acct_inst);
    snprintf(ival, sizeof ival, "%u",
             srv->cfg->usage_interval_s ? srv->cfg->usage_interval_s : BE_USAGE_INTERVAL_S);
    snprintf(spin, sizeof spin, "%u", srv->cfg->spin_us);
    snprintf(slots, sizeof slots, "%u", srv->cfg->staging_slots);
    char *argv[] = {
        (char *)srv->cfg->worker_exe,
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
        "--staging-slots",
        slots,
        NULL, /* --image-dir D, --direct EP --cert --key --ca --peer-sha256 --direct-ports,
               * --lanes N */
        NULL,
        NULL,
        NULL,
        NULL,
        NULL,
        NULL,
        NULL,
        NULL,
        NULL,
        NULL,
        NULL,
        NULL,
        NULL,
        NULL,
        NULL,
        NULL};
    size_t k = 25;
    if (srv->cfg->image_dir) {
        argv[k++] = "--image-dir";
        argv[k++] = (char *)srv->cfg->image_dir;
    }
    /* the worker's own endpoint: the backend's address, a free port (of --direct-ports) */
    char direct[300], lanes[16];
    snprintf(lanes, sizeof lanes, "%u", n->lanes);
    const char *colon = strrchr(srv->cfg->listen, ':');
    if (!srv->cfg->no_direct && colon && srv->cfg->cert && srv->cfg->key && srv->cfg->ca &&
        n->fingerprint[0] &&
        snprintf(direct, sizeof direct, "%.*s:*", (int)(colon - srv->cfg->listen),
                 srv->cfg->listen) < (int)sizeof direct) {
        char *more[] = {"--direct",      direct,
                        "--cert",        (char *)srv->cfg->cert,
                        "--key",         (char *)srv->cfg->key,
                        "--ca",          (char *)srv->cfg->ca,
                        "--peer-sha256", n->fingerprint};
        for (size_t i = 0; i < sizeof more / sizeof *more; i++)
            argv[k++] = more[i];
        if (srv->cfg->direct_ports) {
            argv[k++] = "--direct-ports";
            argv[k++] = (char *)srv->cfg->direct_ports;
        }
        if (n->lanes >= 2) { /* the guest's SLUICE_LANES (lanes.c) */
            argv[k++] = "--lanes";
            argv[k++] = lanes;
        }
    }
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
sl_code be_workers_send(struct be_server *srv, struct be_sess_node *n, const void *msg, size_t len,
                        const Sluice__Wire__CallFrame *f, sl_error *e)
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
    be_workers_queue(n, t);
    return SL_OK;
}

void be_workers_queue(struct be_sess_node *n, struct be_tx *t)
{
    if (n->tx_tail)
        n->tx_tail->next = t;
    else
        n->tx_head = t;
    n->tx_tail = t;
    n->tx_bytes += t->len;
}

/* A worker's IPC token request (ipc_tokens.c): served against the registry with the session's
 * own instance and id (never what the worker says), the answer queued back; a refusal is logged
 * with its reason (docs/security.md, "IPC handles"). */
static void token_request(struct be_server *srv, struct be_sess_node *n)
{
    struct be_ipc_token_ans ans;
    int out_fd = -1;
    be_ipc_tokens_serve_fd(srv->tokens, n->instance, n->id, n->rx.msg, (size_t)n->rx.hdr.msg_len,
                           be_ipc_rx_take_fd(&n->rx), &ans, &out_fd);
    if (ans.result)
        sl_log(SL_LOG_WARNING, BE_COMPONENT, "session %llu instance %s: %s",
               (unsigned long long)n->id, n->instance, ans.why);
    struct be_ipc_hdr h = {BE_IPC_TOKEN, 0, sizeof ans, 0};
    struct be_tx *t = calloc(1, sizeof *t);
    uint8_t *buf = t ? malloc(sizeof h + sizeof ans) : NULL;
    if (!buf) {
        free(t);
        if (out_fd >= 0)
            close(out_fd);
        be_sessions_violation(srv, n->peer, SL_ERR_NOMEM, "out of memory for an IPC token answer");
        return;
    }
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, &ans, sizeof ans);
    OPENSSL_cleanse(&ans, sizeof ans);
    t->buf = buf;
    t->len = sizeof h + sizeof ans;
    t->has_fd = out_fd >= 0;
    t->fd = out_fd;
    be_workers_queue(n, t);
    be_workers_flush(n);
}

/* Writes what the worker's socket takes now. */
void be_workers_flush(struct be_sess_node *n)
{
    while (n->fd >= 0 && n->tx_head) {
        struct be_tx *t = n->tx_head;
        size_t k = t->len - t->off < BE_IPC_RECORD ? t->len - t->off : BE_IPC_RECORD;
        ssize_t w = be_ipc_sendmsg_fd(n->fd, t->buf + t->off, k, t->has_fd ? t->fd : -1, 1);
        if (w <= 0)
            return;      /* full (POLLOUT later) or gone (EOF on read, then reaped) */
        if (t->has_fd) { /* the worker has its own copy now */
            close(t->fd);
            t->has_fd = 0;
        }
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
void be_workers_read(struct be_server *srv, struct be_sess_node *n, size_t budget)
{
    sl_error e;
    n->rx.budget = budget; /* a 64 MiB reply is not read in one go: other sessions first */
    n->rx.until_ns = budget ? be_now_ns() + BE_READ_TURN_NS : 0;
    n->rx.spent = 0;
    while (n->fd >= 0) {
        int r = be_ipc_read(n->fd, &n->rx, 1);
        if (r == 2)
            return;
        if (r < 0) { /* the worker is gone (be_workers_reap() says how) or talks nonsense */
            if (r == -1 && n->pid > 0)
                kill(n->pid, SIGKILL);
            close(n->fd);
            n->fd = -1;
            be_sessions_tx_free(n);
            return;
        }
        if (n->rx.hdr.type == BE_IPC_USAGE) {
            be_sessions_usage(srv, n, n->rx.msg, (size_t)n->rx.hdr.msg_len);
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
            } else if (n->rx.hdr.type == BE_IPC_TOKEN) {
                token_request(srv, n);
            } else if (n->rx.hdr.type == BE_IPC_CLOSE) {
                sl_code code = n->rx.hdr.code > 0 ? (sl_code)n->rx.hdr.code : SL_ERR_PROTOCOL;
                const char *why = (const char *)n->rx.msg;
                if (code == SL_ERR_CLOSED || code == SL_ERR_PEER_LOST) {
                    /* the guest left its direct channel (direct.c): a normal end */
                    n->end_code = code;
                    sl_server_disconnect(srv->srv, n->peer, SL_ERR_CLOSED, why, &e);
                    be_sessions_end(srv, n, why);
                } else {
                    n->end_code = code;
                    be_sessions_violation(srv, n->peer, code, why);
                }
            }
        }
        be_ipc_rx_next(&n->rx);
    }
}
