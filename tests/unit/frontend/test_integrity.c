/* INTEGRITY_CHECK[1]: the constant answers (confirmed on 580), the structure of the hash and
 * the inputs the slot gathers. Bit-exactness against the real driver for versions ending in
 * 2..9 needs the GPU machine: integrity_probe.c. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "exports/export_tables.h"
#include "fe_test_hooks.h"
#include "exports/integrity.h"
#include "exports/md2.h"

typedef CUresult (*integrity_fn)(uint32_t, uint64_t, uint64_t[2]);

static const void *const *table(const uint8_t id[16])
{
    CUuuid u;
    const void *t = NULL;
    memcpy(u.bytes, id, 16);
    assert_int_equal(sl_fe_cuGetExportTable(&t, &u), CUDA_SUCCESS);
    return t;
}

static int setup(void **state)
{
    (void)state;
    fe_test_reset();
    return 0;
}

static void test_constants(void **state)
{
    (void)state;
    integrity_fn f = (integrity_fn)table(SL_FE_ET_ID_INTEGRITY_CHECK)[1];
    /* probe data D: real answers of 580 */
    const uint32_t zero[] = {0, 10, 13000, 12090};
    const uint32_t one[] = {1, 11, 13001};
    uint64_t out[2];
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(f(zero[i], 1784320000, out), CUDA_SUCCESS);
        assert_int_equal(out[0], UINT64_C(0x3341181c03cb675c));
        assert_int_equal(out[1], UINT64_C(0x8ed383aa1f4cd1e8));
    }
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(f(one[i], 1784320000, out), CUDA_SUCCESS);
        assert_int_equal(out[0], UINT64_C(0x1841181c03cb675c));
        assert_int_equal(out[1], UINT64_C(0x8ed383aa1f4cd1e8));
    }
    assert_int_equal(f(13002, 1, NULL), CUDA_ERROR_INVALID_VALUE);
}

static const struct sl_fe_integrity_device DEV2[2] = {
    {{{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
       0x10}},
     0x0001,
     0x1b,
     0x02},
    {{{(char)0xf0, 0x12}}, 0, 0xc3, 0},
};

static struct sl_fe_integrity_input sample(void)
{
    return (struct sl_fe_integrity_input){
        .driver_version = 13000,
        .version = 13002,
        .pid = 0x11223344,
        .thread_id = 0x55667788,
        .cudart_table = UINT64_C(0x00007f0011223340),
        .integrity_table = UINT64_C(0x00007f0011225560),
        .slot1 = UINT64_C(0x00007f0010001230),
        .unix_seconds = UINT64_C(1784320000),
        .devices = DEV2,
        .device_count = 2,
    };
}

/* The bytes hashed, laid out by hand: 48-byte record, then 28 bytes per device. */
static const uint8_t HASHED[48 + 2 * 28] = {
    0xc8, 0x32, 0x00, 0x00,                         /* driver 13000 */
    0xca, 0x32, 0x00, 0x00,                         /* version 13002 */
    0x44, 0x33, 0x22, 0x11,                         /* pid */
    0x88, 0x77, 0x66, 0x55,                         /* thread */
    0x40, 0x33, 0x22, 0x11, 0x00, 0x7f, 0x00, 0x00, /* &CUDART */
    0x60, 0x55, 0x22, 0x11, 0x00, 0x7f, 0x00, 0x00, /* &INTEGRITY */
    0x30, 0x12, 0x00, 0x10, 0x00, 0x7f, 0x00, 0x00, /* slot 1 */
    0x00, 0x90, 0x5a, 0x6a, 0x00, 0x00, 0x00, 0x00, /* unix seconds */
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0x10, 0x01, 0x00, 0x00, 0x00, 0x1b, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, /* device 0 */
    0xf0, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0xc3, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* device 1 */
};

static const uint8_t KEY[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};

static void test_serialisation(void **state)
{
    (void)state;
    struct sl_fe_integrity_input in = sample();
    uint8_t rec[48], drec[28];
    sl_fe_integrity_record(&in, rec);
    assert_memory_equal(rec, HASHED, 48);
    sl_fe_integrity_device_record(&DEV2[0], drec);
    assert_memory_equal(drec, HASHED + 48, 28);
    sl_fe_integrity_device_record(&DEV2[1], drec);
    assert_memory_equal(drec, HASHED + 76, 28);
}

static void test_is_hmac_md2_of_the_records(void **state)
{
    (void)state;
    struct sl_fe_integrity_input in = sample();
    uint64_t out[2];
    assert_int_equal(sl_fe_integrity_compute(&in, out), 0);
    uint8_t mac[16];
    sl_hmac_md2(KEY, 16, HASHED, sizeof HASHED, mac);
    uint64_t w0 = 0, w1 = 0;
    for (int i = 7; i >= 0; i--) {
        w0 = (w0 << 8) | mac[i];
        w1 = (w1 << 8) | mac[8 + i];
    }
    assert_int_equal(out[0], w0);
    assert_int_equal(out[1], w1);
    /* no devices: the record alone */
    in.device_count = 0;
    in.devices = NULL;
    assert_int_equal(sl_fe_integrity_compute(&in, out), 0);
    sl_hmac_md2(KEY, 16, HASHED, 48, mac);
    assert_memory_equal(out, mac, 16); /* little-endian host */
    /* argument checks */
    in.device_count = 1;
    assert_int_equal(sl_fe_integrity_compute(&in, out), -1);
    assert_int_equal(sl_fe_integrity_compute(NULL, out), -1);
    assert_int_equal(sl_fe_integrity_compute(&in, NULL), -1);
}

static void test_every_input_matters(void **state)
{
    (void)state;
    struct sl_fe_integrity_input base = sample();
    uint64_t ref[2], out[2];
    sl_fe_integrity_compute(&base, ref);
    for (int field = 0; field < 9; field++) {
        struct sl_fe_integrity_input in = base;
        struct sl_fe_integrity_device devs[2] = {DEV2[0], DEV2[1]};
        in.devices = devs;
        switch (field) {
        case 0:
            in.driver_version++;
            break;
        case 1:
            in.version = 13003;
            break;
        case 2:
            in.pid++;
            break;
        case 3:
            in.thread_id++;
            break;
        case 4:
            in.cudart_table += 8;
            break;
        case 5:
            in.integrity_table += 8;
            break;
        case 6:
            in.slot1 += 16;
            break;
        case 7:
            in.unix_seconds++;
            break;
        default:
            devs[1].pci_bus++;
            break;
        }
        sl_fe_integrity_compute(&in, out);
        assert_memory_not_equal(out, ref, 16);
    }
}

static void test_slot_gathers_its_inputs(void **state)
{
    (void)state;
    fe_test_set_devices(DEV2, 2);
    fe_test_set_driver_version(13000);
    const void *const *integ = table(SL_FE_ET_ID_INTEGRITY_CHECK);
    const void *const *cudart = table(SL_FE_ET_ID_CUDART_INTERFACE);
    uint64_t got[2], want[2];
    assert_int_equal(((integrity_fn)integ[1])(13002, 1784320000, got), CUDA_SUCCESS);
    struct sl_fe_integrity_input in = {
        .driver_version = 13000,
        .version = 13002,
        .pid = (uint32_t)getpid(),
        .thread_id = (uint32_t)(uintptr_t)pthread_self(),
        .cudart_table = (uint64_t)(uintptr_t)cudart,
        .integrity_table = (uint64_t)(uintptr_t)integ,
        .slot1 = (uint64_t)(uintptr_t)integ[1],
        .unix_seconds = 1784320000,
        .devices = DEV2,
        .device_count = 2,
    };
    sl_fe_integrity_compute(&in, want);
    assert_memory_equal(got, want, 16);
    /* a failing device query is reported, not hashed around */
    fe_test_fail_device_attribute(CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(((integrity_fn)integ[1])(13002, 1784320000, got), CUDA_ERROR_NOT_INITIALIZED);
    /* the constants need no device */
    assert_int_equal(((integrity_fn)integ[1])(13000, 1784320000, got), CUDA_SUCCESS);
    /* zero devices */
    fe_test_fail_device_attribute(CUDA_SUCCESS);
    fe_test_set_devices(NULL, 0);
    assert_int_equal(((integrity_fn)integ[1])(13002, 1784320000, got), CUDA_SUCCESS);
    in.device_count = 0;
    in.devices = NULL;
    sl_fe_integrity_compute(&in, want);
    assert_memory_equal(got, want, 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_constants, setup),
        cmocka_unit_test_setup(test_serialisation, setup),
        cmocka_unit_test_setup(test_is_hmac_md2_of_the_records, setup),
        cmocka_unit_test_setup(test_every_input_matters, setup),
        cmocka_unit_test_setup(test_slot_gathers_its_inputs, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
