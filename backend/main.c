/* sluice-backend: flags, the driver, signals, logs. One process per tenant (project) per host;
 * the agent's supervisor starts it with exactly the flags below. */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "sluice/log.h"

static volatile int stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: sluice-backend --project ID --listen tcp://ADDR:PORT --cert FILE --key FILE\n"
        "                      --ca FILE --driver PATH/libcuda.so.1 [--control ipc://PATH]\n"
        "                      [--allow FILE] [--state-dir DIR] [--help]\n"
        "\n"
        "Serves one tenant's remote CUDA sessions on the real driver (docs/backend.md).\n"
        "  --project ID      the tenant; only client certificates with OU=ID are accepted\n"
        "  --listen EP       where guests connect (mutual TLS 1.3 inside ZeroMQ)\n"
        "  --cert/--key FILE the backend's server certificate and key (PEM)\n"
        "  --ca FILE         the CA that signs guests' client certificates (PEM)\n"
        "  --driver PATH     the REAL NVIDIA driver library (never Sluice's frontend)\n"
        "  --control EP      the agent's control socket (ipc://...): grants, revocations\n"
        "  --allow FILE      instance uuids granted without an agent (one per line, # comments)\n"
        "  --state-dir DIR   a directory for the backend's state (must exist)\n"
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

int main(int argc, char **argv)
{
    struct be_config cfg = {0};
    static const struct option opts[] = {{"project", required_argument, 0, 'p'},
                                         {"listen", required_argument, 0, 'l'},
                                         {"cert", required_argument, 0, 'c'},
                                         {"key", required_argument, 0, 'k'},
                                         {"ca", required_argument, 0, 'a'},
                                         {"driver", required_argument, 0, 'd'},
                                         {"control", required_argument, 0, 'C'},
                                         {"allow", required_argument, 0, 'A'},
                                         {"state-dir", required_argument, 0, 's'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
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
        case 'A':
            cfg.allow = optarg;
            break;
        case 's':
            cfg.state_dir = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sluice-backend: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
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
    if (strncmp(cfg.listen, "tcp://", 6) != 0 || !strrchr(cfg.listen + 6, ':')) {
        fprintf(stderr, "sluice-backend: --listen must be tcp://ADDR:PORT\n");
        return 2;
    }
    if (cfg.control && strncmp(cfg.control, "ipc://", 6) != 0) {
        fprintf(stderr, "sluice-backend: --control must be ipc://PATH\n");
        return 2;
    }
    if (!readable("--cert", cfg.cert) || !readable("--key", cfg.key) || !readable("--ca", cfg.ca) ||
        !readable("--driver", cfg.driver) || (cfg.allow && !readable("--allow", cfg.allow)))
        return 2;
    if (cfg.state_dir) {
        struct stat st;
        if (stat(cfg.state_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "sluice-backend: --state-dir %s is not a directory\n", cfg.state_dir);
            return 2;
        }
    }
    if (!cfg.control && !cfg.allow)
        sl_log(SL_LOG_WARNING, BE_COMPONENT,
               "neither --control nor --allow: every guest will be refused");

    /* the real driver */
    void *dl = dlopen(cfg.driver, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "--driver %s: %s", cfg.driver, dlerror());
        return 1;
    }
    if (!dlsym(dl, "cuDriverGetVersion") || !dlsym(dl, "cuInit")) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "--driver %s does not export the CUDA driver API",
               cfg.driver);
        return 1;
    }
    if (dlsym(dl, "sl_fe_call") || dlsym(dl, "sl_fe_export_table")) {
        sl_log(SL_LOG_ERR, BE_COMPONENT,
               "--driver %s is Sluice's own frontend; point it at the real NVIDIA driver",
               cfg.driver);
        return 1;
    }
    static struct sl_driver_api api;
    int nbound = sl_driver_api_load(&api, dl);
    sl_error e;
    if (be_printf_init(&e) != SL_OK) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "device printf capture: %s", e.msg);
        return 1;
    }
    struct be_devices devs;
    if (be_devices_load(&api, &devs, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "--driver %s: %s", cfg.driver, e.msg);
        return 1;
    }
    sl_log(SL_LOG_NOTICE, BE_COMPONENT,
           "project %s: driver %s, version %d, %d device%s, %d entry points bound", cfg.project,
           cfg.driver, devs.driver_version, devs.count, devs.count == 1 ? "" : "s", nbound);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    be_dispatch_setup();
    int rc = be_server_run(&cfg, &api, &devs, &stop_flag);
    be_devices_free(&devs);
    be_images_clear();
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "project %s: stopped%s", cfg.project,
           rc ? " after an error" : "");
    return rc;
}
