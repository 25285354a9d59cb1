/* Test helper: an agent speaking to sluice-novahook's registry channel through
 * nh_regclient (nova-hook/registry_client.h). One line of output per command.
 *   nh_agent ENDPOINT CA CERT KEY COMMAND...
 * commands (each takes its arguments from the following words):
 *   register HOST ENDPOINT SLOTS | unregister HOST | place HOST INSTANCE PROJECT FLAVOR |
 *   remove HOST INSTANCE | usage ID[,ID...] INSTANCE PROJECT | ping NONCE |
 *   garbage (sends bytes that are no RegistryRequest; prints how the session ended)
 * output: "ok DETAIL [acked=ID,...] [pong=N]", "refused DETAIL", "closed CODE_NAME", or
 * "connect-failed CODE_NAME: message" (exit 3). Exit 0 unless the channel failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry_client.h"

#define MAX_IDS 16

static void print_reply(const Sluice__Control__RegistryReply *r)
{
    printf("%s %s", r->ok ? "ok" : "refused", r->detail);
    if (r->usage_ack) {
        printf(" acked=");
        for (size_t i = 0; i < r->usage_ack->n_record_ids; i++)
            printf("%s%s", i ? "," : "", r->usage_ack->record_ids[i]);
    }
    if (r->pong)
        printf(" pong=%llu", (unsigned long long)r->pong->nonce);
    printf("\n");
}

static int garbage(nh_regclient *c)
{
    static const unsigned char junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x7a, 0x01};
    sl_client *ch = nh_regclient_channel(c);
    sl_error e;
    const void *msg;
    size_t len;
    if (sl_client_send(ch, junk, sizeof junk, NULL, 0, &e) == SL_OK)
        sl_client_recv(ch, &msg, &len, NULL, 5000, &e);
    printf("closed %s %s\n", sl_code_name(e.code), e.msg);
    return 1;
}

/* Builds one request from argv at *i; returns words consumed or -1. */
static int build(char **a, int n, Sluice__Control__RegistryRequest *req, void *mem[])
{
    Sluice__Control__AgentInfo *ai = mem[0];
    Sluice__Control__Placement *pl = mem[1];
    Sluice__Control__Removal *rm = mem[2];
    Sluice__Control__UsagePush *up = mem[3];
    Sluice__Control__Ping *pg = mem[4];
    Sluice__Control__UsageRecord *recs = mem[5], **rp = mem[6];
    static char ids[1024];
    if (!strcmp(a[0], "register") && n >= 4) {
        ai->host = a[1], ai->enrollment_endpoint = a[2];
        ai->slots_total = (uint32_t)strtoul(a[3], NULL, 10);
        req->kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REGISTER, req->register_ = ai;
        return 4;
    }
    if (!strcmp(a[0], "unregister") && n >= 2) {
        ai->host = a[1];
        req->kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_UNREGISTER, req->unregister = ai;
        return 2;
    }
    if (!strcmp(a[0], "place") && n >= 5) {
        pl->host = a[1], pl->instance_uuid = a[2], pl->project_id = a[3], pl->flavor = a[4];
        req->kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_PLACE, req->place = pl;
        return 5;
    }
    if (!strcmp(a[0], "remove") && n >= 3) {
        rm->host = a[1], rm->instance_uuid = a[2];
        req->kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REMOVE, req->remove = rm;
        return 3;
    }
    if (!strcmp(a[0], "usage") && n >= 4) {
        snprintf(ids, sizeof ids, "%s", a[1]);
        size_t k = 0;
        for (char *save = NULL, *id = strtok_r(ids, ",", &save); id && k < MAX_IDS;
             id = strtok_r(NULL, ",", &save), k++) {
            sluice__control__usage_record__init(&recs[k]);
            recs[k].record_id = id, recs[k].instance_uuid = a[2], recs[k].project_id = a[3];
            recs[k].flavor = "g1.small", recs[k].measurement = "events";
            recs[k].interval_start_ns = 1000, recs[k].interval_end_ns = 2000;
            recs[k].gpu_busy_ns = 500, recs[k].kernels = 7;
            rp[k] = &recs[k];
        }
        up->n_records = k, up->records = rp;
        req->kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_USAGE, req->usage = up;
        return 4;
    }
    if (!strcmp(a[0], "ping") && n >= 2) {
        pg->nonce = strtoull(a[1], NULL, 10);
        req->kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_PING, req->ping = pg;
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: nh_agent ENDPOINT CA CERT KEY COMMAND...\n");
        return 2;
    }
    sl_tls_config tls = {
        .mode = SL_TLS_MUTUAL, .ca_file = argv[2], .cert_file = argv[3], .key_file = argv[4]};
    sl_channel_opts o;
    sl_channel_opts_default(&o);
    o.connect_attempts = 1;
    o.handshake_timeout_ms = 5000;
    nh_regclient *c = NULL;
    sl_error e;
    if (nh_regclient_connect(argv[1], &tls, &o, &c, &e) != SL_OK) {
        printf("connect-failed %s: %s\n", sl_code_name(e.code), e.msg);
        return 3;
    }
    int rc = 0;
    for (int i = 5; i < argc && rc == 0;) {
        if (!strcmp(argv[i], "garbage")) {
            rc = garbage(c);
            break;
        }
        Sluice__Control__AgentInfo ai = SLUICE__CONTROL__AGENT_INFO__INIT;
        Sluice__Control__Placement pl = SLUICE__CONTROL__PLACEMENT__INIT;
        Sluice__Control__Removal rm = SLUICE__CONTROL__REMOVAL__INIT;
        Sluice__Control__UsagePush up = SLUICE__CONTROL__USAGE_PUSH__INIT;
        Sluice__Control__Ping pg = SLUICE__CONTROL__PING__INIT;
        Sluice__Control__UsageRecord recs[MAX_IDS];
        Sluice__Control__UsageRecord *rp[MAX_IDS];
        void *mem[] = {&ai, &pl, &rm, &up, &pg, recs, rp};
        Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
        int used = build(argv + i, argc - i, &req, mem);
        if (used < 0) {
            fprintf(stderr, "nh_agent: bad command at %s\n", argv[i]);
            rc = 2;
            break;
        }
        i += used;
        Sluice__Control__RegistryReply *r = NULL;
        if (nh_regclient_call(c, &req, 10000, &r, &e) != SL_OK) {
            printf("closed %s %s\n", sl_code_name(e.code), e.msg);
            rc = 1;
            break;
        }
        print_reply(r);
        nh_regclient_reply_free(r);
    }
    nh_regclient_close(c);
    return rc;
}
