/* agent.revocation_e2e: "a live session ends within 15 s of the domain stopping", end to end.
 *
 *   the agent core in-process on libvirt's test:///default, supervising the REAL sluice-backend
 *   on the driver test double -> a Nova-shaped GPU domain starts -> the backend says hello ->
 *   a guest certificate signed by the host CA (ag_ca_sign_client) and granted
 *   (ag_backend_grant) -> tests/cuda/session_hold runs through the frontend (libcuda.so.1) and
 *   keeps its session busy -> a quick reboot (destroy + start within the debounce) must NOT end
 *   it -> virDomainDestroy -> the program must report its session ended within 15 s, and the
 *   agent's and the backend's logs must name the revocation.
 *
 * The agent's log and the backend's (it inherits our stderr) go to WORK/agent.log, printed when
 * the test fails. Everything (program process group, backend, temp folder) is torn down on every
 * exit path. Exit 77 (skip) only when the nvcc-built program is missing.
 * Usage: test_revocation_e2e BACKEND DOUBLE FRONTEND_DIR SESSION_HOLD_PROGRAM */
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <link.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "ca.h"
#include "core.h"

#define PROJECT "5e1ce0de5e1ce0de4e1c8e1ce0de5e1c"
#define UUID    "5e1ce0de-0000-4000-8000-00000000e2e1"
#define LIMIT_S 15.0

static const char *backend_path, *double_path, *frontend_dir, *program;
static char work[256], logpath[300], proglog[300], confdir[300];
static int saved_stderr = -1, failed = 1;
static ag_config cfg;
static ag_core *core;
static ag_ca *ca;
static pthread_t loop_th;
static int loop_started;
static volatile int loop_stop;
static virConnectPtr rw;
static virDomainPtr dom;
static pid_t prog_pid;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Messages go to the real stderr (fd 2 is the agent's log file once the agent runs). */
static void say(const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    if (write(saved_stderr >= 0 ? saved_stderr : 2, buf, (size_t)n) < 0)
        return;
}

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        say("FAIL (line %d): " __VA_ARGS__);                                                       \
        exit(1);                                                                                   \
    } while (0)

#define WAIT_FOR(cond, secs)                                                                       \
    do {                                                                                           \
        double t0_ = now_s();                                                                      \
        while (!(cond) && now_s() - t0_ < (secs))                                                  \
            usleep(20000);                                                                         \
        if (!(cond))                                                                               \
            FAIL("timed out after %g s waiting for %s", __LINE__, (double)(secs), #cond);          \
    } while (0)

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *s = malloc(cap);
    size_t got;
    while (s && (got = fread(s + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len < 4096) {
            char *t = realloc(s, cap *= 2);
            if (!t) {
                free(s);
                s = NULL;
            }
            s = t;
        }
    }
    fclose(f);
    if (s)
        s[len] = '\0';
    return s;
}

static int file_has(const char *path, const char *needle)
{
    char *s = slurp(path);
    int r = s && strstr(s, needle);
    free(s);
    return r;
}

static void dump(const char *title, const char *path)
{
    char *s = slurp(path);
    say("----- %s (%s)", title, path);
    int fd = saved_stderr >= 0 ? saved_stderr : 2;
    if (s && write(fd, s, strlen(s)) < 0)
        s[0] = '\0';
    say("----- end%s", s ? "" : " (none)");
    free(s);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

static void kill_program(void)
{
    if (prog_pid > 0) {
        kill(-prog_pid, SIGKILL);
        waitpid(prog_pid, NULL, 0);
        prog_pid = 0;
    }
}

/* The backends are children of the loop thread (PR_SET_PDEATHSIG): it frees the core. */
static void *loop(void *arg)
{
    (void)arg;
    while (!loop_stop)
        ag_core_run_once(core, 50);
    ag_core_free(core);
    return NULL;
}

static void cleanup(void)
{
    kill_program();
    if (dom) {
        virDomainDestroy(dom);
        virDomainUndefine(dom);
        virDomainFree(dom);
        dom = NULL;
    }
    if (rw)
        virConnectClose(rw);
    rw = NULL;
    if (loop_started) {
        loop_stop = 1;
        pthread_join(loop_th, NULL); /* Shutdown, SIGTERM, SIGKILL: the backend is gone */
        loop_started = 0;
    }
    if (ca)
        ag_ca_close(ca);
    ca = NULL;
    if (failed && work[0]) {
        dump("agent + backend log", logpath);
        dump("session_hold output", proglog);
    }
    if (saved_stderr >= 0) /* what runs after (LeakSanitizer at exit) goes to the real one */
        dup2(saved_stderr, 2);
    if (work[0] && !getenv("SLUICE_TEST_KEEP"))
        nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    else if (work[0])
        say("kept %s", work);
}

static void on_signal(int sig)
{
    (void)sig;
    exit(1); /* atexit: cleanup */
}

/* Backend server certificates from the host CA (as agent/main.c does). */
static sl_code issue(void *user, const char *cn, const char *const *sans, size_t nsans,
                     char **cert_pem, char **key_pem, char **ca_pem, sl_error *e)
{
    sl_code rc = ag_ca_issue_server(user, cn, sans, nsans, 0, cert_pem, key_pem, e);
    if (rc != SL_OK)
        return rc;
    *ca_pem = strdup(ag_ca_cert_pem(user));
    return *ca_pem ? SL_OK : sl_fail(e, SL_ERR_NOMEM, "out of memory");
}

/* A free range of backend ports: the kernel's pick, and a few above it. */
static int ephemeral_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        FAIL("cannot get an ephemeral port: %s", __LINE__, strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

static void write_file(const char *dir, const char *name, const char *text, size_t len, mode_t mode)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len || fchmod(fd, mode) != 0)
        FAIL("write %s: %s", __LINE__, p, strerror(errno));
    close(fd);
}

/* The guest's side of enrollment without the enrollment server: key + CSR here, certificate
 * from the host CA, the grant to the backend, the four files of docs/enrollment.md. */
static void make_guest(const ag_instance *in, const char *endpoint)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509_REQ *req = X509_REQ_new();
    X509_NAME *nm = X509_NAME_new();
    if (!k || !req || !nm ||
        !X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)"guest", -1, -1,
                                    0) ||
        !X509_REQ_set_subject_name(req, nm) || !X509_REQ_set_pubkey(req, k) ||
        !X509_REQ_sign(req, k, EVP_sha256()))
        FAIL("cannot make the guest's CSR", __LINE__);
    uint8_t *csr = NULL;
    int csr_len = i2d_X509_REQ(req, &csr);
    if (csr_len <= 0)
        FAIL("i2d_X509_REQ", __LINE__);
    uint8_t *der = NULL;
    size_t der_len = 0;
    int64_t not_after = 0;
    char fp[65];
    sl_error e = {0};
    if (ag_ca_sign_client(ca, csr, (size_t)csr_len, in->uuid, in->project_id, &der, &der_len,
                          &not_after, fp, &e) != SL_OK)
        FAIL("ag_ca_sign_client: %s", __LINE__, e.msg);
    ag_backend_grant(ag_core_supervisor(core), in, fp, not_after);

    const uint8_t *p = der;
    X509 *x = d2i_X509(NULL, &p, (long)der_len);
    BIO *cb = BIO_new(BIO_s_mem()), *kb = BIO_new(BIO_s_mem());
    if (!x || !cb || !kb || !PEM_write_bio_X509(cb, x) ||
        !PEM_write_bio_PrivateKey(kb, k, NULL, NULL, 0, NULL, NULL))
        FAIL("PEM encoding", __LINE__);
    char *cpem, *kpem;
    long cl = BIO_get_mem_data(cb, &cpem), kl = BIO_get_mem_data(kb, &kpem);
    if (mkdir(confdir, 0750) != 0)
        FAIL("mkdir %s: %s", __LINE__, confdir, strerror(errno));
    const char *capem = ag_ca_cert_pem(ca);
    write_file(confdir, "ca.pem", capem, strlen(capem), 0644);
    char conf[1024];
    int n = snprintf(conf, sizeof conf,
                     "# agent.revocation_e2e\nendpoint = %s\ninstance_id = %s\nproject_id = %s\n"
                     "not_after = %lld\n",
                     endpoint, in->uuid, in->project_id, (long long)not_after);
    write_file(confdir, "backend.conf", conf, (size_t)n, 0644);
    write_file(confdir, "client.key", kpem, (size_t)kl, 0600);
    write_file(confdir, "client.pem", cpem, (size_t)cl, 0644);
    BIO_free(cb);
    BIO_free(kb);
    X509_free(x);
    free(der);
    OPENSSL_free(csr);
    X509_NAME_free(nm);
    X509_REQ_free(req);
    EVP_PKEY_free(k);
}

/* A sanitized build: the AddressSanitizer runtime this test runs with (libasan.so.N), which the
 * program (not sanitized) must preload to load the sanitized frontend. "" when none. */
static char asan_rt[512];

static int find_asan(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *base = strrchr(info->dlpi_name, '/');
    if (base && !strncmp(base + 1, "libasan.so", 10)) {
        snprintf(asan_rt, sizeof asan_rt, "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

static void start_program(void)
{
    dl_iterate_phdr(find_asan, NULL);
    char ldpath[1024];
    const char *old = getenv("LD_LIBRARY_PATH");
    snprintf(ldpath, sizeof ldpath, "%s%s%s", frontend_dir, old && *old ? ":" : "", old ? old : "");
    pid_t parent = getpid();
    prog_pid = fork();
    if (prog_pid < 0)
        FAIL("fork: %s", __LINE__, strerror(errno));
    if (prog_pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(126);
        int fd = open(proglog, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd < 0)
            _exit(126);
        dup2(fd, 1);
        dup2(fd, 2);
        setenv("LD_LIBRARY_PATH", ldpath, 1);
        setenv("SLUICE_CONFIG_DIR", confdir, 1);
        setenv("SLUICE_HOLD_SECONDS", "60", 1);
        if (asan_rt[0]) { /* as tests/e2e/run.py: cudart's globals are never freed */
            setenv("LD_PRELOAD", asan_rt, 1);
            setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
        }
        execl(program, program, (char *)NULL);
        _exit(127);
    }
    setpgid(prog_pid, prog_pid); /* both sides: no race with kill(-pid) */
}

static int program_exited(int *status)
{
    if (prog_pid <= 0)
        return 1;
    pid_t r = waitpid(prog_pid, status, WNOHANG);
    if (r == prog_pid) {
        prog_pid = 0;
        return 1;
    }
    return 0;
}

static int ticks(void)
{
    char *s = slurp(proglog);
    int last = 0;
    for (char *p = s; p && (p = strstr(p, "TICK ")); p += 5)
        last = atoi(p + 5);
    free(s);
    return last;
}

static int instance_running(void)
{
    ag_instance in;
    return ag_instances_get(ag_core_instances(core), UUID, &in) && in.running;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s BACKEND DOUBLE FRONTEND_DIR SESSION_HOLD_PROGRAM\n", argv[0]);
        return 2;
    }
    backend_path = argv[1];
    double_path = argv[2];
    frontend_dir = argv[3];
    program = argv[4];
    if (access(program, X_OK) != 0) {
        printf("SKIP: %s is not built (nvcc-built programs: SLUICE_CUDA_TESTS=ON)\n", program);
        return 77;
    }
    char lib[600];
    snprintf(lib, sizeof lib, "%s/libcuda.so.1", frontend_dir);
    const char *need[] = {backend_path, double_path, lib};
    for (int i = 0; i < 3; i++)
        if (access(need[i], R_OK) != 0) {
            fprintf(stderr, "FAIL: %s: %s\n", need[i], strerror(errno));
            return 1;
        }
    double t_start = now_s();
    atexit(cleanup);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);

    const char *base = getenv("TMPDIR");
    snprintf(work, sizeof work, "%s/sluice-revoke-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(work)) {
        work[0] = '\0';
        FAIL("mkdtemp: %s", __LINE__, strerror(errno));
    }
    snprintf(logpath, sizeof logpath, "%s/agent.log", work);
    snprintf(proglog, sizeof proglog, "%s/session_hold.log", work);
    snprintf(confdir, sizeof confdir, "%s/guest", work);

    /* 1. the agent core; the real backend; its log and ours in WORK/agent.log */
    /* the backends' 21 ports, then 21 for the session workers' direct channels (the default
     * direct range 48000-49999 may overlap an ephemeral pick) */
    int port = ephemeral_port();
    if (port > 65535 - 41)
        port = 65535 - 41;
    int pmax = port + 20;
    char text[4096];
    snprintf(text, sizeof text,
             "libvirt_uri = test:///default\nadvertise_address = 127.0.0.1\n"
             "backend_bind = 127.0.0.1\nbackend_port_min = %d\nbackend_port_max = %d\n"
             "direct_port_min = %d\ndirect_port_max = %d\n"
             "run_dir = %s/run\nstate_dir = %s/state\nca_dir = %s/ca\nbackend_path = %s\n"
             "driver_path = %s\ntoken_public_key = /dev/null\n"
             "backend_stop_grace = 2\nrestart_backoff_max = 2\n"
             "[tier gold]\nmax_sessions = 4\n[flavor g1.gpu]\ntier = gold\ngpu_share = 0.5\n",
             port, pmax, pmax + 1, pmax + 21, work, work, work, backend_path, double_path);
    ag_config_defaults(&cfg);
    sl_error e = {0};
    if (ag_config_parse("revocation_e2e.conf", text, &cfg, &e) != SL_OK)
        FAIL("config: %s", __LINE__, e.msg);
    cfg.backend_user[0] = cfg.backend_group[0] = '\0';
    const double debounce = cfg.reboot_debounce_s; /* the default: what production runs */
    if (ag_ca_open(cfg.ca_dir, NULL, &ca, &e) != SL_OK)
        FAIL("ag_ca_open: %s", __LINE__, e.msg);

    saved_stderr = dup(2);
    int lfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (saved_stderr < 0 || lfd < 0 || dup2(lfd, 2) < 0)
        FAIL("redirect stderr: %s", __LINE__, strerror(errno));
    close(lfd);
    setvbuf(stderr, NULL, _IONBF, 0);

    ag_core_opts o = {&cfg, issue, ca, NULL, NULL};
    if (ag_core_new(&o, &core, &e) != SL_OK)
        FAIL("ag_core_new: %s", __LINE__, e.msg);
    loop_stop = 0;
    if (pthread_create(&loop_th, NULL, loop, NULL) != 0)
        FAIL("pthread_create", __LINE__);
    loop_started = 1;
    rw = virConnectOpen("test:///default"); /* after the core: its event loop is registered */
    if (!rw)
        FAIL("virConnectOpen(test:///default): %s", __LINE__, virGetLastErrorMessage());
    WAIT_FOR(ag_core_libvirt_connected(core), 5);

    /* 2. a Nova-shaped GPU domain; the backend comes up and says hello */
    char xml[4096];
    snprintf(xml, sizeof xml,
             "<domain type='test'><name>instance-0000e2e1</name><uuid>%s</uuid>"
             "<memory>65536</memory><os><type>hvm</type></os><metadata>"
             "<nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'>"
             "<nova:name>vm</nova:name><nova:flavor name='g1.gpu'/>"
             "<nova:owner><nova:user uuid='u'>user</nova:user>"
             "<nova:project uuid='%s'>proj</nova:project></nova:owner>"
             "<nova:ports><nova:port uuid='p'><nova:ip type='fixed' address='127.0.0.1' "
             "ipVersion='4'/></nova:port></nova:ports></nova:instance></metadata></domain>",
             UUID, PROJECT);
    dom = virDomainDefineXML(rw, xml);
    if (!dom || virDomainCreate(dom) != 0)
        FAIL("define/start the domain: %s", __LINE__, virGetLastErrorMessage());
    WAIT_FOR(instance_running(), 5);
    char endpoint[128];
    WAIT_FOR(ag_backend_endpoint(ag_core_supervisor(core), PROJECT, endpoint, sizeof endpoint), 10);
    int bpid = ag_backend_pid(ag_core_supervisor(core), PROJECT);
    say("backend pid %d at %s (%.2f s)", bpid, endpoint, now_s() - t_start);

    /* 3. the guest's certificate and its grant */
    ag_instance in;
    if (!ag_instances_get(ag_core_instances(core), UUID, &in))
        FAIL("instance %s unknown", __LINE__, UUID);
    make_guest(&in, endpoint);
    WAIT_FOR(file_has(logpath, "instance " UUID " granted by the agent"), 5);

    /* 4. the program holds a session through the frontend */
    start_program();
    int st = 0;
    WAIT_FOR(file_has(proglog, "SESSION OPEN") || program_exited(&st), 20);
    if (!file_has(proglog, "SESSION OPEN"))
        FAIL("session_hold did not open a session (exit status 0x%x)", __LINE__, st);
    WAIT_FOR(ticks() >= 1 || program_exited(&st), 10);
    if (prog_pid == 0)
        FAIL("session_hold ended before the domain stopped", __LINE__);
    say("session open (%.2f s)", now_s() - t_start);

    /* 5a. a quick reboot (destroy + start within the debounce) does not end the session */
    if (virDomainDestroy(dom) != 0 || virDomainCreate(dom) != 0)
        FAIL("quick reboot: %s", __LINE__, virGetLastErrorMessage());
    double t_reboot = now_s();
    while (now_s() - t_reboot < debounce + 1.5 && !program_exited(&st))
        usleep(50000);
    int t1 = ticks();
    usleep(1200 * 1000); /* still making calls after the debounce */
    if (program_exited(&st) || file_has(proglog, "SESSION ENDED") || ticks() <= t1)
        FAIL("a quick reboot (debounce %.0f s) ended the session or stalled it (ticks %d -> %d)",
             __LINE__, debounce, t1, ticks());
    if (file_has(logpath, "): revoked (") || file_has(logpath, " revoked ("))
        FAIL("a quick reboot was revoked", __LINE__);
    if (ag_backend_pid(ag_core_supervisor(core), PROJECT) != bpid)
        FAIL("the backend changed across the quick reboot", __LINE__);
    say("quick reboot: session still live %.1f s later (ticks %d)", now_s() - t_reboot, ticks());

    /* 5b. the domain stops: the session ends within 15 s */
    double t0 = now_s();
    if (virDomainDestroy(dom) != 0)
        FAIL("virDomainDestroy: %s", __LINE__, virGetLastErrorMessage());
    double t_end = 0;
    while (now_s() - t0 < LIMIT_S + 5) {
        if (file_has(proglog, "SESSION ENDED")) {
            t_end = now_s();
            break;
        }
        if (program_exited(&st) && !file_has(proglog, "SESSION ENDED"))
            FAIL("session_hold exited (status 0x%x) without reporting the end", __LINE__, st);
        usleep(20000);
    }
    if (t_end == 0)
        FAIL("the session was still live %.0f s after the domain stopped", __LINE__, LIMIT_S + 5);
    double took = t_end - t0;
    char *out = slurp(proglog);
    char *line = out ? strstr(out, "SESSION ENDED") : NULL;
    if (line)
        line[strcspn(line, "\n")] = '\0';
    say("revocation: the session ended %.2f s after virDomainDestroy (debounce %.0f s): %s", took,
        debounce, line ? line : "?");
    free(out);
    if (took > LIMIT_S)
        FAIL("the session ended %.2f s after the stop, more than %.0f s", __LINE__, took, LIMIT_S);
    WAIT_FOR(program_exited(&st), 5);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        FAIL("session_hold exit status 0x%x", __LINE__, st);
    /* the agent revoked it, the backend ended the live session for that reason */
    WAIT_FOR(file_has(logpath, "instance " UUID " (project " PROJECT "): revoked"), 5);
    WAIT_FOR(file_has(logpath, "instance " UUID " revoked ("), 5);
    if (file_has(logpath, ": 0 live sessions ended"))
        FAIL("the backend's revocation ended no live session", __LINE__);

    /* the project's last GPU instance is gone: its backend stops */
    WAIT_FOR(ag_backend_pid(ag_core_supervisor(core), PROJECT) == 0, 10);
    /* sanitized builds: the backend (its log) and the frontend (the program's output) */
    const char *reports[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"};
    for (int i = 0; i < 3; i++)
        if (file_has(logpath, reports[i]) || file_has(proglog, reports[i]))
            FAIL("sanitizer report: %s", __LINE__, reports[i]);
    failed = 0;
    say("PASS agent.revocation_e2e (%.1f s)", now_s() - t_start);
    return 0;
}
