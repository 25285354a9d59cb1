/* CSV (RFC 4180): one row per project total and per instance, raw numbers; every row names the
 * period it covers, so rows of several reports can be put together. Hours are written with 10
 * significant digits: a few milliseconds of GPU time do not round to 0. */
#include <string.h>

#include "internal.h"

static void field(FILE *f, const char *s, int last)
{
    if (strpbrk(s, ",\"\r\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputs(last ? "\r\n" : ",", f);
}

static void row(FILE *f, const sl_usage_view *v, const char *level, const char *project,
                const sl_usage_server *s, int total)
{
    char b[64], start[40] = "", end[40] = "";
    field(f, level, 0);
    sl_usage_format_time(v->from_ns, 0, b, sizeof b);
    field(f, b, 0);
    sl_usage_format_time(v->to_ns, 0, b, sizeof b);
    field(f, b, 0);
    field(f, project, 0);
    field(f, total ? "" : s->instance, 0);
    field(f, total ? "" : s->name, 0);
    field(f, total ? "" : s->flavor, 0);
    field(f, total ? "" : s->tier, 0);
    field(f, total ? "" : s->domain, 0);
    if (total || !(s->gpu_share > 0))
        b[0] = '\0';
    else
        snprintf(b, sizeof b, "%g", s->gpu_share);
    field(f, b, 0);
    if (!total) {
        sl_usage_format_time(s->started_ns, 0, start, sizeof start);
        if (s->ended_ns)
            sl_usage_format_time(s->ended_ns, 0, end, sizeof end);
    }
    field(f, start, 0);
    field(f, end, 0);
    field(f, s->state, 0);
    const double h[] = {s->wall_s, s->busy_s, s->kernel_s};
    for (int i = 0; i < 3; i++) {
        snprintf(b, sizeof b, "%.10g", h[i] / 3600.0);
        field(f, b, 0);
    }
    const uint64_t n[] = {s->kernels,           s->bytes_htod, s->bytes_dtoh,
                          s->memory_high_water, s->calls,      s->errors};
    for (int i = 0; i < 6; i++) {
        snprintf(b, sizeof b, "%llu", (unsigned long long)n[i]);
        field(f, b, 0);
    }
    snprintf(b, sizeof b, "%.10g", s->entitled_s / 3600.0);
    field(f, b, 0);
    double p = sl_usage_sla_percent(s);
    if (p < 0)
        b[0] = '\0';
    else
        snprintf(b, sizeof b, "%.2f", p);
    field(f, b, 0);
    snprintf(b, sizeof b, "%.10g", s->throttled_s / 3600.0);
    field(f, b, 0);
    snprintf(b, sizeof b, "%llu", (unsigned long long)s->quota_refusals);
    field(f, b, 0);
    snprintf(b, sizeof b, "%llu", (unsigned long long)s->records);
    field(f, b, 0);
    snprintf(b, sizeof b, "%llu", (unsigned long long)s->closed_by_agent);
    field(f, b, !v->shared);
    if (v->shared) {
        snprintf(b, sizeof b, "%.10g", s->shared_s / 3600.0);
        field(f, b, 1);
    }
}

sl_code sl_usage_render_csv(const sl_usage_view *v, FILE *f)
{
    fputs("level,period_start,period_end,project_id,instance_id,name,flavor,sla_tier,domain,gpu_"
          "share,started_at,"
          "ended_at,state,hours,gpu_hours,kernel_hours,kernels,bytes_htod,bytes_dtoh,"
          "memory_high_water_bytes,calls,errors,entitled_gpu_hours,sla_use_percent,"
          "throttled_hours,quota_refusals,records,closed_by_agent",
          f);
    fputs(v->shared ? ",gpu_shared_hours\r\n" : "\r\n", f);
    for (size_t i = 0; i < v->n_tenants; i++) {
        const sl_usage_tenant *t = &v->tenants[i];
        row(f, v, "project", t->project, &t->total, 1);
        for (size_t k = 0; k < t->n_servers; k++)
            row(f, v, "instance", t->project, &t->servers[k], 0);
    }
    return SL_OK;
}
