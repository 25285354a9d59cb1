/* The agent in-process against libvirt: test:///default (the full scenario) or, with argument
 * "qemu", a real libvirtd at qemu:///system with a diskless TCG domain, or, with "registry ...",
 * registry reporting to a real sluice-novahook (run by test_registry.py, which makes the PKI).
 * A fake backend (fake_backend.c) records the control messages it gets in
 * STATE/backends/PROJECT/events.log. */
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "core.h"
#include "report.h"

#define P1  "11111111111141118111111111111111"
#define P2  "22222222222242228222222222222222"
#define U1  "a1a1a1a1-0000-4000-8000-000000000001"
#define U2  "a1a1a1a1-0000-4000-8000-000000000002"
#define U3  "a1a1a1a1-0000-4000-8000-000000000003"
#define SHA "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static ag_config cfg;
static ag_core *core;
static pthread_t loop_th;
static volatile int loop_stop;
static virConnectPtr rw;
static char tmp[256];
static int qemu_mode;
static ag_report *rep;
/* registry mode: NOVAHOOK CONFIG REGISTRY_CLI DB ENDPOINT CA CERT KEY */
static char **reg_args;

/* The backends are children of this thread: PR_SET_PDEATHSIG (SIGTERM) fires when the thread
 * that forked them exits, so ag_core_free (Shutdown to each backend) must run here, before the
 * thread ends, or the backends are already dying when it is sent (docs/agent.md). */
static void *loop(void *arg)
{
    (void)arg;
    while (!loop_stop)
        ag_core_run_once(core, 50);
    ag_core_free(core);
    return NULL;
}

static void on_placement(void *user, const ag_instance *in, int placed)
{
    if (placed)
        ag_report_place(user, in->uuid, in->project_id, in->flavor);
    else
        ag_report_remove(user, in->uuid);
}

static void agent_start(void)
{
    sl_error e;
    ag_core_opts o = {&cfg, NULL, NULL, rep ? on_placement : NULL, rep};
    if (ag_core_new(&o, &core, &e) != SL_OK)
        fail_msg("ag_core_new: %s", e.msg);
    loop_stop = 0;
    pthread_create(&loop_th, NULL, loop, NULL);
}

/* The core without the loop thread (tests that run ag_core_run_once themselves). */
static void agent_start_paused(void)
{
    sl_error e;
    ag_core_opts o = {&cfg, NULL, NULL, NULL, NULL};
    if (ag_core_new(&o, &core, &e) != SL_OK)
        fail_msg("ag_core_new: %s", e.msg);
}

static void agent_stop(void)
{
    loop_stop = 1;
    pthread_join(loop_th, NULL); /* the loop thread frees the core */
    core = NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

#define WAIT_FOR(cond, secs)                                                                       \
    do {                                                                                           \
        double t0_ = now_s();                                                                      \
        while (!(cond) && now_s() - t0_ < (secs))                                                  \
            usleep(20000);                                                                         \
        if (!(cond))                                                                               \
            fail_msg("timed out after %g s waiting for %s", (double)(secs), #cond);                \
    } while (0)

static int count_lines(const char *project, const char *prefix)
{
    char path[512], line[512];
    snprintf(path, sizeof path, "%s/state/backends/%s/events.log", tmp, project);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += !strncmp(line, prefix, strlen(prefix));
    if (f)
        fclose(f);
    return n;
}

static int running(const char *uuid)
{
    ag_instance in;
    return ag_instances_get(ag_core_instances(core), uuid, &in) && in.running;
}

static int known(const char *uuid)
{
    return ag_instances_get(ag_core_instances(core), uuid, NULL);
}

static int backend_pid(const char *project)
{
    return ag_backend_pid(ag_core_supervisor(core), project);
}

static const char *meta(char *buf, size_t n, int ns, const char *flavor, const char *project,
                        const char *ip)
{
    snprintf(buf, n,
             "<nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.%d'>"
             "<nova:name>vm</nova:name><nova:flavor name='%s'/>"
             "<nova:owner><nova:user uuid='u'>user</nova:user>"
             "<nova:project uuid='%s'>proj</nova:project></nova:owner>"
             "<nova:ports><nova:port uuid='p'><nova:ip type='fixed' address='%s' ipVersion='4'/>"
             "</nova:port></nova:ports></nova:instance>",
             ns, flavor, project, ip);
    return buf;
}

static virDomainPtr define(const char *name, const char *uuid, int ns, const char *flavor,
                           const char *project)
{
    char m[2048], xml[4096];
    meta(m, sizeof m, ns, flavor, project, "10.0.0.5");
    if (qemu_mode)
        snprintf(xml, sizeof xml,
                 "<domain type='qemu'><name>%s</name><uuid>%s</uuid><memory unit='MiB'>64"
                 "</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os>"
                 "<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>"
                 "</devices><metadata>%s</metadata>"
                 "</domain>",
                 name, uuid, m);
    else
        snprintf(xml, sizeof xml,
                 "<domain type='test'><name>%s</name><uuid>%s</uuid><memory>65536</memory>"
                 "<os><type>hvm</type></os><metadata>%s</metadata></domain>",
                 name, uuid, m);
    virDomainPtr d = virDomainDefineXML(rw, xml);
    if (!d)
        fail_msg("define %s: %s", name, virGetLastErrorMessage());
    return d;
}

static int setup(void **st)
{
    (void)st;
    snprintf(tmp, sizeof tmp, "/tmp/ag-virt-XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    char text[2048];
    snprintf(text, sizeof text,
             "libvirt_uri = %s\nadvertise_address = 127.0.0.1\nbackend_bind = 127.0.0.1\n"
             "backend_port_min = 47300\nbackend_port_max = 47399\nrun_dir = %s/run\n"
             "state_dir = %s/state\nbackend_path = %s\ntoken_public_key = /dev/null\n"
             "reboot_debounce = 1\nbackend_stop_grace = 2\nrestart_backoff_max = 2\n"
             "[tier gold]\nmax_sessions = 4\n[flavor g1.small]\ntier = gold\ngpu_share = 0.5\n",
             qemu_mode ? "qemu:///system" : "test:///default", tmp, tmp, FAKE_BACKEND);
    ag_config_defaults(&cfg);
    sl_error e;
    if (ag_config_parse("test.conf", text, &cfg, &e) != SL_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    cfg.backend_user[0] = cfg.backend_group[0] = '\0';
    agent_start(); /* registers libvirt's event implementation first */
    rw = virConnectOpen(qemu_mode ? "qemu:///system" : "test:///default");
    if (!rw) {
        fprintf(stderr, "FAIL: cannot open %s read-write: %s\n",
                qemu_mode ? "qemu:///system (is libvirtd running?)" : "test:///default",
                virGetLastErrorMessage());
        return -1;
    }
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    if (core)
        agent_stop();
    if (rw)
        virConnectClose(rw);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* GPU flavor (1.1), non-GPU (1.0), metadata change, grant, kill -9, reboot, stop. */
static void test_lifecycle(void **st)
{
    (void)st;
    WAIT_FOR(ag_core_libvirt_connected(core), 5);
    virDomainPtr d1 = define("instance-00000001", U1, 1, "g1.small", P1);
    virDomainPtr d2 = define("instance-00000002", U2, 0, "m1.small", P2);
    assert_int_equal(virDomainCreate(d1), 0);
    assert_int_equal(virDomainCreate(d2), 0);
    WAIT_FOR(running(U1) && running(U2), 5);
    ag_instance in;
    assert_true(ag_instances_get(ag_core_instances(core), U1, &in));
    assert_int_equal(in.gpu, 1);
    assert_int_equal(in.ns_version, 11);
    assert_string_equal(in.project_id, P1);
    assert_string_equal(in.sla.tier, "gold");
    assert_int_equal(in.sla.max_sessions, 4);
    assert_string_equal(in.ips[0], "10.0.0.5");
    assert_true(ag_instances_get(ag_core_instances(core), U2, &in));
    assert_int_equal(in.gpu, 0);
    assert_int_equal(in.ns_version, 10);

    /* the project's backend runs; the non-GPU project has none */
    WAIT_FOR(backend_pid(P1) > 0, 10);
    char ep[128];
    assert_true(ag_backend_endpoint(ag_core_supervisor(core), P1, ep, sizeof ep));
    assert_non_null(strstr(ep, "tcp://127.0.0.1:473"));
    assert_false(ag_backend_endpoint(ag_core_supervisor(core), P2, ep, sizeof ep));

    /* metadata change (interface attach): new IPs */
    char m[2048];
    meta(m, sizeof m, 1, "g1.small", P1, "10.0.0.99");
    /* libvirt sets the namespace and prefix itself: hand it the element without them */
    char bare[2048], *o = bare;
    for (const char *p = m; *p;) {
        if (!strncmp(p, "nova:", 5))
            p += 5;
        else if (!strncmp(p, " xmlns:nova='", 13))
            p = strchr(p + 13, '\'') + 1;
        else
            *o++ = *p++;
    }
    *o = '\0';
    strcpy(m, bare);
    if (virDomainSetMetadata(d1, VIR_DOMAIN_METADATA_ELEMENT, m, "nova",
                             "http://openstack.org/xmlns/libvirt/nova/1.1", 0) != 0)
        fail_msg("virDomainSetMetadata: %s", virGetLastErrorMessage());
    WAIT_FOR(ag_instances_get(ag_core_instances(core), U1, &in) && !strcmp(in.ips[0], "10.0.0.99"),
             5);

    /* a grant reaches the backend; a killed backend is restarted and gets it again */
    assert_true(ag_instances_get(ag_core_instances(core), U1, &in));
    ag_backend_grant(ag_core_supervisor(core), &in, SHA, time(NULL) + 3600);
    WAIT_FOR(count_lines(P1, "grant " U1 " " SHA) == 1, 5);
    int pid = backend_pid(P1);
    kill(pid, SIGKILL);
    WAIT_FOR(backend_pid(P1) > 0 && backend_pid(P1) != pid, 10);
    WAIT_FOR(count_lines(P1, "grant " U1) == 2, 5);
    assert_int_equal(ag_backend_restarts(ag_core_supervisor(core), P1), 1);

    /* a quick reboot (destroy + start within the debounce) revokes nothing */
    assert_int_equal(virDomainDestroy(d1), 0);
    assert_int_equal(virDomainCreate(d1), 0);
    usleep(1600 * 1000);
    assert_true(running(U1));
    assert_int_equal(count_lines(P1, "revoke "), 0);

    /* a stop is revoked within 15 s, then the project's backend stops */
    double t0 = now_s();
    assert_int_equal(virDomainDestroy(d1), 0);
    WAIT_FOR(count_lines(P1, "revoke " U1 " destroyed") == 1, 15);
    double took = now_s() - t0;
    fprintf(stderr, "revocation %.2f s after the stop\n", took);
    assert_true(took < 15.0);
    WAIT_FOR(count_lines(P1, "shutdown") == 1, 5);
    WAIT_FOR(backend_pid(P1) == 0, 10);
    assert_int_equal(ag_backend_grants(ag_core_supervisor(core), P1), 0);

    assert_int_equal(virDomainDestroy(d2), 0);
    WAIT_FOR(!running(U2), 5);
    virDomainFree(d1);
    virDomainFree(d2);
}

/* The agent restarts in the middle: state is rebuilt by the resync, grants are restored for
 * running instances and dropped for instances that stopped meanwhile. */
static void test_restart(void **st)
{
    (void)st;
    virDomainPtr d1 = virDomainLookupByUUIDString(rw, U1);
    virDomainPtr d3 = define("instance-00000003", U3, 1, "g1.small", P1);
    assert_int_equal(virDomainCreate(d1), 0);
    assert_int_equal(virDomainCreate(d3), 0);
    WAIT_FOR(running(U1) && running(U3) && backend_pid(P1) > 0, 10);
    ag_instance in;
    ag_instances_get(ag_core_instances(core), U1, &in);
    ag_backend_grant(ag_core_supervisor(core), &in, SHA, time(NULL) + 3600);
    ag_instances_get(ag_core_instances(core), U3, &in);
    ag_backend_grant(ag_core_supervisor(core), &in, SHA, time(NULL) + 3600);
    WAIT_FOR(count_lines(P1, "grant " U3) == 1, 5);

    int shutdowns = count_lines(P1, "shutdown");
    agent_stop(); /* the backend is told to shut down (not killed by PR_SET_PDEATHSIG first) */
    assert_int_equal(count_lines(P1, "shutdown"), shutdowns + 1);
    assert_int_equal(virDomainDestroy(d3), 0); /* stops while the agent is away */
    int before = count_lines(P1, "grant " U1);
    agent_start();
    WAIT_FOR(running(U1) && known(U3) && !running(U3), 10);
    WAIT_FOR(backend_pid(P1) > 0, 10);
    WAIT_FOR(count_lines(P1, "grant " U1) == before + 1, 5);
    assert_int_equal(count_lines(P1, "grant " U3), 1); /* not replayed */
    assert_int_equal(ag_backend_grants(ag_core_supervisor(core), P1), 1);

    /* a lost libvirt connection: reconnect + resync, a domain undefined meanwhile is seen */
    ag_core_force_reconnect(core);
    assert_int_equal(virDomainUndefine(d3), 0);
    WAIT_FOR(!known(U3), 10);
    WAIT_FOR(ag_core_libvirt_connected(core), 10);
    assert_true(running(U1));

    /* undefine of a running domain: immediate revocation */
    assert_int_equal(virDomainDestroy(d1), 0);
    assert_int_equal(virDomainUndefine(d1), 0);
    WAIT_FOR(count_lines(P1, "revoke " U1) >= 2, 15);
    WAIT_FOR(!known(U1) && backend_pid(P1) == 0, 10);
    virDomainFree(d1);
    virDomainFree(d3);
}

/* Real libvirtd: a diskless TCG domain with Nova metadata starts and stops. */
static void test_qemu(void **st)
{
    (void)st;
    WAIT_FOR(ag_core_libvirt_connected(core), 10);
    virDomainPtr old = virDomainLookupByUUIDString(rw, U1);
    if (old) {
        virDomainDestroy(old);
        virDomainUndefine(old);
        virDomainFree(old);
    }
    virResetLastError();
    virDomainPtr d = define("sluice-agent-test", U1, 1, "g1.small", P1);
    if (virDomainCreate(d) != 0)
        fail_msg("start the TCG domain: %s", virGetLastErrorMessage());
    WAIT_FOR(running(U1), 20);
    WAIT_FOR(backend_pid(P1) > 0, 10);
    double t0 = now_s();
    virDomainDestroy(d);
    WAIT_FOR(!running(U1), 15);
    WAIT_FOR(backend_pid(P1) == 0, 15);
    fprintf(stderr, "qemu: stop seen and backend stopped %.2f s after the destroy\n", now_s() - t0);
    virDomainUndefine(d);
    WAIT_FOR(!known(U1), 10);
    virDomainFree(d);
}

/* ag_core_watch: the callback runs at least once a second without any I/O, and the descriptor
 * it returns is the one watched next (the enrollment server's fd changes when it re-binds). */
typedef struct watch_t {
    int a[2], b[2];
    int calls;
} watch_t;

static int watch_fn(void *user)
{
    watch_t *w = user;
    char buf[16];
    w->calls++;
    while (read(w->a[0], buf, sizeof buf) > 0 || read(w->b[0], buf, sizeof buf) > 0)
        ;
    return w->b[0]; /* from the first call on, watch b */
}

static void test_watch(void **st)
{
    (void)st;
    agent_stop(); /* run the loop on this thread */
    agent_start_paused();
    static watch_t w;
    assert_int_equal(pipe2(w.a, O_NONBLOCK), 0);
    assert_int_equal(pipe2(w.b, O_NONBLOCK), 0);
    assert_int_equal(ag_core_watch(core, w.a[0], watch_fn, &w), 0);
    /* no I/O at all: called within about a second */
    double t0 = now_s();
    ag_core_run_once(core, 5000);
    double took = now_s() - t0;
    assert_true(w.calls >= 1);
    assert_true(took < 1.5);
    /* now b is watched: a write to b ends the wait at once */
    int before = w.calls;
    assert_int_equal(write(w.b[1], "x", 1), 1);
    t0 = now_s();
    ag_core_run_once(core, 5000);
    took = now_s() - t0;
    assert_true(w.calls == before + 1);
    fprintf(stderr, "watch: woken by the new fd after %.3f s\n", took);
    assert_true(took < 0.2);
    for (int i = 0; i < 2; i++) {
        close(w.a[i]);
        close(w.b[i]);
    }
    ag_core_free(core);
    core = NULL;
    agent_start();
}

/* ---- registry reporting against a real sluice-novahook */

static pid_t novahook_pid;

static void novahook_start(void)
{
    char log[512];
    snprintf(log, sizeof log, "%s/novahook.log", tmp);
    novahook_pid = fork();
    if (novahook_pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(fd, 2);
        execl(reg_args[0], reg_args[0], "--config", reg_args[1], (char *)NULL);
        _exit(127);
    }
}

static void novahook_stop(void)
{
    if (novahook_pid > 0) {
        kill(novahook_pid, SIGTERM);
        waitpid(novahook_pid, NULL, 0);
    }
    novahook_pid = 0;
}

/* 1 when `sluice-registry instances --host HOST` lists uuid */
static int registry_lists(const char *uuid)
{
    char cmd[1024], line[512];
    snprintf(cmd, sizeof cmd, "%s --db '%s' instances --host %s 2>/dev/null", reg_args[2],
             reg_args[3], ag_report_host(rep));
    FILE *f = popen(cmd, "r");
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, uuid) != NULL;
    if (f)
        pclose(f);
    return found;
}

static int report_idle(void)
{
    ag_report_stats s;
    ag_report_get_stats(rep, &s);
    return s.connected && s.pending == 0;
}

static void test_registry(void **st)
{
    (void)st;
    WAIT_FOR(ag_core_libvirt_connected(core), 5);
    /* the registry is down at first: the agent goes on, placements wait */
    virDomainPtr d1 = define("instance-00000011", U1, 1, "g1.small", P1);
    virDomainPtr d2 = define("instance-00000012", U2, 0, "m1.small", P2);
    assert_int_equal(virDomainCreate(d1), 0);
    assert_int_equal(virDomainCreate(d2), 0);
    WAIT_FOR(running(U1) && running(U2) && backend_pid(P1) > 0, 10);
    usleep(3000 * 1000); /* longer than one connection attempt (2 s): retries happen */
    ag_report_stats s;
    ag_report_get_stats(rep, &s);
    assert_int_equal(s.connected, 0);
    assert_int_equal(s.pending, 1);

    double t0 = now_s();
    novahook_start();
    WAIT_FOR(report_idle(), 15);
    fprintf(stderr, "registry: placement arrived %.2f s after the registry started\n",
            now_s() - t0);
    assert_true(registry_lists(U1));
    assert_false(registry_lists(U2)); /* not a GPU flavor */

    /* a stop: removed after the debounce */
    assert_int_equal(virDomainDestroy(d1), 0);
    WAIT_FOR(!registry_lists(U1), 10);

    /* registry restarted with a placement made meanwhile: re-sent on reconnect */
    novahook_stop();
    assert_int_equal(virDomainCreate(d1), 0);
    WAIT_FOR(running(U1), 5);
    usleep(500 * 1000);
    novahook_start();
    WAIT_FOR(report_idle() && registry_lists(U1), 15);
    ag_report_get_stats(rep, &s);
    assert_true(s.sessions >= 2);

    /* undefine: removed at once */
    assert_int_equal(virDomainDestroy(d1), 0);
    assert_int_equal(virDomainUndefine(d1), 0);
    WAIT_FOR(!registry_lists(U1), 10);

    /* Nova's spawn: define, build the config drive (nova-hook answers placed instances only),
     * start. A GPU domain is placed when it is defined; undefined unstarted, it is removed. */
    virDomainPtr d3 = define("instance-00000013", U3, 1, "g1.small", P1);
    WAIT_FOR(registry_lists(U3), 10);
    assert_false(running(U3));
    assert_int_equal(virDomainUndefine(d3), 0);
    WAIT_FOR(!registry_lists(U3), 10);
    virDomainFree(d3);
    virDomainDestroy(d2);
    virDomainFree(d1);
    virDomainFree(d2);
    novahook_stop();
}

static int setup_registry(void **st)
{
    ag_report_opts o = {0};
    o.endpoint = reg_args[4];
    o.ca_file = reg_args[5];
    o.cert_file = reg_args[6];
    o.key_file = reg_args[7];
    o.enroll_endpoint = "tcp://127.0.0.1:7400";
    o.slots = 4;
    o.version = "test";
    o.ca_pem = NULL;
    o.retry_max_ms = 1000;
    o.call_timeout_ms = 2000;
    sl_error e;
    if (ag_report_start(&o, &rep, &e) != SL_OK) {
        fprintf(stderr, "ag_report_start: %s\n", e.msg);
        return -1;
    }
    return setup(st);
}

static int teardown_registry(void **st)
{
    novahook_stop();
    int rc = teardown(st);
    ag_report_stop(rep);
    rep = NULL;
    return rc;
}

int main(int argc, char **argv)
{
    qemu_mode = argc > 1 && !strcmp(argv[1], "qemu");
    if (argc == 10 && !strcmp(argv[1], "registry")) {
        reg_args = argv + 2;
        const struct CMUnitTest reg[] = {cmocka_unit_test(test_registry)};
        return cmocka_run_group_tests(reg, setup_registry, teardown_registry);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watch),
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_restart),
    };
    const struct CMUnitTest qemu[] = {cmocka_unit_test(test_qemu)};
    if (qemu_mode)
        return cmocka_run_group_tests(qemu, setup, teardown);
    return cmocka_run_group_tests(tests, setup, teardown);
}
