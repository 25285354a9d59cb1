/* Configuration file parsing and validation. */
#include "config.h"

#include "ca.h"
#include "sluice/conf.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILE_MAX (256 * 1024)

void ag_config_defaults(ag_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->libvirt_uri, sizeof c->libvirt_uri, "qemu:///system");
    snprintf(c->enroll_addr, sizeof c->enroll_addr, "0.0.0.0");
    c->enroll_port = 7400;
    snprintf(c->ca_dir, sizeof c->ca_dir, "/var/lib/sluice/ca");
    snprintf(c->backend_bind, sizeof c->backend_bind, "0.0.0.0");
    c->port_min = 47000;
    c->port_max = 47999;
    c->direct_port_min = 48000;
    c->direct_port_max = 49999;
    snprintf(c->run_dir, sizeof c->run_dir, "/run/sluice");
    snprintf(c->state_dir, sizeof c->state_dir, "/var/lib/sluice");
    snprintf(c->backend_user, sizeof c->backend_user, "sluice-backend");
    snprintf(c->backend_group, sizeof c->backend_group, "sluice-backend");
    snprintf(c->backend_path, sizeof c->backend_path, "/usr/bin/sluice-backend");
    snprintf(c->driver_path, sizeof c->driver_path, "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
    c->registry_slots = 8;
    c->enroll_clock_skew_s = 60;
    c->enroll_fail_per_minute = 5;
    c->enroll_fail_burst = 5;
    c->client_cert_lifetime_s = AG_CA_CLIENT_LIFETIME_DEFAULT;
    c->server_cert_lifetime_s = AG_CA_SERVER_LIFETIME_DEFAULT;
    c->reboot_debounce_s = 5;
    c->restart_backoff_max_s = 60;
    c->backend_stop_grace_s = 5;
    c->backend_spin_us = -1;
    c->backend_staging_slots = -1;
    c->backend_staging_budget = -1;
}

typedef sl_conf_where where;

static sl_code path(const where *w, const char *v, char *dst, sl_error *e)
{
    if (v[0] != '/')
        return sl_conf_bad(w, e, "must be an absolute path");
    if (strstr(v, "/../") || strchr(v, ' '))
        return sl_conf_bad(w, e, "must not contain '/../' or spaces");
    return sl_conf_str(w, v, dst, AG_PATH_MAX, e);
}

/* One or more tcp://HOST:PORT, comma-separated (several registries: any of them serves). */
static sl_code endpoints(const where *w, const char *v, char *dst, size_t cap, sl_error *e)
{
    size_t count = 0;
    for (const char *p = v; *p;) {
        p += strspn(p, " ");
        size_t n = strcspn(p, ",");
        while (n && p[n - 1] == ' ')
            n--;
        const char *colon = n > 6 ? memchr(p + 6, ':', n - 6) : NULL;
        if (n < 8 || strncmp(p, "tcp://", 6) || !colon || colon + 1 == p + n)
            return sl_conf_bad(w, e, "expected tcp://HOST:PORT, or several comma-separated");
        if (++count > 8)
            return sl_conf_bad(w, e, "at most 8 endpoints");
        p += strcspn(p, ",");
        if (*p == ',' && !*++p)
            return sl_conf_bad(w, e, "trailing comma");
    }
    return sl_conf_str(w, v, dst, cap, e);
}

static sl_code num(const where *w, const char *v, long lo, long hi, int *out, sl_error *e)
{
    long long n;
    sl_code rc = sl_conf_int(w, v, lo, hi, &n, e);
    if (rc == SL_OK)
        *out = (int)n;
    return rc;
}

static int is_ip(const char *v)
{
    unsigned char b[16];
    return inet_pton(AF_INET, v, b) == 1 || inet_pton(AF_INET6, v, b) == 1;
}

static sl_code ip(const where *w, const char *v, char *dst, sl_error *e)
{
    if (!is_ip(v))
        return sl_conf_bad(w, e, "not an IPv4 or IPv6 address literal");
    return sl_conf_str(w, v, dst, 64, e);
}

/* IPV4:PORT or [IPV6]:PORT */
static sl_code listen_at(const where *w, const char *v, char *addr, int *port, sl_error *e)
{
    char a[64];
    const char *p;
    if (v[0] == '[') {
        const char *end = strchr(v, ']');
        if (!end || end[1] != ':' || (size_t)(end - v - 1) >= sizeof a)
            return sl_conf_bad(w, e, "expected [IPV6]:PORT");
        memcpy(a, v + 1, (size_t)(end - v - 1));
        a[end - v - 1] = '\0';
        p = end + 2;
    } else {
        const char *colon = strrchr(v, ':');
        if (!colon || (size_t)(colon - v) >= sizeof a)
            return sl_conf_bad(w, e, "expected IPV4:PORT or [IPV6]:PORT");
        memcpy(a, v, (size_t)(colon - v));
        a[colon - v] = '\0';
        p = colon + 1;
    }
    if (!is_ip(a))
        return sl_conf_bad(w, e, "not an IP address literal");
    sl_code rc = num(w, p, 0, 65535, port, e);
    if (rc == SL_OK)
        memcpy(addr, a, strlen(a) + 1);
    return rc;
}

static sl_code name_ok(const where *w, const char *v, size_t cap, sl_error *e)
{
    if (!*v || strlen(v) >= cap)
        return sl_conf_bad(w, e, "missing or too long name");
    for (const char *c = v; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_' || *c == '.'))
            return sl_conf_bad(w, e, "name may hold only letters, digits, '-', '_' and '.'");
    return SL_OK;
}

static sl_code set_key(const where *w, const char *k, const char *v, ag_config *c, sl_error *e)
{
    if (!strcmp(k, "libvirt_uri")) {
        if (!strstr(v, "://"))
            return sl_conf_bad(w, e, "expected a libvirt URI such as qemu:///system");
        return sl_conf_str(w, v, c->libvirt_uri, sizeof c->libvirt_uri, e);
    }
    if (!strcmp(k, "enroll_listen"))
        return listen_at(w, v, c->enroll_addr, &c->enroll_port, e);
    if (!strcmp(k, "advertise_address"))
        return ip(w, v, c->advertise_address, e);
    if (!strcmp(k, "backend_bind"))
        return ip(w, v, c->backend_bind, e);
    if (!strcmp(k, "backend_port_min"))
        return num(w, v, 1024, 65535, &c->port_min, e);
    if (!strcmp(k, "backend_port_max"))
        return num(w, v, 1024, 65535, &c->port_max, e);
    if (!strcmp(k, "direct_port_min"))
        return num(w, v, 1024, 65535, &c->direct_port_min, e);
    if (!strcmp(k, "direct_port_max"))
        return num(w, v, 1024, 65535, &c->direct_port_max, e);
    if (!strcmp(k, "run_dir"))
        return path(w, v, c->run_dir, e);
    if (!strcmp(k, "ca_dir"))
        return path(w, v, c->ca_dir, e);
    if (!strcmp(k, "state_dir"))
        return path(w, v, c->state_dir, e);
    if (!strcmp(k, "backend_user"))
        return name_ok(w, v, sizeof c->backend_user, e)
                   ?: sl_conf_str(w, v, c->backend_user, 64, e);
    if (!strcmp(k, "backend_group"))
        return name_ok(w, v, sizeof c->backend_group, e)
                   ?: sl_conf_str(w, v, c->backend_group, 64, e);
    if (!strcmp(k, "backend_path"))
        return path(w, v, c->backend_path, e);
    if (!strcmp(k, "driver_path"))
        return path(w, v, c->driver_path, e);
    if (!strcmp(k, "token_public_key"))
        return path(w, v, c->token_public_key, e);
    if (!strcmp(k, "registry_endpoint"))
        return endpoints(w, v, c->registry_endpoint, sizeof c->registry_endpoint, e);
    if (!strcmp(k, "registry_ca"))
        return path(w, v, c->registry_ca, e);
    if (!strcmp(k, "registry_cert"))
        return path(w, v, c->registry_cert, e);
    if (!strcmp(k, "registry_key"))
        return path(w, v, c->registry_key, e);
    if (!strcmp(k, "registry_slots"))
        return num(w, v, 0, 4096, &c->registry_slots, e);
    if (!strcmp(k, "enroll_token_issuer"))
        return sl_conf_str(w, v, c->enroll_token_issuer, sizeof c->enroll_token_issuer, e);
    if (!strcmp(k, "enroll_clock_skew"))
        return num(w, v, 0, 300, &c->enroll_clock_skew_s, e);
    if (!strcmp(k, "enroll_failures_per_minute"))
        return num(w, v, 1, 600, &c->enroll_fail_per_minute, e);
    if (!strcmp(k, "enroll_failure_burst"))
        return num(w, v, 1, 100, &c->enroll_fail_burst, e);
    if (!strcmp(k, "client_cert_lifetime"))
        return sl_conf_duration(w, v, AG_CA_LIFETIME_MIN, AG_CA_CLIENT_LIFETIME_MAX,
                                &c->client_cert_lifetime_s, e);
    if (!strcmp(k, "server_cert_lifetime"))
        return sl_conf_duration(w, v, AG_CA_LIFETIME_MIN, AG_CA_SERVER_LIFETIME_MAX,
                                &c->server_cert_lifetime_s, e);
    if (!strcmp(k, "reboot_debounce"))
        return num(w, v, 0, 10, &c->reboot_debounce_s, e);
    if (!strcmp(k, "restart_backoff_max"))
        return num(w, v, 1, 300, &c->restart_backoff_max_s, e);
    if (!strcmp(k, "backend_stop_grace"))
        return num(w, v, 1, 60, &c->backend_stop_grace_s, e);
    if (!strcmp(k, "backend_spin_us"))
        return num(w, v, 0, 100000, &c->backend_spin_us, e);
    if (!strcmp(k, "backend_staging_slots"))
        return num(w, v, 0, 8, &c->backend_staging_slots, e);
    if (!strcmp(k, "backend_staging_budget"))
        return num(w, v, 16, 1048576, &c->backend_staging_budget, e);
    if (!strcmp(k, "usage_db"))
        return path(w, v, c->usage_db, e);
    if (!strcmp(k, "usage_retention_days"))
        return num(w, v, 0, 36500, &c->usage_retention_days, e);
    if (!strcmp(k, "metrics_listen")) {
        if (!*v || !strcmp(v, "off")) {
            c->metrics_addr[0] = '\0';
            return SL_OK;
        }
        return listen_at(w, v, c->metrics_addr, &c->metrics_port, e);
    }
    return sl_conf_bad(w, e, "unknown key");
}

/* A key inside [tier NAME] or [flavor NAME]. */
static sl_code set_policy_key(const where *w, const char *k, const char *v, ag_policy_entry *p,
                              int is_flavor, sl_error *e)
{
    if (!strcmp(k, "gpu_share")) {
        if (ag_parse_share(v, &p->sla.gpu_share))
            return sl_conf_bad(w, e, "expected a number with 0 < share <= 1");
        p->set |= AG_SET_SHARE;
        return SL_OK;
    }
    if (!strcmp(k, "memory_quota")) {
        if (ag_parse_size(v, &p->sla.memory_quota))
            return sl_conf_bad(w, e, "expected a size such as 0, 512M or 8G");
        p->set |= AG_SET_QUOTA;
        return SL_OK;
    }
    if (!strcmp(k, "max_sessions")) {
        int n;
        sl_code rc = num(w, v, 0, 1024, &n, e);
        if (rc == SL_OK) {
            p->sla.max_sessions = (uint32_t)n;
            p->set |= AG_SET_SESSIONS;
        }
        return rc;
    }
    if (!strcmp(k, "gpus")) {
        if (ag_parse_gpus(v, p->sla.gpus, sizeof p->sla.gpus))
            return sl_conf_bad(w, e, "expected 'all' or comma-separated GPU-uuid values");
        p->set |= AG_SET_GPUS;
        return SL_OK;
    }
    if (is_flavor && !strcmp(k, "tier"))
        return name_ok(w, v, sizeof p->tier, e) ?: sl_conf_str(w, v, p->tier, sizeof p->tier, e);
    return sl_conf_bad(
        w, e, is_flavor ? "unknown key in a [flavor] section" : "unknown key in a [tier] section");
}

typedef struct parse_ctx {
    ag_config *c;
    ag_policy_entry *cur; /* the [flavor] or [tier] being read; NULL at top level */
    int is_flavor;
} parse_ctx;

/* "[flavor NAME]" / "[tier NAME]" */
static sl_code on_section(void *ctx, const where *w, const char *kind, const char *name,
                          sl_error *e)
{
    parse_ctx *x = ctx;
    ag_policy *p = &x->c->policy;
    ag_policy_entry *v;
    size_t *count, cap;
    if (!strcmp(kind, "flavor")) {
        v = p->flavors, count = &p->n_flavors, cap = AG_MAX_FLAVORS, x->is_flavor = 1;
    } else if (!strcmp(kind, "tier")) {
        v = p->tiers, count = &p->n_tiers, cap = AG_MAX_TIERS, x->is_flavor = 0;
    } else {
        return sl_conf_bad(w, e, "unknown section kind (expected flavor or tier)");
    }
    where wn = {w->file, w->line, kind};
    sl_code rc = name_ok(&wn, name, x->is_flavor ? sizeof v->name : 32, e);
    if (rc != SL_OK)
        return rc;
    for (size_t i = 0; i < *count; i++)
        if (!strcmp(v[i].name, name))
            return sl_conf_bad(&wn, e, "section given twice");
    if (*count >= cap)
        return sl_conf_bad(&wn, e, "too many sections of this kind");
    x->cur = &v[(*count)++];
    memset(x->cur, 0, sizeof *x->cur);
    snprintf(x->cur->name, sizeof x->cur->name, "%s", name);
    return SL_OK;
}

static sl_code on_key(void *ctx, const where *w, const char *v, sl_error *e)
{
    parse_ctx *x = ctx;
    if (!*v && (x->cur || strcmp(w->key, "metrics_listen"))) /* "metrics_listen =": off */
        return sl_conf_bad(w, e, "empty value");
    if (x->cur)
        return set_policy_key(w, w->key, v, x->cur, x->is_flavor, e);
    return set_key(w, w->key, v, x->c, e);
}

static sl_code check(const char *name, ag_config *c, sl_error *e)
{
    if (!c->advertise_address[0])
        return sl_fail(e, SL_ERR_CONFIG, "%s: advertise_address: required key missing", name);
    if (c->port_min > c->port_max)
        return sl_fail(e, SL_ERR_CONFIG, "%s: backend_port_max: smaller than backend_port_min",
                       name);
    if (c->direct_port_min > c->direct_port_max)
        return sl_fail(e, SL_ERR_CONFIG, "%s: direct_port_max: smaller than direct_port_min", name);
    if (c->direct_port_min <= c->port_max && c->port_min <= c->direct_port_max)
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s: direct_port_min..direct_port_max (%d..%d) overlaps "
                       "backend_port_min..backend_port_max (%d..%d)",
                       name, c->direct_port_min, c->direct_port_max, c->port_min, c->port_max);
    if (!c->token_public_key[0])
        return sl_fail(e, SL_ERR_CONFIG, "%s: token_public_key: required key missing", name);
    int reg = !!c->registry_endpoint[0];
    const char *rk[] = {"registry_ca", "registry_cert", "registry_key"};
    const char *rv[] = {c->registry_ca, c->registry_cert, c->registry_key};
    for (int i = 0; i < 3; i++) {
        if (reg && !rv[i][0])
            return sl_fail(e, SL_ERR_CONFIG,
                           "%s: %s: required key missing (registry_endpoint is set)", name, rk[i]);
        if (!reg && rv[i][0])
            return sl_fail(e, SL_ERR_CONFIG, "%s: %s: set but registry_endpoint is missing", name,
                           rk[i]);
    }
    if (c->backend_user[0] != c->backend_group[0] && (!c->backend_user[0] || !c->backend_group[0]))
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s: backend_group: give both backend_user and "
                       "backend_group",
                       name);
    if (!c->usage_db[0])
        snprintf(c->usage_db, sizeof c->usage_db, "%s/usage.db", c->state_dir);
    for (size_t i = 0; i < c->policy.n_flavors; i++) {
        const char *t = c->policy.flavors[i].tier;
        int found = !t[0] || !strcmp(t, "default");
        for (size_t j = 0; j < c->policy.n_tiers; j++)
            found |= !strcmp(c->policy.tiers[j].name, t);
        if (!found)
            return sl_fail(e, SL_ERR_CONFIG, "%s: [flavor %s] tier: no [tier %s] section", name,
                           c->policy.flavors[i].name, t);
    }
    return SL_OK;
}

sl_code ag_config_parse(const char *name, const char *text, ag_config *c, sl_error *e)
{
    parse_ctx x = {c, NULL, 0};
    const sl_conf_reader r = {on_section, "expected [flavor NAME] or [tier NAME]", on_key, &x};
    sl_code rc = sl_conf_parse(name, text, &r, e);
    return rc == SL_OK ? check(name, c, e) : rc;
}

sl_code ag_config_load(const char *path, ag_config *c, sl_error *e)
{
    char *buf;
    sl_code rc = sl_conf_read_file(path, FILE_MAX, &buf, e);
    if (rc == SL_OK)
        rc = ag_config_parse(path, buf, c, e);
    free(buf);
    return rc;
}
