/* sluice-enroll: our vendordata entry and its sources (see vendordata.h). */
#include "vendordata.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "enroll_client.h"

void se_vendordata_free(se_vendordata *v)
{
    free(v->token);
    free(v->ca);
    free(v->endpoint);
    memset(v, 0, sizeof *v);
}

sl_code se_vendordata_parse(const char *src, const char *body, size_t len, const char *key,
                            se_vendordata *v, sl_error *e)
{
    memset(v, 0, sizeof *v);
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return sl_fail(e, SL_ERR_CONFIG, "%s: not a JSON object (line %d: %s)", src, je.line,
                       je.text);
    }
    json_t *o = json_object_get(root, key);
    sl_code rc = SL_OK;
    if (!o || !json_is_object(o) || json_object_size(o) == 0) {
        rc = sl_fail(e, SL_ERR_CONFIG,
                     "%s has no \"%s\" entry: this instance is not placed on a Sluice host (not "
                     "a GPU flavor, or nova-hook is not configured)",
                     src, key);
    } else {
        const char *names[3] = {"token", "ca", "enroll_endpoint"};
        char **dst[3] = {&v->token, &v->ca, &v->endpoint};
        for (int i = 0; i < 3 && rc == SL_OK; i++) {
            json_t *s = json_object_get(o, names[i]);
            if (!json_is_string(s) || json_string_length(s) == 0 || json_string_length(s) > 65536)
                rc = sl_fail(e, SL_ERR_CONFIG, "%s: \"%s\".\"%s\" missing or not a string", src,
                             key, names[i]);
            else if (!(*dst[i] = strdup(json_string_value(s))))
                rc = sl_fail(e, SL_ERR_NOMEM, "no memory");
        }
        if (rc == SL_OK && strncmp(v->endpoint, "tcp://", 6) != 0)
            rc = sl_fail(e, SL_ERR_CONFIG, "%s: enroll_endpoint %.80s is not tcp://HOST:PORT", src,
                         v->endpoint);
        json_t *x = json_object_get(o, "expires");
        if (rc == SL_OK && x) {
            if (!json_is_integer(x) || json_integer_value(x) <= 0)
                rc = sl_fail(e, SL_ERR_CONFIG, "%s: \"%s\".\"expires\" is not a unix time", src,
                             key);
            else
                v->expires = (int64_t)json_integer_value(x);
        }
    }
    json_decref(root);
    if (rc != SL_OK)
        se_vendordata_free(v);
    return rc;
}

int se_source_is_config_drive(const char *src)
{
    size_t n = strlen(SE_CONFIG_DRIVE_DIR);
    return src && strncmp(src, SE_CONFIG_DRIVE_DIR, n) == 0 && src[n] == '/';
}

sl_code se_vendordata_check_time(const char *src, const se_vendordata *v, int64_t now, sl_error *e)
{
    if (!v->expires || now <= v->expires + SE_TOKEN_SKEW_S)
        return SL_OK;
    char when[32];
    time_t t = (time_t)v->expires;
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&t, &tm));
    long long ago = (long long)(now - v->expires);
    if (se_source_is_config_drive(src))
        return sl_fail(e, SL_ERR_CERT_EXPIRED,
                       "the config drive's token expired at %s (%lld min ago): a config drive "
                       "is written once, when the instance is created; a new token comes only "
                       "from the metadata service",
                       when, ago / 60);
    return sl_fail(e, SL_ERR_CERT_EXPIRED,
                   "%s: the token expired at %s (%lld s ago): fetch it again (or check this "
                   "instance's clock)",
                   src, when, ago);
}

int se_default_sources(const char *out[2])
{
    int n = 0;
    if (access(SE_CONFIG_DRIVE_SOURCE, R_OK) == 0)
        out[n++] = SE_CONFIG_DRIVE_SOURCE;
    out[n++] = SE_DEFAULT_SOURCE;
    return n;
}
