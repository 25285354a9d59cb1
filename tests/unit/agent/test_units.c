/* agent unit tests: Nova metadata parsing, flavor policy, config errors, port allocation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend_state.h"
#include "config.h"
#include "gpus.h"
#include "novameta.h"
#include "policy.h"
#include "supervisor.h"

/* research/openstack.md §1: Nova's test_config_metadata_flavor_extra_specs, unchanged. */
static const char nova11[] =
    "<nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'>\n"
    "  <nova:package version=\"2014.2.3\"/>\n"
    "  <nova:name>moonbuggy</nova:name>\n"
    "  <nova:creationTime>2009-02-13 23:31:30</nova:creationTime>\n"
    "  <nova:flavor name=\"m1.lowgravity\" id=\"f719a0dd-4b43-4efe-8336-48ef74099ad4\">\n"
    "    <nova:memory>2048</nova:memory>\n"
    "    <nova:disk>50</nova:disk>\n"
    "    <nova:swap>10</nova:swap>\n"
    "    <nova:ephemeral>10</nova:ephemeral>\n"
    "    <nova:vcpus>8</nova:vcpus>\n"
    "    <nova:extraSpecs>\n"
    "      <nova:extraSpec name=\"hw_rng:allowed\">true</nova:extraSpec>\n"
    "    </nova:extraSpecs>\n"
    "  </nova:flavor>\n"
    "  <nova:owner>\n"
    "    <nova:user uuid=\"3472c2a6-de91-4fb5-b618-42bc781ef670\">buzz</nova:user>\n"
    "    <nova:project uuid=\"f241e906-010e-4917-ae81-53f4fb8aa021\">moonshot</nova:project>\n"
    "  </nova:owner>\n"
    "  <nova:root type=\"image\" uuid=\"fe55c69a-8b2e-4bbc-811a-9ad2023a0426\"/>\n"
    "  <nova:ports>\n"
    "    <nova:port uuid=\"567a4527-b0e4-4d0a-bcc2-71fda37897f7\">\n"
    "      <nova:ip type=\"fixed\" address=\"192.168.1.1\" ipVersion=\"4\"/>\n"
    "      <nova:ip type=\"fixed\" address=\"fe80::f95c:b030:7094\" ipVersion=\"6\"/>\n"
    "      <nova:ip type=\"floating\" address=\"11.22.33.44\" ipVersion=\"4\"/>\n"
    "    </nova:port>\n"
    "    <nova:port uuid=\"a3ca97e2-0cf9-4159-9bfc-afd55bc13ead\">\n"
    "      <nova:ip type=\"fixed\" address=\"10.0.0.1\" ipVersion=\"4\"/>\n"
    "      <nova:ip type=\"fixed\" address=\"fdf8:f53b:82e4::52\" ipVersion=\"6\"/>\n"
    "      <nova:ip type=\"floating\" address=\"1.2.3.4\" ipVersion=\"4\"/>\n"
    "    </nova:port>\n"
    "  </nova:ports>\n"
    "</nova:instance>\n";

/* Older Nova (Zed-era shape, namespace 1.0, default namespace instead of a prefix). */
static const char nova10[] =
    "<instance xmlns='http://openstack.org/xmlns/libvirt/nova/1.0'>"
    "<name>old</name><flavor name='g1.small'><memory>512</memory></flavor>"
    "<owner><user uuid='u1'>alice</user><project uuid='0123456789abcdef0123456789abcdef'>"
    "p</project></owner></instance>";

static sl_code parse(const char *x, ag_novameta *m, sl_error *e)
{
    return ag_novameta_parse(x, strlen(x), 0, m, e);
}

static void test_meta_full_11(void **st)
{
    (void)st;
    ag_novameta m;
    sl_error e;
    assert_int_equal(parse(nova11, &m, &e), SL_OK);
    assert_int_equal(m.ns_version, 11);
    assert_string_equal(m.name, "moonbuggy");
    assert_string_equal(m.flavor, "m1.lowgravity");
    assert_string_equal(m.flavor_id, "f719a0dd-4b43-4efe-8336-48ef74099ad4");
    assert_string_equal(m.project_id, "f241e906-010e-4917-ae81-53f4fb8aa021");
    assert_string_equal(m.project_name, "moonshot");
    assert_string_equal(m.user_id, "3472c2a6-de91-4fb5-b618-42bc781ef670");
    assert_int_equal(m.has_extra_specs, 1);
    assert_int_equal(m.n_specs, 1);
    assert_string_equal(m.specs[0].key, "hw_rng:allowed");
    assert_string_equal(m.specs[0].value, "true");
    assert_int_equal(m.n_ips, 6);
    assert_string_equal(m.ips[0], "192.168.1.1");
    assert_string_equal(m.ips[1], "fe80::f95c:b030:7094");
    assert_string_equal(m.ips[5], "1.2.3.4");
}

static void test_meta_10(void **st)
{
    (void)st;
    ag_novameta m;
    sl_error e;
    assert_int_equal(parse(nova10, &m, &e), SL_OK);
    assert_int_equal(m.ns_version, 10);
    assert_string_equal(m.flavor, "g1.small");
    assert_string_equal(m.project_id, "0123456789abcdef0123456789abcdef");
    assert_int_equal(m.has_extra_specs, 0);
    assert_int_equal(m.n_ips, 0);
}

static void test_meta_missing(void **st)
{
    (void)st;
    ag_novameta m;
    sl_error e;
    const char *noproj = "<instance xmlns='http://openstack.org/xmlns/libvirt/nova/1.1'>"
                         "<flavor name='f'/></instance>";
    assert_int_equal(parse(noproj, &m, &e), SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "project"));
    const char *noflavor = "<instance xmlns='http://openstack.org/xmlns/libvirt/nova/1.1'>"
                           "<owner><project uuid='abc'/></owner></instance>";
    assert_int_equal(parse(noflavor, &m, &e), SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "flavor"));
    const char *badip = "<instance xmlns='http://openstack.org/xmlns/libvirt/nova/1.1'>"
                        "<flavor name='f'/><owner><project uuid='abc'/></owner><ports><port>"
                        "<ip address='not-an-ip'/><ip address='10.1.2.3'/></port></ports>"
                        "</instance>";
    assert_int_equal(parse(badip, &m, &e), SL_OK);
    assert_int_equal(m.n_ips, 1);
    assert_string_equal(m.ips[0], "10.1.2.3");
    const char *badproj = "<instance xmlns='http://openstack.org/xmlns/libvirt/nova/1.1'>"
                          "<flavor name='f'/><owner><project uuid='../x'/></owner></instance>";
    assert_int_equal(parse(badproj, &m, &e), SL_ERR_INVALID);
}

static void test_meta_hostile(void **st)
{
    (void)st;
    ag_novameta m;
    sl_error e;
    assert_int_equal(parse("<instance", &m, &e), SL_ERR_INVALID);
    assert_int_equal(parse("", &m, &e), SL_ERR_INVALID);
    /* wrong namespace, no namespace */
    assert_int_equal(parse("<instance xmlns='http://example.com/nova/1.1'><flavor name='f'/>"
                           "<owner><project uuid='a'/></owner></instance>",
                           &m, &e),
                     SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "namespace"));
    assert_int_equal(parse("<instance><flavor name='f'/><owner><project uuid='a'/></owner>"
                           "</instance>",
                           &m, &e),
                     SL_ERR_INVALID);
    /* as libvirt returns it: no namespace, the version asked for is the hint */
    const char *bare = "<instance><flavor name='f'/><owner><project uuid='a'/></owner></instance>";
    assert_int_equal(ag_novameta_parse(bare, strlen(bare), 10, &m, &e), SL_OK);
    assert_int_equal(m.ns_version, 10);
    /* entity expansion ("billion laughs") and external entities are refused before parsing */
    const char *lol = "<?xml version='1.0'?><!DOCTYPE i [<!ENTITY a 'aaaaaaaaaa'>"
                      "<!ENTITY b '&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;'>]>"
                      "<instance xmlns='http://openstack.org/xmlns/libvirt/nova/1.1'>"
                      "<name>&b;</name><flavor name='f'/><owner><project uuid='a'/></owner>"
                      "</instance>";
    assert_int_equal(parse(lol, &m, &e), SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "DTD"));
    const char *xxe = "<!DOCTYPE i SYSTEM 'http://198.51.100.1/x.dtd'>"
                      "<instance xmlns='http://openstack.org/xmlns/libvirt/nova/1.1'/>";
    assert_int_equal(parse(xxe, &m, &e), SL_ERR_INVALID);
    /* huge */
    size_t n = AG_NOVAMETA_MAX + 100;
    char *big = malloc(n + 1);
    memset(big, ' ', n);
    big[n] = '\0';
    memcpy(big, nova10, strlen(nova10));
    assert_int_equal(ag_novameta_parse(big, n, 0, &m, &e), SL_ERR_INVALID);
    free(big);
    /* too long a value */
    char longname[2048];
    snprintf(longname, sizeof longname,
             "<instance xmlns='http://openstack.org/xmlns/libvirt/nova/1.1'><flavor name='%0600d'/>"
             "<owner><project uuid='a'/></owner></instance>",
             7);
    assert_int_equal(parse(longname, &m, &e), SL_ERR_INVALID);
    /* deep nesting is bounded by libxml2 (no XML_PARSE_HUGE) */
    size_t depth = 300000;
    char *deep = malloc(depth * 3 + 200);
    char *p = deep;
    p += sprintf(p, "<instance xmlns='http://openstack.org/xmlns/libvirt/nova/1.1'>");
    for (size_t i = 0; i < 20000; i++)
        p += sprintf(p, "<a>");
    *p = '\0';
    assert_int_equal(parse(deep, &m, &e), SL_ERR_INVALID);
    free(deep);
}

static const char conf_base[] = "advertise_address = 192.0.2.10\n"
                                "token_public_key = /etc/sluice/token.pub\n";

static sl_code conf(const char *extra, ag_config *c, sl_error *e)
{
    char text[4096];
    snprintf(text, sizeof text, "%s%s", conf_base, extra);
    ag_config_defaults(c);
    return ag_config_parse("agent.conf", text, c, e);
}

static void test_policy(void **st)
{
    (void)st;
    static ag_config c;
    sl_error e;
    assert_int_equal(conf("[tier gold]\ngpu_share = 1\nmemory_quota = 16G\nmax_sessions = 8\n"
                          "[tier silver]\ngpu_share = 0.25\n"
                          "[flavor g1.small]\ngpu_share = 0.5\nmemory_quota = 8G\n"
                          "max_sessions = 4\ngpus = all\ntier = gold\n"
                          "[flavor g1.large]\ntier = gold\n"
                          "gpus = GPU-0a1b2c3d-0000-1111-2222-333344445555\n",
                          &c, &e),
                     SL_OK);
    ag_sla s;
    assert_int_equal(ag_policy_resolve(&c.policy, "g1.small", NULL, 0, &s), 1);
    assert_string_equal(s.tier, "gold");
    assert_true(s.gpu_share == 0.5);
    assert_int_equal(s.memory_quota, 8ull << 30);
    assert_int_equal(s.max_sessions, 4);
    assert_string_equal(s.gpus, "all");
    assert_int_equal(ag_policy_resolve(&c.policy, "g1.large", NULL, 0, &s), 1);
    assert_true(s.gpu_share == 1.0);
    assert_int_equal(s.memory_quota, 16ull << 30);
    assert_int_equal(s.max_sessions, 8);
    assert_string_equal(s.gpus, "GPU-0a1b2c3d-0000-1111-2222-333344445555");
    assert_int_equal(ag_policy_resolve(&c.policy, "m1.small", NULL, 0, &s), 0);

    ag_extra_spec x[3] = {
        {"hw_rng:allowed", "true"}, {"sluice:sla", "silver"}, {"sluice:max_sessions", "2"}};
    assert_int_equal(ag_policy_resolve(&c.policy, "custom", x, 1, &s), 0);
    assert_int_equal(ag_policy_resolve(&c.policy, "custom", x, 3, &s), 1);
    assert_string_equal(s.tier, "silver");
    assert_true(s.gpu_share == 0.25);
    assert_int_equal(s.max_sessions, 2);
    ag_extra_spec slot[1] = {{"resources:CUSTOM_GPU_REMOTE_SLOT", "1"}};
    assert_int_equal(ag_policy_resolve(&c.policy, "custom", slot, 1, &s), 1);
    assert_string_equal(s.tier, "default");
    assert_true(s.gpu_share == 1.0);
    ag_extra_spec zero[1] = {{"resources:CUSTOM_GPU_REMOTE_SLOT", "0"}};
    assert_int_equal(ag_policy_resolve(&c.policy, "custom", zero, 1, &s), 0);
    ag_extra_spec bad[2] = {{"sluice:sla", "gold"}, {"sluice:gpu_share", "7"}};
    assert_int_equal(ag_policy_resolve(&c.policy, "custom", bad, 2, &s), 1);
    assert_true(s.gpu_share == 1.0); /* the invalid override is ignored */
    /* the table wins over the extra specs */
    assert_int_equal(ag_policy_resolve(&c.policy, "g1.small", x, 3, &s), 1);
    assert_string_equal(s.tier, "gold");

    uint64_t v;
    assert_int_equal(ag_parse_size("512M", &v), 0);
    assert_int_equal(v, 512ull << 20);
    assert_int_equal(ag_parse_size("8GiB", &v), 0);
    assert_int_equal(ag_parse_size("8X", &v), -1);
    assert_int_equal(ag_parse_size("-1", &v), -1);
    assert_int_equal(ag_parse_size("99999999999T", &v), -1);
}

static void expect_conf_error(const char *extra, const char *needle)
{
    static ag_config c;
    sl_error e = {0};
    assert_int_equal(conf(extra, &c, &e), SL_ERR_CONFIG);
    if (!strstr(e.msg, needle))
        fail_msg("expected '%s' in '%s'", needle, e.msg);
}

static void test_config_errors(void **st)
{
    (void)st;
    static ag_config c;
    sl_error e;
    assert_int_equal(conf("", &c, &e), SL_OK);
    assert_string_equal(c.libvirt_uri, "qemu:///system");
    assert_int_equal(c.reboot_debounce_s, 5);
    expect_conf_error("bogus = 1\n", "agent.conf:3: bogus: unknown key");
    expect_conf_error("backend_port_min = 80\n", "agent.conf:3: backend_port_min: 80 outside");
    expect_conf_error("backend_port_min = 5000\nbackend_port_max = 4000\n",
                      "backend_port_max: smaller");
    expect_conf_error("run_dir = relative\n", "agent.conf:3: run_dir: must be an absolute path");
    expect_conf_error("backend_bind = 1.2.3\n", "agent.conf:3: backend_bind: not an");
    expect_conf_error("enroll_listen = 0.0.0.0\n", "enroll_listen: expected");
    expect_conf_error("enroll_listen = [::]:99999\n", "enroll_listen: 99999 outside");
    expect_conf_error("reboot_debounce = 30\n", "reboot_debounce: 30 outside 0..10");
    assert_int_equal(c.backend_spin_us, -1);
    expect_conf_error("backend_spin_us = 200000\n", "backend_spin_us: 200000 outside 0..100000");
    assert_int_equal(conf("backend_spin_us = 0\n", &c, &e), SL_OK);
    assert_int_equal(c.backend_spin_us, 0);
    assert_int_equal(c.backend_staging_slots, -1);
    expect_conf_error("backend_staging_slots = 9\n", "backend_staging_slots: 9 outside 0..8");
    assert_int_equal(conf("backend_staging_slots = 0\n", &c, &e), SL_OK);
    assert_int_equal(c.backend_staging_slots, 0);
    assert_int_equal(c.backend_staging_budget, -1);
    expect_conf_error("backend_staging_budget = 8\n",
                      "backend_staging_budget: 8 outside 16..1048576");
    assert_int_equal(conf("backend_staging_budget = 2048\n", &c, &e), SL_OK);
    assert_int_equal(c.backend_staging_budget, 2048);
    assert_int_equal(c.direct_port_min, 48000);
    assert_int_equal(c.direct_port_max, 49999);
    expect_conf_error("direct_port_min = 47500\n", "overlaps backend_port_min..backend_port_max");
    expect_conf_error("direct_port_min = 49000\ndirect_port_max = 48500\n",
                      "direct_port_max: smaller");
    expect_conf_error("libvirt_uri = qemu\n", "libvirt_uri: expected a libvirt URI");
    expect_conf_error("registry_endpoint = tcp://10.0.0.1:7500\n",
                      "registry_ca: required key missing");
    expect_conf_error("registry_ca = /x\n", "registry_ca: set but registry_endpoint");
    expect_conf_error("backend_user = bad user\n", "backend_user: name may hold only");
    expect_conf_error("run_dir = /a\nrun_dir = /b\n", "agent.conf:4: run_dir: key given twice");
    expect_conf_error("just words\n", "agent.conf:3: expected key = value");
    expect_conf_error("[flavor g1]\ngpu_share = 0\n", "agent.conf:4: gpu_share: expected");
    expect_conf_error("[flavor g1]\ngpu_share = 1.5\n", "gpu_share: expected a number");
    expect_conf_error("[flavor g1]\nmemory_quota = lots\n", "memory_quota: expected a size");
    expect_conf_error("[flavor g1]\nmax_sessions = 5000\n", "max_sessions: 5000 outside");
    expect_conf_error("[flavor g1]\ngpus = 0,1\n", "gpus: expected 'all'");
    expect_conf_error("[flavor g1]\ntier = platinum\n", "[flavor g1] tier: no [tier platinum]");
    expect_conf_error("[flavor g1]\nlibvirt_uri = test:///default\n",
                      "unknown key in a [flavor] section");
    expect_conf_error("[flavor g1]\n[flavor g1]\n", "agent.conf:4: flavor: section given twice");
    expect_conf_error("[flavour g1]\n", "unknown section kind");
    expect_conf_error("[flavor g 1]\n", "name may hold only");
    expect_conf_error("[tier gold]\ntier = x\n", "unknown key in a [tier] section");
    /* enrollment, CA lifetimes and registry slots */
    assert_int_equal(conf("", &c, &e), SL_OK);
    assert_string_equal(c.enroll_token_issuer, "");
    assert_int_equal(c.enroll_clock_skew_s, 60);
    assert_int_equal(c.enroll_fail_per_minute, 5);
    assert_int_equal(c.enroll_fail_burst, 5);
    assert_int_equal(c.client_cert_lifetime_s, 7 * 86400);
    assert_int_equal(c.server_cert_lifetime_s, 30 * 86400);
    assert_int_equal(c.registry_slots, 8);
    assert_int_equal(conf("enroll_token_issuer = sluice-novahook\nenroll_clock_skew = 0\n"
                          "enroll_failures_per_minute = 12\nenroll_failure_burst = 3\n"
                          "client_cert_lifetime = 12h\nserver_cert_lifetime = 90d\n"
                          "registry_slots = 16\n",
                          &c, &e),
                     SL_OK);
    assert_string_equal(c.enroll_token_issuer, "sluice-novahook");
    assert_int_equal(c.enroll_clock_skew_s, 0);
    assert_int_equal(c.enroll_fail_per_minute, 12);
    assert_int_equal(c.enroll_fail_burst, 3);
    assert_int_equal(c.client_cert_lifetime_s, 12 * 3600);
    assert_int_equal(c.server_cert_lifetime_s, 90 * 86400);
    assert_int_equal(c.registry_slots, 16);
    assert_int_equal(conf("client_cert_lifetime = 3600\nserver_cert_lifetime = 120m\n", &c, &e),
                     SL_OK);
    assert_int_equal(c.client_cert_lifetime_s, 3600);
    assert_int_equal(c.server_cert_lifetime_s, 7200);
    expect_conf_error("enroll_clock_skew = 301\n",
                      "agent.conf:3: enroll_clock_skew: 301 outside 0..300");
    expect_conf_error("enroll_failures_per_minute = 0\n",
                      "enroll_failures_per_minute: 0 outside 1..600");
    expect_conf_error("enroll_failure_burst = many\n", "enroll_failure_burst: not an integer");
    expect_conf_error("enroll_token_issuer = caf\xc3\xa9\n",
                      "enroll_token_issuer: value is not printable");
    expect_conf_error("client_cert_lifetime = 31d\n",
                      "agent.conf:3: client_cert_lifetime: 31d outside 3600..2592000 seconds");
    expect_conf_error("client_cert_lifetime = 59m\n", "client_cert_lifetime: 59m outside");
    expect_conf_error("client_cert_lifetime = 7w\n", "client_cert_lifetime: expected a duration");
    expect_conf_error("server_cert_lifetime = -1d\n", "server_cert_lifetime: expected a duration");
    expect_conf_error("server_cert_lifetime = 398d\n", "server_cert_lifetime: 398d outside");
    expect_conf_error("server_cert_lifetime = 99999999999d\n",
                      "server_cert_lifetime: 99999999999d outside");
    expect_conf_error("registry_slots = 5000\n", "registry_slots: 5000 outside 0..4096");
    ag_config_defaults(&c);
    assert_int_equal(ag_config_parse("x.conf", "run_dir = /x\n", &c, &e), SL_ERR_CONFIG);
    assert_string_equal(e.msg, "x.conf: advertise_address: required key missing");
    assert_int_equal(ag_config_load("/nonexistent/agent.conf", &c, &e), SL_ERR_CONFIG);
}

static void test_example_config(void **st)
{
    (void)st;
    static ag_config c;
    sl_error e;
    ag_config_defaults(&c);
    if (ag_config_load(SOURCE_DIR "/agent/sluice-agent.conf.example", &c, &e) != SL_OK)
        fail_msg("%s", e.msg);
    assert_true(c.policy.n_flavors >= 2);
}

/* STATE_DIR/backends.state: written and read back, malformed lines skipped, a missing file is
 * empty; process identities from /proc (a reaped child has none). */
static void test_backend_state(void **st)
{
    (void)st;
    char dir[] = "/tmp/ag-bstate-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/backends.state", dir);
    ag_bstate *rows = NULL;
    size_t n = 9;
    sl_error e;
    assert_int_equal(ag_bstate_load(path, &rows, &n, &e), SL_OK);
    assert_int_equal(n, 0);
    ag_bstate w[2] = {{"11111111111141118111111111111111", 47000, 1234, 5678, 1800000000},
                      {"22222222222242228222222222222222", 47001, 0, 0, 1700000000}};
    assert_int_equal(ag_bstate_save(path, w, 2, &e), SL_OK);
    FILE *f = fopen(path, "a");
    fputs("bad line\nproj;rm 1 0 0 0\n33 70000 0 0 0\n44 47002 5 0 0\n", f);
    fclose(f);
    assert_int_equal(ag_bstate_load(path, &rows, &n, &e), SL_OK);
    assert_int_equal(n, 2);
    assert_memory_equal(rows, w, sizeof w);
    free(rows);
    /* process identities */
    assert_true(ag_proc_start(getpid()) > 0);
    assert_int_equal(ag_proc_start(getpid()), ag_proc_start(getpid()));
    pid_t c = fork();
    if (c == 0)
        _exit(0);
    assert_true(c > 0);
    waitpid(c, NULL, 0);
    assert_int_equal(ag_proc_start(c), 0);
    assert_int_equal(ag_proc_start(0), 0);
    unlink(path);
    rmdir(dir);
}

static void test_ports(void **st)
{
    (void)st;
    int used[] = {47000, 47001, 47003};
    assert_int_equal(ag_ports_pick(47000, 47010, used, 3, NULL), 47002);
    assert_int_equal(ag_ports_pick(47000, 47001, used, 3, NULL), -1);
    assert_int_equal(ag_ports_pick(47005, 47005, NULL, 0, NULL), 47005);
    /* a port someone else holds is skipped */
    int fd = -1;
    int p = -1;
    for (int port = 47100; port < 47200 && fd < 0; port++) {
        char cmd[8];
        (void)cmd;
        if (ag_ports_pick(port, port, NULL, 0, "127.0.0.1") == port) {
            p = port;
            fd = 1;
        }
    }
    assert_true(p > 0);
    assert_int_equal(ag_ports_pick(p, p, NULL, 0, "not-an-ip"), -1);
}

/* The GPU list for the registry: the backend's --list-gpus on the driver double, parsed; and
 * lines that must be refused. */
static void test_gpus(void **st)
{
    (void)st;
    static ag_config c;
    ag_config_defaults(&c);
    snprintf(c.backend_path, sizeof c.backend_path, "%s", BACKEND);
    snprintf(c.driver_path, sizeof c.driver_path, "%s", DRIVER_DOUBLE);
    c.backend_user[0] = c.backend_group[0] = '\0';
    ag_gpu g[AG_MAX_GPUS];
    size_t n = 0;
    sl_error e;
    if (ag_gpus_probe(&c, g, AG_MAX_GPUS, &n, &e) != SL_OK)
        fail_msg("%s", e.msg);
    assert_int_equal(n, 1);
    assert_int_equal(strncmp(g[0].uuid, "GPU-", 4), 0);
    assert_string_equal(g[0].name, "Sluice driver test double (no GPU)");
    assert_true(g[0].memory_bytes > 0);
    snprintf(c.driver_path, sizeof c.driver_path, "/nonexistent/libcuda.so.1");
    assert_int_equal(ag_gpus_probe(&c, g, AG_MAX_GPUS, &n, &e), SL_ERR_IO);
    assert_non_null(strstr(e.msg, "--list-gpus"));
    assert_int_equal(ag_gpus_parse("GPU-1\t10\tA\nGPU-2\t20\tB b\n", g, 4, &n, &e), SL_OK);
    assert_int_equal(n, 2);
    assert_string_equal(g[1].name, "B b");
    assert_int_equal(g[1].memory_bytes, 20);
    const char *bad[] = {"GPU-1\t10\n", "GPU-1\tx\tA\n", "GPU-1\t-1\tA\n", "\t1\tA\n",
                         "GPU-1\t1\tA\x1b[2J\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (ag_gpus_parse(bad[i], g, 4, &n, &e) == SL_OK)
            fail_msg("accepted: %s", bad[i]);
    assert_int_equal(ag_gpus_parse("a\t1\tx\nb\t1\tx\n", g, 1, &n, &e), SL_ERR_TOO_LARGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meta_full_11),   cmocka_unit_test(test_meta_10),
        cmocka_unit_test(test_meta_missing),   cmocka_unit_test(test_meta_hostile),
        cmocka_unit_test(test_policy),         cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_example_config), cmocka_unit_test(test_ports),
        cmocka_unit_test(test_gpus),           cmocka_unit_test(test_backend_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
