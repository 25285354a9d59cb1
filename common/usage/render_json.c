/* JSON in the shape of Nova's os-simple-tenant-usage (GET /os-simple-tenant-usage?detailed=1):
 * {"tenant_usages": [{"tenant_id", "start", "stop", "total_hours", "total_local_gb_usage",
 * "total_memory_mb_usage", "total_vcpus_usage", "server_usages": [{"instance_id", "name",
 * "flavor", "hours", "local_gb", "memory_mb", "vcpus", "tenant_id", "started_at", "ended_at",
 * "state", "uptime"}]}]}, each object extended with Sluice's GPU figures. Nova's own fields
 * about disk, memory and vCPUs are 0: Sluice does not account them. */
#include <math.h>

#include "internal.h"

static void str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p == '\r')
            fputs("\\r", f);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void key(FILE *f, const char *ind, const char *k, int *first)
{
    fprintf(f, "%s\n%s", *first ? "" : ",", ind);
    *first = 0;
    str(f, k);
    fputs(": ", f);
}

static void kstr(FILE *f, const char *ind, const char *k, const char *v, int *first)
{
    key(f, ind, k, first);
    str(f, v);
}

static void knum(FILE *f, const char *ind, const char *k, double v, int *first)
{
    key(f, ind, k, first);
    fprintf(f, "%.6f", isfinite(v) ? v : 0.0);
}

static void kint(FILE *f, const char *ind, const char *k, uint64_t v, int *first)
{
    key(f, ind, k, first);
    fprintf(f, "%llu", (unsigned long long)v);
}

static void ktime(FILE *f, const char *ind, const char *k, int64_t ns, int *first)
{
    char b[40];
    key(f, ind, k, first);
    if (!ns) {
        fputs("null", f);
        return;
    }
    sl_usage_format_time(ns, 1, b, sizeof b);
    str(f, b);
}

/* The Sluice figures, in server and (prefixed "total_") tenant objects. */
static void figures(FILE *f, const char *ind, const sl_usage_server *s, const char *pre, int *first)
{
    char k[64];
#define K(name) (snprintf(k, sizeof k, "%s%s", pre, name), k)
    knum(f, ind, K("gpu_hours"), s->busy_s / 3600.0, first);
    knum(f, ind, K("kernel_hours"), s->kernel_s / 3600.0, first);
    kint(f, ind, K("kernels"), s->kernels, first);
    kint(f, ind, K("bytes_htod"), s->bytes_htod, first);
    kint(f, ind, K("bytes_dtoh"), s->bytes_dtoh, first);
    kint(f, ind, K("calls"), s->calls, first);
    kint(f, ind, K("errors"), s->errors, first);
    knum(f, ind, K("entitled_gpu_hours"), s->entitled_s / 3600.0, first);
    knum(f, ind, K("throttled_hours"), s->throttled_s / 3600.0, first);
    kint(f, ind, K("quota_refusals"), s->quota_refusals, first);
    kint(f, ind, K("records"), s->records, first);
    kint(f, ind, K("closed_by_agent"), s->closed_by_agent, first);
#undef K
    kint(f, ind, "memory_high_water_bytes", s->memory_high_water, first);
    double p = sl_usage_sla_percent(s);
    key(f, ind, "sla_use_percent", first);
    if (p < 0)
        fputs("null", f);
    else
        fprintf(f, "%.2f", p);
}

static void server(FILE *f, const char *project, const sl_usage_server *s, int64_t to_ns)
{
    const char *ind = "          ";
    int first = 1;
    fputs("        {", f);
    kstr(f, ind, "instance_id", s->instance, &first);
    kstr(f, ind, "name", s->name, &first);
    kstr(f, ind, "flavor", s->flavor, &first);
    knum(f, ind, "hours", s->wall_s / 3600.0, &first);
    kint(f, ind, "local_gb", 0, &first);
    kint(f, ind, "memory_mb", 0, &first);
    kint(f, ind, "vcpus", 0, &first);
    kstr(f, ind, "tenant_id", project, &first);
    ktime(f, ind, "started_at", s->started_ns, &first);
    ktime(f, ind, "ended_at", s->ended_ns, &first);
    kstr(f, ind, "state", s->state, &first);
    int64_t end = s->ended_ns ? s->ended_ns : to_ns;
    kint(f, ind, "uptime",
         end > s->started_ns ? (uint64_t)((end - s->started_ns) / SL_USAGE_NS_PER_S) : 0, &first);
    kstr(f, ind, "domain", s->domain, &first);
    kstr(f, ind, "sla_tier", s->tier, &first);
    knum(f, ind, "gpu_share", s->gpu_share, &first);
    key(f, ind, "existence", &first);
    str(f, s->observed ? "observed" : "lifetime");
    figures(f, ind, s, "", &first);
    fputs("\n        }", f);
}

sl_code sl_usage_render_json(const sl_usage_view *v, FILE *f)
{
    fputs("{\n  \"tenant_usages\": [", f);
    const char *ind = "      ";
    for (size_t i = 0; i < v->n_tenants; i++) {
        const sl_usage_tenant *t = &v->tenants[i];
        int first = 1;
        fprintf(f, "%s\n    {", i ? "," : "");
        kstr(f, ind, "tenant_id", t->project, &first);
        ktime(f, ind, "start", v->from_ns, &first);
        ktime(f, ind, "stop", v->to_ns, &first);
        knum(f, ind, "total_hours", t->total.wall_s / 3600.0, &first);
        knum(f, ind, "total_local_gb_usage", 0, &first);
        knum(f, ind, "total_memory_mb_usage", 0, &first);
        knum(f, ind, "total_vcpus_usage", 0, &first);
        figures(f, ind, &t->total, "total_", &first);
        key(f, ind, "server_usages", &first);
        fputc('[', f);
        for (size_t k = 0; k < t->n_servers; k++) {
            fputs(k ? ",\n" : "\n", f);
            server(f, t->project, &t->servers[k], v->to_ns);
        }
        fputs(t->n_servers ? "\n      ]\n    }" : "]\n    }", f);
    }
    fputs(v->n_tenants ? "\n  ]\n}\n" : "]\n}\n", f);
    return SL_OK;
}
