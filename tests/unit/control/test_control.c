/* Round trips of the hand-written control schema: enrollment, agent<->backend, usage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "sluice_control.pb-c.h"

static void usage_record_round_trip(void **state)
{
    (void)state;
    Sluice__Control__UsageRecord r = SLUICE__CONTROL__USAGE_RECORD__INIT;
    r.record_id = "6f1c2a4e-0b7d-4c55-9a61-3f0e8d2b7c10";
    r.instance_uuid = "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60";
    r.project_id = "f241e906010e4917ae8153f4fb8aa021";
    r.flavor = "g1.small";
    r.gpu_uuid = "GPU-0000";
    r.interval_start_ns = 1700000000000000000;
    r.interval_end_ns = 1700000010000000000;
    r.gpu_busy_ns = 123456789;
    r.kernels = 1000;
    r.bytes_htod = UINT64_MAX;
    r.measurement = "cupti";
    r.final = 1;

    size_t n = sluice__control__usage_record__get_packed_size(&r);
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    assert_int_equal(sluice__control__usage_record__pack(&r, buf), n);
    Sluice__Control__UsageRecord *d = sluice__control__usage_record__unpack(NULL, n, buf);
    assert_non_null(d);
    assert_string_equal(d->record_id, r.record_id);
    assert_string_equal(d->project_id, r.project_id);
    assert_int_equal(d->interval_end_ns, r.interval_end_ns);
    assert_int_equal(d->gpu_busy_ns, r.gpu_busy_ns);
    assert_true(d->bytes_htod == UINT64_MAX);
    assert_true(d->final);
    sluice__control__usage_record__free_unpacked(d, NULL);
    free(buf);
}

static void backend_control_oneof_round_trip(void **state)
{
    (void)state;
    Sluice__Control__Sla sla = SLUICE__CONTROL__SLA__INIT;
    sla.flavor = "g1.small";
    sla.gpu_share = 0.3;
    sla.memory_quota_bytes = 8ull << 30;
    Sluice__Control__Grant g = SLUICE__CONTROL__GRANT__INIT;
    g.instance_uuid = "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60";
    g.project_id = "f241e906010e4917ae8153f4fb8aa021";
    g.sla = &sla;
    Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.seq = 7;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT;
    m.grant = &g;

    uint8_t buf[512];
    size_t n = sluice__control__backend_control__get_packed_size(&m);
    assert_true(n <= sizeof buf);
    sluice__control__backend_control__pack(&m, buf);
    Sluice__Control__BackendControl *d = sluice__control__backend_control__unpack(NULL, n, buf);
    assert_non_null(d);
    assert_int_equal(d->kind_case, SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT);
    assert_string_equal(d->grant->instance_uuid, g.instance_uuid);
    assert_true(d->grant->sla->gpu_share == 0.3);
    assert_true(d->grant->sla->memory_quota_bytes == 8ull << 30);
    sluice__control__backend_control__free_unpacked(d, NULL);
}

static void garbage_is_refused(void **state)
{
    (void)state;
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    assert_null(sluice__control__enroll_request__unpack(NULL, sizeof junk, junk));
    assert_null(sluice__control__registry_request__unpack(NULL, sizeof junk, junk));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(usage_record_round_trip),
        cmocka_unit_test(backend_control_oneof_round_trip),
        cmocka_unit_test(garbage_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
