/* Registry reporting: a thread, a table of wanted placements, a dirty mark per instance. */
#include "report.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "registry_client.h"
#include "sluice/log.h"

#define COMPONENT        "agent"
#define USAGE_BATCH      256
#define USAGE_RETRY_MS   60000 /* after a refused push */
#define USAGE_STORE_WAIT 5000  /* after the store failed */

typedef struct entry {
    char uuid[40], project[40], flavor[128];
    int placed;   /* wanted state: 1 = place, 0 = remove */
    int dirty;    /* the registry has not acknowledged the wanted state */
    unsigned gen; /* bumped on each change, so a reply to an older request leaves it dirty */
    int64_t since;
} entry;

struct ag_report {
    char endpoints[AG_REPORT_MAX_ENDPOINTS][256];
    size_t n_endpoints, cur; /* the one in use (or tried next) */
    const char *endpoint;    /* endpoints[cur] */
    char ca[512], cert[512], key[512];
    char host[64], enroll[256], version[64];
    char *ca_pem;
    ag_gpu *gpus;
    size_t n_gpus;
    uint32_t slots;
    int retry_max_ms, call_ms, ping_ms;

    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    entry *v;
    size_t n, cap;
    ag_report_stats st;

    ag_usage_store *usage;
    ag_metrics *metrics;
    int usage_batch;
    unsigned usage_kicks; /* bumped by ag_report_usage_kick */
    unsigned usage_seen;  /* the kicks a push that found nothing had seen */
    int64_t usage_retry;  /* CLOCK_MONOTONIC ms before which no push is tried */
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void deadline_ts(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static entry *find(ag_report *r, const char *uuid)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->v[i].uuid, uuid))
            return &r->v[i];
    return NULL;
}

static entry *add(ag_report *r, const char *uuid)
{
    entry *en = find(r, uuid);
    if (en)
        return en;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        entry *nv = realloc(r->v, cap * sizeof *nv);
        if (!nv)
            return NULL;
        r->v = nv, r->cap = cap;
    }
    en = &r->v[r->n++];
    memset(en, 0, sizeof *en);
    snprintf(en->uuid, sizeof en->uuid, "%s", uuid);
    return en;
}

static void count(ag_report *r)
{
    unsigned pending = 0, placed = 0;
    for (size_t i = 0; i < r->n; i++) {
        pending += r->v[i].dirty != 0;
        placed += r->v[i].placed != 0;
    }
    r->st.pending = pending, r->st.placed = placed;
}

void ag_report_place(ag_report *r, const char *uuid, const char *project, const char *flavor)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    entry *en = add(r, uuid);
    if (en) {
        if (!en->placed)
            en->since = (int64_t)time(NULL);
        snprintf(en->project, sizeof en->project, "%s", project);
        snprintf(en->flavor, sizeof en->flavor, "%s", flavor);
        en->placed = 1, en->dirty = 1, en->gen++;
        count(r);
        pthread_cond_signal(&r->cv);
    } else {
        sl_log(SL_LOG_ERR, COMPONENT, "registry: out of memory, placement of %s not reported",
               uuid);
    }
    pthread_mutex_unlock(&r->mu);
}

void ag_report_remove(ag_report *r, const char *uuid)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    entry *en = add(r, uuid);
    if (en) {
        en->placed = 0, en->dirty = 1, en->gen++;
        count(r);
        pthread_cond_signal(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

void ag_report_usage_kick(ag_report *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->usage_kicks++;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* (lock held) Records may be waiting and no refusal asks to wait. */
static int usage_due(const ag_report *r)
{
    return r->usage && r->usage_kicks != r->usage_seen && mono_ms() >= r->usage_retry;
}

void ag_report_get_stats(ag_report *r, ag_report_stats *st)
{
    pthread_mutex_lock(&r->mu);
    count(r);
    *st = r->st;
    pthread_mutex_unlock(&r->mu);
}

const char *ag_report_host(const ag_report *r)
{
    return r->host;
}

/* One request; 1 = acknowledged, 0 = refused (detail in *why), -1 = the session failed. */
static int call(ag_report *r, nh_regclient *c, Sluice__Control__RegistryRequest *req, char *why,
                size_t n)
{
    Sluice__Control__RegistryReply *rep = NULL;
    sl_error e = {0};
    sl_code rc = nh_regclient_call(c, req, r->call_ms, &rep, &e);
    pthread_mutex_lock(&r->mu);
    r->st.sent++;
    pthread_mutex_unlock(&r->mu);
    if (rc != SL_OK) {
        snprintf(why, n, "%s", e.msg);
        return -1;
    }
    int ok = rep->ok;
    snprintf(why, n, "%s", rep->detail ? rep->detail : "");
    nh_regclient_reply_free(rep);
    if (!ok) {
        pthread_mutex_lock(&r->mu);
        r->st.refused++;
        pthread_mutex_unlock(&r->mu);
    }
    return ok;
}

static int do_register(ag_report *r, nh_regclient *c, char *why, size_t n)
{
    Sluice__Control__AgentInfo ai = SLUICE__CONTROL__AGENT_INFO__INIT;
    ai.host = r->host;
    ai.enrollment_endpoint = r->enroll;
    ai.slots_total = r->slots;
    ai.version = r->version;
    ai.ca_pem = r->ca_pem ? r->ca_pem : (char *)"";
    Sluice__Control__Gpu gv[AG_MAX_GPUS], *gp[AG_MAX_GPUS];
    for (size_t i = 0; i < r->n_gpus && i < AG_MAX_GPUS; i++) {
        sluice__control__gpu__init(&gv[i]);
        gv[i].uuid = r->gpus[i].uuid;
        gv[i].name = r->gpus[i].name;
        gv[i].memory_bytes = r->gpus[i].memory_bytes;
        gp[i] = &gv[i];
    }
    ai.n_gpus = r->n_gpus < AG_MAX_GPUS ? r->n_gpus : AG_MAX_GPUS;
    ai.gpus = gp;
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REGISTER;
    req.register_ = &ai;
    return call(r, c, &req, why, n);
}

/* Sends the wanted state of one dirty entry (copied under the lock). */
static int sync_one(ag_report *r, nh_regclient *c, const entry *en, char *why, size_t n)
{
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    Sluice__Control__Placement pl = SLUICE__CONTROL__PLACEMENT__INIT;
    Sluice__Control__Removal rm = SLUICE__CONTROL__REMOVAL__INIT;
    if (en->placed) {
        pl.instance_uuid = (char *)en->uuid;
        pl.project_id = (char *)en->project;
        pl.flavor = (char *)en->flavor;
        pl.host = r->host;
        pl.since_unix = en->since;
        req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_PLACE;
        req.place = &pl;
    } else {
        rm.instance_uuid = (char *)en->uuid;
        rm.host = r->host;
        rm.at_unix = (int64_t)time(NULL);
        req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REMOVE;
        req.remove = &rm;
    }
    return call(r, c, &req, why, n);
}

static int ping(ag_report *r, nh_regclient *c, char *why, size_t n)
{
    Sluice__Control__Ping p = SLUICE__CONTROL__PING__INIT;
    p.nonce = (uint64_t)mono_ms();
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_PING;
    req.ping = &p;
    return call(r, c, &req, why, n);
}

/* One usage push (lock not held): 1 = done (acknowledged, nothing to send, refused or the
 * store failed: see usage_retry), -1 = the session failed. */
static int push_usage(ag_report *r, nh_regclient *c, char *why, size_t n)
{
    pthread_mutex_lock(&r->mu);
    unsigned kicks = r->usage_kicks;
    pthread_mutex_unlock(&r->mu);
    ag_usage_batch b;
    sl_error e = {0};
    if (ag_usage_store_unforwarded(r->usage, (size_t)r->usage_batch, &b, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "registry: usage not forwarded: %s", e.msg);
        pthread_mutex_lock(&r->mu);
        r->usage_retry = mono_ms() + USAGE_STORE_WAIT;
        pthread_mutex_unlock(&r->mu);
        return 1;
    }
    if (!b.n) {
        ag_usage_batch_free(&b);
        pthread_mutex_lock(&r->mu);
        r->usage_seen = kicks; /* a kick since then looks again */
        pthread_mutex_unlock(&r->mu);
        return 1;
    }
    Sluice__Control__UsagePush up = SLUICE__CONTROL__USAGE_PUSH__INIT;
    up.records = b.recs;
    up.n_records = b.n;
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_USAGE;
    req.usage = &up;
    Sluice__Control__RegistryReply *rep = NULL;
    sl_code rc = nh_regclient_call(c, &req, r->call_ms, &rep, &e);
    size_t sent = b.n;
    ag_usage_batch_free(&b);
    pthread_mutex_lock(&r->mu);
    r->st.sent++;
    pthread_mutex_unlock(&r->mu);
    if (rc != SL_OK) {
        snprintf(why, n, "%s", e.msg);
        return -1;
    }
    int res = 1;
    if (!rep->ok) {
        snprintf(why, n, "%s", rep->detail ? rep->detail : "");
        pthread_mutex_lock(&r->mu);
        r->st.refused++;
        if (strstr(why, "not registered")) {
            res = -1;
        } else {
            r->usage_retry = mono_ms() + USAGE_RETRY_MS;
            sl_log(SL_LOG_WARNING, COMPONENT,
                   "registry: usage push of %zu records refused: %s; retrying in %d s", sent, why,
                   USAGE_RETRY_MS / 1000);
        }
        pthread_mutex_unlock(&r->mu);
    } else {
        size_t marked = 0;
        int64_t now = (int64_t)time(NULL);
        sl_code mrc = SL_OK;
        if (rep->usage_ack)
            mrc = ag_usage_store_mark_forwarded(r->usage, rep->usage_ack->record_ids,
                                                rep->usage_ack->n_record_ids, now, &marked, &e);
        if (mrc != SL_OK || !marked) {
            /* the same batch again at once would loop: wait */
            if (mrc != SL_OK)
                sl_log(SL_LOG_ERR, COMPONENT, "registry: acknowledged usage not marked: %s", e.msg);
            else
                sl_log(SL_LOG_WARNING, COMPONENT,
                       "registry: usage push of %zu records acknowledged none of them", sent);
            pthread_mutex_lock(&r->mu);
            r->usage_retry = mono_ms() + (mrc != SL_OK ? USAGE_STORE_WAIT : USAGE_RETRY_MS);
            pthread_mutex_unlock(&r->mu);
        } else {
            uint64_t pending = 0;
            ag_usage_store_pending(r->usage, &pending, &e);
            ag_metrics_pending(r->metrics, pending);
            ag_metrics_forwarded(r->metrics, now);
            pthread_mutex_lock(&r->mu);
            r->st.usage_forwarded += marked;
            r->st.last_forward = now;
            pthread_mutex_unlock(&r->mu);
            sl_log(SL_LOG_DEBUG, COMPONENT, "registry: %zu usage records forwarded, %llu pending",
                   marked, (unsigned long long)pending);
        }
    }
    nh_regclient_reply_free(rep);
    return res;
}

/* Moves to the next endpoint of the list; returns its position (0: a round is over). */
static size_t next_endpoint(ag_report *r)
{
    r->cur = (r->cur + 1) % r->n_endpoints;
    r->endpoint = r->endpoints[r->cur];
    return r->cur;
}

/* Waits (lock held) until stop, until ms passed, or, with any_dirty, until an entry is dirty
 * or usage records are due. */
static void wait_for(ag_report *r, int ms, int any_dirty)
{
    struct timespec ts;
    deadline_ts(&ts, ms);
    while (!r->stop) {
        if (any_dirty) {
            int dirty = usage_due(r);
            for (size_t i = 0; i < r->n && !dirty; i++)
                dirty = r->v[i].dirty;
            if (dirty)
                return;
        }
        if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) != 0)
            return;
    }
}

static void *run(void *arg)
{
    ag_report *r = arg;
    nh_regclient *c = NULL;
    int backoff = 1000, down_logged = 0;
    char why[256], last_why[256] = "";
    int64_t last_io = 0;
    sl_tls_config tls = {
        .mode = SL_TLS_MUTUAL, .ca_file = r->ca, .cert_file = r->cert, .key_file = r->key};
    sl_channel_opts co;
    sl_channel_opts_default(&co);
    co.connect_attempts = 1;
    co.handshake_timeout_ms = r->call_ms;
    co.io_timeout_ms = r->call_ms;
    co.linger_ms = 100;

    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        if (!c) {
            pthread_mutex_unlock(&r->mu);
            sl_error e = {0};
            int ok = 0;
            if (nh_regclient_connect(r->endpoint, &tls, &co, &c, &e) != SL_OK) {
                snprintf(why, sizeof why, "%s", e.msg);
                c = NULL;
            } else if ((ok = do_register(r, c, why, sizeof why)) != 1) {
                if (ok == 0) { /* refused: the registry's detail explains */
                    char d[sizeof why];
                    snprintf(d, sizeof d, "%s", why);
                    snprintf(why, sizeof why, "register refused: %.200s", d);
                }
                nh_regclient_close(c);
                c = NULL;
            }
            pthread_mutex_lock(&r->mu);
            if (!c) {
                if (r->n_endpoints > 1)
                    sl_log(SL_LOG_WARNING, COMPONENT,
                           "registry %s: %s; trying the next registry endpoint", r->endpoint, why);
                else if (!down_logged || strcmp(why, last_why))
                    sl_log(SL_LOG_WARNING, COMPONENT,
                           "registry %s: %s; retrying (backoff up to %d s)", r->endpoint, why,
                           r->retry_max_ms / 1000);
                down_logged = 1;
                snprintf(last_why, sizeof last_why, "%s", why);
                r->st.connected = 0;
                /* the next endpoint at once; a pause once every one of them failed */
                if (next_endpoint(r) == 0) {
                    wait_for(r, backoff, 0);
                    backoff = backoff * 2 > r->retry_max_ms ? r->retry_max_ms : backoff * 2;
                }
                continue;
            }
            backoff = 1000, down_logged = 0, last_why[0] = '\0';
            r->st.connected = 1;
            r->st.sessions++;
            r->usage_kicks++;                 /* look for records left over */
            for (size_t i = 0; i < r->n; i++) /* the full current set, again */
                if (r->v[i].placed)
                    r->v[i].dirty = 1;
            count(r);
            sl_log(SL_LOG_NOTICE, COMPONENT,
                   "registry %s: connected, registered as %s; reporting %u placements", r->endpoint,
                   r->host, r->st.placed);
            last_io = mono_ms();
        }
        entry *dirty = NULL;
        for (size_t i = 0; i < r->n && !dirty; i++)
            if (r->v[i].dirty)
                dirty = &r->v[i];
        int res;
        entry cp;
        if (!dirty && usage_due(r)) {
            pthread_mutex_unlock(&r->mu);
            res = push_usage(r, c, why, sizeof why);
            pthread_mutex_lock(&r->mu);
        } else if (!dirty) {
            int64_t idle = mono_ms() - last_io;
            if (idle < r->ping_ms) {
                wait_for(r, (int)(r->ping_ms - idle), 1);
                continue;
            }
            pthread_mutex_unlock(&r->mu);
            res = ping(r, c, why, sizeof why);
            pthread_mutex_lock(&r->mu);
            if (res == 0 && strstr(why, "not registered"))
                res = -1; /* the registry lost us (database replaced): register again */
        } else {
            cp = *dirty;
            pthread_mutex_unlock(&r->mu);
            res = sync_one(r, c, &cp, why, sizeof why);
            pthread_mutex_lock(&r->mu);
            entry *en = find(r, cp.uuid);
            if (res == 0 && strstr(why, "not registered")) {
                res = -1;
            } else if (res >= 0 && en && en->gen == cp.gen) {
                if (res == 0)
                    sl_log(SL_LOG_WARNING, COMPONENT, "registry: %s of %s refused: %s",
                           cp.placed ? "placement" : "removal", cp.uuid, why);
                else
                    sl_log(SL_LOG_INFO, COMPONENT, "registry: %s %s", cp.uuid,
                           cp.placed ? "placed here" : "removed");
                en->dirty = 0;
                if (!en->placed) /* removed for good: forget it */
                    *en = r->v[--r->n];
                count(r);
            }
        }
        last_io = mono_ms();
        if (res < 0) {
            sl_log(SL_LOG_WARNING, COMPONENT, "registry %s: session lost: %s; reconnecting%s",
                   r->endpoint, why, r->n_endpoints > 1 ? " to the next registry endpoint" : "");
            next_endpoint(r);
            down_logged = 1;
            snprintf(last_why, sizeof last_why, "%s", why);
            r->st.connected = 0;
            pthread_mutex_unlock(&r->mu);
            nh_regclient_close(c);
            pthread_mutex_lock(&r->mu);
            c = NULL;
            wait_for(r, backoff, 0);
        }
    }
    pthread_mutex_unlock(&r->mu);
    nh_regclient_close(c);
    return NULL;
}

/* The subject CN of a PEM certificate file. */
static sl_code cert_cn(const char *file, char *out, size_t n, sl_error *e)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return sl_fail(e, SL_ERR_CONFIG, "registry_cert %s: cannot open", file);
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (!x)
        return sl_fail(e, SL_ERR_CONFIG, "registry_cert %s: not a PEM certificate", file);
    char cn[256] = "", ou[256] = "";
    X509_NAME *nm = X509_get_subject_name(x);
    int len = X509_NAME_get_text_by_NID(nm, NID_commonName, cn, sizeof cn);
    X509_NAME_get_text_by_NID(nm, NID_organizationalUnitName, ou, sizeof ou);
    X509_free(x);
    if (len <= 0 || (size_t)len >= n)
        return sl_fail(e, SL_ERR_CONFIG, "registry_cert %s: no usable subject CN (host name)",
                       file);
    if (strcmp(ou, "sluice-agent"))
        return sl_fail(e, SL_ERR_CONFIG,
                       "registry_cert %s: subject OU is '%s', the registry requires sluice-agent",
                       file, ou);
    snprintf(out, n, "%s", cn);
    return SL_OK;
}

sl_code ag_report_start(const ag_report_opts *o, ag_report **out, sl_error *e)
{
    *out = NULL;
    if (!o->endpoint || !o->ca_file || !o->cert_file || !o->key_file || !o->enroll_endpoint)
        return sl_fail(e, SL_ERR_INVALID, "registry: endpoint, CA, certificate, key needed");
    ag_report *r = calloc(1, sizeof *r);
    if (!r)
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    for (const char *p = o->endpoint; *p;) {
        size_t n = strcspn(p, ", ");
        if (n && (n >= sizeof r->endpoints[0] || r->n_endpoints == AG_REPORT_MAX_ENDPOINTS)) {
            free(r);
            return sl_fail(e, SL_ERR_INVALID,
                           "registry: at most %d endpoints of at most 255 bytes each",
                           AG_REPORT_MAX_ENDPOINTS);
        }
        if (n)
            snprintf(r->endpoints[r->n_endpoints++], sizeof r->endpoints[0], "%.*s", (int)n, p);
        p += n + (p[n] != '\0');
    }
    if (!r->n_endpoints) {
        free(r);
        return sl_fail(e, SL_ERR_INVALID, "registry: no endpoint");
    }
    r->endpoint = r->endpoints[0];
    snprintf(r->ca, sizeof r->ca, "%s", o->ca_file);
    snprintf(r->cert, sizeof r->cert, "%s", o->cert_file);
    snprintf(r->key, sizeof r->key, "%s", o->key_file);
    snprintf(r->enroll, sizeof r->enroll, "%s", o->enroll_endpoint);
    snprintf(r->version, sizeof r->version, "%s", o->version ? o->version : "");
    r->slots = o->slots;
    r->retry_max_ms = o->retry_max_ms > 0 ? o->retry_max_ms : 30000;
    r->call_ms = o->call_timeout_ms > 0 ? o->call_timeout_ms : 5000;
    r->ping_ms = o->ping_interval_ms > 0 ? o->ping_interval_ms : 30000;
    r->usage = o->usage;
    r->metrics = o->metrics;
    r->usage_batch = o->usage_batch > 0 && o->usage_batch <= 1024 ? o->usage_batch : USAGE_BATCH;
    r->usage_kicks = 1; /* records may be waiting from before */
    sl_code rc = SL_OK;
    if (o->host)
        snprintf(r->host, sizeof r->host, "%s", o->host);
    else
        rc = cert_cn(o->cert_file, r->host, sizeof r->host, e);
    if (rc == SL_OK && o->ca_pem && !(r->ca_pem = strdup(o->ca_pem)))
        rc = sl_fail(e, SL_ERR_NOMEM, "out of memory");
    if (rc == SL_OK && o->gpus && o->n_gpus) {
        r->n_gpus = o->n_gpus < AG_MAX_GPUS ? o->n_gpus : AG_MAX_GPUS;
        if (!(r->gpus = malloc(r->n_gpus * sizeof *r->gpus)))
            rc = sl_fail(e, SL_ERR_NOMEM, "out of memory");
        else
            memcpy(r->gpus, o->gpus, r->n_gpus * sizeof *r->gpus);
    }
    if (rc != SL_OK) {
        free(r->ca_pem);
        free(r);
        return rc;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&r->mu, NULL);
    if (pthread_create(&r->th, NULL, run, r) != 0) {
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mu);
        free(r->ca_pem);
        free(r->gpus);
        free(r);
        return sl_fail(e, SL_ERR_IO, "registry: cannot start a thread");
    }
    *out = r;
    return SL_OK;
}

void ag_report_stop(ag_report *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->th, NULL);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r->v);
    free(r->ca_pem);
    free(r->gpus);
    free(r);
}
