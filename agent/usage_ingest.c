/* Usage ingestion: check, complete, commit, acknowledge; lifetimes; metrics. */
#include "usage_ingest.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/log.h"
#include "supervisor.h"
#include "usage_record.h"

#define COMPONENT   "agent"
#define REJECT_RING 64

typedef struct queued {
    char project[65];
    Sluice__Control__BackendReport *rep;
    Sluice__Control__UsageRecord rec; /* a shallow copy of rep->usage, completed below */
    char name[256], domain[256], tier[33], flavor[256];
} queued;

struct ag_usage {
    ag_usage_store *store;
    ag_metrics *metrics;
    ag_instances *inst;
    void (*stored)(void *);
    void *stored_user;
    queued *q;
    size_t nq;
    char rejected[REJECT_RING][40]; /* ids already logged as malformed */
    size_t next_reject;
    int64_t last_tick_ms, last_beat_ms, last_prune_ms, last_settle_ms;
    int retention_days, keep_unforwarded;
    uint64_t alive_sig;
    pthread_mutex_t mu; /* stats only */
    ag_usage_stats st;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int seed(const sl_usage_rec *sum, uint64_t records, void *ud)
{
    ag_metrics_seed(ud, sum, records);
    return 0;
}

sl_code ag_usage_new(const ag_usage_opts *o, ag_usage **out, sl_error *e)
{
    if (!o->store || !o->instances)
        return sl_fail(e, SL_ERR_INVALID, "usage: a store and an instance table are needed");
    ag_usage *u = calloc(1, sizeof *u);
    if (!u || !(u->q = calloc(AG_USAGE_QUEUE_MAX, sizeof *u->q))) {
        free(u);
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&u->mu, NULL);
    u->store = o->store;
    u->metrics = o->metrics;
    u->inst = o->instances;
    u->stored = o->stored;
    u->stored_user = o->stored_user;
    u->retention_days = o->retention_days;
    u->keep_unforwarded = o->keep_unforwarded;
    uint64_t n = 0, pending = 0;
    sl_code rc = SL_OK;
    if (u->metrics)
        rc = ag_usage_store_totals(u->store, seed, u->metrics, e);
    if (rc == SL_OK)
        rc = ag_usage_store_count(u->store, &n, e);
    if (rc == SL_OK)
        rc = ag_usage_store_pending(u->store, &pending, e);
    if (rc != SL_OK) {
        ag_usage_free(u);
        return rc;
    }
    ag_metrics_pending(u->metrics, pending);
    sl_log(SL_LOG_INFO, COMPONENT, "usage store: %llu records, %llu not forwarded yet",
           (unsigned long long)n, (unsigned long long)pending);
    *out = u;
    return SL_OK;
}

static void drop_queue(ag_usage *u)
{
    for (size_t i = 0; i < u->nq; i++)
        sluice__control__backend_report__free_unpacked(u->q[i].rep, NULL);
    u->nq = 0;
}

void ag_usage_free(ag_usage *u)
{
    if (!u)
        return;
    drop_queue(u);
    free(u->q);
    pthread_mutex_destroy(&u->mu);
    free(u);
}

static void count(ag_usage *u, uint64_t *field, uint64_t n)
{
    pthread_mutex_lock(&u->mu);
    *field += n;
    pthread_mutex_unlock(&u->mu);
}

void ag_usage_get_stats(const ag_usage *u, ag_usage_stats *st)
{
    pthread_mutex_lock((pthread_mutex_t *)&u->mu);
    *st = u->st;
    pthread_mutex_unlock((pthread_mutex_t *)&u->mu);
}

/* Logs a malformed record once per id (a backend resends what was not acknowledged). */
static void reject(ag_usage *u, const char *project, const Sluice__Control__UsageRecord *r,
                   const char *why)
{
    char id[40];
    snprintf(id, sizeof id, "%.39s", r->record_id ? r->record_id : "");
    int seen = 0;
    for (size_t i = 0; i < REJECT_RING && !seen; i++)
        seen = id[0] && !strcmp(u->rejected[i], id);
    sl_log(seen ? SL_LOG_DEBUG : SL_LOG_WARNING, COMPONENT,
           "project %s: usage record %.39s refused (not stored, not acknowledged): %s", project,
           id[0] ? id : "(no id)", why);
    if (!seen) {
        memcpy(u->rejected[u->next_reject], id, sizeof id);
        u->next_reject = (u->next_reject + 1) % REJECT_RING;
    }
    count(u, &u->st.rejected, 1);
    ag_metrics_rejected(u->metrics, 1);
}

/* A copy that passes the record checks here and in the registry: printable ASCII (a Nova
 * display name may be UTF-8; other bytes become '?'), shorter than cap. */
static void printable(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++)
        dst[i] = (unsigned char)src[i] >= 0x20 && (unsigned char)src[i] <= 0x7e ? src[i] : '?';
    dst[i] = '\0';
}

/* Fills what the backend left empty from the instance table, else the latest lifetime. */
static void complete(ag_usage *u, queued *q)
{
    Sluice__Control__UsageRecord *r = &q->rec;
    ag_instance in;
    ag_usage_info info;
    int found = 0;
    if (ag_instances_get(u->inst, r->instance_uuid, &in)) {
        printable(q->name, sizeof q->name, in.name);
        printable(q->domain, sizeof q->domain, in.domain);
        printable(q->tier, sizeof q->tier, in.sla.tier);
        printable(q->flavor, sizeof q->flavor, in.flavor);
        info.gpu_share = in.gpu ? in.sla.gpu_share : 0;
        found = 1;
    } else {
        sl_error e;
        if (ag_usage_store_info(u->store, r->instance_uuid, &info, &found, &e) != SL_OK)
            sl_log(SL_LOG_WARNING, COMPONENT, "%s", e.msg);
        if (found) {
            printable(q->name, sizeof q->name, info.name);
            printable(q->domain, sizeof q->domain, info.domain);
            printable(q->tier, sizeof q->tier, info.tier);
            printable(q->flavor, sizeof q->flavor, info.flavor);
        }
    }
    if (!found)
        return;
    if (!r->instance_name || !*r->instance_name)
        r->instance_name = q->name;
    if (!r->domain_name || !*r->domain_name)
        r->domain_name = q->domain;
    if (!r->sla_tier || !*r->sla_tier)
        r->sla_tier = q->tier;
    if (!r->flavor || !*r->flavor)
        r->flavor = q->flavor;
    if (!(r->gpu_share > 0))
        r->gpu_share = info.gpu_share;
}

int ag_usage_take(ag_usage *u, const char *project, Sluice__Control__BackendReport *rep)
{
    const Sluice__Control__UsageRecord *r = rep->usage;
    char why[160];
    if (!r) {
        count(u, &u->st.rejected, 1);
        return 0;
    }
    if (ag_usage_record_check(r, project, now_ns(), why, sizeof why) != 0) {
        reject(u, project, r, why);
        return 0;
    }
    if (u->nq >= AG_USAGE_QUEUE_MAX) {
        sl_log(SL_LOG_WARNING, COMPONENT,
               "project %s: usage queue full, record %s not acknowledged (sent again later)",
               project, r->record_id);
        return 0;
    }
    queued *q = &u->q[u->nq++];
    memset(q, 0, sizeof *q);
    snprintf(q->project, sizeof q->project, "%s", project);
    q->rep = rep;
    q->rec = *r;
    complete(u, q);
    return 1;
}

static int shared_total(const sl_usage_rec *sum, uint64_t records, void *ud)
{
    (void)records;
    ag_metrics_shared(ud, sum);
    return 0;
}

void ag_usage_settle(ag_usage *u, const ag_usage_settle_opts *o)
{
    if (!u)
        return;
    const ag_usage_settle_opts dflt = {
        (int64_t)AG_USAGE_SHARE_WINDOW_S * 1000000000LL,
        (int64_t)AG_USAGE_SHARE_GRACE_S * 1000000000LL,
        (int64_t)AG_USAGE_SHARE_MAX_DELAY_S * 1000000000LL,
        360,
    };
    ag_usage_settled done;
    sl_error e;
    if (ag_usage_store_settle(u->store, o ? o : &dflt, now_ns(), &done, &e) != SL_OK) {
        sl_log(SL_LOG_WARNING, COMPONENT, "usage store: shared GPU time: %s (tried again)", e.msg);
        return;
    }
    if (!done.windows)
        return;
    count(u, &u->st.shared_windows, done.windows);
    sl_log(SL_LOG_DEBUG, COMPONENT, "usage store: %llu windows apportioned, %.6f s busy",
           (unsigned long long)done.windows, (double)done.busy_ns / 1e9);
    if (u->metrics && ag_usage_store_totals(u->store, shared_total, u->metrics, &e) != SL_OK)
        sl_log(SL_LOG_WARNING, COMPONENT, "usage store: shared GPU time for /metrics: %s", e.msg);
}

void ag_usage_commit(ag_usage *u, ag_usage_ack_fn ack, void *user)
{
    if (!u || !u->nq)
        return;
    const Sluice__Control__UsageRecord **recs = calloc(u->nq, sizeof *recs);
    unsigned char *is_new = calloc(u->nq, 1);
    char **ids = calloc(u->nq, sizeof *ids);
    unsigned char *done = calloc(u->nq, 1);
    sl_error e = {0};
    sl_code rc = recs && is_new && ids && done ? SL_OK : sl_fail(&e, SL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; rc == SL_OK && i < u->nq; i++)
        recs[i] = &u->q[i].rec;
    if (rc == SL_OK)
        rc = ag_usage_store_put(u->store, recs, u->nq, (int64_t)time(NULL), is_new, &e);
    if (rc != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT,
               "usage store: %zu records not stored, not acknowledged (the backends send them "
               "again): %s",
               u->nq, e.msg);
        count(u, &u->st.failed_commits, 1);
        ag_metrics_store_failed(u->metrics);
    } else {
        size_t fresh = 0;
        for (size_t i = 0; i < u->nq; i++) {
            if (!is_new[i])
                continue;
            sl_usage_rec row;
            ag_usage_record_row(&u->q[i].rec, &row);
            ag_metrics_record(u->metrics, &row);
            fresh++;
        }
        count(u, &u->st.stored, fresh);
        count(u, &u->st.duplicates, u->nq - fresh);
        count(u, &u->st.commits, 1);
        sl_log(SL_LOG_DEBUG, COMPONENT, "usage store: %zu records committed, %zu new", u->nq,
               fresh);
        /* acknowledge per backend, duplicates included: they are stored */
        for (size_t i = 0; i < u->nq; i++) {
            if (done[i])
                continue;
            size_t n = 0;
            for (size_t k = i; k < u->nq; k++)
                if (!done[k] && !strcmp(u->q[k].project, u->q[i].project)) {
                    ids[n++] = u->q[k].rec.record_id;
                    done[k] = 1;
                }
            if (ack)
                ack(user, u->q[i].project, ids, n);
        }
        uint64_t pending;
        if (ag_usage_store_pending(u->store, &pending, &e) == SL_OK)
            ag_metrics_pending(u->metrics, pending);
        if (fresh && u->stored)
            u->stored(u->stored_user);
    }
    free(recs);
    free(is_new);
    free(ids);
    free(done);
    drop_queue(u);
}

static void domain_of(ag_usage *u, const char *uuid, char *out, size_t n)
{
    ag_instance in;
    out[0] = '\0';
    if (uuid && ag_instances_get(u->inst, uuid, &in))
        snprintf(out, n, "%s", in.domain);
}

void ag_usage_session(ag_usage *u, const char *project, const Sluice__Control__SessionEvent *ev)
{
    if (!u || !ev->instance_uuid)
        return;
    /* a refusal before the certificate was read names no instance */
    int anonymous =
        ev->kind == SLUICE__CONTROL__SESSION_EVENT__KIND__REFUSED && !*ev->instance_uuid;
    if (!anonymous && !ag_usage_is_uuid(ev->instance_uuid))
        return;
    int kind = ev->kind == SLUICE__CONTROL__SESSION_EVENT__KIND__OPENED    ? AG_SESSION_OPENED
               : ev->kind == SLUICE__CONTROL__SESSION_EVENT__KIND__CLOSED  ? AG_SESSION_CLOSED
               : ev->kind == SLUICE__CONTROL__SESSION_EVENT__KIND__REFUSED ? AG_SESSION_REFUSED
               : ev->kind == SLUICE__CONTROL__SESSION_EVENT__KIND__WORKER_KILLED
                   ? AG_SESSION_WORKER_KILLED
                   : 0;
    if (!kind)
        return;
    char domain[256];
    domain_of(u, ev->instance_uuid, domain, sizeof domain);
    ag_metrics_session(u->metrics, project, ev->instance_uuid, domain, kind, ev->reason);
    sl_error e;
    if (kind == AG_SESSION_OPENED && ev->session_id &&
        ag_usage_store_session_opened(u->store, project, ev->session_id, ev->instance_uuid,
                                      now_ns(), &e) != SL_OK)
        sl_log(SL_LOG_WARNING, COMPONENT, "%s (the session is closed from its records only)",
               e.msg);
}

/* ---------------------------------------------------------------- closing what a backend left */

typedef struct closer {
    queued q; /* the record and its completion */
    char id[37], project[65], instance[40], flavor[256], gpu[65];
    uint64_t session;
    int64_t start, end;
} closer;

typedef struct closing {
    closer *c;
    size_t n, cap;
    int (*keep)(void *user, const char *project); /* 1: leave this project's sessions open */
    void *user;
    int64_t end; /* 0: each at its last known time */
} closing;

static int collect(const ag_usage_open *o, void *ud)
{
    closing *cl = ud;
    if (cl->keep && cl->keep(cl->user, o->project))
        return 0;
    if (cl->n == cl->cap) {
        size_t cap = cl->cap ? cl->cap * 2 : 16;
        closer *v = realloc(cl->c, cap * sizeof *v);
        if (!v)
            return 1;
        cl->c = v;
        cl->cap = cap;
    }
    closer *c = &cl->c[cl->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->project, sizeof c->project, "%s", o->project);
    snprintf(c->instance, sizeof c->instance, "%s", o->instance);
    snprintf(c->flavor, sizeof c->flavor, "%s", o->flavor);
    snprintf(c->gpu, sizeof c->gpu, "%s", o->gpu_uuid);
    c->session = o->session_id;
    c->start = o->last_end_ns > o->opened_ns ? o->last_end_ns : o->opened_ns;
    c->end = cl->end > c->start ? cl->end : c->start;
    return 0;
}

static void record_id(char out[37])
{
    uint8_t r[16];
    if (RAND_bytes(r, sizeof r) != 1)
        for (size_t i = 0; i < sizeof r; i++)
            r[i] = (uint8_t)(rand() & 0xff);
    r[6] = (uint8_t)((r[6] & 0x0f) | 0x40);
    r[8] = (uint8_t)((r[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0],
             r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13],
             r[14], r[15]);
}

/* Writes a final record marked closed_by_agent for each open session of the projects cl keeps
 * not (project: only that one), in one transaction. */
static void close_open(ag_usage *u, const char *project, closing *cl, const char *why)
{
    sl_error e;
    if (ag_usage_store_open_sessions(u->store, project, collect, cl, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "%s (open sessions not closed)", e.msg);
        free(cl->c);
        return;
    }
    if (!cl->n) {
        free(cl->c);
        return;
    }
    const Sluice__Control__UsageRecord **recs = calloc(cl->n, sizeof *recs);
    unsigned char *is_new = calloc(cl->n, 1);
    for (size_t i = 0; recs && is_new && i < cl->n; i++) {
        closer *c = &cl->c[i];
        record_id(c->id);
        Sluice__Control__UsageRecord *r = &c->q.rec;
        sluice__control__usage_record__init(r);
        r->record_id = c->id;
        r->instance_uuid = c->instance;
        r->project_id = c->project;
        r->flavor = c->flavor;
        r->gpu_uuid = c->gpu;
        r->session_id = c->session;
        r->interval_start_ns = c->start;
        r->interval_end_ns = c->end;
        r->measurement = "none";
        r->final = 1;
        r->closed_by_agent = 1;
        complete(u, &c->q);
        recs[i] = r;
    }
    sl_code rc = recs && is_new
                     ? ag_usage_store_put(u->store, recs, cl->n, (int64_t)time(NULL), is_new, &e)
                     : sl_fail(&e, SL_ERR_NOMEM, "out of memory");
    if (rc != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "usage store: %zu sessions not closed: %s", cl->n, e.msg);
    } else {
        for (size_t i = 0; i < cl->n; i++) {
            closer *c = &cl->c[i];
            sl_log(SL_LOG_WARNING, COMPONENT,
                   "project %s: session %llu of instance %s closed by the agent (its backend %s): "
                   "record %s, not measured for the last %.1f s",
                   c->project, (unsigned long long)c->session, c->instance, why, c->id,
                   (double)(c->end - c->start) / 1e9);
            if (!is_new[i])
                continue;
            sl_usage_rec row;
            ag_usage_record_row(&c->q.rec, &row);
            ag_metrics_record(u->metrics, &row);
            count(u, &u->st.stored, 1);
        }
        uint64_t pending;
        if (ag_usage_store_pending(u->store, &pending, &e) == SL_OK)
            ag_metrics_pending(u->metrics, pending);
        if (u->stored)
            u->stored(u->stored_user);
    }
    free(recs);
    free(is_new);
    free(cl->c);
}

void ag_usage_backend_ended(ag_usage *u, const char *project, const char *why)
{
    if (!u)
        return;
    ag_metrics_sessions_reset(u->metrics, project);
    closing cl = {0};
    cl.end = now_ns();
    close_open(u, project, &cl, why);
}

void ag_usage_close_orphans(ag_usage *u, int (*alive)(void *user, const char *project), void *user)
{
    if (!u)
        return;
    closing cl = {0};
    cl.keep = alive;
    cl.user = user;
    close_open(u, NULL, &cl, "ended while no agent was running");
}

void ag_usage_backend_reset(ag_usage *u, const char *project)
{
    if (u)
        ag_metrics_sessions_reset(u->metrics, project);
}

void ag_usage_backend_restarted(ag_usage *u, const char *project)
{
    if (u)
        ag_metrics_backend_restarted(u->metrics, project);
}

/* The SLA gauges of the GPU instances, and the end of the series of departed ones. */
static void instance_gauges(ag_usage *u, const ag_instance *all, size_t n, int64_t mono_ms)
{
    ag_metrics_instance *v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (all[i].gpu)
            v[k++] = (ag_metrics_instance){
                all[i].project_id, all[i].uuid,    all[i].domain,        all[i].flavor,
                all[i].sla.tier,   all[i].running, all[i].sla.gpu_share, all[i].sla.memory_quota};
    ag_metrics_instances(u->metrics, v, k, mono_ms);
    free(v);
}

/* The running (or about to be revoked) GPU instances, as lifetimes to extend. */
static void beat(ag_usage *u, int64_t mono_ms)
{
    size_t n = 0;
    ag_instance *all = ag_instances_snapshot(u->inst, &n);
    ag_usage_alive *alive = calloc(n ? n : 1, sizeof *alive);
    if (!alive) {
        free(all);
        return;
    }
    size_t k = 0;
    uint64_t sig = 0;
    for (size_t i = 0; i < n; i++) {
        const ag_instance *in = &all[i];
        if (!in->gpu || !(in->running || in->revoke_at_ms))
            continue;
        alive[k++] = (ag_usage_alive){in->uuid,   in->project_id, in->name,         in->domain,
                                      in->flavor, in->sla.tier,   in->sla.gpu_share};
        uint64_t h = 1469598103934665603ULL; /* FNV-1a; XOR-combined: order-independent */
        for (const char *p = in->uuid; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        sig ^= (h ^ (uint64_t)(in->sla.gpu_share * 1e6)) * 1099511628211ULL;
    }
    if (u->metrics)
        instance_gauges(u, all, n, mono_ms);
    sig += k;
    if (sig != u->alive_sig || mono_ms - u->last_beat_ms >= AG_USAGE_BEAT_S * 1000) {
        sl_error e;
        if (ag_usage_store_heartbeat(u->store, alive, k, now_ns(), &e) != SL_OK)
            sl_log(SL_LOG_WARNING, COMPONENT, "usage store: lifetimes: %s", e.msg);
        u->alive_sig = sig;
        u->last_beat_ms = mono_ms;
    }
    free(alive);
    free(all);
}

void ag_usage_tick(ag_usage *u, int libvirt_connected, unsigned backends_running)
{
    if (!u)
        return;
    ag_metrics_health(u->metrics, libvirt_connected, backends_running);
    int64_t now = ag_now_ms();
    if (u->last_tick_ms && now - u->last_tick_ms < 1000)
        return; /* the instance table at most once a second */
    u->last_tick_ms = now;
    beat(u, now);
    if (!u->last_settle_ms || now - u->last_settle_ms >= AG_USAGE_SHARE_EVERY_S * 1000) {
        u->last_settle_ms = now;
        ag_usage_settle(u, NULL);
    }
    if (u->retention_days > 0 &&
        (!u->last_prune_ms || now - u->last_prune_ms >= AG_USAGE_PRUNE_S * 1000)) {
        u->last_prune_ms = now;
        int64_t before = now_ns() - (int64_t)u->retention_days * 86400 * 1000000000LL;
        ag_usage_pruned p;
        sl_error e;
        if (ag_usage_store_prune(u->store, before, u->keep_unforwarded, &p, &e) != SL_OK)
            sl_log(SL_LOG_WARNING, COMPONENT, "usage store: retention: %s", e.msg);
        else if (p.records || p.lifetimes)
            sl_log(SL_LOG_INFO, COMPONENT,
                   "usage store: retention (%d days) removed %llu records, %llu lifetimes",
                   u->retention_days, (unsigned long long)p.records,
                   (unsigned long long)p.lifetimes);
    }
}
