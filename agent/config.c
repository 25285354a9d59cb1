/* Configuration file parsing and validation. */
#include "config.h"

#include "ca.h"

#include <arpa/inet.h>
#include <errno.h>
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
}

typedef struct where {
    const char *file;
    int line;
    const char *key;
} where;

static sl_code bad(const where *w, sl_error *e, const char *what)
{
    return sl_fail(e, SL_ERR_CONFIG, "%s:%d: %s: %s", w->file, w->line, w->key, what);
}

static int printable(const char *v)
{
    for (; *v; v++)
        if ((unsigned char)*v < 0x20 || (unsigned char)*v > 0x7e)
            return 0;
    return 1;
}

static sl_code str(const where *w, const char *v, char *dst, size_t cap, sl_error *e)
{
    if (!*v)
        return bad(w, e, "empty value");
    if (strlen(v) >= cap)
        return bad(w, e, "value too long");
    if (!printable(v))
        return bad(w, e, "value is not printable ASCII");
    memcpy(dst, v, strlen(v) + 1);
    return SL_OK;
}

static sl_code path(const where *w, const char *v, char *dst, sl_error *e)
{
    if (v[0] != '/')
        return bad(w, e, "must be an absolute path");
    if (strstr(v, "/../") || strchr(v, ' '))
        return bad(w, e, "must not contain '/../' or spaces");
    return str(w, v, dst, AG_PATH_MAX, e);
}

static sl_code num(const where *w, const char *v, long lo, long hi, int *out, sl_error *e)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!*v || *end || errno)
        return bad(w, e, "not an integer");
    if (n < lo || n > hi) {
        char msg[96];
        snprintf(msg, sizeof msg, "%ld outside %ld..%ld", n, lo, hi);
        return bad(w, e, msg);
    }
    *out = (int)n;
    return SL_OK;
}

/* N, Ns, Nm, Nh or Nd, within lo..hi seconds */
static sl_code duration(const where *w, const char *v, long lo, long hi, int *out, sl_error *e)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10), mul = 1;
    if (!*v || errno || end == v || n < 0 || (end[0] && end[1]))
        return bad(w, e, "expected a duration such as 3600, 90m, 12h or 7d");
    switch (*end) {
    case '\0':
    case 's':
        break;
    case 'm':
        mul = 60;
        break;
    case 'h':
        mul = 3600;
        break;
    case 'd':
        mul = 86400;
        break;
    default:
        return bad(w, e, "expected a duration such as 3600, 90m, 12h or 7d");
    }
    if (n > hi / mul || n * mul < lo) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s outside %ld..%ld seconds", v, lo, hi);
        return bad(w, e, msg);
    }
    *out = (int)(n * mul);
    return SL_OK;
}

static int is_ip(const char *v)
{
    unsigned char b[16];
    return inet_pton(AF_INET, v, b) == 1 || inet_pton(AF_INET6, v, b) == 1;
}

static sl_code ip(const where *w, const char *v, char *dst, sl_error *e)
{
    if (!is_ip(v))
        return bad(w, e, "not an IPv4 or IPv6 address literal");
    return str(w, v, dst, 64, e);
}

/* IPV4:PORT or [IPV6]:PORT */
static sl_code listen_at(const where *w, const char *v, char *addr, int *port, sl_error *e)
{
    char a[64];
    const char *p;
    if (v[0] == '[') {
        const char *end = strchr(v, ']');
        if (!end || end[1] != ':' || (size_t)(end - v - 1) >= sizeof a)
            return bad(w, e, "expected [IPV6]:PORT");
        memcpy(a, v + 1, (size_t)(end - v - 1));
        a[end - v - 1] = '\0';
        p = end + 2;
    } else {
        const char *colon = strrchr(v, ':');
        if (!colon || (size_t)(colon - v) >= sizeof a)
            return bad(w, e, "expected IPV4:PORT or [IPV6]:PORT");
        memcpy(a, v, (size_t)(colon - v));
        a[colon - v] = '\0';
        p = colon + 1;
    }
    if (!is_ip(a))
        return bad(w, e, "not an IP address literal");
    sl_code rc = num(w, p, 0, 65535, port, e);
    if (rc == SL_OK)
        memcpy(addr, a, strlen(a) + 1);
    return rc;
}

static sl_code name_ok(const where *w, const char *v, size_t cap, sl_error *e)
{
    if (!*v || strlen(v) >= cap)
        return bad(w, e, "missing or too long name");
    for (const char *c = v; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_' || *c == '.'))
            return bad(w, e, "name may hold only letters, digits, '-', '_' and '.'");
    return SL_OK;
}

static sl_code set_key(const where *w, const char *k, const char *v, ag_config *c, sl_error *e)
{
    if (!strcmp(k, "libvirt_uri")) {
        if (!strstr(v, "://"))
            return bad(w, e, "expected a libvirt URI such as qemu:///system");
        return str(w, v, c->libvirt_uri, sizeof c->libvirt_uri, e);
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
    if (!strcmp(k, "run_dir"))
        return path(w, v, c->run_dir, e);
    if (!strcmp(k, "ca_dir"))
        return path(w, v, c->ca_dir, e);
    if (!strcmp(k, "state_dir"))
        return path(w, v, c->state_dir, e);
    if (!strcmp(k, "backend_user"))
        return name_ok(w, v, sizeof c->backend_user, e) ?: str(w, v, c->backend_user, 64, e);
    if (!strcmp(k, "backend_group"))
        return name_ok(w, v, sizeof c->backend_group, e) ?: str(w, v, c->backend_group, 64, e);
    if (!strcmp(k, "backend_path"))
        return path(w, v, c->backend_path, e);
    if (!strcmp(k, "driver_path"))
        return path(w, v, c->driver_path, e);
    if (!strcmp(k, "token_public_key"))
        return path(w, v, c->token_public_key, e);
    if (!strcmp(k, "registry_endpoint")) {
        if (strncmp(v, "tcp://", 6) || !strchr(v + 6, ':'))
            return bad(w, e, "expected tcp://HOST:PORT");
        return str(w, v, c->registry_endpoint, sizeof c->registry_endpoint, e);
    }
    if (!strcmp(k, "registry_ca"))
        return path(w, v, c->registry_ca, e);
    if (!strcmp(k, "registry_cert"))
        return path(w, v, c->registry_cert, e);
    if (!strcmp(k, "registry_key"))
        return path(w, v, c->registry_key, e);
    if (!strcmp(k, "registry_slots"))
        return num(w, v, 0, 4096, &c->registry_slots, e);
    if (!strcmp(k, "enroll_token_issuer"))
        return str(w, v, c->enroll_token_issuer, sizeof c->enroll_token_issuer, e);
    if (!strcmp(k, "enroll_clock_skew"))
        return num(w, v, 0, 300, &c->enroll_clock_skew_s, e);
    if (!strcmp(k, "enroll_failures_per_minute"))
        return num(w, v, 1, 600, &c->enroll_fail_per_minute, e);
    if (!strcmp(k, "enroll_failure_burst"))
        return num(w, v, 1, 100, &c->enroll_fail_burst, e);
    if (!strcmp(k, "client_cert_lifetime"))
        return duration(w, v, AG_CA_LIFETIME_MIN, AG_CA_CLIENT_LIFETIME_MAX,
                        &c->client_cert_lifetime_s, e);
    if (!strcmp(k, "server_cert_lifetime"))
        return duration(w, v, AG_CA_LIFETIME_MIN, AG_CA_SERVER_LIFETIME_MAX,
                        &c->server_cert_lifetime_s, e);
    if (!strcmp(k, "reboot_debounce"))
        return num(w, v, 0, 10, &c->reboot_debounce_s, e);
    if (!strcmp(k, "restart_backoff_max"))
        return num(w, v, 1, 300, &c->restart_backoff_max_s, e);
    if (!strcmp(k, "backend_stop_grace"))
        return num(w, v, 1, 60, &c->backend_stop_grace_s, e);
    return bad(w, e, "unknown key");
}

/* A key inside [tier NAME] or [flavor NAME]. */
static sl_code set_policy_key(const where *w, const char *k, const char *v, ag_policy_entry *p,
                              int is_flavor, sl_error *e)
{
    if (!strcmp(k, "gpu_share")) {
        if (ag_parse_share(v, &p->sla.gpu_share))
            return bad(w, e, "expected a number with 0 < share <= 1");
        p->set |= AG_SET_SHARE;
        return SL_OK;
    }
    if (!strcmp(k, "memory_quota")) {
        if (ag_parse_size(v, &p->sla.memory_quota))
            return bad(w, e, "expected a size such as 0, 512M or 8G");
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
            return bad(w, e, "expected 'all' or comma-separated GPU-uuid values");
        p->set |= AG_SET_GPUS;
        return SL_OK;
    }
    if (is_flavor && !strcmp(k, "tier"))
        return name_ok(w, v, sizeof p->tier, e) ?: str(w, v, p->tier, sizeof p->tier, e);
    return bad(w, e,
               is_flavor ? "unknown key in a [flavor] section" : "unknown key in a [tier] section");
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    char *end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        *--end = '\0';
    return s;
}

/* "[flavor NAME]" / "[tier NAME]" */
static sl_code section(const where *w, char *s, ag_config *c, ag_policy_entry **cur, int *is_flavor,
                       sl_error *e)
{
    size_t n = strlen(s);
    if (s[n - 1] != ']')
        return bad(w, e, "expected [flavor NAME] or [tier NAME]");
    s[n - 1] = '\0';
    char *body = trim(s + 1);
    char *sp = strpbrk(body, " \t");
    if (!sp)
        return bad(w, e, "expected [flavor NAME] or [tier NAME]");
    *sp = '\0';
    char *name = trim(sp + 1);
    ag_policy *p = &c->policy;
    ag_policy_entry *v;
    size_t *count, cap;
    if (!strcmp(body, "flavor")) {
        v = p->flavors, count = &p->n_flavors, cap = AG_MAX_FLAVORS, *is_flavor = 1;
    } else if (!strcmp(body, "tier")) {
        v = p->tiers, count = &p->n_tiers, cap = AG_MAX_TIERS, *is_flavor = 0;
    } else {
        return bad(w, e, "unknown section kind (expected flavor or tier)");
    }
    where wn = {w->file, w->line, body};
    sl_code rc = name_ok(&wn, name, *is_flavor ? sizeof v->name : 32, e);
    if (rc != SL_OK)
        return rc;
    for (size_t i = 0; i < *count; i++)
        if (!strcmp(v[i].name, name))
            return bad(&wn, e, "section given twice");
    if (*count >= cap)
        return bad(&wn, e, "too many sections of this kind");
    *cur = &v[(*count)++];
    memset(*cur, 0, sizeof **cur);
    snprintf((*cur)->name, sizeof(*cur)->name, "%s", name);
    return SL_OK;
}

static sl_code check(const char *name, ag_config *c, sl_error *e)
{
    if (!c->advertise_address[0])
        return sl_fail(e, SL_ERR_CONFIG, "%s: advertise_address: required key missing", name);
    if (c->port_min > c->port_max)
        return sl_fail(e, SL_ERR_CONFIG, "%s: backend_port_max: smaller than backend_port_min",
                       name);
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
    char *copy = strdup(text);
    if (!copy)
        return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", name);
    sl_code rc = SL_OK;
    char seen[64][32] = {{0}};
    int nseen = 0, line = 0, is_flavor = 0;
    ag_policy_entry *cur = NULL;
    char *save = NULL;
    for (char *ln = copy; rc == SL_OK && ln; ln = save) {
        save = strchr(ln, '\n');
        if (save)
            *save++ = '\0';
        line++;
        char *s = trim(ln);
        if (!*s || *s == '#' || *s == ';')
            continue;
        where w = {name, line, s};
        if (*s == '[') {
            rc = section(&w, s, c, &cur, &is_flavor, e);
            nseen = 0;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = sl_fail(e, SL_ERR_CONFIG, "%s:%d: expected key = value", name, line);
            break;
        }
        *eq = '\0';
        char *k = trim(s), *v = trim(eq + 1);
        w.key = k;
        if (!*k || strlen(k) >= sizeof seen[0]) {
            rc = bad(&w, e, "missing or too long key");
            break;
        }
        for (int i = 0; i < nseen; i++)
            if (!strcmp(seen[i], k))
                rc = bad(&w, e, "key given twice");
        if (rc != SL_OK)
            break;
        if (nseen < 64)
            snprintf(seen[nseen++], sizeof seen[0], "%s", k);
        if (!*v)
            rc = bad(&w, e, "empty value");
        else if (cur)
            rc = set_policy_key(&w, k, v, cur, is_flavor, e);
        else
            rc = set_key(&w, k, v, c, e);
    }
    free(copy);
    return rc == SL_OK ? check(name, c, e) : rc;
}

sl_code ag_config_load(const char *path, ag_config *c, sl_error *e)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return sl_fail(e, SL_ERR_CONFIG, "%s: cannot open: %s", path, strerror(errno));
    char *buf = malloc(FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t n = fread(buf, 1, FILE_MAX + 1, f);
    fclose(f);
    sl_code rc;
    if (n > FILE_MAX) {
        rc = sl_fail(e, SL_ERR_CONFIG, "%s: larger than %d bytes", path, FILE_MAX);
    } else if (memchr(buf, '\0', n)) {
        rc = sl_fail(e, SL_ERR_CONFIG, "%s: holds a NUL byte", path);
    } else {
        buf[n] = '\0';
        rc = ag_config_parse(path, buf, c, e);
    }
    free(buf);
    return rc;
}
