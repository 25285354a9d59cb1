/* The sample usage. */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>

#define H   3600ULL
#define S   1000000000ULL
#define GIB (1ULL << 30)
#define MIB (1ULL << 20)

int64_t fx_time(const char *iso)
{
    int64_t ns;
    sl_error e;
    if (sl_usage_parse_time(iso, &ns, &e) != SL_OK) {
        fprintf(stderr, "fixture: %s\n", e.msg);
        abort();
    }
    return ns;
}

static sl_usage_rec recs[12];
static sl_usage_life lives[3];
static size_t n_recs, n_lives;

static void rec(const char *id, const char *inst, const char *project, const char *start,
                const char *end, uint64_t busy_s, uint64_t kernels, uint64_t htod, uint64_t dtoh,
                uint64_t mem, uint64_t throttled_s, uint64_t refusals)
{
    sl_usage_rec *r = &recs[n_recs++];
    int u1 = inst[35] == '1', u2 = inst[35] == '2';
    r->record_id = id;
    r->instance = inst;
    r->project = project;
    r->flavor = u2 ? "g1.large" : "g1.small";
    r->gpu_uuid = "GPU-5f1a2b3c-0000-4000-8000-00000000a100";
    r->name = u1 ? "web-1" : u2 ? "batch \"x\", 2" : "";
    r->domain = u1 ? "instance-00000001" : u2 ? "instance-00000002" : "";
    r->tier = u1 ? "silver" : u2 ? "gold" : "";
    r->gpu_share = u1 ? 0.5 : u2 ? 1.0 : 0;
    r->start_ns = fx_time(start);
    r->end_ns = fx_time(end);
    r->gpu_busy_ns = busy_s * S;
    r->kernel_ns = busy_s * S * 4 / 3;
    r->kernels = kernels;
    r->bytes_htod = htod;
    r->bytes_dtoh = dtoh;
    r->memory_high_water = mem;
    r->calls = kernels * 3 + 10;
    r->errors = refusals;
    r->throttled_ns = throttled_s * S;
    r->quota_refusals = refusals;
}

static void life(const char *inst, const char *project, const char *start, const char *end,
                 int open)
{
    sl_usage_life *l = &lives[n_lives++];
    int u1 = inst[35] == '1';
    l->instance = inst;
    l->project = project;
    l->name = u1 ? "web-1" : "batch \"x\", 2";
    l->flavor = u1 ? "g1.small" : "g1.large";
    l->tier = u1 ? "silver" : "gold";
    l->domain = u1 ? "instance-00000001" : "instance-00000002";
    l->gpu_share = u1 ? 0.5 : 1.0;
    l->start_ns = fx_time(start);
    l->end_ns = fx_time(end);
    l->open = open;
}

static void init(void)
{
    if (n_recs)
        return;
    /* U1: three busy hours on the first day, one on the second; an open lifetime */
    rec("aaaa0001-0000-4000-8000-000000000001", FX_U1, FX_PA, "2026-11-01T02:00:00",
        "2026-11-01T03:00:00", H / 2, 1000, GIB, 512 * MIB, 2 * GIB, 600, 0);
    rec("aaaa0001-0000-4000-8000-000000000002", FX_U1, FX_PA, "2026-11-01T03:00:00",
        "2026-11-01T04:00:00", H / 2, 1000, GIB, 512 * MIB, 2 * GIB, 600, 1);
    rec("aaaa0001-0000-4000-8000-000000000003", FX_U1, FX_PA, "2026-11-01T04:00:00",
        "2026-11-01T05:00:00", H / 2, 1000, GIB, 512 * MIB, 3 * GIB, 600, 0);
    rec("aaaa0001-0000-4000-8000-000000000004", FX_U1, FX_PA, "2026-11-02T10:00:00",
        "2026-11-02T11:00:00", H, 5000, 4 * GIB, GIB, GIB, 0, 0);
    /* U2: a record across the period's start (half of it inside), then one inside */
    rec("aaaa0002-0000-4000-8000-000000000001", FX_U2, FX_PA, "2026-10-31T23:30:00",
        "2026-11-01T00:30:00", H, 200, 100 * MIB, 10 * MIB, 512 * MIB, 0, 0);
    rec("aaaa0002-0000-4000-8000-000000000002", FX_U2, FX_PA, "2026-11-02T01:00:00",
        "2026-11-02T02:00:00", H / 4, 50, 0, 0, 256 * MIB, 0, 0);
    /* U2's session closed by the agent: its backend was killed 8 s after the record above */
    rec("aaaa0002-0000-4000-8000-000000000003", FX_U2, FX_PA, "2026-11-02T02:00:00",
        "2026-11-02T02:00:08", 0, 0, 0, 0, 0, 0, 0);
    recs[n_recs - 1].calls = 0;
    recs[n_recs - 1].closed_by_agent = 1;
    /* U3 (project B, no lifetime, no share): one inside, one across the period's end */
    rec("bbbb0003-0000-4000-8000-000000000001", FX_U3, FX_PB, "2026-11-03T20:00:00",
        "2026-11-03T21:00:00", H / 2, 10, 3 * MIB, 1000, 8 * GIB, 0, 0);
    rec("bbbb0003-0000-4000-8000-000000000002", FX_U3, FX_PB, "2026-11-03T23:00:00",
        "2026-11-04T01:00:00", 2 * H, 77, 5 * MIB, 0, GIB, 0, 0);
    /* outside the period: ignored */
    rec("bbbb0003-0000-4000-8000-000000000003", FX_U3, FX_PB, "2026-10-20T00:00:00",
        "2026-10-20T01:00:00", H, 1, 1, 1, 1, 0, 0);
    life(FX_U1, FX_PA, "2026-11-01T00:00:00", "2026-11-03T12:00:00", 1);
    life(FX_U2, FX_PA, "2026-10-31T12:00:00", "2026-11-01T06:00:00", 0);
    life(FX_U2, FX_PA, "2026-11-02T00:00:00", "2026-11-02T12:00:00", 0);
}

size_t fx_records(const sl_usage_rec **out)
{
    init();
    *out = recs;
    return n_recs;
}

size_t fx_lives(const sl_usage_life **out)
{
    init();
    *out = lives;
    return n_lives;
}
