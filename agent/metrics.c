/* Metric series and their text exposition (format 0.0.4). */
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct useries {
    char project[65], instance[65], domain[256], gpu[65];
    uint64_t busy_ns, kernel_ns, kernels, htod, dtoh, throttled_ns, refusals, records, mem_hw;
} useries;

typedef struct sseries {
    char project[65], instance[65], domain[256];
    int64_t open;
    uint64_t opened, refused;
} sseries;

struct ag_metrics {
    pthread_mutex_t mu;
    useries *u;
    size_t nu, capu;
    sseries *s;
    size_t ns, caps;
    uint64_t rejected, store_failed, pending;
    int libvirt;
    unsigned backends;
    int64_t last_forward;
};

ag_metrics *ag_metrics_new(void)
{
    ag_metrics *m = calloc(1, sizeof *m);
    if (m)
        pthread_mutex_init(&m->mu, NULL);
    return m;
}

void ag_metrics_free(ag_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m->u);
    free(m->s);
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

void ag_metrics_seed(ag_metrics *m, const sl_usage_rec *r, uint64_t records)
{
    if (!m)
        return;
    char p[65], i[65], d[256], g[65];
    put(p, sizeof p, r->project);
    put(i, sizeof i, r->instance);
    put(d, sizeof d, r->domain);
    put(g, sizeof g, r->gpu_uuid);
    pthread_mutex_lock(&m->mu);
    useries *u = NULL;
    for (size_t k = 0; k < m->nu && !u; k++)
        if (!strcmp(m->u[k].instance, i) && !strcmp(m->u[k].gpu, g) &&
            !strcmp(m->u[k].project, p) && !strcmp(m->u[k].domain, d))
            u = &m->u[k];
    if (!u && (u = grow((void **)&m->u, &m->nu, &m->capu, sizeof *u))) {
        memcpy(u->project, p, sizeof p);
        memcpy(u->instance, i, sizeof i);
        memcpy(u->domain, d, sizeof d);
        memcpy(u->gpu, g, sizeof g);
    }
    if (u) {
        u->busy_ns = add(u->busy_ns, r->gpu_busy_ns);
        u->kernel_ns = add(u->kernel_ns, r->kernel_ns);
        u->kernels = add(u->kernels, r->kernels);
        u->htod = add(u->htod, r->bytes_htod);
        u->dtoh = add(u->dtoh, r->bytes_dtoh);
        u->throttled_ns = add(u->throttled_ns, r->throttled_ns);
        u->refusals = add(u->refusals, r->quota_refusals);
        u->records = add(u->records, records);
        if (r->memory_high_water > u->mem_hw)
            u->mem_hw = r->memory_high_water;
    }
    pthread_mutex_unlock(&m->mu);
}

void ag_metrics_session(ag_metrics *m, const char *project, const char *instance,
                        const char *domain, int kind)
{
    if (!m)
        return;
    char p[65], i[65], d[256];
    put(p, sizeof p, project);
    put(i, sizeof i, instance);
    put(d, sizeof d, domain);
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
            s->refused++;
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

/* ------------------------------------------------------------------------------ exposition */

typedef struct buf {
    char *p;
    size_t len, cap;
    int oom;
} buf;

static void out(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out(buf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n + 1;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
}

/* A label value: backslash, double quote and line feed escaped. */
static void label(buf *b, const char *name, const char *v, int first)
{
    out(b, "%s%s=\"", first ? "" : ",", name);
    for (; *v; v++) {
        if (*v == '\\')
            out(b, "\\\\");
        else if (*v == '"')
            out(b, "\\\"");
        else if (*v == '\n')
            out(b, "\\n");
        else
            out(b, "%c", *v);
    }
    out(b, "\"");
}

static void family(buf *b, const char *name, const char *type, const char *help)
{
    out(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void ulabels(buf *b, const useries *u)
{
    out(b, "{");
    label(b, "project_id", u->project, 1);
    label(b, "instance_id", u->instance, 0);
    label(b, "domain", u->domain, 0);
    label(b, "gpu_uuid", u->gpu, 0);
    out(b, "}");
}

static void slabels(buf *b, const sseries *s)
{
    out(b, "{");
    label(b, "project_id", s->project, 1);
    label(b, "instance_id", s->instance, 0);
    label(b, "domain", s->domain, 0);
    out(b, "}");
}

/* One usage family: the field at offset off of each series, as seconds (ns) or a count. */
static void ufamily(buf *b, const ag_metrics *m, const char *name, const char *type,
                    const char *help, size_t off, int ns)
{
    family(b, name, type, help);
    for (size_t k = 0; k < m->nu; k++) {
        uint64_t v;
        memcpy(&v, (const char *)&m->u[k] + off, sizeof v);
        out(b, "%s", name);
        ulabels(b, &m->u[k]);
        if (ns)
            out(b, " %llu.%09llu\n", (unsigned long long)(v / 1000000000ULL),
                (unsigned long long)(v % 1000000000ULL));
        else
            out(b, " %llu\n", (unsigned long long)v);
    }
}

static void gauge(buf *b, const char *name, const char *help, long long v, const char *type)
{
    family(b, name, type, help);
    out(b, "%s %lld\n", name, v);
}

char *ag_metrics_render(ag_metrics *m, size_t *len)
{
    buf b = {malloc(8192), 0, 8192, 0};
    if (!b.p)
        return NULL;
    b.p[0] = '\0';
    pthread_mutex_lock(&m->mu);
    ufamily(&b, m, "sluice_gpu_busy_seconds_total", "counter",
            "GPU time the instance's work occupied the device (overlapping work counted once).",
            offsetof(useries, busy_ns), 1);
    ufamily(&b, m, "sluice_kernel_seconds_total", "counter",
            "Sum of the instance's kernel durations on the device.", offsetof(useries, kernel_ns),
            1);
    ufamily(&b, m, "sluice_kernels_total", "counter", "Kernels the instance launched.",
            offsetof(useries, kernels), 0);
    ufamily(&b, m, "sluice_bytes_htod_total", "counter", "Bytes copied host to device.",
            offsetof(useries, htod), 0);
    ufamily(&b, m, "sluice_bytes_dtoh_total", "counter", "Bytes copied device to host.",
            offsetof(useries, dtoh), 0);
    ufamily(&b, m, "sluice_memory_high_water_bytes", "gauge",
            "Largest device memory a session of the instance held (over all its records).",
            offsetof(useries, mem_hw), 0);
    ufamily(&b, m, "sluice_throttled_seconds_total", "counter",
            "Time the instance's work was held back by its GPU-share cap.",
            offsetof(useries, throttled_ns), 1);
    ufamily(&b, m, "sluice_quota_refusals_total", "counter",
            "Device allocations refused by the memory quota.", offsetof(useries, refusals), 0);
    ufamily(&b, m, "sluice_usage_records_total", "counter", "Usage records stored.",
            offsetof(useries, records), 0);
    family(&b, "sluice_sessions_open", "gauge", "Open CUDA sessions of the instance.");
    for (size_t k = 0; k < m->ns; k++) {
        out(&b, "sluice_sessions_open");
        slabels(&b, &m->s[k]);
        out(&b, " %lld\n", (long long)m->s[k].open);
    }
    family(&b, "sluice_sessions_opened_total", "counter",
           "Sessions opened since the agent started.");
    for (size_t k = 0; k < m->ns; k++) {
        out(&b, "sluice_sessions_opened_total");
        slabels(&b, &m->s[k]);
        out(&b, " %llu\n", (unsigned long long)m->s[k].opened);
    }
    family(&b, "sluice_sessions_refused_total", "counter",
           "Sessions refused (for example over max_sessions) since the agent started.");
    for (size_t k = 0; k < m->ns; k++) {
        out(&b, "sluice_sessions_refused_total");
        slabels(&b, &m->s[k]);
        out(&b, " %llu\n", (unsigned long long)m->s[k].refused);
    }
    gauge(&b, "sluice_agent_libvirt_connected", "1 when the agent's libvirt connection is up.",
          m->libvirt, "gauge");
    gauge(&b, "sluice_agent_backends_running",
          "Tenant backends running and connected to the agent.", m->backends, "gauge");
    gauge(&b, "sluice_agent_last_forward_timestamp_seconds",
          "Unix time of the last usage push the registry acknowledged (0: none yet).",
          (long long)m->last_forward, "gauge");
    gauge(&b, "sluice_agent_usage_records_pending_forward",
          "Stored usage records the registry has not acknowledged yet.", (long long)m->pending,
          "gauge");
    gauge(&b, "sluice_agent_usage_records_rejected_total",
          "Malformed usage records refused (not stored, not acknowledged).", (long long)m->rejected,
          "counter");
    gauge(&b, "sluice_agent_usage_store_errors_total",
          "Usage store commits that failed (the records were not acknowledged).",
          (long long)m->store_failed, "counter");
    pthread_mutex_unlock(&m->mu);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
