/* JSON in the shape of Nova's os-simple-tenant-usage, written with jansson:
 *   every project (GET /os-simple-tenant-usage?detailed=1):
 *     {"tenant_usages": [{"tenant_id", "start", "stop", "total_hours", "total_local_gb_usage",
 *      "total_memory_mb_usage", "total_vcpus_usage", "server_usages": [{"instance_id", "name",
 *      "flavor", "hours", "local_gb", "memory_mb", "vcpus", "tenant_id", "started_at",
 *      "ended_at", "state", "uptime"}]}]}
 *   one project (--project; GET /os-simple-tenant-usage/{tenant_id}?detailed=1):
 *     {"tenant_usage": {...one of the above...}}, {"tenant_usage": {}} when it has no usage.
 * Each object is extended with Sluice's GPU figures. Nova's own fields about disk, memory and
 * vCPUs are 0: Sluice does not account them. Where Sluice differs from Nova: docs/usage.md. */
#include <jansson.h>
#include <math.h>

#include "internal.h"
#include "sluice/log.h"

#define REAL_DIGITS 10 /* significant digits: short GPU use never rounds to 0 */

/* A string as JSON; bytes that are not UTF-8 are written escaped as text (\xNN). */
static json_t *jstr(const char *s)
{
    json_t *j = json_string(s ? s : "");
    if (j)
        return j;
    char esc[1024];
    return json_string(sl_log_escape(s, esc, sizeof esc));
}

static json_t *jtime(int64_t ns)
{
    if (!ns)
        return json_null();
    char b[40];
    sl_usage_format_time(ns, 1, b, sizeof b);
    return json_string(b);
}

static json_t *jreal(double v)
{
    return json_real(isfinite(v) ? v : 0.0);
}

static json_t *jint(uint64_t v)
{
    return json_integer((json_int_t)(v > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : v));
}

/* Sets o[k] = v, counting a failure (NULL v or no memory) in *bad. */
static void set(json_t *o, const char *k, json_t *v, int *bad)
{
    if (!v || json_object_set_new(o, k, v) != 0)
        *bad = 1;
}

/* The Sluice figures, in server and (prefixed "total_") tenant objects. */
/* shared: the view has shared GPU time (gpu_shared_hours). */
static void figures(json_t *o, const sl_usage_server *s, const char *pre, int shared, int *bad)
{
    char k[64];
#define K(name) (snprintf(k, sizeof k, "%s%s", pre, name), k)
    set(o, K("gpu_hours"), jreal(s->busy_s / 3600.0), bad);
    if (shared)
        set(o, K("gpu_shared_hours"), jreal(s->shared_s / 3600.0), bad);
    set(o, K("kernel_hours"), jreal(s->kernel_s / 3600.0), bad);
    set(o, K("kernels"), jint(s->kernels), bad);
    set(o, K("bytes_htod"), jint(s->bytes_htod), bad);
    set(o, K("bytes_dtoh"), jint(s->bytes_dtoh), bad);
    set(o, K("calls"), jint(s->calls), bad);
    set(o, K("errors"), jint(s->errors), bad);
    set(o, K("entitled_gpu_hours"), jreal(s->entitled_s / 3600.0), bad);
    set(o, K("throttled_hours"), jreal(s->throttled_s / 3600.0), bad);
    set(o, K("quota_refusals"), jint(s->quota_refusals), bad);
    set(o, K("records"), jint(s->records), bad);
    set(o, K("closed_by_agent"), jint(s->closed_by_agent), bad);
#undef K
    set(o, "memory_high_water_bytes", jint(s->memory_high_water), bad);
    double p = sl_usage_sla_percent(s);
    set(o, "sla_use_percent", p < 0 ? json_null() : jreal(round(p * 100.0) / 100.0), bad);
}

/* Nova's vm_state words: an instance whose end is known is "terminated" (with ended_at), as
 * in Nova; one Sluice saw no lifetime of ("observed") ends with its last record. */
static const char *nova_state(const sl_usage_server *s)
{
    return s->ended_ns ? "terminated" : "active";
}

static json_t *server(const char *project, const sl_usage_server *s, int64_t to_ns, int shared,
                      int *bad)
{
    json_t *o = json_object();
    if (!o) {
        *bad = 1;
        return NULL;
    }
    set(o, "instance_id", jstr(s->instance), bad);
    set(o, "name", jstr(s->name), bad);
    set(o, "flavor", jstr(s->flavor), bad);
    set(o, "hours", jreal(s->wall_s / 3600.0), bad);
    set(o, "local_gb", json_integer(0), bad);
    set(o, "memory_mb", json_integer(0), bad);
    set(o, "vcpus", json_integer(0), bad);
    set(o, "tenant_id", jstr(project), bad);
    set(o, "started_at", jtime(s->started_ns), bad);
    set(o, "ended_at", jtime(s->ended_ns), bad);
    set(o, "state", json_string(nova_state(s)), bad);
    int64_t end = s->ended_ns ? s->ended_ns : to_ns;
    set(o, "uptime",
        json_integer(end > s->started_ns ? (json_int_t)((end - s->started_ns) / SL_USAGE_NS_PER_S)
                                         : 0),
        bad);
    set(o, "domain", jstr(s->domain), bad);
    set(o, "sla_tier", jstr(s->tier), bad);
    set(o, "gpu_share", jreal(s->gpu_share), bad);
    set(o, "existence", json_string(s->observed ? "observed" : "lifetime"), bad);
    figures(o, s, "", shared, bad);
    return o;
}

static json_t *tenant(const sl_usage_view *v, const sl_usage_tenant *t, int *bad)
{
    json_t *o = json_object(), *servers = json_array();
    if (!o || !servers) {
        json_decref(o);
        json_decref(servers);
        *bad = 1;
        return NULL;
    }
    set(o, "tenant_id", jstr(t->project), bad);
    set(o, "start", jtime(v->from_ns), bad);
    set(o, "stop", jtime(v->to_ns), bad);
    set(o, "total_hours", jreal(t->total.wall_s / 3600.0), bad);
    set(o, "total_local_gb_usage", jreal(0), bad);
    set(o, "total_memory_mb_usage", jreal(0), bad);
    set(o, "total_vcpus_usage", jreal(0), bad);
    figures(o, &t->total, "total_", v->shared, bad);
    for (size_t k = 0; k < t->n_servers; k++) {
        json_t *s = server(t->project, &t->servers[k], v->to_ns, v->shared, bad);
        if (!s || json_array_append_new(servers, s) != 0)
            *bad = 1;
    }
    set(o, "server_usages", servers, bad);
    return o;
}

sl_code sl_usage_render_json(const sl_usage_view *v, FILE *f)
{
    int bad = 0;
    json_t *root = json_object();
    if (!root)
        return SL_ERR_NOMEM;
    if (v->project) {
        json_t *t = v->n_tenants ? tenant(v, &v->tenants[0], &bad) : json_object();
        set(root, "tenant_usage", t, &bad);
    } else {
        json_t *all = json_array();
        for (size_t i = 0; all && i < v->n_tenants; i++) {
            json_t *t = tenant(v, &v->tenants[i], &bad);
            if (!t || json_array_append_new(all, t) != 0)
                bad = 1;
        }
        set(root, "tenant_usages", all, &bad);
    }
    int rc = bad ? -1 : json_dumpf(root, f, JSON_INDENT(2) | JSON_REAL_PRECISION(REAL_DIGITS));
    json_decref(root);
    if (bad)
        return SL_ERR_NOMEM;
    if (rc != 0 || fputc('\n', f) == EOF)
        return SL_ERR_IO;
    return SL_OK;
}
