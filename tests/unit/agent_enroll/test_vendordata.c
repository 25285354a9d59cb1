/* sluice-enroll's vendordata entry (frontend/enroll/vendordata.c): parsing, the token's
 * "expires" and the message for a config drive whose token is older than its lifetime. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "enroll_client.h"
#include "vendordata.h"

static const char *const BODY =
    "{\"sluice\": {\"token\": \"a.b.c\", \"ca\": \"PEM\", \"enroll_endpoint\": "
    "\"tcp://192.0.2.10:7400\", \"expires\": 1800000600}}";

static void test_vendordata_parse(void **state)
{
    (void)state;
    se_vendordata v;
    sl_error e;
    assert_int_equal(se_vendordata_parse("x", BODY, strlen(BODY), "sluice", &v, &e), SL_OK);
    assert_string_equal(v.token, "a.b.c");
    assert_string_equal(v.endpoint, "tcp://192.0.2.10:7400");
    assert_int_equal(v.expires, 1800000600);
    se_vendordata_free(&v);

    /* an older nova-hook without "expires": no time check */
    const char *old = "{\"sluice\": {\"token\": \"t\", \"ca\": \"c\", \"enroll_endpoint\": "
                      "\"tcp://h:1\"}}";
    assert_int_equal(se_vendordata_parse("x", old, strlen(old), "sluice", &v, &e), SL_OK);
    assert_int_equal(v.expires, 0);
    assert_int_equal(se_vendordata_check_time("x", &v, 4000000000, &e), SL_OK);
    se_vendordata_free(&v);

    const char *bad = "{\"sluice\": {\"token\": \"t\", \"ca\": \"c\", \"enroll_endpoint\": "
                      "\"tcp://h:1\", \"expires\": \"soon\"}}";
    assert_int_equal(se_vendordata_parse("x", bad, strlen(bad), "sluice", &v, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "\"expires\" is not a unix time"));

    const char *none = "{\"sluice\": {}}";
    assert_int_equal(se_vendordata_parse("vd", none, strlen(none), "sluice", &v, &e),
                     SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "has no \"sluice\" entry"));
}

static void test_vendordata_expired(void **state)
{
    (void)state;
    se_vendordata v;
    sl_error e;
    assert_int_equal(se_vendordata_parse("x", BODY, strlen(BODY), "sluice", &v, &e), SL_OK);
    /* within the lifetime, and within the skew after it */
    assert_int_equal(se_vendordata_check_time("x", &v, 1800000000, &e), SL_OK);
    assert_int_equal(se_vendordata_check_time("x", &v, 1800000600 + SE_TOKEN_SKEW_S, &e), SL_OK);
    /* from the metadata service: fetch again, or the clock */
    assert_int_equal(
        se_vendordata_check_time(SE_DEFAULT_SOURCE, &v, 1800000600 + SE_TOKEN_SKEW_S + 1, &e),
        SL_ERR_CERT_EXPIRED);
    assert_non_null(strstr(e.msg, "the token expired at 2027-01-15 08:10:00 UTC"));
    assert_non_null(strstr(e.msg, "clock"));
    /* from a config drive: why it cannot be newer, where a new one comes from */
    assert_int_equal(se_vendordata_check_time(SE_CONFIG_DRIVE_SOURCE, &v, 1800000600 + 7200, &e),
                     SL_ERR_CERT_EXPIRED);
    assert_non_null(strstr(e.msg, "the config drive's token expired at 2027-01-15 08:10:00 UTC "
                                  "(120 min ago)"));
    assert_non_null(strstr(e.msg, "written once, when the instance is created"));
    assert_non_null(strstr(e.msg, "metadata service"));
    se_vendordata_free(&v);
}

static void test_vendordata_sources(void **state)
{
    (void)state;
    assert_true(se_source_is_config_drive(SE_CONFIG_DRIVE_SOURCE));
    assert_true(se_source_is_config_drive(SE_CONFIG_DRIVE_DIR "/x.json"));
    assert_false(se_source_is_config_drive(SE_CONFIG_DRIVE_DIR "-other/x.json"));
    assert_false(se_source_is_config_drive(SE_DEFAULT_SOURCE));
    assert_false(se_source_is_config_drive(NULL));
    const char *s[2];
    int n = se_default_sources(s);
    /* the metadata service is always the last */
    assert_true(n >= 1 && n <= 2);
    assert_string_equal(s[n - 1], SE_DEFAULT_SOURCE);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vendordata_parse),
        cmocka_unit_test(test_vendordata_expired),
        cmocka_unit_test(test_vendordata_sources),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
