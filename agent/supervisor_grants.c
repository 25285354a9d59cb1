/* Grants (memory and STATE_DIR/grants/PROJECT) and the control messages that carry them. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sluice/log.h"
#include "supervisor_internal.h"

/* ------------------------------------------------------------------ grants file */

static void grants_path(const ag_supervisor *s, const char *project, char *out, size_t n)
{
    snprintf(out, n, "%s/grants/%s", s->cfg->state_dir, project);
}

void sv_grants_save(const ag_supervisor *s, const backend *b)
{
    char path[700], tmp[720];
    grants_path(s, b->project, path, sizeof path);
    if (!b->n_grants) {
        unlink(path);
        return;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        sl_log(SL_LOG_WARNING, COMPONENT, "grants file %s: %s (grants kept in memory only)", tmp,
               strerror(errno));
        return;
    }
    for (size_t i = 0; i < b->n_grants; i++)
        fprintf(f, "%s %s %lld\n", b->grants[i].uuid, b->grants[i].sha,
                (long long)b->grants[i].not_after);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0 || rename(tmp, path) != 0)
        sl_log(SL_LOG_WARNING, COMPONENT, "grants file %s: %s", path, strerror(errno));
}

int sv_hex64(const char *s)
{
    if (strlen(s) != 64)
        return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return 0;
    return 1;
}

/* Every enrollment adds a grant (another user of the instance, a renewal); an instance keeps
 * at most this many, as its backend does (backend/control.c): expired ones go first, then the
 * one that ends first. */
#define GRANTS_PER_INSTANCE 8

void sv_grant_add(backend *b, const char *uuid, const char *sha, int64_t not_after)
{
    for (size_t i = 0; i < b->n_grants; i++)
        if (!strcmp(b->grants[i].uuid, uuid) && !strcmp(b->grants[i].sha, sha)) {
            b->grants[i].not_after = not_after;
            return;
        }
    int64_t now = time(NULL);
    size_t mine = 0, first = SIZE_MAX;
    for (size_t i = 0; i < b->n_grants;) {
        if (strcmp(b->grants[i].uuid, uuid)) {
            i++;
        } else if (b->grants[i].not_after && b->grants[i].not_after <= now) {
            b->grants[i] = b->grants[--b->n_grants]; /* expired */
        } else {
            if (first == SIZE_MAX || b->grants[i].not_after < b->grants[first].not_after)
                first = i;
            mine++;
            i++;
        }
    }
    if (mine >= GRANTS_PER_INSTANCE && first != SIZE_MAX)
        b->grants[first] = b->grants[--b->n_grants];
    if (b->n_grants == b->cap_grants) {
        size_t cap = b->cap_grants ? b->cap_grants * 2 : 8;
        grant *g = realloc(b->grants, cap * sizeof *g);
        if (!g)
            return;
        b->grants = g;
        b->cap_grants = cap;
    }
    grant *g = &b->grants[b->n_grants++];
    snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
    snprintf(g->sha, sizeof g->sha, "%s", sha);
    g->not_after = not_after;
}

void sv_grants_load(const ag_supervisor *s, backend *b)
{
    char path[700], line[256];
    grants_path(s, b->project, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    int64_t now = time(NULL);
    while (fgets(line, sizeof line, f)) {
        char uuid[40], sha[65];
        long long na;
        if (sscanf(line, "%39s %64s %lld", uuid, sha, &na) == 3 && sv_hex64(sha) && na > now)
            sv_grant_add(b, uuid, sha, na);
    }
    fclose(f);
    if (b->n_grants)
        sl_log(SL_LOG_INFO, COMPONENT, "project %s: %zu grants restored from %s", b->project,
               b->n_grants, path);
}

/* ------------------------------------------------------------------ messages */

void sv_clear_pending(backend *b)
{
    for (size_t i = 0; i < b->n_pend; i++)
        free(b->pend[i].buf);
    b->n_pend = 0;
}

static void track(backend *b, uint64_t seq, void *buf, size_t len, int is_set)
{
    if (b->n_pend >= 4096) {
        free(buf);
        return;
    }
    if (b->n_pend == b->cap_pend) {
        size_t cap = b->cap_pend ? b->cap_pend * 2 : 16;
        pending *p = realloc(b->pend, cap * sizeof *p);
        if (!p) {
            free(buf);
            return;
        }
        b->pend = p;
        b->cap_pend = cap;
    }
    b->pend[b->n_pend++] = (pending){seq, buf, len, ag_now_ms(), is_set};
}

/* Sends msg (seq and the backend's key set here) and, if track, keeps it until acked. Not
 * connected: nothing is sent (the grant set after the next hello carries the grants). */
void sv_send_ctl(ag_supervisor *s, backend *b, Sluice__Control__BackendControl *msg, int keep)
{
    if (!b->connected)
        return;
    msg->seq = ++b->seq;
    msg->agent_key = (ProtobufCBinaryData){sizeof b->key, b->key};
    size_t len;
    void *buf = ag_control_pack(msg, &len);
    if (!buf)
        return;
    sl_error e;
    if (ag_control_send(s->ctl, &b->peer, buf, len, &e) != SL_OK)
        sl_log(SL_LOG_WARNING, COMPONENT, "project %s: %s", b->project, e.msg);
    if (keep)
        track(b, msg->seq, buf, len,
              msg->kind_case == SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT_SET);
    else
        free(buf);
}

/* The Grant message of g (NULL when its instance is not a known GPU instance). The strings
 * point into *in, *sla, *gpus and *gbuf, which must outlive the message. */
typedef struct grant_msg {
    ag_instance in;
    uint8_t sha[32];
    char *gpus[32];
    char gbuf[sizeof((ag_sla *)0)->gpus];
    Sluice__Control__Sla sla;
    Sluice__Control__Grant gr;
} grant_msg;

static int make_grant(ag_supervisor *s, const grant *g, grant_msg *m)
{
    if (!ag_instances_get(s->inst, g->uuid, &m->in) || !m->in.gpu)
        return 0;
    for (int i = 0; i < 32; i++) {
        unsigned v = 0;
        sscanf(g->sha + 2 * i, "%2x", &v);
        m->sha[i] = (uint8_t)v;
    }
    size_t ng = 0;
    memcpy(m->gbuf, m->in.sla.gpus, sizeof m->gbuf);
    m->gbuf[sizeof m->gbuf - 1] = '\0';
    if (strcmp(m->gbuf, "all")) {
        char *save;
        for (char *t = strtok_r(m->gbuf, ",", &save); t && ng < 32; t = strtok_r(NULL, ",", &save))
            m->gpus[ng++] = t;
    }
    Sluice__Control__Sla sla = SLUICE__CONTROL__SLA__INIT;
    sla.flavor = m->in.flavor;
    sla.tier = m->in.sla.tier;
    sla.gpu_share = m->in.sla.gpu_share;
    sla.memory_quota_bytes = m->in.sla.memory_quota;
    sla.max_sessions = m->in.sla.max_sessions;
    sla.gpu_uuids = m->gpus;
    sla.n_gpu_uuids = ng;
    m->sla = sla;
    Sluice__Control__Grant gr = SLUICE__CONTROL__GRANT__INIT;
    gr.instance_uuid = m->in.uuid;
    gr.project_id = m->in.project_id;
    gr.cert_sha256 = (ProtobufCBinaryData){32, m->sha};
    gr.not_after_unix = g->not_after;
    gr.sla = &m->sla;
    gr.domain_name = m->in.domain;
    m->gr = gr;
    return 1;
}

/* One grant, to a backend that has had its grant set (before that, the set carries it). */
void sv_send_grant(ag_supervisor *s, backend *b, const grant *g)
{
    if (!b->synced)
        return;
    grant_msg *gm = malloc(sizeof *gm);
    if (!gm)
        return;
    if (!make_grant(s, g, gm)) {
        sl_log(SL_LOG_INFO, COMPONENT, "instance %s: not a known GPU instance, grant not sent",
               g->uuid);
        free(gm);
        return;
    }
    Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT;
    m.grant = &gm->gr;
    sv_send_ctl(s, b, &m, 1);
    free(gm);
}

/* Every grant of the backend whose instance is a known GPU instance: the backend revokes every
 * other instance it knows and ends its sessions. Sent after the hello once the instance table
 * reflects libvirt, and after every resync. */
void sv_send_grant_set(ag_supervisor *s, backend *b, const char *reason)
{
    if (!b->connected)
        return;
    grant_msg *gm = calloc(b->n_grants ? b->n_grants : 1, sizeof *gm);
    Sluice__Control__Grant **list = calloc(b->n_grants ? b->n_grants : 1, sizeof *list);
    if (!gm || !list) {
        free(gm);
        free(list);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < b->n_grants; i++)
        if (make_grant(s, &b->grants[i], &gm[n])) {
            list[n] = &gm[n].gr;
            n++;
        }
    Sluice__Control__GrantSet gs = SLUICE__CONTROL__GRANT_SET__INIT;
    gs.grants = list;
    gs.n_grants = n;
    gs.reason = (char *)reason;
    Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT_SET;
    m.grant_set = &gs;
    /* an older set still waiting for its ack is replaced, never sent again */
    for (size_t i = 0; i < b->n_pend;)
        if (b->pend[i].is_set) {
            free(b->pend[i].buf);
            b->pend[i] = b->pend[--b->n_pend];
        } else {
            i++;
        }
    sv_send_ctl(s, b, &m, 1);
    if (!b->synced)
        sl_log(SL_LOG_NOTICE, COMPONENT,
               "project %s: grant set sent to the backend (%zu grant%s, %s)", b->project, n,
               n == 1 ? "" : "s", reason);
    b->synced = 1;
    free(gm);
    free(list);
}

void sv_send_revoke(ag_supervisor *s, backend *b, const char *uuid, const char *reason)
{
    Sluice__Control__Revoke r = SLUICE__CONTROL__REVOKE__INIT;
    r.instance_uuid = (char *)uuid;
    r.reason = (char *)reason;
    Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_REVOKE;
    m.revoke = &r;
    sv_send_ctl(s, b, &m, 1);
}

void sv_send_shutdown(ag_supervisor *s, backend *b, const char *reason)
{
    Sluice__Control__Shutdown sd = SLUICE__CONTROL__SHUTDOWN__INIT;
    sd.reason = (char *)reason;
    Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_SHUTDOWN;
    m.shutdown = &sd;
    sv_send_ctl(s, b, &m, 0);
}

/* Unacknowledged grants and revocations go again every RETRANSMIT_MS (applying is idempotent);
 * an unacknowledged grant set is made again from the grants of now (an old set sent after a
 * later grant would revoke it). */
void sv_retransmit(ag_supervisor *s, backend *b, int64_t now)
{
    int set_due = 0;
    for (size_t i = 0; i < b->n_pend; i++) {
        if (now - b->pend[i].sent_ms < RETRANSMIT_MS)
            continue;
        if (b->pend[i].is_set) {
            set_due = 1;
            continue;
        }
        sl_error e;
        ag_control_send(s->ctl, &b->peer, b->pend[i].buf, b->pend[i].len, &e);
        b->pend[i].sent_ms = now;
    }
    if (set_due)
        sv_send_grant_set(s, b, "sent again: no acknowledgement");
}
