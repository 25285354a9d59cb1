/* The agent's control channel, the backend's side.
 *
 * Control channel (--control ipc://PATH): a plain ZeroMQ DEALER (the socket file's permissions
 * are the trust); each message is one frame holding one protobuf message: BackendReport from us
 * (hello first), BackendControl from the agent. Every BackendControl is answered with
 * BackendReport{ack{control_seq, ok, detail}}; ping is answered with pong.
 *
 * With --control-key FILE (the agent always gives one) the backend trusts only messages that
 * carry the key in that file (BackendControl.agent_key), holds new sessions (refuses them) until
 * the agent's GrantSet has told it its complete grants, holds them again as soon as the agent's
 * socket disconnects, and ends every session and exits (the shutdown hook) when no keyed message
 * came for BE_ORPHAN_GRACE_MS: a backend whose agent is gone cannot be revoked, so it does not
 * outlive it by more than that (docs/agent.md, "When the agent restarts").
 *
 * Usage records (docs/accounting.md) go out one per BackendReport{usage} and stay in the queue
 * (usage_queue.c) until a UsageAck names them; they are sent again every --usage-resend seconds
 * and, with the hello, whenever the socket connects again (a socket monitor sees it). Session
 * events (opened, closed, refused, worker killed) go out as BackendReport{session}; one that
 * ZeroMQ refuses (a slow agent's full queue) is held, with every later one, and sent again in
 * order on the next chores (BE_CONTROL_HELD_EVENTS at most). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <zmq.h>

#include "daemon/control.h"
#include "accounting/usage_queue.h"
#include "bounds.h"
#include "sluice/log.h"
#include "sluice_control.pb-c.h"

#define CTL_MAX_MSG            (1u << 20)
#define SLUICE_BACKEND_VERSION "0.1.0"

struct be_control {
    void *ctx, *sock, *mon;
    struct be_grants *grants;
    struct be_control_hooks hooks;
    uint64_t seq;
    char *project, *listen;
    struct be_uq *usage;
    int64_t resend_ms;
    unsigned connects; /* ZMQ_EVENT_CONNECTED seen */
    int keyed;         /* --control-key given: only messages with key are the agent's */
    uint8_t key[BE_CONTROL_KEY_LEN];
    int64_t agent_ms;               /* the last keyed message (or the start) */
    int64_t orphan_ms;              /* BE_ORPHAN_GRACE_MS unless a test set it */
    int64_t warned_ms;              /* the last "message without the key" warning */
    int64_t send_warned_ms;         /* the last "send" warning */
    unsigned long send_failed;      /* sends refused since that warning */
    int orphaned;                   /* the shutdown hook ran for want of an agent */
    struct held *held, **held_tail; /* session events refused by the socket, oldest first */
    size_t n_held;
    unsigned long held_dropped; /* the oldest dropped for room since the last warning */
};

struct held { /* one packed BackendReport{session} */
    struct held *next;
    size_t len;
    uint8_t buf[];
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A refused send (a full queue to a slow agent, or none connected) is logged once per
 * BE_CONTROL_WARN_MS with the number refused since: under load one line per refused usage
 * update flooded the journal (14,454 lines in a minute, issue 18). Usage records stay queued
 * and go again (be_control_usage). */
static void send_refused(struct be_control *c, int err)
{
    int64_t now = mono_ms();
    c->send_failed++;
    if (c->send_warned_ms && now - c->send_warned_ms < BE_CONTROL_WARN_MS)
        return;
    if (c->send_failed > 1)
        sl_log(SL_LOG_WARNING, BE_COMPONENT,
               "control: send: %s (%lu messages refused since the last such line; usage records "
               "stay queued and are sent again)",
               zmq_strerror(err), c->send_failed);
    else
        sl_log(SL_LOG_WARNING, BE_COMPONENT, "control: send: %s", zmq_strerror(err));
    c->send_failed = 0;
    c->send_warned_ms = now;
}

static int report(struct be_control *c, Sluice__Control__BackendReport *r)
{
    r->seq = ++c->seq;
    size_t len = sluice__control__backend_report__get_packed_size(r);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return -1;
    sluice__control__backend_report__pack(r, buf);
    int rc = zmq_send(c->sock, buf, len, ZMQ_DONTWAIT) < 0 ? -1 : 0;
    if (rc)
        send_refused(c, errno);
    free(buf);
    return rc;
}

/* The oldest held session event goes (sent, or dropped for room). */
static void drop_first(struct be_control *c)
{
    struct held *h = c->held;
    c->held = h->next;
    if (!c->held)
        c->held_tail = &c->held;
    c->n_held--;
    free(h);
}

/* Sends the held session events in order until the socket refuses one (it stays first). */
static void send_held(struct be_control *c)
{
    while (c->held) {
        if (zmq_send(c->sock, c->held->buf, c->held->len, ZMQ_DONTWAIT) < 0) {
            send_refused(c, errno);
            return;
        }
        drop_first(c);
    }
    if (c->held_dropped) {
        sl_log(SL_LOG_WARNING, BE_COMPONENT,
               "control: %lu session events were dropped while the agent did not read (at most "
               "%u are held)",
               c->held_dropped, BE_CONTROL_HELD_EVENTS);
        c->held_dropped = 0;
    }
}

/* A session event: sent now unless older ones wait or the socket refuses it, else held (the
 * oldest dropped, counted, past BE_CONTROL_HELD_EVENTS). */
static void report_session(struct be_control *c, Sluice__Control__BackendReport *r)
{
    r->seq = ++c->seq;
    size_t len = sluice__control__backend_report__get_packed_size(r);
    struct held *h = malloc(sizeof *h + (len ? len : 1));
    if (!h)
        return;
    h->next = NULL;
    h->len = len;
    sluice__control__backend_report__pack(r, h->buf);
    send_held(c);
    if (!c->held && zmq_send(c->sock, h->buf, len, ZMQ_DONTWAIT) >= 0) {
        free(h);
        return;
    }
    if (!c->held)
        send_refused(c, errno);
    if (c->n_held == BE_CONTROL_HELD_EVENTS) {
        drop_first(c);
        c->held_dropped++;
    }
    *c->held_tail = h;
    c->held_tail = &h->next;
    c->n_held++;
}

size_t be_control_events_held(const struct be_control *c)
{
    return c ? c->n_held : 0;
}

static void ack(struct be_control *c, uint64_t seq, int ok, const char *detail)
{
    Sluice__Control__Ack a = SLUICE__CONTROL__ACK__INIT;
    a.control_seq = seq;
    a.ok = ok;
    a.detail = (char *)detail;
    Sluice__Control__BackendReport r = SLUICE__CONTROL__BACKEND_REPORT__INIT;
    r.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_ACK;
    r.ack = &a;
    report(c, &r);
}

static void hello(struct be_control *c)
{
    Sluice__Control__BackendHello h = SLUICE__CONTROL__BACKEND_HELLO__INIT;
    h.project_id = c->project;
    h.pid = (uint32_t)getpid();
    h.endpoint = c->listen;
    h.version = SLUICE_BACKEND_VERSION;
    Sluice__Control__BackendReport r = SLUICE__CONTROL__BACKEND_REPORT__INIT;
    r.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_HELLO;
    r.hello = &h;
    report(c, &r);
}

static int send_usage(void *user, const Sluice__Control__UsageRecord *rec)
{
    Sluice__Control__BackendReport r = SLUICE__CONTROL__BACKEND_REPORT__INIT;
    r.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_USAGE;
    r.usage = (Sluice__Control__UsageRecord *)rec;
    return report(user, &r);
}

sl_code be_control_open(const char *endpoint, const char *project, const char *listen,
                        struct be_grants *grants, const struct be_control_hooks *hooks,
                        struct be_control **out, sl_error *e)
{
    struct be_control *c = calloc(1, sizeof *c);
    if (!c)
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    c->grants = grants;
    c->hooks = *hooks;
    c->held_tail = &c->held;
    c->ctx = zmq_ctx_new();
    c->sock = c->ctx ? zmq_socket(c->ctx, ZMQ_DEALER) : NULL;
    if (!c->sock) {
        be_control_close(c);
        return sl_fail(e, SL_ERR_IO, "zmq: %s", zmq_strerror(errno));
    }
    int zero = 0, hwm = 1000;
    int64_t max = CTL_MAX_MSG;
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(c->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &max, sizeof max);
    c->project = strdup(project);
    c->listen = strdup(listen);
    c->usage = be_uq_new(BE_USAGE_QUEUE_MAX);
    c->resend_ms = (int64_t)BE_USAGE_RESEND_S * 1000;
    c->orphan_ms = BE_ORPHAN_GRACE_MS;
    if (!c->project || !c->listen || !c->usage) {
        be_control_close(c);
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    }
    /* a monitor tells reconnections apart (the agent restarted: hello and records again) */
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://sluice-control-monitor-%p", (void *)c);
    if (zmq_socket_monitor(c->sock, mon, ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED) == 0 &&
        (c->mon = zmq_socket(c->ctx, ZMQ_PAIR)) != NULL) {
        zmq_setsockopt(c->mon, ZMQ_LINGER, &zero, sizeof zero);
        if (zmq_connect(c->mon, mon) != 0) {
            zmq_close(c->mon);
            c->mon = NULL;
        }
    }
    if (zmq_connect(c->sock, endpoint) != 0) {
        be_control_close(c);
        return sl_fail(e, SL_ERR_CONFIG, "cannot connect to %s: %s", endpoint, zmq_strerror(errno));
    }
    hello(c);
    sl_log(SL_LOG_INFO, BE_COMPONENT, "control: hello sent to %s", endpoint);
    *out = c;
    return SL_OK;
}

void be_control_set_resend(struct be_control *c, int64_t ms)
{
    if (c && ms > 0)
        c->resend_ms = ms;
}

void be_control_set_orphan_grace(struct be_control *c, int64_t ms)
{
    if (c && ms > 0)
        c->orphan_ms = ms;
}

void *be_control_socket(struct be_control *c)
{
    return c ? c->sock : NULL;
}

/* NULL when g is a grant the backend can apply, else why not. */
static const char *grant_invalid(const Sluice__Control__Grant *g, struct be_sla *sla, char *why,
                                 size_t n)
{
    if (!g || !g->instance_uuid || !be_grants_uuid_ok(g->instance_uuid))
        return "grant without a valid instance uuid";
    if (g->cert_sha256.len != 0 && g->cert_sha256.len != 32)
        return "cert_sha256 is not 32 bytes";
    if (be_grants_sla_from(g->sla, sla, why, n) != 0)
        return why;
    return NULL;
}

static void apply_grant(struct be_control *c, const Sluice__Control__Grant *g,
                        const struct be_sla *sla)
{
    be_grants_add(c->grants, g->instance_uuid, g->cert_sha256.data, g->cert_sha256.len,
                  g->not_after_unix);
    be_grants_set_sla(c->grants, g->instance_uuid, g->sla ? sla : NULL);
    if (c->hooks.grant)
        c->hooks.grant(c->hooks.user, g->instance_uuid, sla);
    sl_log(SL_LOG_INFO, BE_COMPONENT, "instance %s granted by the agent (%.64s%s%.64s)",
           g->instance_uuid, g->domain_name ? g->domain_name : "",
           g->sla && g->sla->flavor ? ", flavor " : "",
           g->sla && g->sla->flavor ? g->sla->flavor : "");
}

/* GrantSet: the agent's complete grants. Every instance granted here and not in the set is
 * revoked (its live sessions end); an instance in the set keeps exactly the set's certificates
 * (one it no longer lists is refused from then on); then the set is applied. All or nothing: one
 * malformed grant refuses the whole set (the backend keeps holding new sessions). */
static void grant_set(struct be_control *c, uint64_t seq, const Sluice__Control__GrantSet *gs)
{
    char why[120];
    struct be_sla sla;
    for (size_t i = 0; i < gs->n_grants; i++) {
        const char *bad = grant_invalid(gs->grants[i], &sla, why, sizeof why);
        if (bad) {
            char d[200];
            snprintf(d, sizeof d, "grant set: grant %zu: %s", i, bad);
            ack(c, seq, 0, d);
            return;
        }
    }
    const char *reason = gs->reason && *gs->reason ? gs->reason : "grant set";
    struct be_grants *g = c->grants;
    size_t revoked = 0;
    for (size_t i = 0; i < g->n; i++) {
        int kept = 0;
        for (size_t j = 0; j < gs->n_grants && !kept; j++)
            kept = !strcmp(g->g[i].uuid, gs->grants[j]->instance_uuid);
        if (kept && !g->g[i].revoked)
            g->g[i].n_sha = 0; /* the set's grants below add its certificates again */
        if (kept || g->g[i].revoked)
            continue;
        char uuid[64], r[200];
        snprintf(uuid, sizeof uuid, "%s", g->g[i].uuid);
        snprintf(r, sizeof r, "not granted by the agent any more (%.120s)", reason);
        be_grants_revoke(g, uuid);
        if (c->hooks.revoke)
            c->hooks.revoke(c->hooks.user, uuid, r);
        revoked++;
    }
    for (size_t j = 0; j < gs->n_grants; j++) {
        be_grants_sla_from(gs->grants[j]->sla, &sla, why, sizeof why);
        apply_grant(c, gs->grants[j], &sla);
    }
    if (g->held)
        sl_log(SL_LOG_NOTICE, BE_COMPONENT,
               "control: the agent's grant set (%.120s): %zu instance%s granted, %zu revoked; "
               "new sessions are admitted",
               reason, gs->n_grants, gs->n_grants == 1 ? "" : "s", revoked);
    g->held = 0;
    ack(c, seq, 1, "");
}

static void handle(struct be_control *c, const Sluice__Control__BackendControl *m)
{
    if (c->keyed) {
        if (m->agent_key.len != sizeof c->key ||
            CRYPTO_memcmp(m->agent_key.data, c->key, sizeof c->key) != 0) {
            int64_t now = mono_ms();
            if (now - c->warned_ms >= 60000) {
                c->warned_ms = now;
                sl_log(SL_LOG_WARNING, BE_COMPONENT,
                       "control: a message without this backend's agent key was ignored (not "
                       "from the agent that started it)");
            }
            return;
        }
        c->agent_ms = mono_ms();
    }
    switch (m->kind_case) {
    case SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT: {
        struct be_sla sla;
        char why[120];
        const char *bad = grant_invalid(m->grant, &sla, why, sizeof why);
        if (bad) {
            ack(c, m->seq, 0, bad);
            return;
        }
        apply_grant(c, m->grant, &sla);
        ack(c, m->seq, 1, "");
        return;
    }
    case SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT_SET:
        grant_set(c, m->seq, m->grant_set);
        return;
    case SLUICE__CONTROL__BACKEND_CONTROL__KIND_REVOKE: {
        const Sluice__Control__Revoke *r = m->revoke;
        if (!r->instance_uuid || !be_grants_uuid_ok(r->instance_uuid)) {
            ack(c, m->seq, 0, "revoke without a valid instance uuid");
            return;
        }
        be_grants_revoke(c->grants, r->instance_uuid);
        if (c->hooks.revoke)
            c->hooks.revoke(c->hooks.user, r->instance_uuid,
                            r->reason && *r->reason ? r->reason : "revoked by the agent");
        ack(c, m->seq, 1, "");
        return;
    }
    case SLUICE__CONTROL__BACKEND_CONTROL__KIND_PING: {
        Sluice__Control__Pong p = SLUICE__CONTROL__PONG__INIT;
        p.nonce = m->ping->nonce;
        Sluice__Control__BackendReport r = SLUICE__CONTROL__BACKEND_REPORT__INIT;
        r.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_PONG;
        r.pong = &p;
        report(c, &r);
        ack(c, m->seq, 1, "");
        return;
    }
    case SLUICE__CONTROL__BACKEND_CONTROL__KIND_SHUTDOWN:
        ack(c, m->seq, 1, "");
        if (c->hooks.shutdown)
            c->hooks.shutdown(c->hooks.user, m->shutdown->reason ? m->shutdown->reason : "");
        return;
    case SLUICE__CONTROL__BACKEND_CONTROL__KIND_USAGE_ACK: {
        const Sluice__Control__UsageAck *ua = m->usage_ack;
        size_t n = ua ? be_uq_ack(c->usage, ua->record_ids, ua->n_record_ids) : 0;
        if (sl_log_enabled(SL_LOG_DEBUG))
            sl_log(SL_LOG_DEBUG, BE_COMPONENT,
                   "control: %zu usage record%s acknowledged, %zu waiting", n, n == 1 ? "" : "s",
                   be_uq_len(c->usage));
        ack(c, m->seq, 1, "");
        return;
    }
    default:
        ack(c, m->seq, 0, "unknown control message");
    }
}

/* Connection events: a connection after the first one is a reconnection (the agent came back):
 * hello again, and every record not acknowledged yet. */
static void monitor(struct be_control *c)
{
    for (int k = 0; c->mon && k < 16; k++) {
        zmq_msg_t ev;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, c->mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        uint16_t id = 0;
        if (zmq_msg_size(&ev) >= 2)
            memcpy(&id, zmq_msg_data(&ev), 2);
        int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        while (more) { /* the endpoint frame */
            zmq_msg_init(&ev);
            more = zmq_msg_recv(&ev, c->mon, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&ev);
            zmq_msg_close(&ev);
        }
        if (id == ZMQ_EVENT_DISCONNECTED) {
            if (c->keyed && !c->grants->held)
                sl_log(SL_LOG_WARNING, BE_COMPONENT,
                       "control: the agent disconnected: new sessions are held until it is back; "
                       "without it for %.1f s this backend ends its sessions and exits",
                       (double)c->orphan_ms / 1000);
            if (c->keyed)
                c->grants->held = 1;
            continue;
        }
        if (id != ZMQ_EVENT_CONNECTED || ++c->connects == 1)
            continue;
        sl_log(SL_LOG_NOTICE, BE_COMPONENT,
               "control: connected to the agent again: hello, its live sessions, and %zu usage "
               "record%s not acknowledged yet",
               be_uq_len(c->usage), be_uq_len(c->usage) == 1 ? "" : "s");
        if (c->keyed)
            c->grants->held = 1; /* until this agent's grant set */
        hello(c);
        if (c->hooks.reconnected)
            c->hooks.reconnected(c->hooks.user);
        be_uq_due(c->usage, mono_ms(), c->resend_ms, 1, send_usage, c);
    }
}

/* Keyed: no message from the agent for BE_ORPHAN_GRACE_MS ends the backend (once). */
static void orphan_check(struct be_control *c)
{
    if (!c->keyed || c->orphaned || mono_ms() - c->agent_ms < c->orphan_ms)
        return;
    c->orphaned = 1;
    c->grants->held = 1;
    sl_log(SL_LOG_ERR, BE_COMPONENT,
           "control: no word from the agent for %.1f s: ending every session and exiting (a "
           "backend without its agent cannot be revoked)",
           (double)c->orphan_ms / 1000);
    if (c->hooks.shutdown)
        c->hooks.shutdown(c->hooks.user, "no agent");
}

static int hexval(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

sl_code be_control_require_key(struct be_control *c, const char *path, sl_error *e)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return sl_fail(e, SL_ERR_CONFIG, "--control-key %s: %s", path, strerror(errno));
    char hex[2 * BE_CONTROL_KEY_LEN + 2];
    size_t n = fread(hex, 1, sizeof hex, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    while (n && (hex[n - 1] == '\n' || hex[n - 1] == '\r'))
        n--;
    int ok = !more && n == 2 * BE_CONTROL_KEY_LEN;
    for (size_t i = 0; ok && i < BE_CONTROL_KEY_LEN; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        ok = hi >= 0 && lo >= 0;
        if (ok)
            c->key[i] = (uint8_t)(hi << 4 | lo);
    }
    OPENSSL_cleanse(hex, sizeof hex);
    if (!ok)
        return sl_fail(e, SL_ERR_CONFIG, "--control-key %s: not %d lowercase hex digits", path,
                       2 * BE_CONTROL_KEY_LEN);
    c->keyed = 1;
    c->agent_ms = mono_ms();
    c->grants->held = 1; /* until the agent's grant set */
    return SL_OK;
}

void be_control_usage(struct be_control *c, const uint8_t *rec, size_t len)
{
    if (be_uq_add(c->usage, rec, len) != 0) {
        sl_log(SL_LOG_WARNING, BE_COMPONENT, "control: a malformed usage record was dropped");
        return;
    }
    be_uq_due(c->usage, mono_ms(), c->resend_ms, 0, send_usage, c);
}

size_t be_control_usage_waiting(const struct be_control *c)
{
    return c ? be_uq_len(c->usage) : 0;
}

void be_control_session(struct be_control *c, int kind, const char *instance, const char *project,
                        uint64_t session_id, const char *detail)
{
    if (!c)
        return;
    Sluice__Control__SessionEvent ev = SLUICE__CONTROL__SESSION_EVENT__INIT;
    ev.kind = (Sluice__Control__SessionEvent__Kind)kind;
    ev.instance_uuid = (char *)instance;
    ev.project_id = (char *)project;
    ev.session_id = session_id;
    ev.detail = (char *)(detail ? detail : "");
    Sluice__Control__BackendReport r = SLUICE__CONTROL__BACKEND_REPORT__INIT;
    r.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_SESSION;
    r.session = &ev;
    report_session(c, &r);
}

void be_control_refused(struct be_control *c, const char *reason, const char *instance,
                        const char *project, const char *detail)
{
    if (!c)
        return;
    Sluice__Control__SessionEvent ev = SLUICE__CONTROL__SESSION_EVENT__INIT;
    ev.kind = SLUICE__CONTROL__SESSION_EVENT__KIND__REFUSED;
    ev.instance_uuid = (char *)(instance ? instance : "");
    ev.project_id = (char *)project;
    ev.detail = (char *)(detail ? detail : "");
    ev.reason = (char *)reason;
    Sluice__Control__BackendReport r = SLUICE__CONTROL__BACKEND_REPORT__INIT;
    r.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_SESSION;
    r.session = &ev;
    report_session(c, &r);
}

void be_control_process(struct be_control *c)
{
    if (!c)
        return;
    monitor(c);
    orphan_check(c);
    send_held(c);
    be_uq_due(c->usage, mono_ms(), c->resend_ms, 0, send_usage, c);
    for (int k = 0; k < 256; k++) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        int n = zmq_msg_recv(&msg, c->sock, ZMQ_DONTWAIT);
        if (n < 0) {
            zmq_msg_close(&msg);
            return;
        }
        int more = zmq_msg_more(&msg);
        if (!more)
            be_control_handle(c, zmq_msg_data(&msg), (size_t)n);
        else
            sl_log(SL_LOG_WARNING, BE_COMPONENT, "control: dropped a multi-frame message");
        zmq_msg_close(&msg);
        while (more) { /* multi-frame: not ours; drop the rest */
            zmq_msg_init(&msg);
            if (zmq_msg_recv(&msg, c->sock, ZMQ_DONTWAIT) < 0)
                more = 0;
            else
                more = zmq_msg_more(&msg);
            zmq_msg_close(&msg);
        }
    }
}

void be_control_handle(struct be_control *c, const void *frame, size_t len)
{
    Sluice__Control__BackendControl *m =
        len > 0 && len <= CTL_MAX_MSG ? sluice__control__backend_control__unpack(NULL, len, frame)
                                      : NULL;
    if (!m) {
        sl_log(SL_LOG_WARNING, BE_COMPONENT, "control: dropped an undecodable message");
        return;
    }
    handle(c, m);
    sluice__control__backend_control__free_unpacked(m, NULL);
}

void be_control_close(struct be_control *c)
{
    if (!c)
        return;
    if (c->usage && be_uq_len(c->usage))
        sl_log(SL_LOG_WARNING, BE_COMPONENT,
               "control: %zu usage record%s not acknowledged by the agent are lost",
               be_uq_len(c->usage), be_uq_len(c->usage) == 1 ? "" : "s");
    be_uq_free(c->usage);
    if (c->n_held)
        sl_log(SL_LOG_WARNING, BE_COMPONENT,
               "control: %zu session event%s the agent did not take are lost", c->n_held,
               c->n_held == 1 ? "" : "s");
    while (c->held)
        drop_first(c);
    free(c->project);
    free(c->listen);
    if (c->sock && c->mon)
        zmq_socket_monitor(c->sock, NULL, 0);
    if (c->mon)
        zmq_close(c->mon);
    if (c->sock)
        zmq_close(c->sock);
    if (c->ctx)
        zmq_ctx_term(c->ctx);
    free(c);
}
