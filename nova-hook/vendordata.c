/* Nova DynamicJSON vendordata answers: {"token","ca","enroll_endpoint","expires"} or {}. */
#include "vendordata.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "validate.h"

static void set(nh_vd_answer *a, int status, const char *body, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set(nh_vd_answer *a, int status, const char *body, const char *fmt, ...)
{
    a->status = status;
    a->body = strdup(body);
    if (!a->body)
        a->status = 500;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->why, sizeof a->why, fmt, ap);
    va_end(ap);
}

static void bad_request(nh_vd_answer *a, const char *what)
{
    char body[160];
    snprintf(body, sizeof body, "{\"error\":\"%s\"}", what);
    set(a, 400, body, "bad request: %s", what);
}

#define STAMP_TRIES 3

/* Stamps a fresh token id, signs, and records the token in the store: its id is unique
 * across every nova-hook (an id the database holds already is stamped anew). */
static sl_code sign_unique(const nh_vendordata *v, sl_token_claims *c, int64_t now, char **token,
                           sl_error *e)
{
    for (int i = 0; i < STAMP_TRIES; i++) {
        char kid[32] = "";
        sl_code rc = sl_token_claims_stamp(c, now, v->ttl, e);
        if (rc == SL_OK)
            rc = nh_signer_sign(v->signer, c, token, kid, sizeof kid, e);
        if (rc != SL_OK)
            return rc;
        nh_token_rec t = {c->jti, c->sub, c->project_id, v->node, kid, c->iat, c->exp};
        int unique = 0;
        if ((rc = nh_store_token_issued(v->store, &t, &unique, e)) == SL_OK && unique)
            return SL_OK;
        free(*token);
        *token = NULL;
        if (rc != SL_OK)
            return rc;
    }
    return sl_fail(e, SL_ERR_IO, "no unique token id in %d tries", STAMP_TRIES);
}

static void issue(const nh_vendordata *v, const char *instance, const char *project,
                  const nh_target *t, int64_t now, nh_vd_answer *a)
{
    sl_token_claims c;
    memset(&c, 0, sizeof c);
    snprintf(c.iss, sizeof c.iss, "%s", v->issuer);
    snprintf(c.aud, sizeof c.aud, "%s", SL_TOKEN_AUDIENCE);
    snprintf(c.sub, sizeof c.sub, "%s", instance);
    snprintf(c.project_id, sizeof c.project_id, "%s", project);
    sl_error e;
    char *token = NULL;
    if (sign_unique(v, &c, now, &token, &e) != SL_OK) {
        set(a, 500, "{}", "instance %s: issuing a token failed: %s", instance, e.msg);
        return;
    }
    const char *ca = t->ca_pem ? t->ca_pem : v->agent_ca_pem;
    json_t *o = json_pack("{s:s, s:s, s:s, s:I}", "token", token, "ca", ca, "enroll_endpoint",
                          t->endpoint, "expires", (json_int_t)c.exp);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    free(token);
    if (!s) {
        set(a, 500, "{}", "instance %s: out of memory", instance);
        return;
    }
    a->status = 200;
    a->body = s;
    snprintf(a->why, sizeof a->why, "instance %.64s project %.64s on %.64s: token %.40s issued",
             instance, project, t->host, c.jti);
}

void nh_vendordata_answer(const nh_vendordata *v, const char *body, size_t len, int64_t now,
                          nh_vd_answer *a)
{
    memset(a, 0, sizeof *a);
    json_error_t je;
    /* JSON_ALLOW_NUL: Nova sends metadata values as they were given, "\u0000" included; the
     * two ids we read are checked to hold none */
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!j) {
        bad_request(a, "body is not JSON");
        return;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        bad_request(a, "body is not a JSON object");
        return;
    }
    json_t *ji = json_object_get(j, "instance-id");
    json_t *jp = json_object_get(j, "project-id");
    if (!json_is_string(ji) || strlen(json_string_value(ji)) != json_string_length(ji) ||
        !nh_valid_id(json_string_value(ji))) {
        json_decref(j);
        bad_request(a, "instance-id is missing or not an id");
        return;
    }
    if (!json_is_string(jp) || strlen(json_string_value(jp)) != json_string_length(jp) ||
        !nh_valid_id(json_string_value(jp))) {
        json_decref(j);
        bad_request(a, "project-id is missing or not an id");
        return;
    }
    char instance[80], project[80];
    snprintf(instance, sizeof instance, "%s", json_string_value(ji));
    snprintf(project, sizeof project, "%s", json_string_value(jp));
    json_decref(j); /* user-data, metadata and the rest are dropped unread */

    nh_target t;
    int found = 0;
    sl_error e;
    if (nh_store_lookup(v->store, instance, &t, &found, &e) != SL_OK) {
        set(a, 500, "{}", "instance %s: registry lookup failed: %s", instance, e.msg);
        return;
    }
    if (!found)
        set(a, 200, "{}", "instance %s: not on a Sluice host", instance);
    else if (strcmp(t.project, project) != 0)
        set(a, 200, "{}", "instance %s: project %s differs from the registered one", instance,
            project);
    else if (!t.ca_pem && !v->agent_ca_pem)
        set(a, 500, "{}", "instance %s: no agent CA for host %s", instance, t.host);
    else
        issue(v, instance, project, &t, now, a);
    free(t.ca_pem);
}
