/* sluice-registry-push AGENT_STORE REGISTRY_DB HOST: forwards what an agent's usage store holds
 * to a registry database as the agent does, through the agent's own code for the batches
 * (ag_usage_store_unforwarded: records whose shared GPU time is final, each with it) and the
 * registry's own handler and store for the pushes (nh_registry_handle, after registering HOST),
 * marking each acknowledged batch forwarded, until nothing is left. Prints one JSON line:
 * {"forwarded":N,"pending":N}. The channel between the two is not part of it (agent_usage.forward
 * runs that with a real sluice-novahook). A test tool (accounting.py, part shared). */
#include <stdio.h>
#include <time.h>

#include "registry.h"
#include "store.h"
#include "usage_store.h"

static int push(nh_store *reg, const char *host, ag_usage_store *s, ag_usage_batch *b,
                size_t *marked, sl_error *e)
{
    Sluice__Control__UsagePush up = SLUICE__CONTROL__USAGE_PUSH__INIT;
    up.records = b->recs;
    up.n_records = b->n;
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_USAGE;
    req.usage = &up;
    nh_peer p = {host, (int64_t)time(NULL)};
    nh_reply r;
    nh_reply_init(&r);
    int rc = -1;
    if (nh_registry_handle(reg, &p, &req, &r, e) != SL_OK || !r.msg.ok || !r.msg.usage_ack)
        fprintf(stderr, "sluice-registry-push: push refused: %s\n", r.detail);
    else if (ag_usage_store_mark_forwarded(s, r.msg.usage_ack->record_ids,
                                           r.msg.usage_ack->n_record_ids, p.now, marked,
                                           e) != SL_OK)
        fprintf(stderr, "sluice-registry-push: %s\n", e->msg);
    else
        rc = 0;
    nh_reply_free(&r);
    return rc;
}

static int enroll(nh_store *reg, const char *host)
{
    Sluice__Control__AgentInfo ai = SLUICE__CONTROL__AGENT_INFO__INIT;
    ai.host = (char *)host;
    ai.enrollment_endpoint = "tcp://127.0.0.1:7400";
    ai.slots_total = 4;
    ai.version = "test";
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REGISTER;
    req.register_ = &ai;
    nh_peer p = {host, (int64_t)time(NULL)};
    nh_reply r;
    nh_reply_init(&r);
    sl_error e = {0};
    int ok = nh_registry_handle(reg, &p, &req, &r, &e) == SL_OK && r.msg.ok;
    if (!ok)
        fprintf(stderr, "sluice-registry-push: register refused: %s %s\n", r.detail, e.msg);
    nh_reply_free(&r);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: sluice-registry-push AGENT_STORE REGISTRY_DB HOST\n");
        return 2;
    }
    ag_usage_store *s;
    nh_store *reg;
    sl_error e = {0};
    if (ag_usage_store_open(argv[1], 0, &s, &e) != SL_OK) {
        fprintf(stderr, "sluice-registry-push: %s\n", e.msg);
        return 1;
    }
    if (nh_store_open(argv[2], NH_STORE_SERVE, &reg, &e) != SL_OK) {
        fprintf(stderr, "sluice-registry-push: %s\n", e.msg);
        ag_usage_store_close(s);
        return 1;
    }
    int rc = enroll(reg, argv[3]);
    size_t forwarded = 0;
    while (!rc) {
        ag_usage_batch b;
        if (ag_usage_store_unforwarded(s, 256, &b, &e) != SL_OK) {
            fprintf(stderr, "sluice-registry-push: %s\n", e.msg);
            rc = -1;
            break;
        }
        size_t marked = 0;
        if (b.n && push(reg, argv[3], s, &b, &marked, &e) != 0)
            rc = -1;
        size_t n = b.n;
        ag_usage_batch_free(&b);
        forwarded += marked;
        if (!n || !marked)
            break;
    }
    uint64_t pending = 0;
    if (!rc && ag_usage_store_pending(s, &pending, &e) == SL_OK)
        printf("{\"forwarded\":%zu,\"pending\":%llu}\n", forwarded, (unsigned long long)pending);
    nh_store_close(reg);
    ag_usage_store_close(s);
    return rc ? 1 : 0;
}
