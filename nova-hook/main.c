/* sluice-novahook: the vendordata HTTPS service and the agents' registry, one daemon. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "config.h"
#include "http.h"
#include "registry_channel.h"
#include "signer.h"
#include "sluice/cli.h"
#include "sluice/db.h"
#include "sluice/log.h"
#include "store.h"
#include "vendordata.h"

#define COMPONENT     "nova-hook"
#define PEM_MAX       (256 * 1024)
#define CHORES_S      10    /* key repository look */
#define PRUNE_S       3600  /* retention */
#define TOKENS_KEEP_S 86400 /* issued tokens stay this long after they expire (audit) */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice-novahook --config FILE [--check-config]\n"
            "\n"
            "Serves Nova's DynamicJSON vendordata over HTTPS (mutual TLS) and keeps the\n"
            "registry of Sluice agents, placements and usage in SQLite or in a MariaDB\n"
            "database several nova-hooks share (database), which agents reach over the\n"
            "Sluice channel with mutual TLS (registry_listen).\n"
            "\n"
            "  -c, --config FILE   configuration file (key = value; see docs/nova-hook.md)\n"
            "      --check-config  load and check the configuration and every file it names,\n"
            "                      then exit 0 (valid) or 1\n"
            "  -V, --version       the release\n"
            "  -h, --help          this text\n"
            "\n"
            "Logs go to stderr in journald's <N> form; SLUICE_LOG_LEVEL=debug|info|...\n"
            "SIGTERM or SIGINT stops it cleanly; SIGHUP loads a changed token key\n"
            "repository at once (it is also looked at every %d s).\n",
            CHORES_S);
}

/* Reads a whole text file (PEM) into a malloc'd NUL-terminated buffer. */
static sl_code read_text(const char *key, const char *path, char **out, sl_error *e)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return sl_fail(e, SL_ERR_CONFIG, "%s %s: cannot open: %s", key, path, strerror(errno));
    char *buf = malloc(PEM_MAX + 1);
    size_t n = buf ? fread(buf, 1, PEM_MAX + 1, f) : 0;
    fclose(f);
    if (!buf)
        return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", key);
    if (n == 0 || n > PEM_MAX || memchr(buf, '\0', n) || !strstr(buf, "-----BEGIN ")) {
        free(buf);
        return sl_fail(e, SL_ERR_CONFIG, "%s %s: empty, too large or not PEM", key, path);
    }
    buf[n] = '\0';
    *out = buf;
    return SL_OK;
}

typedef struct daemon_state {
    nh_config cfg;
    char *cert, *key, *trust, *agent_ca;
    char *reg_ca, *reg_cert, *reg_key; /* the registry channel's, when registry_listen is set */
    nh_signer *signer;
    char node[256];
    nh_store *store;
    nh_http *http;
    nh_regchan *regchan;
} daemon_state;

static sl_code load(daemon_state *d, sl_error *e)
{
    sl_code rc;
    if ((rc = read_text("tls_cert", d->cfg.tls_cert, &d->cert, e)) != SL_OK ||
        (rc = read_text("tls_key", d->cfg.tls_key, &d->key, e)) != SL_OK ||
        (rc = read_text("client_ca", d->cfg.client_ca, &d->trust, e)) != SL_OK ||
        (rc = read_text("agent_ca", d->cfg.agent_ca, &d->agent_ca, e)) != SL_OK)
        return rc;
    if (d->cfg.registry_port >= 0 &&
        ((rc = read_text("registry_ca", d->cfg.registry_ca, &d->reg_ca, e)) != SL_OK ||
         (rc = read_text("registry_cert", d->cfg.registry_cert, &d->reg_cert, e)) != SL_OK ||
         (rc = read_text("registry_key", d->cfg.registry_key, &d->reg_key, e)) != SL_OK))
        return rc;
    if (d->cfg.node_name[0])
        snprintf(d->node, sizeof d->node, "%s", d->cfg.node_name);
    else if (gethostname(d->node, sizeof d->node - 1) != 0)
        snprintf(d->node, sizeof d->node, "unknown");
    return nh_signer_open(d->cfg.token_key, d->cfg.token_key_repository, &d->signer, e);
}

static void free_secret(char *s)
{
    if (s)
        memset(s, 0, strlen(s));
    free(s);
}

static void unload(daemon_state *d)
{
    nh_http_stop(d->http);
    nh_regchan_stop(d->regchan);
    nh_store_close(d->store);
    nh_signer_free(d->signer);
    free_secret(d->key);
    free_secret(d->reg_key);
    free(d->cert);
    free(d->trust);
    free(d->agent_ca);
    free(d->reg_ca);
    free(d->reg_cert);
}

/* Binds the agents' registry channel when registry_listen is set. */
static sl_code start_registry(daemon_state *d, sl_error *e)
{
    if (d->cfg.registry_port < 0) {
        sl_log(SL_LOG_NOTICE, COMPONENT,
               "registry channel not bound (no registry_listen): agents cannot report");
        return SL_OK;
    }
    char endpoint[96];
    if (d->cfg.registry_port == 0)
        snprintf(endpoint, sizeof endpoint, "tcp://%s:*", d->cfg.registry_addr);
    else
        snprintf(endpoint, sizeof endpoint, "tcp://%s:%d", d->cfg.registry_addr,
                 d->cfg.registry_port);
    nh_regchan_opts o = {endpoint, d->reg_ca, d->reg_cert, d->reg_key, d->cfg.registry_hosts,
                         d->store};
    sl_code rc = nh_regchan_start(&o, &d->regchan, e);
    if (rc == SL_OK)
        sl_log(SL_LOG_NOTICE, COMPONENT,
               "registry channel listening on %s (mutual TLS, agents%s%s)",
               nh_regchan_endpoint(d->regchan), d->cfg.registry_hosts[0] ? ": " : "",
               d->cfg.registry_hosts);
    return rc;
}

static int64_t mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

/* A changed key repository (a rotation copied in) is loaded; the old keys stay on failure. */
static void refresh_keys(daemon_state *d)
{
    sl_error e;
    int r = nh_signer_refresh(d->signer, &e);
    char what[512];
    if (r > 0) {
        nh_signer_describe(d->signer, what, sizeof what);
        sl_log(SL_LOG_NOTICE, COMPONENT, "token keys reloaded: %s", what);
    } else if (r < 0) {
        sl_log(SL_LOG_ERR, COMPONENT,
               "token key repository changed but is unusable, signing "
               "with the keys loaded before: %s",
               e.msg);
    }
}

/* Retention: usage and placement history older than usage_retention_days (when set), issued
 * tokens a day after they expired. Any of several nova-hooks may do it: deletes are
 * idempotent. */
static void prune(daemon_state *d)
{
    int64_t now = (int64_t)time(NULL);
    int64_t usage_before = d->cfg.usage_retention_days > 0
                               ? (now - (int64_t)d->cfg.usage_retention_days * 86400) * 1000000000LL
                               : 0;
    nh_pruned p;
    sl_error e;
    if (nh_store_prune(d->store, usage_before, now - TOKENS_KEEP_S, &p, &e) != SL_OK)
        sl_log(SL_LOG_WARNING, COMPONENT, "retention: %s", e.msg);
    else if (p.usage || p.history || p.tokens)
        sl_log(SL_LOG_INFO, COMPONENT,
               "retention: removed %lld usage records, %lld placement history rows, %lld "
               "expired tokens",
               (long long)p.usage, (long long)p.history, (long long)p.tokens);
}

/* Waits for a stop signal; serves the registry channel meanwhile when it is bound, and does
 * the chores (key repository, retention) on time. */
static int wait_for_stop(daemon_state *d, sigset_t *stop)
{
    int64_t next_keys = mono_s() + CHORES_S, next_prune = mono_s();
    for (;;) {
        int64_t now = mono_s();
        if (now >= next_keys) {
            refresh_keys(d);
            next_keys = now + CHORES_S;
        }
        if (now >= next_prune) {
            prune(d);
            next_prune = now + PRUNE_S;
        }
        int sig;
        if (!d->regchan) {
            struct timespec wait = {1, 0};
            sig = sigtimedwait(stop, NULL, &wait);
        } else {
            struct timespec zero = {0, 0};
            sig = sigtimedwait(stop, NULL, &zero);
            if (sig < 0) {
                sl_error e;
                if (nh_regchan_poll(d->regchan, 200, &e) != SL_OK) {
                    sl_log(SL_LOG_ERR, COMPONENT, "registry channel: %s", e.msg);
                    struct timespec pause = {0, 100 * 1000 * 1000};
                    nanosleep(&pause, NULL);
                }
            }
        }
        if (sig < 0)
            continue;
        if (sig != SIGHUP)
            return sig;
        sl_log(SL_LOG_INFO, COMPONENT,
               "SIGHUP: looking at the token key repository (restart "
               "to reload the rest of the configuration)");
        refresh_keys(d);
    }
}

static int serve(daemon_state *d, sigset_t *stop)
{
    sl_error e;
    if (nh_store_open(d->cfg.database, NH_STORE_SERVE, &d->store, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "%s", e.msg);
        return 1;
    }
    nh_vendordata vd = {d->store,         d->signer,  d->node, d->cfg.token_issuer,
                        d->cfg.token_ttl, d->agent_ca};
    nh_http_opts ho = {
        d->cfg.listen_addr, d->cfg.listen_port, d->cfg.path,     d->cert,        d->key,
        d->trust,           d->cfg.client_cn,   d->cfg.max_body, d->cfg.threads, &vd};
    if (nh_http_start(&ho, &d->http, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "%s", e.msg);
        return 1;
    }
    char keys[512];
    nh_signer_describe(d->signer, keys, sizeof keys);
    sl_log(SL_LOG_NOTICE, COMPONENT,
           "listening on https://%s%s%s:%d%s (mutual TLS), registry %s, token %s",
           strchr(d->cfg.listen_addr, ':') ? "[" : "", d->cfg.listen_addr,
           strchr(d->cfg.listen_addr, ':') ? "]" : "", nh_http_port(d->http), d->cfg.path,
           nh_store_where(d->store), keys);
    if (start_registry(d, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "%s", e.msg);
        return 1;
    }
    int sig = wait_for_stop(d, stop);
    sl_log(SL_LOG_NOTICE, COMPONENT, "signal %d: shutting down", sig);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"check-config", no_argument, NULL, 'k'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, 'V'},
                                         {NULL, 0, NULL, 0}};
    const char *config = NULL;
    int check = 0, c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":c:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            config = optarg;
            break;
        case 'k':
            check = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            return sl_cli_version("sluice-novahook");
        default:
            return sl_cli_bad_option("sluice-novahook", c, argv);
        }
    }
    if (optind != argc)
        return sl_cli_usage_error("sluice-novahook", "unexpected argument '%s'", argv[optind]);
    if (!config)
        return sl_cli_usage_error("sluice-novahook", "--config FILE is needed");
    sl_log_set_identifier("sluice-novahook");
    /* block the stop signals in every thread; the main thread waits for them */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    daemon_state d;
    memset(&d, 0, sizeof d);
    nh_config_defaults(&d.cfg);
    sl_error e;
    int rc = 1;
    if (nh_config_load(config, &d.cfg, &e) != SL_OK || load(&d, &e) != SL_OK ||
        sl_db_check_url(d.cfg.database, 0, "database", &e) != SL_OK) {
        if (check)
            fprintf(stderr, "sluice-novahook: %s\n", e.msg);
        else
            sl_log(SL_LOG_ERR, COMPONENT, "%s", e.msg);
    } else if (check)
        rc = 0, printf("%s: configuration valid\n", config);
    else
        rc = serve(&d, &stop);
    unload(&d);
    return rc;
}
