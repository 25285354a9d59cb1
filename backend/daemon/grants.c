/* Instance uuids whose sessions the accept hook lets in (with the project, which must be
 * --project). They come from --allow FILE (one uuid per line, '#' comments) and from the agent's
 * Grant messages (pinned to the certificate's SHA-256, kept with the SLA). Every Grant adds its
 * certificate to the instance's set (up to BE_GRANT_CERTS: each enrollment, of any user of the
 * instance, keeps working). A revoked instance is refused from then on, until granted again.
 * The channel thread's accept hook (accept.c) asks them, the control channel (control.c) changes
 * them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/grants.h"
#include "bounds.h"
#include "sluice/log.h"

struct be_grants *be_grants_new(void)
{
    return calloc(1, sizeof(struct be_grants));
}

void be_grants_free(struct be_grants *g)
{
    if (!g)
        return;
    free(g->g);
    free(g);
}

static struct be_grant *grant_find(const struct be_grants *g, const char *uuid)
{
    for (size_t i = 0; i < g->n; i++)
        if (!strcmp(g->g[i].uuid, uuid))
            return &g->g[i];
    return NULL;
}

int be_grants_uuid_ok(const char *u)
{
    size_t n = strlen(u);
    if (n == 0 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = u[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '-'))
            return 0;
    }
    return 1;
}

void be_grants_add(struct be_grants *g, const char *uuid, const uint8_t *sha, size_t sha_len,
                   int64_t not_after)
{
    struct be_grant *x = grant_find(g, uuid);
    if (!x) {
        if (g->n == g->cap) {
            size_t cap = g->cap ? g->cap * 2 : 16;
            struct be_grant *v = realloc(g->g, cap * sizeof *v);
            if (!v)
                return;
            g->g = v;
            g->cap = cap;
        }
        x = &g->g[g->n++];
        memset(x, 0, sizeof *x);
        snprintf(x->uuid, sizeof x->uuid, "%s", uuid);
    }
    if (x->revoked) { /* granted again after a revocation: the old certificates stay dead */
        x->revoked = 0;
        x->n_sha = 0;
    }
    if (!sha || sha_len != 32)
        return;
    int slot = -1;
    for (int i = 0; i < x->n_sha && slot < 0; i++)
        if (!memcmp(x->sha[i], sha, 32))
            slot = i;
    if (slot < 0 && x->n_sha < BE_GRANT_CERTS)
        slot = x->n_sha++;
    if (slot < 0) { /* full: the certificate that ends first goes */
        slot = 0;
        for (int k = 1; k < x->n_sha; k++)
            if (x->not_after[k] < x->not_after[slot])
                slot = k;
    }
    memcpy(x->sha[slot], sha, 32);
    x->not_after[slot] = not_after;
}

void be_grants_set_sla(struct be_grants *g, const char *uuid, const struct be_sla *sla)
{
    struct be_grant *x = grant_find(g, uuid);
    if (!x)
        return;
    x->has_sla = sla != NULL;
    if (sla)
        x->sla = *sla;
}

int be_grants_sla(const struct be_grants *g, const char *uuid, struct be_sla *out)
{
    const struct be_grant *x = grant_find(g, uuid);
    memset(out, 0, sizeof *out);
    out->share = 1;
    if (!x || !x->has_sla)
        return 0;
    *out = x->sla;
    return 1;
}

/* Grant.sla as the backend keeps it; -1 (and why) when a value is out of range. */
int be_grants_sla_from(const Sluice__Control__Sla *in, struct be_sla *out, char *why, size_t n)
{
    memset(out, 0, sizeof *out);
    out->share = 1;
    if (!in)
        return 0;
    double sh = in->gpu_share;
    if (!isfinite(sh) || sh < 0 || sh > 1) {
        snprintf(why, n, "sla.gpu_share %g is not within 0..1", sh);
        return -1;
    }
    out->share = sh > 0 ? sh : 1; /* 0: not set, uncapped */
    const char *f = in->flavor ? in->flavor : "";
    if (strlen(f) >= sizeof out->flavor) {
        snprintf(why, n, "sla.flavor is longer than %zu bytes", sizeof out->flavor - 1);
        return -1;
    }
    for (const char *p = f; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) {
            snprintf(why, n, "sla.flavor is not printable ASCII");
            return -1;
        }
    snprintf(out->flavor, sizeof out->flavor, "%s", f);
    out->quota = in->memory_quota_bytes;
    out->max_sessions = in->max_sessions;
    return 0;
}

void be_grants_revoke(struct be_grants *g, const char *uuid)
{
    struct be_grant *x = grant_find(g, uuid);
    if (!x) {
        be_grants_add(g, uuid, NULL, 0, 0);
        x = grant_find(g, uuid);
    }
    if (x) {
        x->revoked = 1;
        x->n_sha = 0;
    }
}

sl_code be_grants_load_allow(struct be_grants *g, const char *path, sl_error *e)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return sl_fail(e, SL_ERR_CONFIG, "%s: %s", path, strerror(errno));
    char line[512];
    int lineno = 0, count = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *h = strchr(line, '#');
        if (h)
            *h = 0;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        char *end = p + strlen(p);
        while (end > p && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
            *--end = 0;
        if (!*p)
            continue;
        if (!be_grants_uuid_ok(p)) {
            fclose(f);
            return sl_fail(e, SL_ERR_CONFIG, "%s:%d: not an instance uuid", path, lineno);
        }
        be_grants_add(g, p, NULL, 0, 0);
        count++;
    }
    fclose(f);
    sl_log(SL_LOG_INFO, BE_COMPONENT, "allow-list %s: %d instance%s granted", path, count,
           count == 1 ? "" : "s");
    return SL_OK;
}

int be_grants_check(const struct be_grants *g, const char *project, const sl_peer_identity *id,
                    char *why, size_t n)
{
    if (!id->authenticated) {
        snprintf(why, n, "no client certificate");
        return 1;
    }
    if (g->held) {
        snprintf(why, n,
                 "the host's sluice-agent is not connected to this backend; new sessions "
                 "are admitted again once it is back (retry in a few seconds)");
        return 1;
    }
    if (strcmp(id->project_id, project) != 0) {
        snprintf(why, n, "project %s is not this backend's project", id->project_id);
        return 1;
    }
    const struct be_grant *x = grant_find(g, id->instance_id);
    if (!x || x->revoked) {
        snprintf(why, n, "instance %s has no grant on this backend%s", id->instance_id,
                 x ? " (revoked)" : "");
        return 1;
    }
    for (int k = 0; k < x->n_sha; k++) {
        char hex[65];
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", x->sha[k][i]);
        if (!strcmp(hex, id->fingerprint))
            return 0;
    }
    if (x->n_sha) {
        snprintf(why, n,
                 "certificate of instance %s is not one of the %d granted (an older enrollment, "
                 "or another host's)",
                 id->instance_id, x->n_sha);
        return 1;
    }
    return 0;
}
