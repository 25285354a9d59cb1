/* Flavor policy resolution. */
#include "policy.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ag_parse_share(const char *v, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (!*v || *end || errno || !(d > 0.0 && d <= 1.0))
        return -1;
    *out = d;
    return 0;
}

int ag_parse_size(const char *v, uint64_t *out)
{
    char *end;
    if (!isdigit((unsigned char)*v))
        return -1;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case '\0':
        break;
    case 'K':
    case 'k':
        shift = 10;
        break;
    case 'M':
    case 'm':
        shift = 20;
        break;
    case 'G':
    case 'g':
        shift = 30;
        break;
    case 'T':
    case 't':
        shift = 40;
        break;
    default:
        return -1;
    }
    if (*end && end[1] && strcmp(end + 1, "i") && strcmp(end + 1, "iB") && strcmp(end + 1, "B"))
        return -1;
    if (shift && n > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)n << shift;
    return 0;
}

/* GPU uuids as nvidia-smi prints them: "GPU-" then hex and dashes. */
int ag_parse_gpus(const char *v, char *out, size_t cap)
{
    if (!strcmp(v, "all")) {
        snprintf(out, cap, "all");
        return 0;
    }
    if (!*v || strlen(v) >= cap)
        return -1;
    for (const char *p = v; *p;) {
        size_t n = strcspn(p, ",");
        if (n < 5 || strncmp(p, "GPU-", 4))
            return -1;
        for (size_t i = 4; i < n; i++)
            if (!isxdigit((unsigned char)p[i]) && p[i] != '-')
                return -1;
        p += n;
        if (*p == ',' && !*++p)
            return -1;
    }
    memcpy(out, v, strlen(v) + 1);
    return 0;
}

static const ag_policy_entry *find(const ag_policy_entry *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i].name, name))
            return &v[i];
    return NULL;
}

static void defaults(ag_sla *s, const char *tier)
{
    memset(s, 0, sizeof *s);
    snprintf(s->tier, sizeof s->tier, "%s", tier);
    s->gpu_share = 1.0;
    snprintf(s->gpus, sizeof s->gpus, "all");
}

/* Starts from a tier's SLA (or the built-in defaults), then applies what e itself set. */
static void overlay(ag_sla *s, const ag_policy_entry *e)
{
    if (e->set & AG_SET_SHARE)
        s->gpu_share = e->sla.gpu_share;
    if (e->set & AG_SET_QUOTA)
        s->memory_quota = e->sla.memory_quota;
    if (e->set & AG_SET_SESSIONS)
        s->max_sessions = e->sla.max_sessions;
    if (e->set & AG_SET_GPUS)
        memcpy(s->gpus, e->sla.gpus, sizeof s->gpus);
}

static void from_tier(const ag_policy *p, const char *tier, ag_sla *s)
{
    defaults(s, tier);
    const ag_policy_entry *t = find(p->tiers, p->n_tiers, tier);
    if (t)
        overlay(s, t);
}

static const char *spec(const ag_extra_spec *specs, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(specs[i].key, key))
            return specs[i].value;
    return NULL;
}

static int marked(const ag_extra_spec *specs, size_t n)
{
    const char *slot = spec(specs, n, "resources:CUSTOM_GPU_REMOTE_SLOT");
    if (slot && atoi(slot) >= 1)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (!strncmp(specs[i].key, "sluice:", 7))
            return 1;
    return 0;
}

int ag_policy_resolve(const ag_policy *p, const char *flavor, const ag_extra_spec *specs,
                      size_t n_specs, ag_sla *sla)
{
    const ag_policy_entry *f = find(p->flavors, p->n_flavors, flavor);
    if (f) {
        from_tier(p, f->tier[0] ? f->tier : "default", sla);
        overlay(sla, f);
        return 1;
    }
    if (!specs || !marked(specs, n_specs))
        return 0;
    const char *tier = spec(specs, n_specs, "sluice:sla");
    char t[32];
    snprintf(t, sizeof t, "%s", tier && *tier && strlen(tier) < sizeof t ? tier : "default");
    from_tier(p, t, sla);
    const char *v;
    double share;
    uint64_t quota;
    if ((v = spec(specs, n_specs, "sluice:gpu_share")) && !ag_parse_share(v, &share))
        sla->gpu_share = share;
    if ((v = spec(specs, n_specs, "sluice:memory_quota")) && !ag_parse_size(v, &quota))
        sla->memory_quota = quota;
    if ((v = spec(specs, n_specs, "sluice:max_sessions"))) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*v && !*end && n >= 0 && n <= 1024)
            sla->max_sessions = (uint32_t)n;
    }
    return 1;
}
