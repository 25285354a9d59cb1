#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "sluice/error.h"

static void fail_fills_code_and_message(void **state)
{
    (void)state;
    sl_error e;
    sl_error_clear(&e);
    assert_int_equal(sl_fail(&e, SL_ERR_CERT_EXPIRED, "certificate of %s expired", "peer"),
                     SL_ERR_CERT_EXPIRED);
    assert_int_equal(e.code, SL_ERR_CERT_EXPIRED);
    assert_string_equal(e.msg, "certificate of peer expired");
    assert_int_equal(sl_fail(NULL, SL_ERR_IO, "ignored"), SL_ERR_IO);
}

static void every_code_has_a_name(void **state)
{
    (void)state;
    for (int c = 0; c < SL_CODE_COUNT; c++) {
        assert_non_null(sl_code_name((sl_code)c));
        assert_string_not_equal(sl_code_name((sl_code)c), "unknown");
    }
    assert_string_equal(sl_code_name((sl_code)9999), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fail_fills_code_and_message),
        cmocka_unit_test(every_code_has_a_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
