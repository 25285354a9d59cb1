/* Writes the report fixture (fixture.c) into a store, for the command-line tests:
 *   usage_seed agent DB      the agent's usage store: records and lifetimes
 *   usage_seed registry DB   the registry: host gpu-a registered, the instances placed (U2
 *                            removed again), the records pushed through nh_registry_handle */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fixture.h"
#include "registry.h"
#include "store.h"
#include "usage_store.h"

static Sluice__Control__UsageRecord proto_of(const sl_usage_rec *r)
{
    Sluice__Control__UsageRecord u = SLUICE__CONTROL__USAGE_RECORD__INIT;
    u.record_id = (char *)r->record_id;
    u.instance_uuid = (char *)r->instance;
    u.project_id = (char *)r->project;
    u.flavor = (char *)r->flavor;
    u.gpu_uuid = (char *)r->gpu_uuid;
    u.instance_name = (char *)r->name;
    u.domain_name = (char *)r->domain;
    u.sla_tier = (char *)r->tier;
    u.gpu_share = r->gpu_share;
    u.interval_start_ns = r->start_ns;
    u.interval_end_ns = r->end_ns;
    u.gpu_busy_ns = r->gpu_busy_ns;
    u.kernel_ns = r->kernel_ns;
    u.kernels = r->kernels;
    u.bytes_htod = r->bytes_htod;
    u.bytes_dtoh = r->bytes_dtoh;
    u.memory_high_water = r->memory_high_water;
    u.calls = r->calls;
    u.errors = r->errors;
    u.throttled_ns = r->throttled_ns;
    u.quota_refusals = (uint32_t)r->quota_refusals;
    u.measurement = r->closed_by_agent ? "none" : "events";
    u.final = r->closed_by_agent;
    u.closed_by_agent = r->closed_by_agent;
    return u;
}

static int agent(const char *db)
{
    const sl_usage_rec *recs;
    const sl_usage_life *lives;
    size_t nr = fx_records(&recs), nl = fx_lives(&lives);
    Sluice__Control__UsageRecord u[16];
    const Sluice__Control__UsageRecord *p[16];
    for (size_t i = 0; i < nr; i++) {
        u[i] = proto_of(&recs[i]);
        p[i] = &u[i];
    }
    ag_usage_store *s;
    sl_error e;
    if (ag_usage_store_open(db, 0, &s, &e) != SL_OK ||
        ag_usage_store_put(s, p, nr, 1800000000, NULL, &e) != SL_OK) {
        fprintf(stderr, "usage_seed: %s\n", e.msg);
        return 1;
    }
    ag_usage_store_close(s);
    /* lifetimes with the fixture's own times (the heartbeat only writes "now") */
    sqlite3 *h;
    sqlite3_stmt *q;
    if (sqlite3_open(db, &h) != SQLITE_OK ||
        sqlite3_prepare_v2(h,
                           "INSERT INTO lifetimes(instance, start_ns, end_ns, open, project, "
                           "name, domain, flavor, sla_tier, gpu_share) VALUES (?1, ?2, ?3, ?4, "
                           "?5, ?6, ?7, ?8, ?9, ?10)",
                           -1, &q, NULL) != SQLITE_OK) {
        fprintf(stderr, "usage_seed: %s\n", sqlite3_errmsg(h));
        return 1;
    }
    for (size_t i = 0; i < nl; i++) {
        const sl_usage_life *l = &lives[i];
        sqlite3_reset(q);
        sqlite3_bind_text(q, 1, l->instance, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 2, l->start_ns);
        sqlite3_bind_int64(q, 3, l->end_ns);
        sqlite3_bind_int(q, 4, l->open);
        sqlite3_bind_text(q, 5, l->project, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 6, l->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 7, l->domain, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 8, l->flavor, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 9, l->tier, -1, SQLITE_STATIC);
        sqlite3_bind_double(q, 10, l->gpu_share);
        if (sqlite3_step(q) != SQLITE_DONE) {
            fprintf(stderr, "usage_seed: %s\n", sqlite3_errmsg(h));
            return 1;
        }
    }
    sqlite3_finalize(q);
    sqlite3_close(h);
    return 0;
}

static int handle(nh_store *s, Sluice__Control__RegistryRequest *req)
{
    nh_peer peer = {"gpu-a", (int64_t)time(NULL)};
    nh_reply r;
    nh_reply_init(&r);
    sl_error e;
    int ok = nh_registry_handle(s, &peer, req, &r, &e) == SL_OK && r.msg.ok;
    if (!ok)
        fprintf(stderr, "usage_seed: registry refused: %s\n", r.detail);
    nh_reply_free(&r);
    return ok ? 0 : 1;
}

static int registry(const char *db)
{
    nh_store *s;
    sl_error e;
    if (nh_store_open(db, 0, &s, &e) != SL_OK) {
        fprintf(stderr, "usage_seed: %s\n", e.msg);
        return 1;
    }
    int rc = 0;
    Sluice__Control__AgentInfo ai = SLUICE__CONTROL__AGENT_INFO__INIT;
    ai.host = "gpu-a";
    ai.enrollment_endpoint = "tcp://192.0.2.1:7400";
    ai.slots_total = 8;
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REGISTER;
    req.register_ = &ai;
    rc |= handle(s, &req);
    const char *inst[] = {FX_U1, FX_U2, FX_U3};
    const char *proj[] = {FX_PA, FX_PA, FX_PB};
    for (int i = 0; i < 3; i++) {
        Sluice__Control__Placement pl = SLUICE__CONTROL__PLACEMENT__INIT;
        pl.instance_uuid = (char *)inst[i];
        pl.project_id = (char *)proj[i];
        pl.flavor = "g1.small";
        pl.host = "gpu-a";
        pl.since_unix = fx_time("2026-11-01T00:00:00") / 1000000000LL;
        req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_PLACE;
        req.place = &pl;
        rc |= handle(s, &req);
    }
    Sluice__Control__Removal rm = SLUICE__CONTROL__REMOVAL__INIT;
    rm.instance_uuid = FX_U2;
    rm.host = "gpu-a";
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REMOVE;
    req.remove = &rm;
    rc |= handle(s, &req);
    const sl_usage_rec *recs;
    size_t nr = fx_records(&recs);
    Sluice__Control__UsageRecord u[16];
    Sluice__Control__UsageRecord *p[16];
    for (size_t i = 0; i < nr; i++) {
        u[i] = proto_of(&recs[i]);
        p[i] = &u[i];
    }
    Sluice__Control__UsagePush up = SLUICE__CONTROL__USAGE_PUSH__INIT;
    up.records = p;
    up.n_records = nr;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_USAGE;
    req.usage = &up;
    rc |= handle(s, &req);
    rc |= handle(s, &req); /* pushed twice: stored once */
    nh_store_close(s);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "agent"))
        return agent(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "registry"))
        return registry(argv[2]);
    fprintf(stderr, "usage: usage_seed agent|registry DB\n");
    return 2;
}
