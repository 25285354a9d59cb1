/* Test helper: drives the registry handler on a database, as an agent over the channel would.
 *   nh_seed DB register HOST ENDPOINT SLOTS [LAST_SEEN_UNIX]
 *   nh_seed DB place HOST INSTANCE PROJECT FLAVOR
 *   nh_seed DB usage-loop HOST PREFIX N     (prints "acked ID" once each record is stored)
 *   nh_seed DB usage HOST ID INSTANCE PROJECT START_S END_S BUSY_NS [SHARED_NS]
 *     one record; without SHARED_NS as an agent older than the shared time sends it */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "registry.h"
#include "store.h"

static int handle(nh_store *s, const char *host, int64_t now, Sluice__Control__RegistryRequest *req,
                  nh_reply *r)
{
    nh_peer p = {host, now};
    sl_error e;
    nh_reply_init(r);
    if (nh_registry_handle(s, &p, req, r, &e) != SL_OK || !r->msg.ok) {
        fprintf(stderr, "nh_seed: refused: %s\n", r->detail);
        return 1;
    }
    return 0;
}

static int do_register(nh_store *s, char **a, int n)
{
    if (n < 3)
        return 2;
    Sluice__Control__Gpu g = SLUICE__CONTROL__GPU__INIT;
    g.uuid = "GPU-5e1c0000-0000-0000-0000-000000000001";
    g.name = "NVIDIA H200";
    g.memory_bytes = 150754820096ull;
    Sluice__Control__Gpu *gs[] = {&g};
    Sluice__Control__AgentInfo ai = SLUICE__CONTROL__AGENT_INFO__INIT;
    ai.host = a[0];
    ai.enrollment_endpoint = a[1];
    ai.slots_total = (uint32_t)strtoul(a[2], NULL, 10);
    ai.n_gpus = 1;
    ai.gpus = gs;
    ai.version = "0.1.0";
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REGISTER;
    req.register_ = &ai;
    nh_reply r;
    int64_t now = n > 3 ? strtoll(a[3], NULL, 10) : (int64_t)time(NULL);
    int rc = handle(s, a[0], now, &req, &r);
    nh_reply_free(&r);
    return rc;
}

static int do_place(nh_store *s, char **a, int n)
{
    if (n < 4)
        return 2;
    Sluice__Control__Placement p = SLUICE__CONTROL__PLACEMENT__INIT;
    p.host = a[0];
    p.instance_uuid = a[1];
    p.project_id = a[2];
    p.flavor = a[3];
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_PLACE;
    req.place = &p;
    nh_reply r;
    int rc = handle(s, a[0], (int64_t)time(NULL), &req, &r);
    nh_reply_free(&r);
    return rc;
}

static int do_usage_loop(nh_store *s, char **a, int n)
{
    if (n < 3)
        return 2;
    long count = strtol(a[2], NULL, 10);
    for (long i = 0; i < count; i++) {
        char id[96];
        snprintf(id, sizeof id, "%s-%06ld", a[1], i);
        Sluice__Control__UsageRecord u = SLUICE__CONTROL__USAGE_RECORD__INIT;
        u.record_id = id;
        u.instance_uuid = "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60";
        u.project_id = "f241e906010e4917ae8153f4fb8aa021";
        u.interval_start_ns = 1;
        u.interval_end_ns = 2;
        Sluice__Control__UsageRecord *recs[] = {&u};
        Sluice__Control__UsagePush up = SLUICE__CONTROL__USAGE_PUSH__INIT;
        up.records = recs;
        up.n_records = 1;
        Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
        req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_USAGE;
        req.usage = &up;
        nh_reply r;
        if (handle(s, a[0], (int64_t)time(NULL), &req, &r) != 0 || !r.msg.usage_ack) {
            nh_reply_free(&r);
            return 1;
        }
        printf("acked %s\n", r.msg.usage_ack->record_ids[0]);
        fflush(stdout);
        nh_reply_free(&r);
    }
    return 0;
}

static int do_usage(nh_store *s, char **a, int n)
{
    if (n < 7)
        return 2;
    Sluice__Control__UsageRecord u = SLUICE__CONTROL__USAGE_RECORD__INIT;
    Sluice__Control__SharedTime sh = SLUICE__CONTROL__SHARED_TIME__INIT;
    u.record_id = a[1];
    u.instance_uuid = a[2];
    u.project_id = a[3];
    u.flavor = "g1.small";
    u.gpu_uuid = "GPU-5e1c0000-0000-0000-0000-000000000001";
    u.measurement = "events";
    u.interval_start_ns = strtoll(a[4], NULL, 10) * 1000000000LL;
    u.interval_end_ns = strtoll(a[5], NULL, 10) * 1000000000LL;
    u.gpu_busy_ns = strtoull(a[6], NULL, 10);
    if (n > 7) {
        sh.gpu_shared_ns = strtoull(a[7], NULL, 10);
        u.shared = &sh;
    }
    Sluice__Control__UsageRecord *recs[] = {&u};
    Sluice__Control__UsagePush up = SLUICE__CONTROL__USAGE_PUSH__INIT;
    up.records = recs;
    up.n_records = 1;
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_USAGE;
    req.usage = &up;
    nh_reply r;
    int rc = handle(s, a[0], (int64_t)time(NULL), &req, &r);
    nh_reply_free(&r);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: nh_seed DB register|place|usage-loop|usage ARGS...\n");
        return 2;
    }
    nh_store *s;
    sl_error e;
    if (nh_store_open(argv[1], 0, &s, &e) != SL_OK) {
        fprintf(stderr, "nh_seed: %s\n", e.msg);
        return 1;
    }
    int rc = 2;
    if (!strcmp(argv[2], "register"))
        rc = do_register(s, argv + 3, argc - 3);
    else if (!strcmp(argv[2], "place"))
        rc = do_place(s, argv + 3, argc - 3);
    else if (!strcmp(argv[2], "usage-loop"))
        rc = do_usage_loop(s, argv + 3, argc - 3);
    else if (!strcmp(argv[2], "usage"))
        rc = do_usage(s, argv + 3, argc - 3);
    nh_store_close(s);
    if (rc == 2)
        fprintf(stderr, "nh_seed: bad arguments\n");
    return rc;
}
