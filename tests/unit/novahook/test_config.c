/* sluice-novahook configuration: a valid file, and errors that name the line and the key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "config.h"

#define REQUIRED                                                                                   \
    "listen = 127.0.0.1:9443\n"                                                                    \
    "tls_cert = /etc/sluice/nh.crt\n"                                                              \
    "tls_key = /etc/sluice/nh.key\n"                                                               \
    "client_ca = /etc/sluice/nova-ca.pem\n"                                                        \
    "token_key = /etc/sluice/token.key\n"                                                          \
    "agent_ca = /etc/sluice/agent-ca.pem\n"

static void valid(void **state)
{
    (void)state;
    nh_config c;
    nh_config_defaults(&c);
    sl_error e;
    assert_int_equal(nh_config_parse("t.conf",
                                     "# comment\n" REQUIRED "  token_ttl = 300  \r\n"
                                     "; other comment\n\nthreads=2\nlisten_unused_check = 1\n",
                                     &c, &e),
                     SL_ERR_CONFIG);
    assert_string_equal(e.msg, "t.conf:12: listen_unused_check: unknown key");
    nh_config_defaults(&c);
    assert_int_equal(nh_config_parse("t.conf",
                                     REQUIRED "token_ttl = 300\nthreads=2\nclient_cn = nova-api\n",
                                     &c, &e),
                     SL_OK);
    assert_string_equal(c.listen_addr, "127.0.0.1");
    assert_int_equal(c.listen_port, 9443);
    assert_int_equal(c.token_ttl, 300);
    assert_int_equal(c.threads, 2);
    assert_string_equal(c.path, "/v1/vendordata");
    assert_string_equal(c.client_cn, "nova-api");
    nh_config_defaults(&c);
    assert_int_equal(nh_config_parse("t.conf", (REQUIRED "listen = [::1]:0\n") + 24, &c, &e),
                     SL_OK);
    assert_string_equal(c.listen_addr, "::1");
    assert_int_equal(c.listen_port, 0);
}

static void expect(const char *text, const char *msg)
{
    nh_config c;
    nh_config_defaults(&c);
    sl_error e;
    assert_int_equal(nh_config_parse("t.conf", text, &c, &e), SL_ERR_CONFIG);
    assert_string_equal(e.msg, msg);
}

#define REGISTRY                                                                                   \
    "registry_listen = 127.0.0.1:7410\n"                                                           \
    "registry_ca = /etc/sluice/reg-ca.pem\n"                                                       \
    "registry_cert = /etc/sluice/reg.crt\n"                                                        \
    "registry_key = /etc/sluice/reg.key\n"

static void registry_keys(void **state)
{
    (void)state;
    nh_config c;
    nh_config_defaults(&c);
    sl_error e;
    assert_int_equal(c.registry_port, -1);
    assert_int_equal(nh_config_parse("t.conf", REQUIRED, &c, &e), SL_OK);
    assert_int_equal(c.registry_port, -1); /* optional: not bound */
    nh_config_defaults(&c);
    assert_int_equal(nh_config_parse("t.conf",
                                     REQUIRED REGISTRY "registry_hosts = gpu-a,gpu-b.example\n", &c,
                                     &e),
                     SL_OK);
    assert_string_equal(c.registry_addr, "127.0.0.1");
    assert_int_equal(c.registry_port, 7410);
    assert_string_equal(c.registry_key, "/etc/sluice/reg.key");
    assert_string_equal(c.registry_hosts, "gpu-a,gpu-b.example");
    expect(REQUIRED "registry_listen = 127.0.0.1:7410\nregistry_ca = /etc/sluice/reg-ca.pem\n",
           "t.conf: registry_cert: required key missing (registry_listen is set)");
    expect(REQUIRED "registry_ca = /etc/sluice/reg-ca.pem\n",
           "t.conf: registry_ca: set but registry_listen is missing");
    expect(REQUIRED "registry_hosts = gpu-a\n",
           "t.conf: registry_hosts: set but registry_listen is missing");
    expect(REQUIRED "registry_listen = [::1]:7410\n",
           "t.conf:7: registry_listen: IPv6 is not supported here: expected IPV4:PORT");
    expect(REQUIRED "registry_listen = 127.0.0.1:70000\n",
           "t.conf:7: registry_listen: 70000 outside 0..65535");
    expect(REQUIRED "registry_key = reg.key\n", "t.conf:7: registry_key: must be an absolute path");
    expect(REQUIRED REGISTRY "registry_hosts = gpu-a,,gpu-b\n",
           "t.conf:11: registry_hosts: expected comma-separated host names of 1..63 bytes");
    expect(REQUIRED REGISTRY "registry_hosts = gpu-a,\n",
           "t.conf:11: registry_hosts: trailing comma");
    expect(REQUIRED REGISTRY "registry_hosts = gpu a\n",
           "t.conf:11: registry_hosts: an entry is not a host name");
    expect(REQUIRED REGISTRY "registry_listen = 127.0.0.1:1\n",
           "t.conf:11: registry_listen: key given twice");
}

static void errors_name_line_and_key(void **state)
{
    (void)state;
    expect(REQUIRED "token_ttl = 5\n", "t.conf:7: token_ttl: 5 outside 60..3600");
    expect(REQUIRED "token_ttl = ten\n", "t.conf:7: token_ttl: not an integer");
    expect(REQUIRED "max_body = 1\n", "t.conf:7: max_body: 1 outside 1024..16777216");
    expect(REQUIRED "threads = 0\n", "t.conf:7: threads: 0 outside 1..64");
    expect(REQUIRED "database = relative.db\n",
           "t.conf:7: database: a SQLite path must be absolute: relative.db");
    expect(REQUIRED "path = v1\n",
           "t.conf:7: path: must start with / and hold no '?', '#' or space");
    expect(REQUIRED "listen = 1.2.3.4:9443\n", "t.conf:7: listen: key given twice");
    expect("listen = nova:9443\n", "t.conf:1: listen: not an IPv4 address (use [..] for IPv6)");
    expect("listen = 127.0.0.1:99999\n", "t.conf:1: listen: 99999 outside 0..65535");
    expect("listen = 127.0.0.1\n", "t.conf:1: listen: expected IPV4:PORT or [IPV6]:PORT");
    expect("just words\n", "t.conf:1: expected key = value");
    expect("tls_cert =\n", "t.conf:1: tls_cert: must be an absolute path");
    expect("listen = 127.0.0.1:1\n", "t.conf: tls_cert: required key missing");
    expect("", "t.conf: listen: required key missing");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid),
        cmocka_unit_test(errors_name_line_and_key),
        cmocka_unit_test(registry_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
