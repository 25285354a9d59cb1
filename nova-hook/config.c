/* Configuration file parsing and validation. */
#include "config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/conf.h"
#include "sluice/db_url.h"
#include "validate.h"

#define FILE_MAX (64 * 1024)

void nh_config_defaults(nh_config *c)
{
    memset(c, 0, sizeof *c);
    c->listen_port = -1;
    snprintf(c->path, sizeof c->path, "/v1/vendordata");
    c->token_ttl = 600;
    snprintf(c->token_issuer, sizeof c->token_issuer, "sluice-nova-hook");
    snprintf(c->database, sizeof c->database, "/var/lib/sluice/registry.db");
    c->max_body = NH_MAX_BODY_DEFAULT;
    c->threads = 4;
    c->registry_port = -1;
}

typedef sl_conf_where where;

static sl_code path(const where *w, const char *v, char *dst, sl_error *e)
{
    if (v[0] != '/')
        return sl_conf_bad(w, e, "must be an absolute path");
    return sl_conf_str(w, v, dst, NH_PATH_MAX, e);
}

/* A SQLite path or a database URL; the message never shows the value (it may hold a
 * password). */
static sl_code database(const where *w, const char *v, char *dst, size_t cap, sl_error *e)
{
    sl_db_url u;
    sl_error ue;
    if (sl_db_url_parse(v, &u, &ue) != SL_OK) {
        const char *msg = strncmp(ue.msg, "database: ", 10) == 0 ? ue.msg + 10 : ue.msg;
        msg = strncmp(msg, "database URL: ", 14) == 0 ? msg + 14 : msg;
        return sl_conf_bad(w, e, msg);
    }
    memset(u.password, 0, sizeof u.password);
    return sl_conf_str(w, v, dst, cap, e);
}

/* "ADDR:PORT" or "[V6]:PORT" (v6 == 0: IPv4 only) into addr_out[64] and *port_out. */
static sl_code listen_at(const where *w, const char *v, int v6, char *addr_out, int *port_out,
                         sl_error *e)
{
    char addr[64];
    const char *port;
    if (v[0] == '[' && !v6)
        return sl_conf_bad(w, e, "IPv6 is not supported here: expected IPV4:PORT");
    if (v[0] == '[') {
        const char *end = strchr(v, ']');
        if (!end || end[1] != ':' || (size_t)(end - v - 1) >= sizeof addr)
            return sl_conf_bad(w, e, "expected [IPV6]:PORT");
        memcpy(addr, v + 1, (size_t)(end - v - 1));
        addr[end - v - 1] = '\0';
        port = end + 2;
        struct in6_addr a6;
        if (inet_pton(AF_INET6, addr, &a6) != 1)
            return sl_conf_bad(w, e, "not an IPv6 address");
    } else {
        const char *colon = strrchr(v, ':');
        if (!colon || (size_t)(colon - v) >= sizeof addr)
            return sl_conf_bad(w, e, "expected IPV4:PORT or [IPV6]:PORT");
        memcpy(addr, v, (size_t)(colon - v));
        addr[colon - v] = '\0';
        port = colon + 1;
        struct in_addr a4;
        if (inet_pton(AF_INET, addr, &a4) != 1)
            return sl_conf_bad(w, e, "not an IPv4 address (use [..] for IPv6)");
    }
    long long p;
    sl_code rc = sl_conf_int(w, port, 0, 65535, &p, e);
    if (rc != SL_OK)
        return rc;
    memcpy(addr_out, addr, strlen(addr) + 1);
    *port_out = (int)p;
    return SL_OK;
}

/* Comma-separated host names, each a plain certificate CN (at most 63 bytes). */
static sl_code host_list(const where *w, const char *v, char *dst, size_t cap, sl_error *e)
{
    sl_code rc = sl_conf_str(w, v, dst, cap, e);
    if (rc != SL_OK)
        return rc;
    char item[256];
    for (const char *p = v; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n > 63)
            return sl_conf_bad(w, e, "expected comma-separated host names of 1..63 bytes");
        memcpy(item, p, n);
        item[n] = '\0';
        if (!nh_valid_host(item))
            return sl_conf_bad(w, e, "an entry is not a host name");
        p += n;
        if (*p == ',' && !*++p)
            return sl_conf_bad(w, e, "trailing comma");
    }
    return SL_OK;
}

static sl_code set_key(const where *w, const char *k, const char *v, nh_config *c, sl_error *e)
{
    long long n;
    sl_code rc;
    if (!strcmp(k, "listen"))
        return listen_at(w, v, 1, c->listen_addr, &c->listen_port, e);
    if (!strcmp(k, "registry_listen"))
        return listen_at(w, v, 0, c->registry_addr, &c->registry_port, e);
    if (!strcmp(k, "registry_ca"))
        return path(w, v, c->registry_ca, e);
    if (!strcmp(k, "registry_cert"))
        return path(w, v, c->registry_cert, e);
    if (!strcmp(k, "registry_key"))
        return path(w, v, c->registry_key, e);
    if (!strcmp(k, "registry_hosts"))
        return host_list(w, v, c->registry_hosts, sizeof c->registry_hosts, e);
    if (!strcmp(k, "path")) {
        if (v[0] != '/' || strpbrk(v, "?# "))
            return sl_conf_bad(w, e, "must start with / and hold no '?', '#' or space");
        return sl_conf_str(w, v, c->path, sizeof c->path, e);
    }
    if (!strcmp(k, "tls_cert"))
        return path(w, v, c->tls_cert, e);
    if (!strcmp(k, "tls_key"))
        return path(w, v, c->tls_key, e);
    if (!strcmp(k, "client_ca"))
        return path(w, v, c->client_ca, e);
    if (!strcmp(k, "client_cn"))
        return sl_conf_str(w, v, c->client_cn, sizeof c->client_cn, e);
    if (!strcmp(k, "token_key"))
        return path(w, v, c->token_key, e);
    if (!strcmp(k, "token_key_repository"))
        return path(w, v, c->token_key_repository, e);
    if (!strcmp(k, "token_ttl")) {
        if ((rc = sl_conf_int(w, v, 60, 3600, &n, e)) == SL_OK)
            c->token_ttl = n;
        return rc;
    }
    if (!strcmp(k, "token_issuer"))
        return sl_conf_str(w, v, c->token_issuer, sizeof c->token_issuer, e);
    if (!strcmp(k, "agent_ca"))
        return path(w, v, c->agent_ca, e);
    if (!strcmp(k, "database"))
        return database(w, v, c->database, sizeof c->database, e);
    if (!strcmp(k, "node_name")) {
        if (!nh_valid_host(v) || strlen(v) >= sizeof c->node_name)
            return sl_conf_bad(w, e, "expected a host-name-like name of at most 63 bytes");
        return sl_conf_str(w, v, c->node_name, sizeof c->node_name, e);
    }
    if (!strcmp(k, "usage_retention_days")) {
        if ((rc = sl_conf_int(w, v, 0, 36500, &n, e)) == SL_OK)
            c->usage_retention_days = (int)n;
        return rc;
    }
    if (!strcmp(k, "max_body")) {
        if ((rc = sl_conf_int(w, v, 1024, NH_MAX_BODY_MAX, &n, e)) == SL_OK)
            c->max_body = (size_t)n;
        return rc;
    }
    if (!strcmp(k, "threads")) {
        if ((rc = sl_conf_int(w, v, 1, 64, &n, e)) == SL_OK)
            c->threads = (int)n;
        return rc;
    }
    return sl_conf_bad(w, e, "unknown key");
}

/* registry_listen needs registry_ca/_cert/_key; those (and registry_hosts) need it. */
static sl_code registry_required(const char *name, const nh_config *c, sl_error *e)
{
    const struct {
        const char *key, *val;
    } reg[] = {{"registry_ca", c->registry_ca},
               {"registry_cert", c->registry_cert},
               {"registry_key", c->registry_key},
               {"registry_hosts", NULL}};
    for (size_t i = 0; i < sizeof reg / sizeof reg[0]; i++) {
        if (c->registry_port >= 0 && reg[i].val && !reg[i].val[0])
            return sl_fail(e, SL_ERR_CONFIG,
                           "%s: %s: required key missing (registry_listen is set)", name,
                           reg[i].key);
        const char *v = reg[i].val ? reg[i].val : c->registry_hosts;
        if (c->registry_port < 0 && v[0])
            return sl_fail(e, SL_ERR_CONFIG, "%s: %s: set but registry_listen is missing", name,
                           reg[i].key);
    }
    return SL_OK;
}

static sl_code required(const char *name, const nh_config *c, sl_error *e)
{
    static const struct {
        const char *key;
        size_t off;
    } req[] = {
        {"tls_cert", offsetof(nh_config, tls_cert)},
        {"tls_key", offsetof(nh_config, tls_key)},
        {"client_ca", offsetof(nh_config, client_ca)},
        {"agent_ca", offsetof(nh_config, agent_ca)},
    };
    if (c->listen_port < 0)
        return sl_fail(e, SL_ERR_CONFIG, "%s: listen: required key missing", name);
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++)
        if (!((const char *)c + req[i].off)[0])
            return sl_fail(e, SL_ERR_CONFIG, "%s: %s: required key missing", name, req[i].key);
    if (!c->token_key[0] && !c->token_key_repository[0])
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s: token_key or token_key_repository: required key missing", name);
    if (c->token_key[0] && c->token_key_repository[0])
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s: token_key and token_key_repository: set one of them, not both", name);
    return registry_required(name, c, e);
}

static sl_code on_key(void *ctx, const where *w, const char *v, sl_error *e)
{
    return set_key(w, w->key, v, ctx, e);
}

sl_code nh_config_parse(const char *name, const char *text, nh_config *c, sl_error *e)
{
    const sl_conf_reader r = {NULL, NULL, on_key, c};
    sl_code rc = sl_conf_parse(name, text, &r, e);
    return rc == SL_OK ? required(name, c, e) : rc;
}

sl_code nh_config_load(const char *path, nh_config *c, sl_error *e)
{
    char *buf;
    sl_code rc = sl_conf_read_file(path, FILE_MAX, &buf, e);
    if (rc == SL_OK)
        rc = nh_config_parse(path, buf, c, e);
    free(buf);
    return rc;
}
