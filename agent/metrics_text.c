/* The text exposition format 0.0.4 of the agent's series (metrics.h, docs/usage.md). */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

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

static void slabels(buf *b, const char *project, const char *instance, const char *domain)
{
    out(b, "{");
    label(b, "project_id", project, 1);
    label(b, "instance_id", instance, 0);
    label(b, "domain", domain, 0);
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

static void usage_families(buf *b, const ag_metrics *m)
{
    ufamily(b, m, "sluice_gpu_busy_seconds_total", "counter",
            "GPU time the instance's work occupied the device (overlapping work counted once), "
            "raw: including time the GPU gave to other sessions.",
            offsetof(useries, busy_ns), 1);
    ufamily(b, m, "sluice_gpu_shared_seconds_total", "counter",
            "The instance's part of the GPU's busy time: time several sessions were busy on the "
            "GPU shared equally among them (apportioned once settled).",
            offsetof(useries, shared_ns), 1);
    ufamily(b, m, "sluice_kernel_seconds_total", "counter",
            "Sum of the instance's kernel durations on the device.", offsetof(useries, kernel_ns),
            1);
    ufamily(b, m, "sluice_kernels_total", "counter", "Kernels the instance launched.",
            offsetof(useries, kernels), 0);
    ufamily(b, m, "sluice_htod_bytes_total", "counter", "Bytes copied host to device.",
            offsetof(useries, htod), 0);
    ufamily(b, m, "sluice_dtoh_bytes_total", "counter", "Bytes copied device to host.",
            offsetof(useries, dtoh), 0);
    ufamily(b, m, "sluice_memory_high_water_bytes", "gauge",
            "Largest device memory a session of the instance held (over all its records).",
            offsetof(useries, mem_hw), 0);
    ufamily(b, m, "sluice_memory_interval_high_water_bytes", "gauge",
            "Largest device memory a session of the instance held in its latest usage interval "
            "(0 until a record arrived since the agent started).",
            offsetof(useries, mem_last), 0);
    ufamily(b, m, "sluice_throttled_seconds_total", "counter",
            "Time the instance's work was held back by its GPU-share cap.",
            offsetof(useries, throttled_ns), 1);
    ufamily(b, m, "sluice_quota_refusals_total", "counter",
            "Device allocations refused by the memory quota.", offsetof(useries, refusals), 0);
    ufamily(b, m, "sluice_usage_records_total", "counter", "Usage records stored.",
            offsetof(useries, records), 0);
}

static void session_families(buf *b, const ag_metrics *m)
{
    family(b, "sluice_sessions_open", "gauge", "Open CUDA sessions of the instance.");
    for (size_t k = 0; k < m->ns; k++)
        if (m->s[k].instance[0]) {
            out(b, "sluice_sessions_open");
            slabels(b, m->s[k].project, m->s[k].instance, m->s[k].domain);
            out(b, "} %lld\n", (long long)m->s[k].open);
        }
    family(b, "sluice_sessions_opened_total", "counter",
           "Sessions opened since the agent started.");
    for (size_t k = 0; k < m->ns; k++)
        if (m->s[k].instance[0]) {
            out(b, "sluice_sessions_opened_total");
            slabels(b, m->s[k].project, m->s[k].instance, m->s[k].domain);
            out(b, "} %llu\n", (unsigned long long)m->s[k].opened);
        }
    family(b, "sluice_sessions_refused_total", "counter",
           "Sessions refused since the agent started, by reason: certificate (the TLS handshake "
           "failed; instance_id empty), grant (no grant for the certificate, or revoked), limit "
           "(a session limit).");
    for (size_t k = 0; k < m->ns; k++)
        for (int r = 0; r < AG_REFUSE_N; r++)
            if (m->s[k].refused[r]) {
                out(b, "sluice_sessions_refused_total");
                slabels(b, m->s[k].project, m->s[k].instance, m->s[k].domain);
                label(b, "reason", ag_refuse_names[r], 0);
                out(b, "} %llu\n", (unsigned long long)m->s[k].refused[r]);
            }
    family(b, "sluice_session_workers_killed_total", "counter",
           "Session worker processes the backend killed because they did not end within the "
           "grace period after their session closed (their last work may not be accounted).");
    for (size_t k = 0; k < m->ns; k++)
        if (m->s[k].instance[0]) {
            out(b, "sluice_session_workers_killed_total");
            slabels(b, m->s[k].project, m->s[k].instance, m->s[k].domain);
            out(b, "} %llu\n", (unsigned long long)m->s[k].killed);
        }
}

static void sla_families(buf *b, const ag_metrics *m)
{
    family(b, "sluice_sla_gpu_share", "gauge",
           "The GPU share the running instance's SLA entitles it to (1 = a whole GPU).");
    for (size_t k = 0; k < m->ni; k++) {
        out(b, "sluice_sla_gpu_share");
        slabels(b, m->i[k].project, m->i[k].instance, m->i[k].domain);
        label(b, "flavor", m->i[k].flavor, 0);
        label(b, "sla_tier", m->i[k].tier, 0);
        out(b, "} %g\n", m->i[k].share);
    }
    family(b, "sluice_sla_memory_quota_bytes", "gauge",
           "The device memory quota of the running instance's SLA (0 = none).");
    for (size_t k = 0; k < m->ni; k++) {
        out(b, "sluice_sla_memory_quota_bytes");
        slabels(b, m->i[k].project, m->i[k].instance, m->i[k].domain);
        out(b, "} %llu\n", (unsigned long long)m->i[k].quota);
    }
}

static void kfamily(buf *b, const char *name, const char *help, const char *lname, const kseries *v,
                    size_t n)
{
    family(b, name, "counter", help);
    for (size_t k = 0; k < n; k++) {
        out(b, "%s{", name);
        label(b, lname, v[k].label, 1);
        out(b, "} %llu\n", (unsigned long long)v[k].n);
    }
}

static void agent_families(buf *b, const ag_metrics *m)
{
    family(b, "sluice_agent_build_info", "gauge", "The agent's release, as a label; always 1.");
    out(b, "sluice_agent_build_info{");
    label(b, "version", m->version, 1);
    out(b, "} 1\n");
    kfamily(b, "sluice_agent_enrollments_total",
            "Enrollments answered since the agent started, by result (OK, or the refusal: "
            "BAD_TOKEN, REPLAYED, UNKNOWN_DOMAIN, WRONG_PROJECT, NOT_GPU_FLAVOR, WRONG_SOURCE, "
            "RATE_LIMITED, BAD_CSR, INTERNAL).",
            "result", m->enroll, m->nenroll);
    kfamily(b, "sluice_agent_backend_restarts_total",
            "Backends that died and were started again, since the agent started.", "project_id",
            m->restarts, m->nrestarts);
    gauge(b, "sluice_agent_libvirt_connected", "1 when the agent's libvirt connection is up.",
          m->libvirt, "gauge");
    gauge(b, "sluice_agent_backends_running", "Tenant backends running and connected to the agent.",
          m->backends, "gauge");
    gauge(b, "sluice_agent_last_forward_timestamp_seconds",
          "Unix time of the last usage push the registry acknowledged (0: none yet).",
          (long long)m->last_forward, "gauge");
    gauge(b, "sluice_agent_usage_records_pending_forward",
          "Stored usage records the registry has not acknowledged yet.", (long long)m->pending,
          "gauge");
    gauge(b, "sluice_agent_usage_records_rejected_total",
          "Malformed usage records refused (not stored, not acknowledged).", (long long)m->rejected,
          "counter");
    gauge(b, "sluice_agent_usage_store_errors_total",
          "Usage store commits that failed (the records were not acknowledged).",
          (long long)m->store_failed, "counter");
}

char *ag_metrics_render(ag_metrics *m, size_t *len)
{
    buf b = {malloc(8192), 0, 8192, 0};
    if (!b.p)
        return NULL;
    b.p[0] = '\0';
    pthread_mutex_lock(&m->mu);
    usage_families(&b, m);
    session_families(&b, m);
    sla_families(&b, m);
    agent_families(&b, m);
    pthread_mutex_unlock(&m->mu);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
