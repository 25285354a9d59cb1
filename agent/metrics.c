/* Metric series: what the agent counts and keeps (metrics.h); the text is metrics_text.c. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

const char *const ag_refuse_names[AG_REFUSE_N] = {"certificate", "grant", "limit", "other"};

ag_metrics *ag_metrics_new(const char *version)
{
    ag_metrics *m = calloc(1, sizeof *m);
    if (m) {
        pthread_mutex_init(&m->mu, NULL);
        snprintf(m->version, sizeof m->version, "%s", version ? version : "");
    }
    return m;
}

void ag_metrics_free(ag_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m->u);
    free(m->s);
    free(m->i);
    free(m->enroll);
    free(m->restarts);
    free(m);
}

static void put(char *dst, size_t cap, const char *v)
{
    snprintf(dst, cap, "%s", v ? v : "");
}

/* Grows *v (of *n elements of size sz, capacity *cap) by one zeroed element; NULL: no memory. */
static void *grow(void **v, size_t *n, size_t *cap, size_t sz)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        void *nv = realloc(*v, c * sz);
        if (!nv)
            return NULL;
        *v = nv;
        *cap = c;
    }
    void *el = (char *)*v + (*n)++ * sz;
    memset(el, 0, sz);
    return el;
}

static uint64_t add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void ag_metrics_record(ag_metrics *m, const sl_usage_rec *r)
{
    ag_metrics_seed(m, r, 1);
}

/* The series of r's (project, instance, domain, gpu), made when new; NULL when out of memory.
 * Under m->mu. */
static useries *series_of(ag_metrics *m, const sl_usage_rec *r)
{
    char p[65], i[65], d[256], g[65];
    put(p, sizeof p, r->project);
    put(i, sizeof i, r->instance);
    put(d, sizeof d, r->domain);
    put(g, sizeof g, r->gpu_uuid);
    for (size_t k = 0; k < m->nu; k++)
        if (!strcmp(m->u[k].instance, i) && !strcmp(m->u[k].gpu, g) &&
            !strcmp(m->u[k].project, p) && !strcmp(m->u[k].domain, d))
            return &m->u[k];
    useries *u = grow((void **)&m->u, &m->nu, &m->capu, sizeof *u);
    if (u) {
        memcpy(u->project, p, sizeof p);
        memcpy(u->instance, i, sizeof i);
        memcpy(u->domain, d, sizeof d);
        memcpy(u->gpu, g, sizeof g);
    }
    return u;
}

void ag_metrics_seed(ag_metrics *m, const sl_usage_rec *r, uint64_t records)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    useries *u = series_of(m, r);
    if (u) {
        u->busy_ns = add(u->busy_ns, r->gpu_busy_ns);
        u->shared_ns = add(u->shared_ns, r->gpu_shared_ns);
        u->kernel_ns = add(u->kernel_ns, r->kernel_ns);
        u->kernels = add(u->kernels, r->kernels);
        u->htod = add(u->htod, r->bytes_htod);
        u->dtoh = add(u->dtoh, r->bytes_dtoh);
        u->throttled_ns = add(u->throttled_ns, r->throttled_ns);
        u->refusals = add(u->refusals, r->quota_refusals);
        u->records = add(u->records, records);
        if (r->memory_high_water > u->mem_hw)
            u->mem_hw = r->memory_high_water;
        if (records == 1 && r->end_ns >= u->last_end_ns) { /* a record, not the store's sums */
            u->mem_last = r->memory_high_water;
            u->last_end_ns = r->end_ns;
        }
    }
    pthread_mutex_unlock(&m->mu);
}

void ag_metrics_shared(ag_metrics *m, const sl_usage_rec *sum)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    useries *u = series_of(m, sum);
    if (u && sum->gpu_shared_ns > u->shared_ns) /* a counter: never down */
        u->shared_ns = sum->gpu_shared_ns;
    pthread_mutex_unlock(&m->mu);
}

static int refuse_index(const char *reason)
{
    for (int k = 0; k < AG_REFUSE_OTHER; k++)
        if (reason && !strcmp(reason, ag_refuse_names[k]))
            return k;
    return AG_REFUSE_OTHER;
}

void ag_metrics_session(ag_metrics *m, const char *project, const char *instance,
                        const char *domain, int kind, const char *reason)
{
    if (!m)
        return;
    char p[65], i[65], d[256];
    put(p, sizeof p, project);
    put(i, sizeof i, instance);
    put(d, sizeof d, domain);
    if (!i[0] && kind != AG_SESSION_REFUSED)
        return;
    pthread_mutex_lock(&m->mu);
    sseries *s = NULL;
    for (size_t k = 0; k < m->ns && !s; k++)
        if (!strcmp(m->s[k].instance, i) && !strcmp(m->s[k].project, p))
            s = &m->s[k];
    if (!s && (s = grow((void **)&m->s, &m->ns, &m->caps, sizeof *s))) {
        memcpy(s->project, p, sizeof p);
        memcpy(s->instance, i, sizeof i);
    }
    if (s) {
        if (d[0])
            memcpy(s->domain, d, sizeof d);
        if (kind == AG_SESSION_OPENED) {
            s->open++;
            s->opened++;
        } else if (kind == AG_SESSION_CLOSED && s->open > 0) {
            s->open--;
        } else if (kind == AG_SESSION_REFUSED) {
            s->refused[refuse_index(reason)]++;
        } else if (kind == AG_SESSION_WORKER_KILLED) {
            s->killed++;
        }
    }
    pthread_mutex_unlock(&m->mu);
}

void ag_metrics_sessions_reset(ag_metrics *m, const char *project)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    for (size_t k = 0; k < m->ns; k++)
        if (!strcmp(m->s[k].project, project))
            m->s[k].open = 0;
    pthread_mutex_unlock(&m->mu);
}

/* Adds n to the counter labelled label (set: replaces it). */
static void kcount(kseries **v, size_t *nv, size_t *cap, const char *label, uint64_t n, int set)
{
    kseries *k = NULL;
    for (size_t j = 0; j < *nv && !k; j++)
        if (!strcmp((*v)[j].label, label))
            k = &(*v)[j];
    if (!k && (k = grow((void **)v, nv, cap, sizeof *k)))
        put(k->label, sizeof k->label, label);
    if (k)
        k->n = set ? n : add(k->n, n);
}

void ag_metrics_backend_restarted(ag_metrics *m, const char *project)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    kcount(&m->restarts, &m->nrestarts, &m->caprestarts, project, 1, 0);
    pthread_mutex_unlock(&m->mu);
}

void ag_metrics_enrollments(ag_metrics *m, const char *result, uint64_t count)
{
    if (!m || !count)
        return;
    pthread_mutex_lock(&m->mu);
    kcount(&m->enroll, &m->nenroll, &m->capenroll, result, count, 1);
    pthread_mutex_unlock(&m->mu);
}

static int listed(const ag_metrics_instance *v, size_t n, const char *instance)
{
    if (!instance[0])
        return 1; /* project-wide series (refusals before the instance was known) stay */
    for (size_t k = 0; k < n; k++)
        if (v[k].instance && !strcmp(v[k].instance, instance))
            return 1;
    return 0;
}

/* 1 when the series' instance has been gone for longer than the grace period. */
static int departed(int64_t *absent_since, int present, int64_t now_ms)
{
    if (present) {
        *absent_since = 0;
        return 0;
    }
    if (!*absent_since)
        *absent_since = now_ms ? now_ms : 1;
    return now_ms - *absent_since > (int64_t)AG_METRICS_DEPART_GRACE_S * 1000;
}

void ag_metrics_instances(ag_metrics *m, const ag_metrics_instance *v, size_t n, int64_t now_ms)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->ni = 0;
    for (size_t k = 0; k < n; k++) {
        iseries *s;
        if (!v[k].running || !(s = grow((void **)&m->i, &m->ni, &m->capi, sizeof *s)))
            continue;
        put(s->project, sizeof s->project, v[k].project);
        put(s->instance, sizeof s->instance, v[k].instance);
        put(s->domain, sizeof s->domain, v[k].domain);
        put(s->flavor, sizeof s->flavor, v[k].flavor);
        put(s->tier, sizeof s->tier, v[k].tier);
        s->share = v[k].gpu_share;
        s->quota = v[k].memory_quota;
    }
    for (size_t k = 0; k < m->nu;)
        if (departed(&m->u[k].absent_since, listed(v, n, m->u[k].instance), now_ms))
            m->u[k] = m->u[--m->nu];
        else
            k++;
    for (size_t k = 0; k < m->ns;)
        if (departed(&m->s[k].absent_since, listed(v, n, m->s[k].instance), now_ms))
            m->s[k] = m->s[--m->ns];
        else
            k++;
    pthread_mutex_unlock(&m->mu);
}

#define SETTER(body)                                                                               \
    if (!m)                                                                                        \
        return;                                                                                    \
    pthread_mutex_lock(&m->mu);                                                                    \
    body;                                                                                          \
    pthread_mutex_unlock(&m->mu)

void ag_metrics_rejected(ag_metrics *m, unsigned n)
{
    SETTER(m->rejected += n);
}
void ag_metrics_store_failed(ag_metrics *m)
{
    SETTER(m->store_failed++);
}
void ag_metrics_health(ag_metrics *m, int libvirt_connected, unsigned backends_running)
{
    SETTER(m->libvirt = libvirt_connected; m->backends = backends_running);
}
void ag_metrics_pending(ag_metrics *m, uint64_t pending)
{
    SETTER(m->pending = pending);
}
void ag_metrics_forwarded(ag_metrics *m, int64_t unix_time)
{
    SETTER(m->last_forward = unix_time);
}
