/* sluice/log.h: escaping (nothing a guest sends can start a line of its own), the level from
 * $SLUICE_LOG_LEVEL (any case; garbage warned about once), the fields of a line. Each case that
 * logs runs in a child process: the level is read once per process, and stderr is a file there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice/log.h"

static void escapes(void **state)
{
    (void)state;
    char out[256];
    assert_string_equal(sl_log_escape("plain text: 1 2 3", out, sizeof out), "plain text: 1 2 3");
    assert_string_equal(sl_log_escape("a\nb\rc\td\\e", out, sizeof out), "a\\nb\\rc\\td\\\\e");
    assert_string_equal(sl_log_escape("\x1b[31mred\x7f\x01", out, sizeof out),
                        "\\x1b[31mred\\x7f\\x01");
    /* printable UTF-8 stays; invalid bytes, C1 controls, U+2028 do not */
    assert_string_equal(sl_log_escape("caf\xc3\xa9 \xf0\x9f\x98\x80", out, sizeof out),
                        "caf\xc3\xa9 \xf0\x9f\x98\x80");
    assert_string_equal(sl_log_escape("\xff\xc3(\xc2\x9b\xe2\x80\xa8\xed\xa0\x80", out, sizeof out),
                        "\\xff\\xc3(\\xc2\\x9b\\xe2\\x80\\xa8\\xed\\xa0\\x80");
    assert_string_equal(sl_log_escape(NULL, out, sizeof out), "");
    /* truncated at a whole escape, always terminated */
    char small[6];
    assert_string_equal(sl_log_escape("ab\ncd", small, sizeof small), "ab\\nc");
    assert_string_equal(sl_log_escape("\xc3\xa9\xc3\xa9\xc3\xa9", small, sizeof small),
                        "\xc3\xa9\xc3\xa9");
}

static void labels(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(sl_log_session_label("f241e906010e4917ae8153f4fb8aa021", 7, b, sizeof b),
                        "f241e906/7");
    assert_string_equal(sl_log_session_label("", 1, b, sizeof b), "-/1");
}

typedef void (*body_fn)(void);

/* Runs body in a child with SLUICE_LOG_LEVEL=level (NULL: unset) and stderr in a file; returns
 * what it wrote (malloc'd). */
static char *run_child(const char *level, body_fn body)
{
    char path[] = "/tmp/sluice-test-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (level)
            setenv("SLUICE_LOG_LEVEL", level, 1);
        else
            unsetenv("SLUICE_LOG_LEVEL");
        unsetenv("JOURNAL_STREAM");
        dup2(fd, STDERR_FILENO);
        body();
        fflush(stderr);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    static char buf[8192];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    unlink(path);
    assert_true(n >= 0);
    buf[n] = '\0';
    return strdup(buf);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void log_hostile(void)
{
    sl_log(SL_LOG_NOTICE, "backend", "session 1 opened (guest on %s, %s)",
           "evil\n<0>agent: forged emergency", "client\r\x1b[2Jv1");
}

static void one_line_per_message(void **state)
{
    (void)state;
    char *out = run_child(NULL, log_hostile);
    assert_int_equal(count_lines(out), 1);
    assert_null(strstr(out, "\n<0>"));
    assert_string_equal(out, "<5>backend: session 1 opened (guest on evil\\n<0>agent: forged "
                             "emergency, client\\r\\x1b[2Jv1)\n");
    free(out);
}

static void log_levels(void)
{
    sl_log(SL_LOG_DEBUG, "t", "debug line");
    sl_log(SL_LOG_INFO, "t", "info line");
    sl_log(SL_LOG_WARNING, "t", "warning line");
}

static void level_any_case(void **state)
{
    (void)state;
    char *out = run_child("DEBUG", log_levels);
    assert_string_equal(out, "<7>t: debug line\n<6>t: info line\n<4>t: warning line\n");
    free(out);
    out = run_child("Warning", log_levels);
    assert_string_equal(out, "<4>t: warning line\n");
    free(out);
    out = run_child("7", log_levels);
    assert_int_equal(count_lines(out), 3);
    free(out);
    out = run_child(NULL, log_levels);
    assert_string_equal(out, "<6>t: info line\n<4>t: warning line\n");
    free(out);
}

static void level_garbage_warned_once(void **state)
{
    (void)state;
    char *out = run_child("verbose\n<0>x", log_levels);
    assert_string_equal(out, "<4>log: SLUICE_LOG_LEVEL=verbose\\n<0>x is not err, warning, "
                             "notice, info, debug or 0..7; using info\n"
                             "<6>t: info line\n<4>t: warning line\n");
    free(out);
}

static void log_fields(void)
{
    sl_log_set_process_fields(&(sl_log_fields){.project = "p0123456789"});
    sl_log(SL_LOG_INFO, "backend", "listening");
    sl_log(SL_LOG_INFO, "backend", "project p0123456789: listening");
    sl_log_set_thread_fields(&(sl_log_fields){.instance = "inst-1", .session = "p0123456/3"});
    sl_log(SL_LOG_INFO, "backend", "session 3 instance inst-1: opened");
    sl_log_set_thread_fields(&(sl_log_fields){.instance = "bad\ninst"});
    sl_log(SL_LOG_INFO, "backend", "x");
    sl_log_set_thread_fields(NULL);
    sl_log(SL_LOG_INFO, "backend", "y");
}

static void fields_named_once(void **state)
{
    (void)state;
    char *out = run_child(NULL, log_fields);
    assert_string_equal(out, "<6>backend: listening [project=p0123456789]\n"
                             "<6>backend: project p0123456789: listening\n"
                             "<6>backend: session 3 instance inst-1: opened [project=p0123456789 "
                             "session=p0123456/3]\n"
                             "<6>backend: x [project=p0123456789 instance=bad\\ninst]\n"
                             "<6>backend: y [project=p0123456789]\n");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(escapes),
        cmocka_unit_test(labels),
        cmocka_unit_test(one_line_per_message),
        cmocka_unit_test(level_any_case),
        cmocka_unit_test(level_garbage_warned_once),
        cmocka_unit_test(fields_named_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
