/* The report builder: records and lifetimes -> per project, per instance figures. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct span {
    int64_t a, b;
    int open;
} span;

/* A descriptive field and the time of the source it came from (the latest wins). */
typedef struct info {
    char *v;
    int64_t at;
} info;

enum { I_NAME, I_FLAVOR, I_TIER, I_DOMAIN, I_COUNT };

typedef struct acc {
    sl_usage_server s;
    char *project;
    info inf[I_COUNT];
    double share;
    int64_t share_at;
    span *lives;
    size_t n_lives, cap_lives;
    int64_t first_ns, last_ns; /* records' span */
    int have_rec;
    double bk[SL_USAGE_MAX_BUCKETS];
} acc;

struct sl_usage_report {
    int64_t from, to;
    char *only;
    acc **v;
    size_t n, cap;
    size_t *slot; /* index + 1, 0 = empty */
    size_t n_slot;
    sl_usage_tenant *tenants;
    size_t n_tenants;
    sl_usage_view view;
    int finished;
};

static char *dup0(const char *s)
{
    return strdup(s ? s : "");
}

static uint64_t hash(const char *p, const char *i)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
    for (; *i; i++)
        h = (h ^ (unsigned char)*i) * 1099511628211ULL;
    return h;
}

static int rehash(sl_usage_report *r)
{
    size_t n = r->n_slot ? r->n_slot * 2 : 64;
    size_t *s = calloc(n, sizeof *s);
    if (!s)
        return -1;
    for (size_t k = 0; k < r->n; k++) {
        size_t j = (size_t)hash(r->v[k]->project, r->v[k]->s.instance) & (n - 1);
        while (s[j])
            j = (j + 1) & (n - 1);
        s[j] = k + 1;
    }
    free(r->slot);
    r->slot = s;
    r->n_slot = n;
    return 0;
}

static acc *lookup(sl_usage_report *r, const char *project, const char *instance, sl_error *e)
{
    if (r->n_slot) {
        size_t j = (size_t)hash(project, instance) & (r->n_slot - 1);
        for (; r->slot[j]; j = (j + 1) & (r->n_slot - 1)) {
            acc *a = r->v[r->slot[j] - 1];
            if (!strcmp(a->s.instance, instance) && !strcmp(a->project, project))
                return a;
        }
    }
    if ((r->n + 1) * 2 > r->n_slot && rehash(r) != 0)
        goto oom;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 32;
        acc **nv = realloc(r->v, cap * sizeof *nv);
        if (!nv)
            goto oom;
        r->v = nv;
        r->cap = cap;
    }
    acc *a = calloc(1, sizeof *a);
    if (!a || !(a->project = dup0(project)) || !(a->s.instance = dup0(instance))) {
        if (a)
            free(a->project);
        free(a);
        goto oom;
    }
    r->v[r->n] = a;
    size_t j = (size_t)hash(project, instance) & (r->n_slot - 1);
    while (r->slot[j])
        j = (j + 1) & (r->n_slot - 1);
    r->slot[j] = ++r->n;
    return a;
oom:
    sl_fail(e, SL_ERR_NOMEM, "usage report: out of memory");
    return NULL;
}

static int set_info(info *f, const char *v, int64_t at)
{
    if (!v || !*v || (f->v && at < f->at))
        return 0;
    char *c = strdup(v);
    if (!c)
        return -1;
    free(f->v);
    f->v = c;
    f->at = at;
    return 0;
}

static int take_info(acc *a, const char *name, const char *flavor, const char *tier,
                     const char *domain, double share, int64_t at)
{
    if (share > 0 && (a->share <= 0 || at >= a->share_at)) {
        a->share = share;
        a->share_at = at;
    }
    return set_info(&a->inf[I_NAME], name, at) | set_info(&a->inf[I_FLAVOR], flavor, at) |
           set_info(&a->inf[I_TIER], tier, at) | set_info(&a->inf[I_DOMAIN], domain, at);
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

sl_code sl_usage_report_new(int64_t from_ns, int64_t to_ns, const char *project,
                            sl_usage_report **out, sl_error *e)
{
    if (to_ns <= from_ns)
        return sl_fail(e, SL_ERR_INVALID, "usage report: the period ends before it starts");
    sl_usage_report *r = calloc(1, sizeof *r);
    if (!r || (project && !(r->only = strdup(project)))) {
        free(r);
        return sl_fail(e, SL_ERR_NOMEM, "usage report: out of memory");
    }
    r->from = from_ns;
    r->to = to_ns;
    int64_t days = (to_ns - from_ns + SL_USAGE_DAY_NS - 1) / SL_USAGE_DAY_NS;
    int64_t per = (days + SL_USAGE_MAX_BUCKETS - 1) / SL_USAGE_MAX_BUCKETS;
    r->view.bucket_ns = per * SL_USAGE_DAY_NS;
    r->view.n_buckets = (size_t)((to_ns - from_ns + r->view.bucket_ns - 1) / r->view.bucket_ns);
    r->view.from_ns = from_ns;
    r->view.to_ns = to_ns;
    r->view.project = r->only;
    *out = r;
    return SL_OK;
}

void sl_usage_report_with_shared(sl_usage_report *r)
{
    r->view.shared = 1;
}

/* Part of ns (of an interval [a, b)) inside [lo, hi). */
static double part(uint64_t ns, int64_t a, int64_t b, int64_t lo, int64_t hi)
{
    if (b == a)
        return a >= lo && a < hi ? (double)ns : 0.0;
    return (double)ns * ((double)sl_usage_overlap(a, b, lo, hi) / (double)(b - a));
}

sl_code sl_usage_report_add(sl_usage_report *r, const sl_usage_rec *u, sl_error *e)
{
    if (r->finished)
        return sl_fail(e, SL_ERR_INVALID, "usage report: already finished");
    if (!u->instance || !u->project || u->end_ns < u->start_ns)
        return sl_fail(e, SL_ERR_INVALID, "usage report: record %.64s is malformed",
                       u->record_id ? u->record_id : "?");
    if (r->only && strcmp(r->only, u->project))
        return SL_OK;
    int ends_in = u->end_ns >= r->from && u->end_ns < r->to;
    if (!ends_in && !sl_usage_overlap(u->start_ns, u->end_ns, r->from, r->to))
        return SL_OK;
    acc *a = lookup(r, u->project, u->instance, e);
    if (!a)
        return SL_ERR_NOMEM;
    if (take_info(a, u->name, u->flavor, u->tier, u->domain, u->gpu_share, u->end_ns))
        return sl_fail(e, SL_ERR_NOMEM, "usage report: out of memory");
    sl_usage_server *s = &a->s;
    s->busy_s += part(u->gpu_busy_ns, u->start_ns, u->end_ns, r->from, r->to) / 1e9;
    s->kernel_s += part(u->kernel_ns, u->start_ns, u->end_ns, r->from, r->to) / 1e9;
    s->shared_s += part(u->gpu_shared_ns, u->start_ns, u->end_ns, r->from, r->to) / 1e9;
    s->throttled_s += part(u->throttled_ns, u->start_ns, u->end_ns, r->from, r->to) / 1e9;
    for (size_t k = 0; k < r->view.n_buckets; k++) {
        int64_t lo = r->from + (int64_t)k * r->view.bucket_ns;
        int64_t hi = lo + r->view.bucket_ns < r->to ? lo + r->view.bucket_ns : r->to;
        if (u->end_ns >= lo && u->start_ns < hi)
            a->bk[k] += part(u->gpu_busy_ns, u->start_ns, u->end_ns, lo, hi) / 1e9;
    }
    if (u->memory_high_water > s->memory_high_water)
        s->memory_high_water = u->memory_high_water;
    if (ends_in) {
        s->kernels = sat_add(s->kernels, u->kernels);
        s->bytes_htod = sat_add(s->bytes_htod, u->bytes_htod);
        s->bytes_dtoh = sat_add(s->bytes_dtoh, u->bytes_dtoh);
        s->calls = sat_add(s->calls, u->calls);
        s->errors = sat_add(s->errors, u->errors);
        s->quota_refusals = sat_add(s->quota_refusals, u->quota_refusals);
        s->records++;
        s->closed_by_agent += u->closed_by_agent != 0;
    }
    if (!a->have_rec || u->start_ns < a->first_ns)
        a->first_ns = u->start_ns;
    if (!a->have_rec || u->end_ns > a->last_ns)
        a->last_ns = u->end_ns;
    a->have_rec = 1;
    return SL_OK;
}

sl_code sl_usage_report_add_life(sl_usage_report *r, const sl_usage_life *l, sl_error *e)
{
    if (r->finished)
        return sl_fail(e, SL_ERR_INVALID, "usage report: already finished");
    if (!l->instance || !l->project || l->end_ns < l->start_ns)
        return sl_fail(e, SL_ERR_INVALID, "usage report: a lifetime of %.64s is malformed",
                       l->instance ? l->instance : "?");
    if (r->only && strcmp(r->only, l->project))
        return SL_OK;
    if (!sl_usage_overlap(l->start_ns, l->end_ns, r->from, r->to) &&
        !(l->start_ns >= r->from && l->start_ns < r->to)) /* a zero-length one counts inside */
        return SL_OK;
    acc *a = lookup(r, l->project, l->instance, e);
    if (!a)
        return SL_ERR_NOMEM;
    if (take_info(a, l->name, l->flavor, l->tier, l->domain, l->gpu_share, l->end_ns))
        return sl_fail(e, SL_ERR_NOMEM, "usage report: out of memory");
    if (a->n_lives == a->cap_lives) {
        size_t cap = a->cap_lives ? a->cap_lives * 2 : 4;
        span *nv = realloc(a->lives, cap * sizeof *nv);
        if (!nv)
            return sl_fail(e, SL_ERR_NOMEM, "usage report: out of memory");
        a->lives = nv;
        a->cap_lives = cap;
    }
    a->lives[a->n_lives++] = (span){l->start_ns, l->end_ns, l->open != 0};
    return SL_OK;
}

static int by_start(const void *x, const void *y)
{
    const span *a = x, *b = y;
    return a->a < b->a ? -1 : a->a > b->a;
}

/* How long the instance existed inside [lo, hi): its lifetimes (sorted, overlaps counted once),
 * or without any the span of its records. */
static int64_t existed(const acc *a, int64_t lo, int64_t hi)
{
    if (!a->n_lives)
        return sl_usage_overlap(a->first_ns, a->last_ns, lo, hi);
    int64_t wall = 0, cur_a = a->lives[0].a, cur_b = a->lives[0].b;
    for (size_t i = 1; i < a->n_lives; i++) {
        const span *p = &a->lives[i];
        if (p->a > cur_b) {
            wall += sl_usage_overlap(cur_a, cur_b, lo, hi);
            cur_a = p->a;
            cur_b = p->b;
        } else if (p->b > cur_b) {
            cur_b = p->b;
        }
    }
    return wall + sl_usage_overlap(cur_a, cur_b, lo, hi);
}

/* Existence inside the period, start, end and state of one instance. */
static void existence(const sl_usage_report *r, acc *a)
{
    sl_usage_server *s = &a->s;
    if (!a->n_lives) {
        s->observed = 1;
        s->state = "unknown";
        s->started_ns = a->first_ns;
        s->ended_ns = a->last_ns;
        s->wall_s = (double)existed(a, r->from, r->to) / 1e9;
        return;
    }
    qsort(a->lives, a->n_lives, sizeof *a->lives, by_start);
    int64_t last_end = 0;
    int open = 0;
    for (size_t i = 0; i < a->n_lives; i++)
        if (a->lives[i].b >= last_end) {
            last_end = a->lives[i].b;
            open = a->lives[i].open;
        }
    s->wall_s = (double)existed(a, r->from, r->to) / 1e9;
    s->started_ns = a->lives[0].a;
    s->ended_ns = open ? 0 : last_end;
    s->state = open ? "active" : "terminated";
}

static void add_total(sl_usage_server *t, const sl_usage_server *s)
{
    t->wall_s += s->wall_s;
    t->busy_s += s->busy_s;
    t->shared_s += s->shared_s;
    t->kernel_s += s->kernel_s;
    t->throttled_s += s->throttled_s;
    t->entitled_s += s->entitled_s;
    t->kernels = sat_add(t->kernels, s->kernels);
    t->bytes_htod = sat_add(t->bytes_htod, s->bytes_htod);
    t->bytes_dtoh = sat_add(t->bytes_dtoh, s->bytes_dtoh);
    t->calls = sat_add(t->calls, s->calls);
    t->errors = sat_add(t->errors, s->errors);
    t->quota_refusals = sat_add(t->quota_refusals, s->quota_refusals);
    t->records = sat_add(t->records, s->records);
    t->closed_by_agent = sat_add(t->closed_by_agent, s->closed_by_agent);
    if (s->memory_high_water > t->memory_high_water)
        t->memory_high_water = s->memory_high_water;
}

static int by_key(const void *x, const void *y)
{
    const acc *a = *(acc *const *)x, *b = *(acc *const *)y;
    int c = strcmp(a->project, b->project);
    return c ? c : strcmp(a->s.instance, b->s.instance);
}

static sl_code finish_fail(sl_error *e)
{
    return sl_fail(e, SL_ERR_NOMEM, "usage report: out of memory");
}

sl_code sl_usage_report_finish(sl_usage_report *r, sl_error *e)
{
    if (r->finished)
        return sl_fail(e, SL_ERR_INVALID, "usage report: already finished");
    r->finished = 1;
    if (r->n)
        qsort(r->v, r->n, sizeof *r->v, by_key);
    for (size_t i = 0; i < r->n; i++) {
        acc *a = r->v[i];
        sl_usage_server *s = &a->s;
        existence(r, a);
        s->name = a->inf[I_NAME].v;
        s->flavor = a->inf[I_FLAVOR].v;
        s->tier = a->inf[I_TIER].v;
        s->domain = a->inf[I_DOMAIN].v;
        memset(a->inf, 0, sizeof a->inf);
        if ((!s->name && !(s->name = dup0(NULL))) || (!s->flavor && !(s->flavor = dup0(NULL))) ||
            (!s->tier && !(s->tier = dup0(NULL))) || (!s->domain && !(s->domain = dup0(NULL))))
            return finish_fail(e);
        s->gpu_share = a->share;
        s->entitled_s = (a->share > 0 ? a->share : 1.0) * s->wall_s;
    }
    size_t nt = 0;
    for (size_t i = 0; i < r->n; i++)
        nt += i == 0 || strcmp(r->v[i]->project, r->v[i - 1]->project);
    r->tenants = calloc(nt ? nt : 1, sizeof *r->tenants);
    if (!r->tenants)
        return finish_fail(e);
    for (size_t i = 0, t = 0; i < r->n; t++) {
        size_t j = i;
        while (j < r->n && !strcmp(r->v[j]->project, r->v[i]->project))
            j++;
        sl_usage_tenant *tn = &r->tenants[t];
        r->n_tenants = t + 1;
        tn->project = dup0(r->v[i]->project);
        tn->servers = calloc(j - i, sizeof *tn->servers);
        tn->bucket_busy_s = calloc(r->view.n_buckets ? r->view.n_buckets : 1, sizeof(double));
        tn->bucket_entitled_s = calloc(r->view.n_buckets ? r->view.n_buckets : 1, sizeof(double));
        if (!tn->project || !tn->servers || !tn->bucket_busy_s || !tn->bucket_entitled_s)
            return finish_fail(e);
        tn->total.state = "";
        for (size_t k = i; k < j; k++) {
            tn->servers[tn->n_servers++] = r->v[k]->s;
            memset(&r->v[k]->s, 0, sizeof r->v[k]->s); /* strings now owned by the tenant */
            add_total(&tn->total, &tn->servers[tn->n_servers - 1]);
            double share = r->v[k]->share > 0 ? r->v[k]->share : 1.0;
            for (size_t b = 0; b < r->view.n_buckets; b++) {
                int64_t lo = r->from + (int64_t)b * r->view.bucket_ns;
                int64_t hi = lo + r->view.bucket_ns < r->to ? lo + r->view.bucket_ns : r->to;
                tn->bucket_busy_s[b] += r->v[k]->bk[b];
                tn->bucket_entitled_s[b] += share * (double)existed(r->v[k], lo, hi) / 1e9;
            }
        }
        i = j;
    }
    r->view.tenants = r->tenants;
    r->view.n_tenants = r->n_tenants;
    return SL_OK;
}

const sl_usage_view *sl_usage_report_view(const sl_usage_report *r)
{
    return &r->view;
}

static void free_server(sl_usage_server *s)
{
    free(s->instance);
    free(s->name);
    free(s->flavor);
    free(s->tier);
    free(s->domain);
}

void sl_usage_report_free(sl_usage_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        acc *a = r->v[i];
        free_server(&a->s);
        for (int k = 0; k < I_COUNT; k++)
            free(a->inf[k].v);
        free(a->project);
        free(a->lives);
        free(a);
    }
    for (size_t t = 0; t < r->n_tenants; t++) {
        for (size_t k = 0; k < r->tenants[t].n_servers; k++)
            free_server(&r->tenants[t].servers[k]);
        free(r->tenants[t].servers);
        free(r->tenants[t].project);
        free(r->tenants[t].bucket_busy_s);
        free(r->tenants[t].bucket_entitled_s);
    }
    free(r->tenants);
    free(r->v);
    free(r->slot);
    free(r->only);
    free(r);
}

double sl_usage_sla_percent(const sl_usage_server *s)
{
    if (!(s->entitled_s > 0) || !isfinite(s->entitled_s))
        return -1;
    return 100.0 * s->busy_s / s->entitled_s;
}
