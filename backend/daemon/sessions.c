/* The channel thread's sessions: finding a session by peer or id, ending one (its worker gets
 * EOF, then SIGKILL after BE_WORKER_GRACE_MS), freeing its node, protocol violations, the usage
 * records of its worker (checked against the session, then queued for the agent) and the outbox's
 * drain. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "daemon/sessions.h"
#include "accounting/quota.h"
#include "accounting/usage.h"
#include "daemon/config.h"
#include "daemon/control.h"
#include "daemon/ipc_tokens.h"
#include "daemon/state.h"
#include "session/session.h"
#include "sluice/log.h"
#include "sluice_control.pb-c.h"

int64_t be_sessions_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct be_sess_node *be_sessions_find(struct be_server *srv, sl_peer peer)
{
    for (struct be_sess_node *n = srv->sessions; n; n = n->next)
        if (n->peer == peer && !n->ended)
            return n;
    return NULL;
}

struct be_sess_node *be_sessions_find_id(struct be_server *srv, uint64_t id)
{
    for (struct be_sess_node *n = srv->sessions; n; n = n->next)
        if (n->id == id)
            return n;
    return NULL;
}

/* A usage record from session n's worker (or an in-process session, n found by its id): checked
 * against the session it comes from, then queued for the agent or logged. */
void be_sessions_usage(struct be_server *srv, struct be_sess_node *n, const uint8_t *rec,
                       size_t len)
{
    Sluice__Control__UsageRecord *r = sluice__control__usage_record__unpack(NULL, len, rec);
    int in_process = !n; /* thread mode: the session (and its node) may be gone already */
    if (r && !n)
        n = be_sessions_find_id(srv, r->session_id);
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
void be_sessions_final_lost(struct be_server *srv, struct be_sess_node *n)
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
    be_sessions_usage(srv, n, buf, len);
    free(buf);
}

void be_sessions_drain_outbox(struct be_server *srv)
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
            be_sessions_usage(srv, NULL, o->msg, o->len);
        } else if (be_sessions_find(srv, o->peer)) {
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

void be_sessions_tx_free(struct be_sess_node *n)
{
    for (struct be_tx *t = n->tx_head, *x; t; t = x) {
        x = t->next;
        if (t->has_fd)
            close(t->fd);
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

void be_sessions_end(struct be_server *srv, struct be_sess_node *n, const char *why)
{
    if (n->ended)
        return;
    n->ended = 1;
    srv->live--;
    /* the handles it exported die with it: no session can open them from here on */
    size_t gone = be_ipc_tokens_drop_session(srv->tokens, n->id);
    if (gone)
        sl_log(SL_LOG_INFO, BE_COMPONENT, "session %llu: %zu IPC handle(s) it exported forgotten",
               (unsigned long long)n->id, gone);
    sl_log(SL_LOG_INFO, BE_COMPONENT, "session %llu instance %s project %s: closing (%s)",
           (unsigned long long)n->id, n->instance, n->project, why);
    be_control_session(srv->ctl, SLUICE__CONTROL__SESSION_EVENT__KIND__CLOSED, n->instance,
                       n->project, n->id, why);
    if (n->s) {
        be_sessions_tx_free(n); /* a job whose bulk was still on its way */
        be_session_close(n->s);
        return;
    }
    /* the worker sees EOF, sends its final usage record, frees everything and exits (we read
     * until it has); SIGKILL if it takes too long */
    be_sessions_tx_free(n);
    if (n->fd >= 0) { /* why, for the guest's direct channel (best effort: never waits) */
        size_t wl = strlen(why) < 200 ? strlen(why) : 200;
        uint8_t rec[sizeof(struct be_ipc_hdr) + 201];
        struct be_ipc_hdr h = {BE_IPC_CLOSE, n->end_code ? (int32_t)n->end_code : SL_ERR_CLOSED, wl,
                               0};
        memcpy(rec, &h, sizeof h);
        memcpy(rec + sizeof h, why, wl);
        ssize_t w = send(n->fd, rec, sizeof h + wl, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)w;
    }
    if (n->fd >= 0 && shutdown(n->fd, SHUT_WR) != 0) {
        close(n->fd);
        n->fd = -1;
    }
    n->kill_at = be_sessions_now_ms() + BE_WORKER_GRACE_MS;
}

void be_sessions_node_free(struct be_server *srv, struct be_sess_node *n)
{
    if (n->s)
        be_session_free(n->s);
    if (srv->acct && n->acct_slot >= 0)
        be_acct_slot_release(srv->acct, n->acct_slot); /* its memory is free again */
    be_sessions_tx_free(n);
    be_ipc_rx_free(&n->rx);
    if (n->fd >= 0)
        close(n->fd);
    free(n);
}

void be_sessions_violation(struct be_server *srv, sl_peer peer, sl_code code, const char *why)
{
    sl_error e;
    struct be_sess_node *n = be_sessions_find(srv, peer);
    sl_log(SL_LOG_WARNING, BE_COMPONENT, "session %llu instance %s project %s: %s; ending it",
           n ? (unsigned long long)n->id : 0ULL, n ? n->instance : "?", n ? n->project : "?", why);
    sl_server_disconnect(srv->srv, peer, code, why, &e);
    if (n)
        be_sessions_end(srv, n, why);
}
