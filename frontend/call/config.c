/* backend.conf and the credential files the enrollment tool writes ($SLUICE_CONFIG_DIR or
 * /etc/sluice). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call/config.h"
#include "component.h"
#include "sluice/log.h"

static char *trim(char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

sl_code sl_fe_config_parse(const char *text, struct sl_fe_config *cfg, sl_error *err)
{
    cfg->endpoint[0] = '\0';
    char line[1024];
    int lineno = 0;
    const char *p = text;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        lineno++;
        if (n >= sizeof line)
            return sl_fail(err, SL_ERR_CONFIG, "backend.conf line %d is too long", lineno);
        memcpy(line, p, n);
        line[n] = '\0';
        p = nl ? nl + 1 : NULL;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *l = trim(line);
        if (!*l)
            continue;
        char *eq = strchr(l, '=');
        if (!eq)
            return sl_fail(err, SL_ERR_CONFIG, "backend.conf line %d: expected key = value",
                           lineno);
        *eq = '\0';
        char *key = trim(l), *val = trim(eq + 1);
        if (strcmp(key, "endpoint") == 0) {
            if (!*val || strlen(val) >= sizeof cfg->endpoint)
                return sl_fail(err, SL_ERR_CONFIG, "backend.conf line %d: bad endpoint", lineno);
            if (strncmp(val, "tcp://", 6) != 0 && strncmp(val, "ipc://", 6) != 0)
                return sl_fail(err, SL_ERR_CONFIG,
                               "backend.conf line %d: endpoint must be tcp://HOST:PORT", lineno);
            strcpy(cfg->endpoint, val);
        }
        /* unknown keys are ignored: newer enrollment tools may add some */
    }
    if (!cfg->endpoint[0])
        return sl_fail(err, SL_ERR_CONFIG, "backend.conf has no endpoint = tcp://HOST:PORT");
    return SL_OK;
}

static sl_code path_of(struct sl_fe_config *cfg, char *dst, size_t cap, const char *name,
                       sl_error *err)
{
    int n = snprintf(dst, cap, "%s/%s", cfg->dir, name);
    if (n < 0 || (size_t)n >= cap)
        return sl_fail(err, SL_ERR_CONFIG, "config path too long: %s/%s", cfg->dir, name);
    if (access(dst, R_OK) != 0)
        return sl_fail(err, SL_ERR_CONFIG, "cannot read %s: %s", dst, strerror(errno));
    return SL_OK;
}

sl_code sl_fe_config_load(const char *dir, struct sl_fe_config *cfg, sl_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    if (!dir || !*dir)
        dir = getenv("SLUICE_CONFIG_DIR");
    if (!dir || !*dir)
        dir = "/etc/sluice";
    if (strlen(dir) >= sizeof cfg->dir)
        return sl_fail(err, SL_ERR_CONFIG, "SLUICE_CONFIG_DIR too long");
    strcpy(cfg->dir, dir);

    char conf[600];
    snprintf(conf, sizeof conf, "%s/backend.conf", dir);
    FILE *f = fopen(conf, "r");
    if (!f)
        return sl_fail(err, SL_ERR_CONFIG, "cannot read %s: %s", conf, strerror(errno));
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad)
        return sl_fail(err, SL_ERR_CONFIG, "cannot read %s", conf);
    text[n] = '\0';
    sl_code rc = sl_fe_config_parse(text, cfg, err);
    if (rc)
        return rc;
    if ((rc = path_of(cfg, cfg->ca, sizeof cfg->ca, "ca.pem", err)) ||
        (rc = path_of(cfg, cfg->cert, sizeof cfg->cert, "client.pem", err)) ||
        (rc = path_of(cfg, cfg->key, sizeof cfg->key, "client.key", err)))
        return rc;
    return SL_OK;
}
