/* The registry channel's message path without the transport: a packed RegistryRequest in, a
 * packed RegistryReply out with the same seq; garbage, empty and oversized requests are
 * SL_ERR_PROTOCOL (the binding drops the peer); the peer host from the certificate is enforced. */
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
#include "registry_channel.h"

#define NOW 1800000000LL

static nh_store *store;
static nh_testdb db;

static int setup(void **state)
{
    (void)state;
    nh_testdb_make(&db);
    sl_error e;
    assert_int_equal(nh_store_open(db.url, 0, &store, &e), SL_OK);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nh_store_close(store);
    nh_testdb_drop(&db);
    return 0;
}

/* Packs req, processes it as host, returns the unpacked reply (or NULL with *rc set). */
static Sluice__Control__RegistryReply *roundtrip(const char *host,
                                                 Sluice__Control__RegistryRequest *req)
{
    size_t n = sluice__control__registry_request__get_packed_size(req);
    uint8_t *in = malloc(n + 1), *out = NULL;
    size_t out_len = 0;
    sluice__control__registry_request__pack(req, in);
    sl_error store_err, e;
    assert_int_equal(nh_regchan_process(store, host, NOW, in, n, &out, &out_len, &store_err, &e),
                     SL_OK);
    assert_int_equal(store_err.code, SL_OK);
    free(in);
    Sluice__Control__RegistryReply *r = sluice__control__registry_reply__unpack(NULL, out_len, out);
    free(out);
    assert_non_null(r);
    return r;
}

static void register_place_and_host_check(void **state)
{
    (void)state;
    Sluice__Control__AgentInfo ai = SLUICE__CONTROL__AGENT_INFO__INIT;
    ai.host = "gpu-a";
    ai.enrollment_endpoint = "tcp://192.0.2.1:7400";
    ai.slots_total = 4;
    Sluice__Control__RegistryRequest req = SLUICE__CONTROL__REGISTRY_REQUEST__INIT;
    req.seq = 41;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REGISTER;
    req.register_ = &ai;
    Sluice__Control__RegistryReply *r = roundtrip("gpu-b", &req); /* another host's cert */
    assert_int_equal(r->seq, 41);
    assert_false(r->ok);
    assert_non_null(strstr(r->detail, "not the authenticated host gpu-b"));
    sluice__control__registry_reply__free_unpacked(r, NULL);
    req.seq = 42;
    r = roundtrip("gpu-a", &req);
    assert_int_equal(r->seq, 42);
    assert_true(r->ok);
    assert_string_equal(r->detail, "registered");
    sluice__control__registry_reply__free_unpacked(r, NULL);

    Sluice__Control__Ping ping = SLUICE__CONTROL__PING__INIT;
    ping.nonce = 9;
    req.seq = 43;
    req.kind_case = SLUICE__CONTROL__REGISTRY_REQUEST__KIND_PING;
    req.ping = &ping;
    r = roundtrip("gpu-a", &req);
    assert_true(r->ok);
    assert_non_null(r->pong);
    assert_int_equal(r->pong->nonce, 9);
    sluice__control__registry_reply__free_unpacked(r, NULL);
}

static void garbage_is_a_protocol_error(void **state)
{
    (void)state;
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x7a, 0x01};
    uint8_t *out = (uint8_t *)1;
    size_t out_len = 5;
    sl_error store_err, e;
    assert_int_equal(
        nh_regchan_process(store, "gpu-a", NOW, junk, sizeof junk, &out, &out_len, &store_err, &e),
        SL_ERR_PROTOCOL);
    assert_null(out);
    assert_int_equal(out_len, 0);
    assert_string_equal(e.msg, "request of 7 bytes is not a RegistryRequest");
    assert_int_equal(
        nh_regchan_process(store, "gpu-a", NOW, junk, 0, &out, &out_len, &store_err, &e),
        SL_ERR_PROTOCOL);
    assert_int_equal(nh_regchan_process(store, "gpu-a", NOW, junk, NH_REGCHAN_MAX_MESSAGE + 1, &out,
                                        &out_len, &store_err, &e),
                     SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "1..1048576"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(register_place_and_host_check),
        cmocka_unit_test(garbage_is_a_protocol_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
