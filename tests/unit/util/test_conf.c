#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/conf.h"

/* Records what the reader yields as "S kind name @line" / "K key=value @line" lines. */
typedef struct seen {
    char log[1024];
    const char *fail_key; /* on_key fails for this key */
} seen;

static void add(seen *s, const char *fmt, const char *a, const char *b, int line)
{
    size_t n = strlen(s->log);
    snprintf(s->log + n, sizeof s->log - n, fmt, a, b, line);
}

static sl_code on_section(void *ctx, const sl_conf_where *w, const char *kind, const char *name,
                          sl_error *e)
{
    (void)e;
    assert_string_equal(w->key + 1, kind);
    add(ctx, "S %s %s @%d\n", kind, name, w->line);
    return SL_OK;
}

static sl_code on_key(void *ctx, const sl_conf_where *w, const char *v, sl_error *e)
{
    seen *s = ctx;
    if (s->fail_key && !strcmp(w->key, s->fail_key))
        return sl_conf_bad(w, e, "rejected");
    add(s, "K %s=%s @%d\n", w->key, v, w->line);
    return SL_OK;
}

static sl_code parse(const char *text, int sections, seen *s, sl_error *e)
{
    memset(s, 0, sizeof *s);
    sl_error_clear(e);
    sl_conf_reader r = {sections ? on_section : NULL, "expected [KIND NAME]", on_key, s};
    return sl_conf_parse("f.conf", text, &r, e);
}

static void yields_keys_and_sections(void **state)
{
    (void)state;
    seen s;
    sl_error e;
    assert_int_equal(
        parse("# comment\n ; other\n\n  a = 1 \r\nb=\n[tier  gold ]\na = x y\n", 1, &s, &e), SL_OK);
    assert_string_equal(s.log, "K a=1 @4\nK b= @5\nS tier gold @6\nK a=x y @7\n");
}

/* "key = value  # why": the comment is not part of the value; a '#' inside a word is */
static void trailing_comments(void **state)
{
    (void)state;
    seen s;
    sl_error e;
    assert_int_equal(
        parse("a = 5  # five\nb = x#y\t# tab\n[tier gold] # the top tier\nc =   # empty\n", 1, &s,
              &e),
        SL_OK);
    assert_string_equal(s.log, "K a=5 @1\nK b=x#y @2\nS tier gold @3\nK c= @4\n");
}

static void formats_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int sections;
        const char *msg;
    } cases[] = {
        {"a = 1\na = 2\n", 0, "f.conf:2: a: key given twice"},
        {"a = 1\nnope\n", 0, "f.conf:2: expected key = value"},
        {" = 1\n", 0, "f.conf:1: : missing or too long key"},
        {"abcdefghijabcdefghijabcdefghijab = 1\n", 0,
         "f.conf:1: abcdefghijabcdefghijabcdefghijab: missing or too long key"},
        {"[tier]\n", 1, "f.conf:1: [tier: expected [KIND NAME]"},
        {"[tier x\n", 1, "f.conf:1: [tier x: expected [KIND NAME]"},
        {"[t x]\na=2\na=3\n", 1, "f.conf:3: a: key given twice"},
        /* without a section callback, '[' lines are ordinary lines */
        {"[tier x]\n", 0, "f.conf:1: expected key = value"},
    };
    seen s;
    sl_error e;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(parse(cases[i].text, cases[i].sections, &s, &e), SL_ERR_CONFIG);
        assert_string_equal(e.msg, cases[i].msg);
    }
}

static void callback_errors_stop_the_reader(void **state)
{
    (void)state;
    seen s;
    sl_error e;
    memset(&s, 0, sizeof s);
    s.fail_key = "b";
    sl_conf_reader r = {NULL, NULL, on_key, &s};
    assert_int_equal(sl_conf_parse("f.conf", "a=1\nb=2\nc=3\n", &r, &e), SL_ERR_CONFIG);
    assert_string_equal(e.msg, "f.conf:2: b: rejected");
    assert_string_equal(s.log, "K a=1 @1\n");
}

static void sections_reset_duplicates(void **state)
{
    (void)state;
    seen s;
    sl_error e;
    assert_int_equal(parse("a=1\n[t x]\na=2\n[t y]\na=3\n", 1, &s, &e), SL_OK);
}

static void value_helpers(void **state)
{
    (void)state;
    sl_conf_where w = {"f.conf", 7, "k"};
    sl_error e;
    long long n;
    int d;
    char buf[8];
    assert_int_equal(sl_conf_int(&w, "42", 0, 100, &n, &e), SL_OK);
    assert_int_equal(n, 42);
    assert_int_equal(sl_conf_int(&w, "4x", 0, 100, &n, &e), SL_ERR_CONFIG);
    assert_string_equal(e.msg, "f.conf:7: k: not an integer");
    assert_int_equal(sl_conf_int(&w, "", 0, 100, &n, &e), SL_ERR_CONFIG);
    assert_string_equal(e.msg, "f.conf:7: k: not an integer");
    assert_int_equal(sl_conf_int(&w, "-1", 0, 100, &n, &e), SL_ERR_CONFIG);
    assert_string_equal(e.msg, "f.conf:7: k: -1 outside 0..100");
    assert_int_equal(sl_conf_duration(&w, "90m", 60, 86400, &d, &e), SL_OK);
    assert_int_equal(d, 5400);
    assert_int_equal(sl_conf_duration(&w, "2d", 60, 86400, &d, &e), SL_ERR_CONFIG);
    assert_string_equal(e.msg, "f.conf:7: k: 2d outside 60..86400 seconds");
    assert_int_equal(sl_conf_duration(&w, "5w", 60, 86400, &d, &e), SL_ERR_CONFIG);
    assert_string_equal(e.msg, "f.conf:7: k: expected a duration such as 3600, 90m, 12h or 7d");
    assert_int_equal(sl_conf_str(&w, "abc", buf, sizeof buf, &e), SL_OK);
    assert_string_equal(buf, "abc");
    assert_int_equal(sl_conf_str(&w, "abcdefgh", buf, sizeof buf, &e), SL_ERR_CONFIG);
    assert_string_equal(e.msg, "f.conf:7: k: value too long");
    assert_int_equal(sl_conf_str(&w, "", buf, sizeof buf, &e), SL_ERR_CONFIG);
    assert_string_equal(e.msg, "f.conf:7: k: empty value");
    assert_int_equal(sl_conf_str(&w, "a\x01", buf, sizeof buf, &e), SL_ERR_CONFIG);
    assert_string_equal(e.msg, "f.conf:7: k: value is not printable ASCII");
}

static void reads_files(void **state)
{
    (void)state;
    char path[] = "/tmp/sl_conf_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "a = 1\n", 6), 6);
    close(fd);
    sl_error e;
    char *text;
    assert_int_equal(sl_conf_read_file(path, 64, &text, &e), SL_OK);
    assert_string_equal(text, "a = 1\n");
    free(text);
    assert_int_equal(sl_conf_read_file(path, 4, &text, &e), SL_ERR_CONFIG);
    assert_null(text);
    char want[128];
    snprintf(want, sizeof want, "%s: larger than 4 bytes", path);
    assert_string_equal(e.msg, want);
    unlink(path);
    assert_int_equal(sl_conf_read_file(path, 64, &text, &e), SL_ERR_CONFIG);
    assert_null(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(yields_keys_and_sections),
        cmocka_unit_test(trailing_comments),
        cmocka_unit_test(formats_errors),
        cmocka_unit_test(callback_errors_stop_the_reader),
        cmocka_unit_test(sections_reset_duplicates),
        cmocka_unit_test(value_helpers),
        cmocka_unit_test(reads_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
