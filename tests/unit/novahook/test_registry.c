/* Registry handler + store (SQLite, or MariaDB in the .mariadb twin): several agents register,
 * place, remove; refusals; usage records stored once however often pushed; the shared GPU time a
 * record carries stored with it, a record of an older agent (without it) kept as not reported,
 * one longer than its interval refused; a close and reopen of the store loses nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nh_testdb.h"
#include "registry.h"
#include "store.h"

#define NOW 1800000000LL

typedef struct fx {
    nh_testdb db;
    nh_store *s;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    nh_testdb_make(&f->db);
    sl_error e;
    assert_int_equal(nh_store_open(f->db.url, 0, &f->s, &e), SL_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    nh_store_close(f->s);
    nh_testdb_drop(&f->db);
    free(f);
    return 0;
}

/* Sends one request as peer host (NULL: trusted local); returns ok, copies detail. */
static int send_req(fx *f, const char *peer, Sluice__Control__RegistryRequest *req, char *detail)
{
    nh_peer p = {peer, NOW};
    nh_reply r;
    nh_reply_init(&r);
    sl_error e;
    assert_int_equal(nh_registry_handle(f->s, &p, req, &r, &e), SL_OK);
    assert_int_equal(r.msg.seq, req->seq);
    int ok = r.msg.ok;
    if (detail)
        snprintf(detail, SL_ERROR_MSG_MAX, "%s", r.detail);
    nh_reply_free(&r);
    return ok;
}

static int reg(fx *f, const char *peer, const char *host, const char *endpoint, uint32_t slots)
{
    Sluice__Control__Gpu g = SLUICE__CONTROL__GPU__INIT;
    g.uuid = "GPU-1234";
    g.name = "NVIDIA H200";
    g.memory_bytes = 141ull << 30;
    Sluice__Control__Gpu *gs[] = {&g};
    Sluice__Control__AgentInfo a = SLUICE__CONTROL__AGENT_INFO__INIT;
    a.host = (char *)host;
    a.enrollment_endpoint = (char *)endpoint;
    a.slots_total = slots;
    a.n_gpus = 1;
    a.gpus = gs;
    a.version = "0.1.0";
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.seq = 1;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REGISTER;
    req.register_ = &a;
    return send_req(f, peer, &req, NULL);
}

static int place(fx *f, const char *peer, const char *inst, const char *proj, const char *host,
                 char *detail)
{
    Sluice__Control__Placement p = SLUICE__CONTROL__PLACEMENT__INIT;
    p.instance_uuid = (char *)inst;
    p.project_id = (char *)proj;
    p.flavor = "g1.small";
    p.host = (char *)host;
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.seq = 2;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_PLACE;
    req.place = &p;
    return send_req(f, peer, &req, detail);
}

static int removal(fx *f, const char *peer, const char *inst, const char *host)
{
    Sluice__Control__Removal r = SLUICE__CONTROL__REMOVAL__INIT;
    r.instance_uuid = (char *)inst;
    r.host = (char *)host;
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.seq = 3;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REMOVE;
    req.remove = &r;
    return send_req(f, peer, &req, NULL);
}

static int lookup(fx *f, const char *inst, char *host_out)
{
    nh_target t;
    int found;
    sl_error e;
    assert_int_equal(nh_store_lookup(f->s, inst, &t, &found, &e), SL_OK);
    if (found && host_out)
        strcpy(host_out, t.host);
    free(t.ca_pem);
    return found;
}

static int count_instances_cb(const nh_instance_row *r, void *ud)
{
    (void)r;
    (*(int *)ud)++;
    return 0;
}

static int count_hosts_cb(const nh_host_row *r, void *ud)
{
    (void)r;
    (*(int *)ud)++;
    return 0;
}

static int count_instances(fx *f, const char *host, const char *project)
{
    int n = 0;
    sl_error e;
    assert_int_equal(nh_store_instances(f->s, host, project, count_instances_cb, &n, &e), SL_OK);
    return n;
}

#define I1 "11111111-0000-4000-8000-000000000001"
#define I2 "11111111-0000-4000-8000-000000000002"
#define I3 "11111111-0000-4000-8000-000000000003"
#define PA "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define PB "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static void several_agents(void **state)
{
    fx *f = *state;
    assert_true(reg(f, "gpu1", "gpu1", "tcp://192.0.2.1:7400", 8));
    assert_true(reg(f, "gpu2", "gpu2", "tcp://192.0.2.2:7400", 4));
    assert_true(reg(f, "gpu3", "gpu3", "tcp://[2001:db8::3]:7400", 2));
    char d[SL_ERROR_MSG_MAX], h[256];
    assert_true(place(f, "gpu1", I1, PA, "gpu1", d));
    assert_true(place(f, "gpu2", I2, PA, "gpu2", d));
    assert_true(place(f, "gpu2", I3, PB, "gpu2", d));
    assert_true(lookup(f, I1, h));
    assert_string_equal(h, "gpu1");
    assert_int_equal(count_instances(f, NULL, NULL), 3);
    assert_int_equal(count_instances(f, "gpu2", NULL), 2);
    assert_int_equal(count_instances(f, NULL, PA), 2);
    assert_int_equal(count_instances(f, "gpu2", PB), 1);
    /* an instance migrates: gpu1 reports it; a late removal from gpu2 does not undo it */
    assert_true(place(f, "gpu1", I3, PB, "gpu1", d));
    assert_true(removal(f, "gpu2", I3, "gpu2"));
    assert_true(lookup(f, I3, h));
    assert_string_equal(h, "gpu1");
    /* removal, twice (idempotent) */
    assert_true(removal(f, "gpu1", I1, "gpu1"));
    assert_true(removal(f, "gpu1", I1, "gpu1"));
    assert_false(lookup(f, I1, NULL));
    /* unregister drops the agent's placements */
    Sluice__Control__AgentInfo a = SLUICE__CONTROL__AGENT_INFO__INIT;
    a.host = "gpu2";
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_UNREGISTER;
    req.unregister = &a;
    assert_true(send_req(f, "gpu2", &req, NULL));
    assert_false(lookup(f, I2, NULL));
    assert_int_equal(count_instances(f, NULL, NULL), 1);
}

static void refusals(void **state)
{
    fx *f = *state;
    char d[SL_ERROR_MSG_MAX];
    assert_true(reg(f, "gpu1", "gpu1", "tcp://192.0.2.1:7400", 8));
    /* an agent speaking for another host */
    assert_false(reg(f, "gpu1", "gpu9", "tcp://192.0.2.9:7400", 8));
    assert_false(place(f, "gpu1", I1, PA, "gpu2", d));
    assert_non_null(strstr(d, "authenticated host"));
    /* an unregistered peer */
    assert_false(place(f, "gpu7", I1, PA, "gpu7", d));
    assert_non_null(strstr(d, "register first"));
    /* a trusted caller placing on an unknown host */
    assert_false(place(f, NULL, I1, PA, "nohost", d));
    assert_non_null(strstr(d, "not a registered agent"));
    /* malformed fields */
    assert_false(place(f, "gpu1", "not-a-uuid!", PA, "gpu1", d));
    assert_non_null(strstr(d, "instance_uuid"));
    assert_false(place(f, "gpu1", I1, "", "gpu1", d));
    assert_non_null(strstr(d, "project_id"));
    assert_false(reg(f, "gpu1", "gpu1", "http://x:1", 8));
    assert_false(reg(f, "gpu1", "gpu1", "tcp://x:70000", 8));
    assert_false(reg(f, "gpu1", "gpu1", "tcp://x:7400", 100000));
    assert_false(reg(f, NULL, "bad host", "tcp://x:7400", 1));
    /* an empty request */
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    assert_false(send_req(f, "gpu1", &req, d));
    assert_non_null(strstr(d, "unknown request"));
    /* a CA that is no CA */
    Sluice__Control__AgentInfo a = SLUICE__CONTROL__AGENT_INFO__INIT;
    a.host = "gpu1";
    a.enrollment_endpoint = "tcp://192.0.2.1:7400";
    a.ca_pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REGISTER;
    req.register_ = &a;
    assert_false(send_req(f, "gpu1", &req, d));
    assert_non_null(strstr(d, "ca_pem"));
}

static void ping_is_heartbeat(void **state)
{
    fx *f = *state;
    assert_true(reg(f, "gpu1", "gpu1", "tcp://192.0.2.1:7400", 8));
    Sluice__Control__Ping ping = SLUICE__CONTROL__PING__INIT;
    ping.nonce = 42;
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.seq = 9;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_PING;
    req.ping = &ping;
    nh_peer p = {"gpu1", NOW + 50};
    nh_reply r;
    nh_reply_init(&r);
    sl_error e;
    assert_int_equal(nh_registry_handle(f->s, &p, &req, &r, &e), SL_OK);
    assert_true(r.msg.ok);
    assert_non_null(r.msg.pong);
    assert_int_equal(r.msg.pong->nonce, 42);
    nh_reply_free(&r);
    /* no host is stale as of NOW + 50; it is as of NOW + 51 */
    int n = 0;
    assert_int_equal(nh_store_hosts(f->s, NOW + 50, count_hosts_cb, &n, &e), SL_OK);
    assert_int_equal(n, 0);
    assert_int_equal(nh_store_hosts(f->s, NOW + 51, count_hosts_cb, &n, &e), SL_OK);
    assert_int_equal(n, 1);
}

static Sluice__Control__UsageRecord *record(Sluice__Control__UsageRecord *u, const char *id)
{
    sluice__control__usage_record__init(u);
    u->record_id = (char *)id;
    u->instance_uuid = I1;
    u->project_id = PA;
    u->flavor = "g1.small";
    u->gpu_uuid = "GPU-1234";
    u->interval_start_ns = NOW * 1000000000LL;
    u->interval_end_ns = u->interval_start_ns + 10000000000LL;
    u->gpu_busy_ns = UINT64_MAX; /* survives the INTEGER column */
    u->measurement = "events";
    return u;
}

static size_t push(fx *f, const char *peer, Sluice__Control__UsageRecord **recs, size_t n, int *ok)
{
    Sluice__Control__UsagePush up = SLUICE__CONTROL__USAGE_PUSH__INIT;
    up.records = recs;
    up.n_records = n;
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_USAGE;
    req.usage = &up;
    nh_peer p = {peer, NOW};
    nh_reply r;
    nh_reply_init(&r);
    sl_error e;
    assert_int_equal(nh_registry_handle(f->s, &p, &req, &r, &e), SL_OK);
    *ok = r.msg.ok;
    size_t acked = r.msg.usage_ack ? r.msg.usage_ack->n_record_ids : 0;
    for (size_t i = 0; i < acked; i++)
        assert_string_equal(r.msg.usage_ack->record_ids[i], recs[i]->record_id);
    nh_reply_free(&r);
    return acked;
}

static void usage_stored_once(void **state)
{
    fx *f = *state;
    assert_true(reg(f, "gpu1", "gpu1", "tcp://192.0.2.1:7400", 8));
    Sluice__Control__UsageRecord a, b, c;
    Sluice__Control__UsageRecord *recs[] = {record(&a, "rec-1"), record(&b, "rec-2"),
                                            record(&c, "rec-1")};
    int ok;
    assert_int_equal(push(f, "gpu1", recs, 3, &ok), 3); /* duplicate inside one push */
    assert_true(ok);
    assert_int_equal(push(f, "gpu1", recs, 2, &ok), 2); /* redelivery */
    int64_t n;
    sl_error e;
    assert_int_equal(nh_store_usage_count(f->s, &n, &e), SL_OK);
    assert_int_equal(n, 2);
    /* a malformed record refuses the whole push, nothing stored, nothing acked */
    Sluice__Control__UsageRecord bad;
    record(&bad, "rec-3");
    bad.interval_end_ns = bad.interval_start_ns - 1;
    Sluice__Control__UsageRecord d;
    Sluice__Control__UsageRecord *mixed[] = {record(&d, "rec-4"), &bad};
    assert_int_equal(push(f, "gpu1", mixed, 2, &ok), 0);
    assert_false(ok);
    assert_int_equal(nh_store_usage_count(f->s, &n, &e), SL_OK);
    assert_int_equal(n, 2);
    /* an unauthenticated caller cannot push */
    assert_int_equal(push(f, NULL, recs, 1, &ok), 0);
    assert_false(ok);
}

typedef struct shared_seen {
    int n, unknown;
    uint64_t ns;
} shared_seen;

static int on_shared(const sl_usage_rec *u, void *ud)
{
    shared_seen *s = ud;
    s->n++;
    if (u->shared_unknown) {
        s->unknown++;
        assert_int_equal(u->gpu_shared_ns, 0);
    } else {
        s->ns += u->gpu_shared_ns;
    }
    return 0;
}

static void usage_shared_time(void **state)
{
    fx *f = *state;
    assert_true(reg(f, "gpu1", "gpu1", "tcp://192.0.2.1:7400", 8));
    Sluice__Control__UsageRecord a, b, c, old;
    Sluice__Control__SharedTime sa = SLUICE__CONTROL__SHARED_TIME__INIT;
    Sluice__Control__SharedTime sb = SLUICE__CONTROL__SHARED_TIME__INIT;
    Sluice__Control__SharedTime zero = SLUICE__CONTROL__SHARED_TIME__INIT;
    sa.gpu_shared_ns = 4500000000ULL;
    sb.gpu_shared_ns = 10000000000ULL; /* the whole interval */
    record(&a, "rec-1")->shared = &sa;
    record(&b, "rec-2")->shared = &sb;
    record(&c, "rec-3")->shared = &zero; /* idle, or nothing to share: 0, reported */
    record(&old, "rec-4");               /* an agent older than the field */
    Sluice__Control__UsageRecord *recs[] = {&a, &b, &c, &old};
    int ok;
    assert_int_equal(push(f, "gpu1", recs, 4, &ok), 4);
    assert_true(ok);
    shared_seen s = {0};
    sl_error e;
    int64_t t0 = NOW * 1000000000LL;
    assert_int_equal(
        nh_store_usage_records(f->s, t0, t0 + 3600000000000LL, NULL, on_shared, &s, &e), SL_OK);
    assert_int_equal(s.n, 4);
    assert_int_equal(s.unknown, 1);
    assert_int_equal(s.ns, 14500000000ULL);
    /* more than its interval: malformed, the whole push refused */
    Sluice__Control__UsageRecord bad;
    Sluice__Control__SharedTime sbad = SLUICE__CONTROL__SHARED_TIME__INIT;
    sbad.gpu_shared_ns = 10000000001ULL;
    record(&bad, "rec-5")->shared = &sbad;
    Sluice__Control__UsageRecord *one[] = {&bad};
    assert_int_equal(push(f, "gpu1", one, 1, &ok), 0);
    assert_false(ok);
    int64_t n;
    assert_int_equal(nh_store_usage_count(f->s, &n, &e), SL_OK);
    assert_int_equal(n, 4);
}

static int host_row_check(const nh_host_row *r, void *ud)
{
    (void)ud;
    assert_string_equal(r->host, "gpu1");
    assert_int_equal(r->slots, 8);
    assert_int_equal(r->used, 1);
    assert_non_null(strstr(r->gpus_json, "GPU-1234"));
    return 0;
}

static void restart_loses_nothing(void **state)
{
    fx *f = *state;
    assert_true(reg(f, "gpu1", "gpu1", "tcp://192.0.2.1:7400", 8));
    char d[SL_ERROR_MSG_MAX];
    assert_true(place(f, "gpu1", I1, PA, "gpu1", d));
    Sluice__Control__UsageRecord a;
    Sluice__Control__UsageRecord *recs[] = {record(&a, "rec-1")};
    int ok;
    assert_int_equal(push(f, "gpu1", recs, 1, &ok), 1);
    nh_store_close(f->s);
    sl_error e;
    assert_int_equal(nh_store_open(f->db.url, 0, &f->s, &e), SL_OK);
    char h[256];
    assert_true(lookup(f, I1, h));
    assert_string_equal(h, "gpu1");
    int64_t n;
    assert_int_equal(nh_store_usage_count(f->s, &n, &e), SL_OK);
    assert_int_equal(n, 1);
    assert_int_equal(push(f, "gpu1", recs, 1, &ok), 1); /* still stored once */
    assert_int_equal(nh_store_usage_count(f->s, &n, &e), SL_OK);
    assert_int_equal(n, 1);
    /* and a read-only open (the CLI) sees it all */
    nh_store *ro;
    assert_int_equal(nh_store_open(f->db.url, 1, &ro, &e), SL_OK);
    assert_int_equal(nh_store_hosts(ro, 0, host_row_check, NULL, &e), SL_OK);
    nh_store_close(ro);
    /* a read-only open of a file without the schema fails clearly */
    assert_int_not_equal(nh_store_open("/nonexistent/dir/x.db", 1, &ro, &e), SL_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(several_agents, setup, teardown),
        cmocka_unit_test_setup_teardown(refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(ping_is_heartbeat, setup, teardown),
        cmocka_unit_test_setup_teardown(usage_stored_once, setup, teardown),
        cmocka_unit_test_setup_teardown(usage_shared_time, setup, teardown),
        cmocka_unit_test_setup_teardown(restart_loses_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
