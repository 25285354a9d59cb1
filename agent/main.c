/* sluice-agent: one per compute host. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ca.h"
#include "check.h"
#include "config.h"
#include "core.h"
#include "gpus.h"
#include "enroll.h"
#include "metrics.h"
#include "report.h"
#include "sluice/cli.h"
#include "sluice/log.h"
#include "usage_ingest.h"
#include "usage_store.h"

#define COMPONENT "agent"

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice-agent [--config FILE] [--check-config]\n"
               "\n"
               "Watches libvirt for Nova GPU instances, runs one sluice-backend per project\n"
               "with running GPU instances, enrolls guests and revokes them when they stop;\n"
               "stores the backends' usage records (usage_db), forwards them to the registry\n"
               "and serves Prometheus metrics (metrics_listen). Reports: sluice-usage.\n"
               "\n"
               "  -c, --config FILE   configuration file (default /etc/sluice/agent.conf;\n"
               "                      see docs/agent.md)\n"
               "      --check-config  load and check the configuration and the files it names,\n"
               "                      then exit 0 (valid) or 1\n"
               "  -V, --version       the release\n"
               "  -h, --help          this text\n"
               "\n"
               "Logs go to stderr in journald's <N> form; SLUICE_LOG_LEVEL=debug|info|...\n"
               "SIGTERM or SIGINT stops it cleanly (backends are shut down first).\n");
}

/* --check-config prints its findings for a person; the daemon logs them (once each). */
static void report_check(void *user, int is_error, const char *line)
{
    if (*(const int *)user)
        fprintf(stderr, "sluice-agent: %s%s\n", is_error ? "" : "warning: ", line);
    else
        sl_log(is_error ? SL_LOG_ERR : SL_LOG_WARNING, COMPONENT, "%s", line);
}

/* Backend server certificates from the host CA. */
static sl_code issue(void *user, const char *cn, const char *const *sans, size_t nsans,
                     char **cert_pem, char **key_pem, char **ca_pem, sl_error *e)
{
    ag_ca *ca = user;
    sl_code rc = ag_ca_issue_server(ca, cn, sans, nsans, 0, cert_pem, key_pem, e);
    if (rc != SL_OK)
        return rc;
    *ca_pem = strdup(ag_ca_cert_pem(ca));
    return *ca_pem ? SL_OK : sl_fail(e, SL_ERR_NOMEM, "out of memory");
}

typedef struct sigwatch {
    int fd;
    volatile int stop;
} sigwatch;

static int on_signal(void *user)
{
    sigwatch *w = user;
    struct signalfd_siginfo si;
    while (read(w->fd, &si, sizeof si) == (ssize_t)sizeof si) {
        sl_log(SL_LOG_NOTICE, COMPONENT, "signal %u: stopping", si.ssi_signo);
        w->stop = 1;
    }
    return w->fd;
}

static int env_lookup(void *user, const char *uuid, ag_instance *out)
{
    return ag_instances_get(ag_core_instances(user), uuid, out);
}
static int env_endpoint(void *user, const char *project, char *out, size_t n)
{
    return ag_backend_endpoint(ag_core_supervisor(user), project, out, n);
}
static void env_issued(void *user, const ag_instance *inst, const char *fp, int64_t not_after)
{
    ag_backend_grant(ag_core_supervisor(user), inst, fp, not_after);
}
static int env_granted(void *user, const char *fp, char *instance, size_t n)
{
    return ag_backend_granted(ag_core_supervisor(user), fp, instance, n);
}
/* Runs after every wait of the loop, so at least once a second (the channel's timers; ZMQ_FD is
 * edge-triggered). The server re-binds when it renews its certificate: the fd may change. */
static int on_enroll(void *user)
{
    sl_error e;
    if (ag_enroll_poll(user, 0, &e) != SL_OK)
        sl_log(SL_LOG_ERR, COMPONENT, "enrollment server: %s", e.msg);
    return ag_enroll_fd(user);
}

/* sluice_agent_enrollments_total from the enrollment server's counters. */
static void enrollment_metrics(const ag_enroll *enr, ag_metrics *m)
{
    ag_enroll_stats st;
    ag_enroll_get_stats(enr, &st);
    ag_metrics_enrollments(m, "OK", st.ok);
    for (int i = 0; i < 16; i++) /* refused[] is indexed by EnrollReply status */
        if (strcmp(ag_enroll_status_name(i), "OK") != 0)
            ag_metrics_enrollments(m, ag_enroll_status_name(i), st.refused[i]);
}

static void on_placement(void *user, const ag_instance *in, int placed)
{
    if (placed)
        ag_report_place(user, in->uuid, in->project_id, in->flavor);
    else
        ag_report_remove(user, in->uuid);
}

static void on_usage_stored(void *user)
{
    ag_report_usage_kick(user);
}

/* What main() opened, closed in reverse order (NULL members are fine). */
typedef struct running {
    ag_ca *ca;
    ag_usage_store *store;
    ag_metrics *metrics;
    ag_metrics_http *http;
    ag_report *rep;
    ag_core *core;
    ag_usage *usage;
    ag_enroll *enr;
} running;

static int shut(running *r, int status)
{
    ag_core_free(r->core); /* stops the backends; their last records are still stored */
    ag_usage_free(r->usage);
    ag_enroll_close(r->enr);
    ag_metrics_http_stop(r->http);
    ag_report_stop(r->rep);
    ag_metrics_free(r->metrics);
    ag_usage_store_close(r->store);
    ag_ca_close(r->ca);
    return status;
}

int main(int argc, char **argv)
{
    const char *path = "/etc/sluice/agent.conf";
    int check = 0;
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"check-config", no_argument, NULL, 'k'},
                                         {"version", no_argument, NULL, 'V'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":c:hV", opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            path = optarg;
            break;
        case 'k':
            check = 1;
            break;
        case 'V':
            return sl_cli_version("sluice-agent");
        case 'h':
            usage(stdout);
            return 0;
        default:
            return sl_cli_bad_option("sluice-agent", ch, argv);
        }
    }
    if (optind != argc)
        return sl_cli_usage_error("sluice-agent", "unexpected argument '%s'", argv[optind]);
    sl_log_set_identifier("sluice-agent");
    static ag_config cfg;
    sl_error e = {0};
    ag_config_defaults(&cfg);
    if (ag_config_load(path, &cfg, &e) != SL_OK) {
        if (check)
            fprintf(stderr, "sluice-agent: %s\n", e.msg);
        else
            sl_log(SL_LOG_ERR, COMPONENT, "%s", e.msg);
        return 1;
    }
    if (ag_check_config(&cfg, report_check, &check) > 0)
        return 1;
    if (check) {
        printf("%s: configuration OK (%zu flavors, %zu tiers)\n", path, cfg.policy.n_flavors,
               cfg.policy.n_tiers);
        return 0;
    }

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    sigwatch sw = {signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC), 0};

    running run = {0};
    ag_ca_opts cao = {cfg.client_cert_lifetime_s, cfg.server_cert_lifetime_s, 0};
    if (ag_ca_open(cfg.ca_dir, &cao, &run.ca, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "host CA %s: %s", cfg.ca_dir, e.msg);
        return 1;
    }
    ag_ca *ca = run.ca;
    mkdir(cfg.state_dir, 0750);
    if (ag_usage_store_open(cfg.usage_db, 0, &run.store, &e) != SL_OK ||
        !(run.metrics = ag_metrics_new(SLUICE_VERSION))) {
        sl_log(SL_LOG_ERR, COMPONENT, "usage_db: %s", run.store ? "out of memory" : e.msg);
        return shut(&run, 1);
    }
    char endpoint[128], advertised[128], replay[600];
    snprintf(endpoint, sizeof endpoint,
             strchr(cfg.enroll_addr, ':') ? "tcp://[%s]:%d" : "tcp://%s:%d", cfg.enroll_addr,
             cfg.enroll_port);
    snprintf(advertised, sizeof advertised,
             strchr(cfg.advertise_address, ':') ? "tcp://[%s]:%d" : "tcp://%s:%d",
             cfg.advertise_address, cfg.enroll_port);
    static ag_gpu gpus[AG_MAX_GPUS];
    size_t n_gpus = 0;
    if (cfg.registry_endpoint[0]) {
        if (ag_gpus_probe(&cfg, gpus, AG_MAX_GPUS, &n_gpus, &e) != SL_OK)
            sl_log(SL_LOG_WARNING, COMPONENT, "GPUs not known to the registry: %s", e.msg);
        else
            sl_log(SL_LOG_NOTICE, COMPONENT, "%zu GPU%s: %s%s", n_gpus, n_gpus == 1 ? "" : "s",
                   n_gpus ? gpus[0].name : "none", n_gpus > 1 ? ", ..." : "");
        ag_report_opts ro = {0};
        ro.gpus = gpus;
        ro.n_gpus = n_gpus;
        ro.endpoint = cfg.registry_endpoint;
        ro.ca_file = cfg.registry_ca;
        ro.cert_file = cfg.registry_cert;
        ro.key_file = cfg.registry_key;
        ro.enroll_endpoint = advertised;
        ro.slots = (uint32_t)cfg.registry_slots;
        ro.version = SLUICE_VERSION;
        ro.ca_pem = ag_ca_cert_pem(ca);
        ro.usage = run.store;
        ro.metrics = run.metrics;
        if (ag_report_start(&ro, &run.rep, &e) != SL_OK) {
            sl_log(SL_LOG_ERR, COMPONENT, "%s", e.msg);
            return shut(&run, 1);
        }
    }
    ag_report *rep = run.rep;
    ag_core_opts co = {&cfg, issue, ca, rep ? on_placement : NULL, rep};
    if (ag_core_new(&co, &run.core, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "%s", e.msg);
        return shut(&run, 1);
    }
    ag_core *core = run.core;
    ag_usage_opts uo = {run.store,
                        run.metrics,
                        ag_core_instances(core),
                        rep ? on_usage_stored : NULL,
                        rep,
                        cfg.usage_retention_days,
                        rep != NULL};
    if (ag_usage_new(&uo, &run.usage, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "usage_db %s: %s", cfg.usage_db, e.msg);
        return shut(&run, 1);
    }
    ag_core_set_usage(core, run.usage);
    if (cfg.metrics_addr[0]) {
        if (ag_metrics_http_start(run.metrics, cfg.metrics_addr, cfg.metrics_port, &run.http, &e) !=
            SL_OK) {
            sl_log(SL_LOG_ERR, COMPONENT, "%s", e.msg);
            return shut(&run, 1);
        }
        sl_log(SL_LOG_NOTICE, COMPONENT, "metrics on http://%s%s%s:%d/metrics",
               strchr(cfg.metrics_addr, ':') ? "[" : "", cfg.metrics_addr,
               strchr(cfg.metrics_addr, ':') ? "]" : "", ag_metrics_http_port(run.http));
    }
    ag_core_watch(core, sw.fd, on_signal, &sw);
    snprintf(replay, sizeof replay, "%s/enroll-replay.db", cfg.state_dir);
    const char *names[] = {cfg.advertise_address};
    ag_enroll_opts eo = {0};
    eo.endpoint = endpoint;
    eo.server_names = names;
    eo.n_server_names = 1;
    eo.token_key_file = cfg.token_public_key;
    eo.token_issuer = cfg.enroll_token_issuer[0] ? cfg.enroll_token_issuer : NULL;
    eo.token_skew_s = cfg.enroll_clock_skew_s ? cfg.enroll_clock_skew_s : -1;
    eo.replay_db = replay;
    eo.ratelimit.per_minute = cfg.enroll_fail_per_minute;
    eo.ratelimit.burst = cfg.enroll_fail_burst;
    ag_enroll_env env = {env_lookup, env_endpoint, env_issued, core, env_granted};
    if (ag_enroll_open(&eo, ca, &env, &run.enr, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "enrollment server: %s", e.msg);
        return shut(&run, 1);
    }
    ag_enroll *enr = run.enr;
    ag_core_watch(core, ag_enroll_fd(enr), on_enroll, enr);
    sl_log(SL_LOG_NOTICE, COMPONENT, "enrollment on %s", ag_enroll_endpoint(enr));
    sl_log(SL_LOG_NOTICE, COMPONENT,
           "sluice-agent started (libvirt %s, backends on %s, "
           "ports %d..%d)",
           cfg.libvirt_uri, cfg.advertise_address, cfg.port_min, cfg.port_max);
    while (!sw.stop) {
        ag_core_run_once(core, 1000);
        enrollment_metrics(enr, run.metrics);
    }
    shut(&run, 0);
    close(sw.fd);
    sl_log(SL_LOG_NOTICE, COMPONENT, "sluice-agent stopped");
    return 0;
}
