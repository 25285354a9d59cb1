/* Usage record checks. */
#include "usage_record.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int ag_usage_is_uuid(const char *s)
{
    if (!s || strlen(s) != 36)
        return 0;
    for (int i = 0; i < 36; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !hex(s[i]))
            return 0;
    }
    return 1;
}

int ag_usage_is_project(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!hex(s[i]) && s[i] != '-')
            return 0;
    return 1;
}

/* NULL or printable ASCII of at most max bytes. */
static int printable(const char *s, size_t max)
{
    if (!s)
        return 1;
    size_t n = strlen(s);
    if (n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

static int bad(char *why, size_t n, const char *fmt, const char *field)
{
    snprintf(why, n, fmt, field);
    return -1;
}

int ag_usage_record_check(const Sluice__Control__UsageRecord *r, const char *project,
                          int64_t now_ns, char *why, size_t n)
{
    if (!ag_usage_is_uuid(r->record_id))
        return bad(why, n, "%s: not a UUID", "record_id");
    if (!ag_usage_is_uuid(r->instance_uuid))
        return bad(why, n, "%s: not a UUID", "instance_uuid");
    if (!ag_usage_is_project(r->project_id))
        return bad(why, n, "%s: not a project id (1..64 hex digits and '-')", "project_id");
    if (project && strcmp(project, r->project_id))
        return bad(why, n, "%s: not the project of the backend that sent it", "project_id");
    if (r->closed_by_agent)
        return bad(why, n, "%s: only the agent writes it", "closed_by_agent");
    const struct {
        const char *name, *v;
        size_t max;
    } strs[] = {{"flavor", r->flavor, 255},           {"gpu_uuid", r->gpu_uuid, 64},
                {"measurement", r->measurement, 16},  {"instance_name", r->instance_name, 255},
                {"domain_name", r->domain_name, 255}, {"sla_tier", r->sla_tier, 32}};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
        if (!printable(strs[i].v, strs[i].max))
            return bad(why, n, "%s: not printable ASCII or too long", strs[i].name);
    int64_t a = r->interval_start_ns, b = r->interval_end_ns;
    if (a < AG_USAGE_MIN_START_NS)
        return bad(why, n, "%s: before 2020 (a broken clock?)", "interval_start_ns");
    if (b < a)
        return bad(why, n, "%s: before interval_start_ns", "interval_end_ns");
    if (b - a > (int64_t)AG_USAGE_MAX_INTERVAL_S * 1000000000LL)
        return bad(why, n, "%s: the interval is longer than a day", "interval_end_ns");
    if (b > now_ns + (int64_t)AG_USAGE_MAX_SKEW_S * 1000000000LL)
        return bad(why, n, "%s: more than 10 minutes in the future", "interval_end_ns");
    uint64_t len = (uint64_t)(b - a), slack = len / 100 + 1000000000ULL;
    if (r->gpu_busy_ns > len + slack)
        return bad(why, n, "%s: longer than the interval", "gpu_busy_ns");
    if (r->throttled_ns > len + slack)
        return bad(why, n, "%s: longer than the interval", "throttled_ns");
    if (r->kernel_ns > len * AG_USAGE_MAX_CONCURRENT + slack)
        return bad(why, n, "%s: implausibly long for the interval", "kernel_ns");
    const struct {
        const char *name;
        uint64_t v, max;
    } nums[] = {{"kernels", r->kernels, AG_USAGE_MAX_COUNT},
                {"calls", r->calls, AG_USAGE_MAX_COUNT},
                {"errors", r->errors, AG_USAGE_MAX_COUNT},
                {"bytes_htod", r->bytes_htod, AG_USAGE_MAX_BYTES},
                {"bytes_dtoh", r->bytes_dtoh, AG_USAGE_MAX_BYTES},
                {"memory_high_water", r->memory_high_water, AG_USAGE_MAX_BYTES}};
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++)
        if (nums[i].v > nums[i].max)
            return bad(why, n, "%s: implausibly large", nums[i].name);
    if (!isfinite(r->gpu_share) || r->gpu_share < 0 || r->gpu_share > 1)
        return bad(why, n, "%s: not within 0..1", "gpu_share");
    if (r->n_busy > AG_USAGE_MAX_BUSY)
        return bad(why, n, "%s: more than 256 intervals", "busy");
    int64_t prev = a;
    uint64_t sum = 0;
    for (size_t i = 0; i < r->n_busy; i++) {
        const Sluice__Control__BusyInterval *v = r->busy[i];
        if (!v || v->start_ns < prev || v->end_ns <= v->start_ns || v->end_ns > b)
            return bad(why, n,
                       "%s: not sorted, disjoint, non-empty intervals within the record's interval",
                       "busy");
        sum += (uint64_t)(v->end_ns - v->start_ns);
        prev = v->end_ns;
    }
    if (r->busy_widened_ns > sum || (r->n_busy && sum - r->busy_widened_ns != r->gpu_busy_ns))
        return bad(why, n, "%s: does not match gpu_busy_ns and busy", "busy_widened_ns");
    return 0;
}

void ag_usage_record_row(const Sluice__Control__UsageRecord *r, sl_usage_rec *o)
{
    memset(o, 0, sizeof *o);
    o->record_id = r->record_id;
    o->instance = r->instance_uuid;
    o->project = r->project_id;
    o->flavor = r->flavor;
    o->gpu_uuid = r->gpu_uuid;
    o->name = r->instance_name;
    o->domain = r->domain_name;
    o->tier = r->sla_tier;
    o->gpu_share = r->gpu_share;
    o->start_ns = r->interval_start_ns;
    o->end_ns = r->interval_end_ns;
    o->closed_by_agent = r->closed_by_agent;
    o->gpu_busy_ns = r->gpu_busy_ns;
    o->kernel_ns = r->kernel_ns;
    o->kernels = r->kernels;
    o->bytes_htod = r->bytes_htod;
    o->bytes_dtoh = r->bytes_dtoh;
    o->memory_high_water = r->memory_high_water;
    o->calls = r->calls;
    o->errors = r->errors;
    o->throttled_ns = r->throttled_ns;
    o->quota_refusals = r->quota_refusals;
}
