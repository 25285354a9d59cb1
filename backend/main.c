/* sluice-backend: flags, the driver check, signals, logs. One process per tenant (project) per
 * host; the agent's supervisor starts it with exactly the flags below. This process never loads
 * the driver: a probe child checks it at start, and each session runs in a worker process of
 * its own (hidden mode `--session-worker FD`, worker.c). */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bounds.h"
#include "daemon/config.h"
#include "daemon/driver.h"
#include "daemon/list_gpus.h"
#include "daemon/loop.h"
#include "daemon/worker.h"
#include "session/bulk_pool.h"
#include "session/image_store.h"
#include "session/printf.h"
#include "session/spin.h"
#include "sluice/cli.h"
#include "sluice/log.h"

static volatile int stop_flag;

static void on_signal(int sig)
{
    if (sig == SIGHUP)
        be_server_request_reload();
    else
        stop_flag = 1;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: sluice-backend --project ID --listen tcp://ADDR:PORT --cert FILE --key FILE\n"
        "                      --ca FILE --driver PATH/libcuda.so.1 [--control ipc://PATH\n"
        "                      [--control-key FILE]] [--allow FILE] [--state-dir DIR]\n"
        "                      [--max-sessions N]\n"
        "                      [--usage-interval S] [--usage-resend S] [--measure events|none]\n"
        "                      [--spin-us N] [--direct on|off] [--direct-ports MIN-MAX]\n"
        "                      [--staging-slots N] [--staging-budget MIB]\n"
        "                      [--version] [--help]\n"
        "\n"
        "Serves one tenant's remote CUDA sessions on the real driver (docs/backend.md).\n"
        "  --project ID      the tenant; only client certificates with OU=ID are accepted\n"
        "  --listen EP       where guests connect (mutual TLS 1.3 inside ZeroMQ)\n"
        "  --cert/--key FILE the backend's server certificate and key (PEM)\n"
        "  --ca FILE         the CA that signs guests' client certificates (PEM)\n"
        "  --driver PATH     the REAL NVIDIA driver library (never Sluice's frontend)\n"
        "  --control EP      the agent's control socket (ipc://...): grants, revocations\n"
        "  --control-key FILE  the agent's key (64 hex digits): only messages carrying it are\n"
        "                    obeyed; new sessions wait for the agent's grant set, and without\n"
        "                    word from the agent for 15 s the backend ends its sessions and exits\n"
        "  --allow FILE      instance uuids granted without an agent (one per line, # comments)\n"
        "  --state-dir DIR   a directory for the backend's state (must exist)\n"
        "  --max-sessions N  live sessions of the tenant (each one is a worker process); default\n"
        "                    64; an instance's own limit comes from its SLA (the agent's grant)\n"
        "  --usage-interval S  a usage record per session every S seconds (and at its end);\n"
        "                    default 10, 1..86400 (docs/accounting.md)\n"
        "  --usage-resend S  usage records the agent has not acknowledged go again every S\n"
        "                    seconds; default 30, 1..86400\n"
        "  --measure M       events (default): GPU time from timing events; none: no timing\n"
        "                    (to measure the accounting's overhead; GPU shares not enforced)\n"
        "  --spin-us N       once idle, a session's threads poll N microseconds before they\n"
        "                    sleep (fewer wake-ups on a busy session, CPU time); default 200\n"
        "                    (0 on a machine of fewer than 4 CPUs), 0 = off, at most 100000\n"
        "  --direct on|off   on (default): once admitted, a guest talks to its session's worker\n"
        "                    process on a port of its own (same address, a free port);\n"
        "                    off: every call goes through --listen's port\n"
        "  --direct-ports MIN-MAX  the session workers' ports (a firewall opens them); default:\n"
        "                    any free port\n"
        "  --staging-slots N page-locked host memory for large copies' bytes, in 16 MiB slots\n"
        "                    per session, made as its copies need them; default 8, 0..8 (0:\n"
        "                    pageable memory, the driver stages each copy itself)\n"
        "  --staging-budget MIB  page-locked host memory all sessions' slots may hold together;\n"
        "                    default 4096, 16..1048576 (beyond it slots stay pageable)\n"
        "Environment: SLUICE_LOG_LEVEL=err|warning|notice|info|debug\n");
}

static int readable(const char *flag, const char *path)
{
    if (access(path, R_OK) == 0)
        return 1;
    fprintf(stderr, "sluice-backend: %s %s: %s\n", flag, path, strerror(errno));
    return 0;
}

static int id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '-'))
            return 0;
    }
    return 1;
}

/* Hidden modes: `--session-worker FD --driver PATH --session-id N --instance I --project P
 * [--acct-fd FD --acct-slot N --acct-inst N] [--usage-interval S] [--measure M] [--image-dir D]
 * [--spin-us N] [--staging-slots N] [--direct tcp://ADDR:* --cert F --key F --ca F --peer-sha256
 * HEX
 * [--direct-ports MIN-MAX]]` (a session's
 * worker process, started by daemon/workers.c), `--probe-driver PATH --project P` (the start-up
 * driver check) and `--list-gpus --driver PATH` (the agent's GPU list). Returns -1 when argv is
 * none. */
static int hidden_mode(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--list-gpus") && !strcmp(argv[2], "--driver")) {
        sl_log_set_identifier("sluice-backend");
        return be_list_gpus_main(argv[3]);
    }
    if (argc < 2 || (strcmp(argv[1], "--session-worker") && strcmp(argv[1], "--probe-driver")))
        return -1;
    const char *driver = NULL, *instance = "", *project = "";
    unsigned long long sid = 0;
    int fd = -1;
    struct be_worker_opts wo = {-1, -1, -1, 0, 0, NULL, 0, {0}, 0, BE_POOL_SLOTS};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--session-worker"))
            fd = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--acct-fd"))
            wo.acct_fd = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--acct-slot"))
            wo.acct_slot = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--acct-inst"))
            wo.acct_inst = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--usage-interval"))
            wo.usage_interval_s = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--measure"))
            wo.no_gpu_timing = !strcmp(argv[i + 1], "none");
        else if (!strcmp(argv[i], "--image-dir"))
            wo.image_dir = argv[i + 1];
        else if (!strcmp(argv[i], "--spin-us"))
            wo.spin_us = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--staging-slots"))
            wo.staging_slots = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--lanes"))
            wo.lanes = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--direct"))
            wo.direct.listen = argv[i + 1];
        else if (!strcmp(argv[i], "--cert"))
            wo.direct.cert = argv[i + 1];
        else if (!strcmp(argv[i], "--key"))
            wo.direct.key = argv[i + 1];
        else if (!strcmp(argv[i], "--ca"))
            wo.direct.ca = argv[i + 1];
        else if (!strcmp(argv[i], "--peer-sha256"))
            wo.direct.peer_sha256 = argv[i + 1];
        else if (!strcmp(argv[i], "--direct-ports") &&
                 (sscanf(argv[i + 1], "%u-%u", &wo.direct.port_min, &wo.direct.port_max) != 2 ||
                  wo.direct.port_min > wo.direct.port_max || wo.direct.port_max > 65535))
            wo.direct.port_min = wo.direct.port_max = 0;
        else if (!strcmp(argv[i], "--probe-driver") || !strcmp(argv[i], "--driver"))
            driver = argv[i + 1];
        else if (!strcmp(argv[i], "--session-id"))
            sid = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--instance"))
            instance = argv[i + 1];
        else if (!strcmp(argv[i], "--project"))
            project = argv[i + 1];
    }
    if (!driver)
        return 2;
    /* the journal names the backend, its project and the worker's session on every line */
    char label[32];
    sl_log_set_identifier("sluice-backend");
    sl_log_set_process_fields(&(sl_log_fields){
        project, instance, sid ? sl_log_session_label(project, sid, label, sizeof label) : NULL});
    if (!strcmp(argv[1], "--probe-driver"))
        return be_probe_main(driver, project);
    if (fd < 0)
        return 2;
    if (wo.direct.listen && (!wo.direct.cert || !wo.direct.key || !wo.direct.ca))
        wo.direct.listen = NULL; /* no TLS material: no direct endpoint */
    wo.direct.instance = instance;
    wo.direct.project = project;
    wo.direct.sid = sid;
    return be_worker_main(fd, driver, sid, instance, project, &wo);
}

/* Runs `exe --probe-driver PATH` and waits: 0 when the driver loads and initialises. */
static int probe_driver(const char *exe, const char *driver, const char *project)
{
    char *argv[] = {(char *)exe, "--probe-driver", (char *)driver,
                    "--project", (char *)project,  NULL};
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execv(exe, argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv)
{
    /* Copies move through buffers of up to 16 MiB (the frontend's pieces), in the parent and in
     * the worker. Freed ones stay in the heap for the next piece: fresh memory from the kernel
     * costs a page fault per 4 KiB, more than the copy itself (docs/performance.md). */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    int hm = hidden_mode(argc, argv);
    if (hm >= 0)
        return hm;
    /* The server: one heap for its thread and ZeroMQ's I/O thread. A second arena's free top
     * is never given back under the trim threshold above, so the buffers of the sessions'
     * messages stayed in it after they closed; the main heap's are given back once sessions
     * end (workers.c, docs/backend.md "Memory"). */
    mallopt(M_ARENA_MAX, 1);
    struct be_config cfg = {.spin_us = be_default_spin_us(), .staging_slots = BE_POOL_SLOTS};
    static const struct option opts[] = {{"project", required_argument, 0, 'p'},
                                         {"listen", required_argument, 0, 'l'},
                                         {"cert", required_argument, 0, 'c'},
                                         {"key", required_argument, 0, 'k'},
                                         {"ca", required_argument, 0, 'a'},
                                         {"driver", required_argument, 0, 'd'},
                                         {"control", required_argument, 0, 'C'},
                                         {"control-key", required_argument, 0, 'K'},
                                         {"allow", required_argument, 0, 'A'},
                                         {"state-dir", required_argument, 0, 's'},
                                         {"max-sessions", required_argument, 0, 'm'},
                                         {"usage-interval", required_argument, 0, 'I'},
                                         {"usage-resend", required_argument, 0, 'R'},
                                         {"measure", required_argument, 0, 'M'},
                                         {"spin-us", required_argument, 0, 'S'},
                                         {"direct", required_argument, 0, 'D'},
                                         {"direct-ports", required_argument, 0, 'P'},
                                         {"staging-slots", required_argument, 0, 'T'},
                                         {"staging-budget", required_argument, 0, 'B'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {0, 0, 0, 0}};
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (o) {
        case 'p':
            cfg.project = optarg;
            break;
        case 'l':
            cfg.listen = optarg;
            break;
        case 'c':
            cfg.cert = optarg;
            break;
        case 'k':
            cfg.key = optarg;
            break;
        case 'a':
            cfg.ca = optarg;
            break;
        case 'd':
            cfg.driver = optarg;
            break;
        case 'C':
            cfg.control = optarg;
            break;
        case 'K':
            cfg.control_key = optarg;
            break;
        case 'A':
            cfg.allow = optarg;
            break;
        case 's':
            cfg.state_dir = optarg;
            break;
        case 'D':
            if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
                fprintf(stderr, "sluice-backend: --direct must be on or off\n");
                return 2;
            }
            cfg.no_direct = !strcmp(optarg, "off");
            break;
        case 'P': {
            unsigned lo = 0, hi = 0;
            char end = 0;
            if (sscanf(optarg, "%u-%u%c", &lo, &hi, &end) != 2 || lo < 1024 || hi > 65535 ||
                lo > hi) {
                fprintf(stderr, "sluice-backend: --direct-ports must be MIN-MAX within "
                                "1024..65535\n");
                return 2;
            }
            cfg.direct_ports = optarg;
            break;
        }
        case 'm': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (*end || v < 1 || v > 4096) {
                fprintf(stderr, "sluice-backend: --max-sessions must be 1..4096\n");
                return 2;
            }
            cfg.max_sessions = (unsigned)v;
            break;
        }
        case 'I':
        case 'R': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (*end || v < 1 || v > 86400) {
                fprintf(stderr, "sluice-backend: --%s must be 1..86400 seconds\n",
                        o == 'I' ? "usage-interval" : "usage-resend");
                return 2;
            }
            if (o == 'I')
                cfg.usage_interval_s = (unsigned)v;
            else
                cfg.usage_resend_s = (unsigned)v;
            break;
        }
        case 'T': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (!*optarg || *optarg == '-' || *end || v > BE_POOL_SLOTS) {
                fprintf(stderr, "sluice-backend: --staging-slots must be 0..%u\n", BE_POOL_SLOTS);
                return 2;
            }
            cfg.staging_slots = (unsigned)v;
            break;
        }
        case 'B': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (!*optarg || *optarg == '-' || *end || v < 16 || v > BE_STAGING_BUDGET_MAX) {
                fprintf(stderr, "sluice-backend: --staging-budget must be 16..%u MiB\n",
                        BE_STAGING_BUDGET_MAX);
                return 2;
            }
            cfg.staging_budget = (unsigned)v;
            break;
        }
        case 'S': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (!*optarg || *optarg == '-' || *end || v > BE_MAX_SPIN_US) {
                fprintf(stderr, "sluice-backend: --spin-us must be 0..%u microseconds\n",
                        BE_MAX_SPIN_US);
                return 2;
            }
            cfg.spin_us = (unsigned)v;
            break;
        }
        case 'M':
            if (strcmp(optarg, "events") && strcmp(optarg, "none")) {
                fprintf(stderr, "sluice-backend: --measure must be events or none\n");
                return 2;
            }
            cfg.no_gpu_timing = !strcmp(optarg, "none");
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            return sl_cli_version("sluice-backend");
        default:
            return sl_cli_bad_option("sluice-backend", o, argv);
        }
    }
    if (optind < argc)
        return sl_cli_usage_error("sluice-backend", "unexpected argument '%s'", argv[optind]);
    const char *missing = !cfg.project  ? "--project"
                          : !cfg.listen ? "--listen"
                          : !cfg.cert   ? "--cert"
                          : !cfg.key    ? "--key"
                          : !cfg.ca     ? "--ca"
                          : !cfg.driver ? "--driver"
                                        : NULL;
    if (missing) {
        fprintf(stderr, "sluice-backend: %s is required (--help)\n", missing);
        return 2;
    }
    if (!id_ok(cfg.project)) {
        fprintf(stderr, "sluice-backend: --project must be 1..63 of [A-Za-z0-9._:-]\n");
        return 2;
    }
    sl_log_set_identifier("sluice-backend");
    sl_log_set_process_fields(&(sl_log_fields){.project = cfg.project});
    if (strncmp(cfg.listen, "tcp://", 6) != 0 || !strrchr(cfg.listen + 6, ':')) {
        fprintf(stderr, "sluice-backend: --listen must be tcp://ADDR:PORT\n");
        return 2;
    }
    if (cfg.control && strncmp(cfg.control, "ipc://", 6) != 0) {
        fprintf(stderr, "sluice-backend: --control must be ipc://PATH\n");
        return 2;
    }
    if (cfg.control_key && !cfg.control) {
        fprintf(stderr, "sluice-backend: --control-key needs --control\n");
        return 2;
    }
    if (!readable("--cert", cfg.cert) || !readable("--key", cfg.key) || !readable("--ca", cfg.ca) ||
        !readable("--driver", cfg.driver) || (cfg.allow && !readable("--allow", cfg.allow)) ||
        (cfg.control_key && !readable("--control-key", cfg.control_key)))
        return 2;
    if (cfg.state_dir) {
        struct stat st;
        if (stat(cfg.state_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "sluice-backend: --state-dir %s is not a directory\n", cfg.state_dir);
            return 2;
        }
        /* the tenant's module images, kept across sessions (image_store.c) */
        static char images[4096];
        int n = snprintf(images, sizeof images, "%s/images", cfg.state_dir);
        const char *why = n < 0 || (size_t)n >= sizeof images ? "path too long" : NULL;
        if (!why && mkdir(images, 0700) != 0 && errno != EEXIST)
            why = strerror(errno);
        if (!why)
            cfg.image_dir = images;
        else
            sl_log(SL_LOG_WARNING, BE_COMPONENT,
                   "%s/images cannot be made (%s): module images are sent again by every session",
                   cfg.state_dir, why);
    }
    if (!cfg.control && !cfg.allow)
        sl_log(SL_LOG_WARNING, BE_COMPONENT,
               "neither --control nor --allow: every guest will be refused");

    /* The driver is loaded by children only: a probe now, a worker per session later. */
    /* /proc/self/exe: the running binary, even if the package replaced the file meanwhile */
    static const char exe[] = "/proc/self/exe";
    cfg.worker_exe = exe;
    if (probe_driver(exe, cfg.driver, cfg.project) != 0) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "--driver %s cannot be used (see above)", cfg.driver);
        return 1;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* reload the certificate */
    signal(SIGPIPE, SIG_IGN);
    /* connections cost a descriptor each until the channel closes the surplus of a flood
     * (docs/channel.md): the hard limit, not the customary soft 1024, bounds them */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    int rc = be_server_run(&cfg, NULL, NULL, &stop_flag);
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "project %s: stopped%s", cfg.project,
           rc ? " after an error" : "");
    return rc;
}
