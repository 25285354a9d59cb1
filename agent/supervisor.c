/* Tenant backend supervision: the public functions, the tick and the backends' reports. */
#include "supervisor.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sluice/log.h"
#include "supervisor_internal.h"
#include "usage_ingest.h"

int64_t ag_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

backend *sv_find(ag_supervisor *s, const char *project)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->b[i]->project, project))
            return s->b[i];
    return NULL;
}

backend *sv_find_or_add(ag_supervisor *s, const char *project)
{
    backend *b = sv_find(s, project);
    if (b || strlen(project) >= sizeof b->project)
        return b;
    backend **v = realloc(s->b, (s->n + 1) * sizeof *v);
    if (!v)
        return NULL;
    s->b = v;
    b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    snprintf(b->project, sizeof b->project, "%s", project);
    b->backoff_ms = 1000;
    sv_grants_load(s, b);
    s->b[s->n++] = b;
    return b;
}

static void drop(ag_supervisor *s, backend *b)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->b[i] == b) {
            s->b[i] = s->b[--s->n];
            break;
        }
    sv_clear_pending(b);
    free(b->pend);
    free(b->grants);
    free(b);
}

/* ------------------------------------------------------------------ reports */

static backend *by_peer(ag_supervisor *s, const ag_ctl_peer *p)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->b[i]->connected && s->b[i]->peer.len == p->len &&
            !memcmp(s->b[i]->peer.id, p->id, p->len))
            return s->b[i];
    return NULL;
}

static void on_hello(ag_supervisor *s, const ag_ctl_peer *p, const Sluice__Control__BackendHello *h)
{
    backend *b = h->project_id ? sv_find(s, h->project_id) : NULL;
    if (!b || b->pid <= 0 || b->stopping) {
        sl_log(SL_LOG_WARNING, COMPONENT,
               "control: hello for project %.64s refused: no such backend running",
               h->project_id ? h->project_id : "");
        return;
    }
    if (h->pid != (uint32_t)b->pid) {
        sl_log(SL_LOG_WARNING, COMPONENT,
               "control: hello for project %s refused: pid %u, the backend started is %d",
               b->project, h->pid, (int)b->pid);
        return;
    }
    b->peer = *p;
    b->connected = 1;
    b->synced = 0;
    b->last_heard_ms = b->last_ping_ms = ag_now_ms();
    sv_clear_pending(b);
    /* the open-session gauges start again: a fresh backend has no sessions, an adopted one
     * reports its live sessions right after its hello */
    ag_usage_backend_reset(s->usage, b->project);
    sl_log(SL_LOG_NOTICE, COMPONENT, "project %s: backend pid %d ready at %.128s (%.32s)%s",
           b->project, (int)b->pid, h->endpoint ? h->endpoint : "", h->version ? h->version : "",
           b->adopted ? ", adopted from an earlier agent" : "");
    if (s->resynced)
        sv_send_grant_set(s, b, b->adopted ? "adopted by a new agent" : "hello");
    else
        sl_log(SL_LOG_NOTICE, COMPONENT,
               "project %s: its grant set waits for the resync with libvirt (new sessions are "
               "held until then)",
               b->project);
}

/* UsageAck for records now durable in the usage store (agent/usage_ingest.h). Not tracked for
 * retransmission: a backend resends the records it has no ack for, and gets an ack again. */
static void send_usage_ack(void *user, const char *project, char *const *ids, size_t n)
{
    ag_supervisor *s = user;
    backend *b = sv_find(s, project);
    if (!b || !b->connected)
        return;
    Sluice__Control__UsageAck ua = SLUICE__CONTROL__USAGE_ACK__INIT;
    ua.record_ids = (char **)ids;
    ua.n_record_ids = n;
    Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_USAGE_ACK;
    m.usage_ack = &ua;
    sv_send_ctl(s, b, &m, 0);
}

/* Returns 1 when r was handed over (to the usage queue) and must not be freed. */
static int on_report(ag_supervisor *s, const ag_ctl_peer *p, Sluice__Control__BackendReport *r)
{
    if (r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_HELLO) {
        on_hello(s, p, r->hello);
        return 0;
    }
    backend *b = by_peer(s, p);
    if (!b) {
        sl_log(SL_LOG_WARNING, COMPONENT, "control: report from a peer without hello dropped");
        return 0;
    }
    b->last_heard_ms = ag_now_ms();
    /* the journal's fields of what the backend reports */
    sl_log_set_thread_fields(
        &(sl_log_fields){.project = b->project,
                         .instance = r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_SESSION
                                         ? r->session->instance_uuid
                                         : NULL});
    int taken = 0;
    switch (r->kind_case) {
    case SLUICE__CONTROL__BACKEND_REPORT__KIND_ACK:
        for (size_t i = 0; i < b->n_pend; i++)
            if (b->pend[i].seq == r->ack->control_seq) {
                free(b->pend[i].buf);
                b->pend[i] = b->pend[--b->n_pend];
                break;
            }
        if (!r->ack->ok)
            sl_log(SL_LOG_WARNING, COMPONENT,
                   "project %s: backend refused control seq %llu: %.200s", b->project,
                   (unsigned long long)r->ack->control_seq, r->ack->detail ? r->ack->detail : "");
        break;
    case SLUICE__CONTROL__BACKEND_REPORT__KIND_SESSION:
        sl_log(SL_LOG_INFO, COMPONENT,
               "project %s: session %llu of instance %.40s: event %d %.200s", b->project,
               (unsigned long long)r->session->session_id,
               r->session->instance_uuid ? r->session->instance_uuid : "", r->session->kind,
               r->session->detail ? r->session->detail : "");
        ag_usage_session(s->usage, b->project, r->session);
        break;
    case SLUICE__CONTROL__BACKEND_REPORT__KIND_USAGE:
        /* queued; stored and acknowledged by ag_usage_commit after the drain */
        if (s->usage)
            taken = ag_usage_take(s->usage, b->project, r);
        else
            sl_log(SL_LOG_DEBUG, COMPONENT, "project %s: usage record dropped (no usage store)",
                   b->project);
        break;
    default:
        break;
    }
    sl_log_set_thread_fields(NULL);
    return taken;
}

/* ------------------------------------------------------------------ public */

sl_code ag_supervisor_new(const ag_supervisor_opts *o, ag_supervisor **out, sl_error *e)
{
    ag_supervisor *s = calloc(1, sizeof *s);
    if (!s)
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    s->cfg = o->cfg;
    s->inst = o->instances;
    s->issue = o->issue;
    s->issue_user = o->issue_user;
    int gid = -1;
    if (o->cfg->backend_user[0]) {
        struct passwd *pw = getpwnam(o->cfg->backend_user);
        struct group *gr = getgrnam(o->cfg->backend_group);
        if (!pw || !gr) {
            ag_supervisor_free(s);
            return sl_fail(e, SL_ERR_CONFIG, "backend_user %s or backend_group %s does not exist",
                           o->cfg->backend_user, o->cfg->backend_group);
        }
        s->uid = pw->pw_uid;
        s->gid = gr->gr_gid;
        s->switch_user = getuid() == 0;
        gid = s->switch_user ? (int)s->gid : -1;
    } else if (getuid() == 0) {
        sl_log(SL_LOG_WARNING, COMPONENT, "no backend_user: backends run as root");
    }
    if (mkdir(o->cfg->run_dir, 0750) != 0 && errno != EEXIST) {
        ag_supervisor_free(s);
        return sl_fail(e, SL_ERR_IO, "run_dir %s: %s", o->cfg->run_dir, strerror(errno));
    }
    chmod(o->cfg->run_dir, 0750);
    if (gid >= 0 && chown(o->cfg->run_dir, (uid_t)-1, (gid_t)gid) != 0)
        sl_log(SL_LOG_WARNING, COMPONENT, "run_dir: chgrp: %s", strerror(errno));
    char gdir[600];
    /* Backends (the backend group) keep their state in state_dir/backends/ID: they must be able
     * to traverse state_dir, as they do run_dir; the grants and the CA stay the agent's (0700). */
    mkdir(o->cfg->state_dir, 0750);
    if (gid >= 0 && (chmod(o->cfg->state_dir, 0750) != 0 ||
                     chown(o->cfg->state_dir, (uid_t)-1, (gid_t)gid) != 0))
        sl_log(SL_LOG_WARNING, COMPONENT, "state_dir %s: chgrp: %s", o->cfg->state_dir,
               strerror(errno));
    snprintf(gdir, sizeof gdir, "%s/grants", o->cfg->state_dir);
    if (mkdir(gdir, 0700) != 0 && errno != EEXIST)
        sl_log(SL_LOG_WARNING, COMPONENT, "%s: %s (grants kept in memory only)", gdir,
               strerror(errno));
    snprintf(s->ctl_path, sizeof s->ctl_path, "%s/control.sock", o->cfg->run_dir);
    snprintf(s->state_path, sizeof s->state_path, "%s/backends.state", o->cfg->state_dir);
    sl_code rc = ag_control_bind(s->ctl_path, gid, &s->ctl, e);
    if (rc != SL_OK) {
        ag_supervisor_free(s);
        return rc;
    }
    sv_state_load(s); /* ports, and the backends an earlier agent left running */
    *out = s;
    return SL_OK;
}

int ag_supervisor_fd(ag_supervisor *s)
{
    return ag_control_fd(s->ctl);
}

void ag_supervisor_ensure(ag_supervisor *s, const char *project_id)
{
    pthread_mutex_lock(&s->mu);
    backend *b = sv_find_or_add(s, project_id);
    if (b && !b->wanted) {
        b->wanted = 1;
        if (!b->stopping)
            b->next_start_ms = 0;
    }
    pthread_mutex_unlock(&s->mu);
}

void ag_supervisor_revoke(ag_supervisor *s, const char *project_id, const char *uuid,
                          const char *reason)
{
    pthread_mutex_lock(&s->mu);
    backend *b = sv_find(s, project_id);
    if (b) {
        size_t before = b->n_grants;
        for (size_t i = 0; i < b->n_grants;)
            if (!strcmp(b->grants[i].uuid, uuid))
                b->grants[i] = b->grants[--b->n_grants];
            else
                i++;
        if (before != b->n_grants)
            sv_grants_save(s, b);
        if (b->synced)
            sv_send_revoke(s, b, uuid, reason);
        else if (s->resynced)
            sv_send_grant_set(s, b, reason); /* no-op while not connected */
        sl_log(SL_LOG_NOTICE, COMPONENT, "instance %s (project %s): revoked (%s)%s", uuid,
               project_id, reason, b->connected ? "" : "; backend not connected");
    }
    pthread_mutex_unlock(&s->mu);
}

static void release(ag_supervisor *s, backend *b, const char *why)
{
    if (!b->wanted && !b->adopted)
        return;
    b->wanted = 0;
    if (b->pid > 0 && !b->stopping) {
        int64_t now = ag_now_ms();
        b->stopping = 1;
        b->term_at_ms = now + s->cfg->backend_stop_grace_s * 1000;
        b->kill_at_ms = b->term_at_ms + KILL_AFTER_TERM;
        sv_send_shutdown(s, b, why);
        if (!b->connected)
            b->term_at_ms = now;
        sl_log(SL_LOG_NOTICE, COMPONENT, "project %s: %s, stopping the backend", b->project, why);
    }
}

void ag_supervisor_release(ag_supervisor *s, const char *project_id)
{
    if (ag_instances_running_gpu(s->inst, project_id))
        return;
    pthread_mutex_lock(&s->mu);
    backend *b = sv_find(s, project_id);
    if (b && b->wanted)
        release(s, b, "last GPU instance gone");
    pthread_mutex_unlock(&s->mu);
}

void ag_supervisor_prune(ag_supervisor *s)
{
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n; i++) {
        backend *b = s->b[i];
        size_t before = b->n_grants;
        for (size_t j = 0; j < b->n_grants;) {
            ag_instance in;
            /* an instance waiting out the reboot debounce keeps its grant until revoked */
            if (!ag_instances_get(s->inst, b->grants[j].uuid, &in) ||
                (!in.running && !in.revoke_at_ms))
                b->grants[j] = b->grants[--b->n_grants];
            else
                j++;
        }
        if (before != b->n_grants) {
            sl_log(SL_LOG_INFO, COMPONENT,
                   "project %s: %zu grants of instances not running dropped", b->project,
                   before - b->n_grants);
            sv_grants_save(s, b);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

void ag_supervisor_resynced(ag_supervisor *s)
{
    ag_supervisor_prune(s);
    pthread_mutex_lock(&s->mu);
    s->resynced = 1;
    for (size_t i = 0; i < s->n; i++) {
        backend *b = s->b[i];
        /* an adopted backend no running instance wants is stopped; the others follow their
         * instances' events and the reboot debounce as always */
        if (b->adopted && !b->wanted && b->pid > 0 && !b->stopping &&
            !ag_instances_running_gpu(s->inst, b->project)) {
            release(s, b, "no running GPU instance of the project after the resync");
            continue;
        }
        sv_send_grant_set(s, b, "resync with libvirt"); /* its grants are exactly these now */
    }
    pthread_mutex_unlock(&s->mu);
}

static void tick_backend(ag_supervisor *s, backend *b, int64_t now)
{
    char why[160];
    if (b->pid > 0 && sv_ended(b, why, sizeof why)) {
        b->pid = 0;
        b->start = 0;
        b->connected = 0;
        b->synced = 0;
        sv_clear_pending(b);
        sv_state_update(s, b);
        /* its sessions ended with it: those without their final record are closed now */
        ag_usage_backend_ended(s->usage, b->project, why);
        if (b->stopping) {
            sl_log(SL_LOG_NOTICE, COMPONENT, "project %s: backend stopped (%s)", b->project, why);
            b->stopping = 0;
            b->termed = 0;
            b->adopted = 0;
            b->next_start_ms = now;
        } else {
            if (now - b->started_ms > STABLE_MS)
                b->backoff_ms = 1000;
            b->next_start_ms = now + b->backoff_ms;
            b->restarts++;
            ag_usage_backend_restarted(s->usage, b->project);
            sl_log(SL_LOG_ERR, COMPONENT,
                   "project %s: backend %s; restarting in %d ms (restart %d)", b->project, why,
                   b->backoff_ms, b->restarts);
            b->backoff_ms *= 2;
            if (b->backoff_ms > s->cfg->restart_backoff_max_s * 1000)
                b->backoff_ms = s->cfg->restart_backoff_max_s * 1000;
            b->adopted = 0;
        }
    }
    if (b->pid > 0 && b->stopping) {
        if (now >= b->kill_at_ms)
            sv_kill(b, SIGKILL, "did not stop");
        else if (now >= b->term_at_ms && !b->termed) {
            b->termed = 1;
            sv_kill(b, SIGTERM, NULL);
        }
        return;
    }
    if (b->pid <= 0) {
        if (b->wanted && now >= b->next_start_ms)
            sv_spawn(s, b, now);
        return;
    }
    if (!b->connected) {
        if (now - b->started_ms > HELLO_MS) {
            sv_kill(b, SIGKILL, "no hello on the control channel within 30 s");
            b->started_ms = now;
        }
        return;
    }
    if (now - b->last_heard_ms > SILENCE_MS) {
        sv_kill(b, SIGKILL, "silent on the control channel for 30 s");
        b->last_heard_ms = now;
        return;
    }
    sv_renew_cert(s, b, now);
    sv_retransmit(s, b, now);
    if (now - b->last_ping_ms >= PING_MS) {
        Sluice__Control__Ping ping = SLUICE__CONTROL__PING__INIT;
        ping.nonce = (uint64_t)now;
        Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
        m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_PING;
        m.ping = &ping;
        sv_send_ctl(s, b, &m, 0);
        b->last_ping_ms = now;
    }
}

int ag_supervisor_tick(ag_supervisor *s)
{
    pthread_mutex_lock(&s->mu);
    ag_ctl_peer p;
    Sluice__Control__BackendReport *r;
    int got;
    for (int i = 0; i < 1000 && (got = ag_control_recv(s->ctl, &p, &r)) != 0; i++)
        if (got > 0 && !on_report(s, &p, r))
            sluice__control__backend_report__free_unpacked(r, NULL);
    ag_usage_commit(s->usage, send_usage_ack, s); /* one durable transaction, then the acks */
    int64_t now = ag_now_ms();
    int wait = 1000;
    for (size_t i = 0; i < s->n;) {
        backend *b = s->b[i];
        tick_backend(s, b, now);
        if (!b->wanted && b->pid <= 0 && !b->stopping) {
            drop(s, b);
            continue;
        }
        if (b->stopping || (b->wanted && b->pid <= 0) || b->n_pend)
            wait = 100;
        i++;
    }
    pthread_mutex_unlock(&s->mu);
    return wait;
}

void ag_supervisor_stop_all(ag_supervisor *s)
{
    pthread_mutex_lock(&s->mu);
    int64_t now = ag_now_ms();
    for (size_t i = 0; i < s->n; i++) {
        backend *b = s->b[i];
        b->wanted = 0;
        if (b->pid > 0 && !b->stopping) {
            b->stopping = 1;
            b->term_at_ms = b->connected ? now + s->cfg->backend_stop_grace_s * 1000 : now;
            b->kill_at_ms = b->term_at_ms + KILL_AFTER_TERM;
            sv_send_shutdown(s, b, "agent stopping");
        }
    }
    pthread_mutex_unlock(&s->mu);
    for (;;) {
        ag_supervisor_tick(s);
        pthread_mutex_lock(&s->mu);
        size_t n = s->n;
        pthread_mutex_unlock(&s->mu);
        if (!n)
            break;
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
    }
}

void ag_supervisor_free(ag_supervisor *s)
{
    if (!s)
        return;
    while (s->n) {
        backend *b = s->b[0];
        if (b->pid > 0) {
            sv_kill(b, SIGKILL, NULL);
            char why[160];
            for (int i = 0; i < 200 && !sv_ended(b, why, sizeof why); i++)
                usleep(10000);
        }
        drop(s, b);
    }
    free(s->b);
    free(s->st);
    ag_control_close(s->ctl);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int ag_backend_endpoint(ag_supervisor *s, const char *project_id, char *out, size_t n)
{
    pthread_mutex_lock(&s->mu);
    backend *b = sv_find(s, project_id);
    int ok = b && b->pid > 0 && b->connected && !b->stopping;
    if (ok) {
        const char *a = s->cfg->advertise_address;
        snprintf(out, n, strchr(a, ':') ? "tcp://[%s]:%d" : "tcp://%s:%d", a, b->port);
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

int ag_backend_granted(ag_supervisor *s, const char *cert_sha256_hex, char *instance, size_t n)
{
    pthread_mutex_lock(&s->mu);
    int ok = 0;
    int64_t now = time(NULL);
    for (size_t k = 0; k < s->n && !ok; k++) {
        backend *b = s->b[k];
        for (size_t i = 0; i < b->n_grants && !ok; i++)
            if (!strcmp(b->grants[i].sha, cert_sha256_hex) && b->grants[i].not_after > now) {
                snprintf(instance, n, "%s", b->grants[i].uuid);
                ok = 1;
            }
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

void ag_backend_grant(ag_supervisor *s, const ag_instance *inst, const char *cert_sha256_hex,
                      int64_t not_after)
{
    if (!sv_hex64(cert_sha256_hex)) {
        sl_log(SL_LOG_ERR, COMPONENT, "instance %s: grant with a malformed fingerprint ignored",
               inst->uuid);
        return;
    }
    pthread_mutex_lock(&s->mu);
    backend *b = sv_find_or_add(s, inst->project_id);
    if (b) {
        sv_grant_add(b, inst->uuid, cert_sha256_hex, not_after);
        sv_grants_save(s, b);
        sl_log(SL_LOG_NOTICE, COMPONENT, "instance %s (project %s): granted certificate %.16s...",
               inst->uuid, inst->project_id, cert_sha256_hex);
        grant g;
        snprintf(g.uuid, sizeof g.uuid, "%s", inst->uuid);
        snprintf(g.sha, sizeof g.sha, "%s", cert_sha256_hex);
        g.not_after = not_after;
        sv_send_grant(s, b, &g);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Sessions of projects whose backend is not running now (it ended while no agent watched)
 * have ended: the usage store closes those it still holds open. */
static int project_alive(void *user, const char *project)
{
    backend *b = sv_find(user, project);
    return b && b->pid > 0;
}

void ag_supervisor_set_usage(ag_supervisor *s, ag_usage *u)
{
    pthread_mutex_lock(&s->mu);
    s->usage = u;
    ag_usage_close_orphans(u, project_alive, s);
    pthread_mutex_unlock(&s->mu);
}

unsigned ag_supervisor_running(ag_supervisor *s)
{
    pthread_mutex_lock(&s->mu);
    unsigned n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += s->b[i]->pid > 0 && s->b[i]->connected && !s->b[i]->stopping;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int ag_backend_pid(ag_supervisor *s, const char *project_id)
{
    pthread_mutex_lock(&s->mu);
    backend *b = sv_find(s, project_id);
    int pid = b && b->connected ? (int)b->pid : 0;
    pthread_mutex_unlock(&s->mu);
    return pid;
}

int ag_backend_port(ag_supervisor *s, const char *project_id)
{
    pthread_mutex_lock(&s->mu);
    backend *b = sv_find(s, project_id);
    int port = b ? b->port : 0;
    pthread_mutex_unlock(&s->mu);
    return port;
}

int ag_backend_restarts(ag_supervisor *s, const char *project_id)
{
    pthread_mutex_lock(&s->mu);
    backend *b = sv_find(s, project_id);
    int n = b ? b->restarts : 0;
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t ag_backend_grants(ag_supervisor *s, const char *project_id)
{
    pthread_mutex_lock(&s->mu);
    backend *b = sv_find(s, project_id);
    size_t n = b ? b->n_grants : 0;
    pthread_mutex_unlock(&s->mu);
    return n;
}
