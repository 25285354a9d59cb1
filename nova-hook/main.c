/* sluice-novahook: the vendordata HTTPS service and the agents' registry, one daemon. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "http.h"
#include "registry_channel.h"
#include "sluice/db.h"
#include "sluice/cli.h"
#include "sluice/log.h"
#include "sluice/token.h"
#include "store.h"
#include "vendordata.h"

#define COMPONENT "nova-hook"
#define PEM_MAX   (256 * 1024)

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice-novahook --config FILE [--check-config]\n"
               "\n"
               "Serves Nova's DynamicJSON vendordata over HTTPS (mutual TLS) and keeps the\n"
               "registry of Sluice agents, placements and usage in SQLite, which agents reach\n"
               "over the Sluice channel with mutual TLS (registry_listen).\n"
               "\n"
               "  -c, --config FILE   configuration file (key = value; see docs/nova-hook.md)\n"
               "      --check-config  load and check the configuration and every file it names,\n"
               "                      then exit 0 (valid) or 1\n"
               "  -V, --version       the release\n"
               "  -h, --help          this text\n"
               "\n"
               "Logs go to stderr in journald's <N> form; SLUICE_LOG_LEVEL=debug|info|...\n"
               "SIGTERM or SIGINT stops it cleanly.\n");
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
    sl_token_key *token_key;
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
    if ((rc = sl_token_key_load(d->cfg.token_key, &d->token_key, e)) != SL_OK)
        return rc;
    if (!sl_token_key_is_private(d->token_key))
        return sl_fail(e, SL_ERR_CONFIG, "token_key %s: a public key; the private key is needed",
                       d->cfg.token_key);
    return SL_OK;
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
    sl_token_key_free(d->token_key);
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

/* Waits for a stop signal; serves the registry channel meanwhile when it is bound. */
static int wait_for_stop(daemon_state *d, sigset_t *stop)
{
    int sig = 0;
    for (;;) {
        if (!d->regchan) {
            if (sigwait(stop, &sig) != 0)
                return SIGTERM;
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
                continue;
            }
        }
        if (sig != SIGHUP)
            return sig;
        sl_log(SL_LOG_INFO, COMPONENT, "SIGHUP ignored: restart to reload the configuration");
    }
}

static int serve(daemon_state *d, sigset_t *stop)
{
    sl_error e;
    if (nh_store_open(d->cfg.database, 0, &d->store, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "%s", e.msg);
        return 1;
    }
    nh_vendordata vd = {d->store, d->token_key, d->cfg.token_issuer, d->cfg.token_ttl, d->agent_ca};
    nh_http_opts ho = {
        d->cfg.listen_addr, d->cfg.listen_port, d->cfg.path,     d->cert,        d->key,
        d->trust,           d->cfg.client_cn,   d->cfg.max_body, d->cfg.threads, &vd};
    if (nh_http_start(&ho, &d->http, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "%s", e.msg);
        return 1;
    }
    sl_log(SL_LOG_NOTICE, COMPONENT,
           "listening on https://%s%s%s:%d%s (mutual TLS), registry %s, token key %s",
           strchr(d->cfg.listen_addr, ':') ? "[" : "", d->cfg.listen_addr,
           strchr(d->cfg.listen_addr, ':') ? "]" : "", nh_http_port(d->http), d->cfg.path,
           d->cfg.database, sl_token_key_id(d->token_key));
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
        sl_db_check_path(d.cfg.database, 0, "database", &e) != SL_OK) {
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
