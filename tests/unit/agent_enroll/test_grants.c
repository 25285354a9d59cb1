/* Grants and re-enrollment end to end: sluice-enroll's library, the agent's enrollment server
 * (in-process, a fake instance table) and a backend-side channel server whose accept hook is the
 * backend's own grant code (backend/control.c: be_grants_*). The agent's side of a grant (the
 * control channel) is the issued callback, which adds the new certificate's fingerprint.
 *
 *   - every enrollment adds a grant: a second user's enrollment leaves the first certificate
 *     working (it replaced it before);
 *   - the renewal timer (sluice-enroll without --renew) notices a dead grant: after a
 *     revocation on the backend (the agent still granting it), it enrolls again although the
 *     certificate is young; when nothing listens at the endpoint any more, the agent's locate
 *     answer moves backend.conf; while the backend accepts it, it does nothing;
 *   - sluice-enroll --status: live, refused, gone. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "daemon/grants.h"
#include "ca.h"
#include "enroll.h"
#include "enroll_client.h"
#include "sluice/channel.h"
#include "sluice/token.h"
#include "status.h"
#include "testutil.h"

#define INST "6f1e0c2a-1b7d-4c55-9a0e-3f2b8d7c1e42"
#define PROJ "3c9d2f7e8a1b4c6d9e0f1a2b3c4d5e6f"

static struct {
    char dir[256], endpoint[128];
    ag_ca *ca;
    sl_token_key *tkey;
    char *tkey_pub;
    pthread_mutex_t mu;
    struct be_grants *grants;
    char issued[16][65]; /* the agent's grants: the fingerprints it issued */
    int n_issued;
} G = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ---------------------------------------------------------------- the agent's side */

static int lookup(void *user, const char *uuid, ag_instance *out)
{
    (void)user;
    if (strcmp(uuid, INST))
        return 0;
    memset(out, 0, sizeof *out);
    snprintf(out->uuid, sizeof out->uuid, INST);
    snprintf(out->project_id, sizeof out->project_id, PROJ);
    snprintf(out->flavor, sizeof out->flavor, "g1.large");
    snprintf(out->ips[0], sizeof out->ips[0], "127.0.0.1");
    out->n_ips = out->running = out->gpu = 1;
    return 1;
}

static int backend_endpoint(void *user, const char *project, char *out, size_t n)
{
    (void)user;
    pthread_mutex_lock(&G.mu);
    snprintf(out, n, "%s", G.endpoint);
    pthread_mutex_unlock(&G.mu);
    return !strcmp(project, PROJ);
}

/* What the agent's supervisor sends the backend as Grant{cert_sha256}. */
static void issued(void *user, const ag_instance *inst, const char *fp, int64_t not_after)
{
    (void)user;
    uint8_t sha[32];
    for (int i = 0; i < 32; i++) {
        unsigned v;
        sscanf(fp + 2 * i, "%2x", &v);
        sha[i] = (uint8_t)v;
    }
    pthread_mutex_lock(&G.mu);
    be_grants_add(G.grants, inst->uuid, sha, 32, not_after);
    if (G.n_issued < 16)
        snprintf(G.issued[G.n_issued++], sizeof G.issued[0], "%s", fp);
    pthread_mutex_unlock(&G.mu);
}

/* The agent's answer to a locate request: it still grants every certificate it issued (the
 * backend's grants are what the test takes away). */
static int granted(void *user, const char *fp, char *instance, size_t n)
{
    (void)user;
    int found = 0;
    pthread_mutex_lock(&G.mu);
    for (int i = 0; i < G.n_issued && !found; i++)
        found = !strcmp(G.issued[i], fp);
    pthread_mutex_unlock(&G.mu);
    if (found)
        snprintf(instance, n, INST);
    return found;
}

typedef struct loop {
    ag_enroll *en;
    sl_server *backend;
    pthread_t th;
    volatile int stop;
} loop;

static int accept_hook(void *user, const sl_peer_identity *id, sl_error *why)
{
    (void)user;
    char reason[200];
    pthread_mutex_lock(&G.mu);
    int refused = be_grants_check(G.grants, PROJ, id, reason, sizeof reason);
    pthread_mutex_unlock(&G.mu);
    if (refused)
        sl_fail(why, SL_ERR_REFUSED, "%s", reason);
    return refused;
}

static void *run(void *arg)
{
    loop *l = arg;
    sl_error e;
    while (!l->stop) {
        ag_enroll_poll(l->en, 10, &e);
        sl_server_event ev;
        sl_server_poll(l->backend, 10, &ev, &e);
    }
    return NULL;
}

static void start(loop *l)
{
    memset(l, 0, sizeof *l);
    static const char *const names[] = {"127.0.0.1"};
    char db[400];
    snprintf(db, sizeof db, "%s/replay.db", G.dir);
    ag_enroll_opts o = {.endpoint = "tcp://127.0.0.1:*",
                        .server_names = names,
                        .n_server_names = 1,
                        .token_key_pem = G.tkey_pub,
                        .token_issuer = "sluice-nova-hook",
                        .replay_db = db,
                        .ratelimit = {.burst = 100, .per_minute = 1}};
    ag_enroll_env env = {lookup, backend_endpoint, issued, NULL, granted};
    sl_error e;
    assert_int_equal(ag_enroll_open(&o, G.ca, &env, &l->en, &e), SL_OK);
    char *cert = NULL, *key = NULL;
    assert_int_equal(ag_ca_issue_server(G.ca, "backend", names, 1, 0, &cert, &key, &e), SL_OK);
    sl_tls_config tls = {
        .mode = SL_TLS_MUTUAL, .ca_pem = ag_ca_cert_pem(G.ca), .cert_pem = cert, .key_pem = key};
    sl_server_hooks hooks = {.accept = accept_hook};
    assert_int_equal(sl_server_bind("tcp://127.0.0.1:*", &tls, NULL, &hooks, &l->backend, &e),
                     SL_OK);
    free(cert);
    free(key);
    snprintf(G.endpoint, sizeof G.endpoint, "%s", sl_server_endpoint(l->backend));
    assert_int_equal(pthread_create(&l->th, NULL, run, l), 0);
}

static void stop(loop *l)
{
    l->stop = 1;
    pthread_join(l->th, NULL);
    ag_enroll_close(l->en);
    sl_server_close(l->backend);
}

/* ---------------------------------------------------------------- the guest's side */

/* sluice-enroll with a fresh token (each metadata request mints one). */
static sl_code enroll(loop *l, const char *gdir, int renew, se_result *r, sl_error *e)
{
    sl_token_claims c;
    memset(&c, 0, sizeof c);
    snprintf(c.iss, sizeof c.iss, "sluice-nova-hook");
    snprintf(c.aud, sizeof c.aud, SL_TOKEN_AUDIENCE);
    snprintf(c.sub, sizeof c.sub, INST);
    snprintf(c.project_id, sizeof c.project_id, PROJ);
    char *tok = NULL;
    assert_int_equal(sl_token_claims_stamp(&c, (int64_t)time(NULL), 600, e), SL_OK);
    assert_int_equal(sl_token_sign(G.tkey, &c, &tok, e), SL_OK);
    char vd[400];
    snprintf(vd, sizeof vd, "%s/vendor_data2.json", G.dir);
    FILE *f = fopen(vd, "w");
    assert_non_null(f);
    fprintf(f, "{\"sluice\": {\"token\": \"%s\", \"ca\": \"", tok);
    for (const char *p = ag_ca_cert_pem(G.ca); *p; p++)
        fputs(*p == '\n' ? "\\n" : (char[]){*p, 0}, f);
    fprintf(f, "\", \"enroll_endpoint\": \"%s\", \"expires\": 1800000600}}",
            ag_enroll_endpoint(l->en));
    fclose(f);
    free(tok);
    se_opts o = {.source = vd, .dir = gdir, .renew = renew, .timeout_ms = 5000, .check_grant = 1};
    return se_enroll(&o, r, e);
}

static se_grant grant_of(const char *gdir)
{
    char ep[256], why[256];
    assert_int_equal(se_read_endpoint(gdir, ep, sizeof ep), 1);
    return se_grant_probe(gdir, ep, 3000, why, sizeof why);
}

static int status_of(const char *gdir, char *out, size_t n)
{
    se_status st;
    se_status_read(gdir, 3000, &st);
    FILE *f = fmemopen(out, n, "w");
    int rc = se_status_print(&st, gdir, f);
    fclose(f);
    return rc;
}

static void test_grants(void **state)
{
    (void)state;
    loop l;
    start(&l);
    char a[400], b[400], text[2048];
    snprintf(a, sizeof a, "%s/user-a", G.dir);
    snprintf(b, sizeof b, "%s/user-b", G.dir);
    se_result r;
    sl_error e;
    /* two users of the instance enroll: both certificates work */
    assert_int_equal(enroll(&l, a, 0, &r, &e), SL_OK);
    assert_int_equal(r.enrolled, 1);
    assert_int_equal(grant_of(a), SE_GRANT_LIVE);
    assert_int_equal(enroll(&l, b, 0, &r, &e), SL_OK);
    assert_int_equal(grant_of(b), SE_GRANT_LIVE);
    assert_int_equal(grant_of(a), SE_GRANT_LIVE);
    assert_int_equal(status_of(a, text, sizeof text), 0);
    assert_non_null(strstr(text, "grant:         live"));
    /* the timer: a young certificate its backend accepts, nothing to do */
    assert_int_equal(enroll(&l, a, 0, &r, &e), SL_OK);
    assert_int_equal(r.enrolled, 0);
    assert_int_equal(r.regrant, 0);
    /* the instance was revoked (stopped) and runs again: the grant is dead; the timer enrolls
     * again although the certificate is young */
    pthread_mutex_lock(&G.mu);
    be_grants_revoke(G.grants, INST);
    pthread_mutex_unlock(&G.mu);
    assert_int_equal(grant_of(a), SE_GRANT_REFUSED);
    assert_int_equal(status_of(a, text, sizeof text), 1);
    assert_non_null(strstr(text, "grant:         REFUSED"));
    assert_non_null(strstr(text, "sluice-enroll --renew"));
    assert_int_equal(enroll(&l, a, 0, &r, &e), SL_OK);
    assert_int_equal(r.regrant, 1);
    assert_int_equal(r.enrolled, 1);
    assert_non_null(strstr(r.regrant_why, "revoked"));
    assert_int_equal(grant_of(a), SE_GRANT_LIVE);
    /* the backend moved: nothing listens at the old endpoint; the timer learns the new one from
     * the agent (a locate request; this backend.conf lost its enroll_endpoint: vendordata names
     * the agent) and keeps the certificate */
    char conf[500];
    snprintf(conf, sizeof conf, "%s/backend.conf", a);
    FILE *f = fopen(conf, "w");
    assert_non_null(f);
    fprintf(f, "endpoint = tcp://127.0.0.1:1\n");
    fclose(f);
    assert_int_equal(grant_of(a), SE_GRANT_NO_BACKEND);
    assert_int_equal(status_of(a, text, sizeof text), 1);
    assert_non_null(strstr(text, "grant:         GONE"));
    assert_int_equal(enroll(&l, a, 0, &r, &e), SL_OK);
    assert_int_equal(r.regrant, 0);
    assert_int_equal(r.enrolled, 0);
    assert_int_equal(r.moved, 1);
    assert_string_equal(r.old_endpoint, "tcp://127.0.0.1:1");
    assert_string_equal(r.endpoint, G.endpoint);
    assert_int_equal(grant_of(a), SE_GRANT_LIVE);
    stop(&l);
}

static int setup(void **state)
{
    (void)state;
    tu_tmpdir(G.dir, sizeof G.dir);
    char cadir[300];
    snprintf(cadir, sizeof cadir, "%s/ca", G.dir);
    sl_error e;
    G.grants = be_grants_new();
    if (!G.grants || ag_ca_open(cadir, NULL, &G.ca, &e) != SL_OK ||
        sl_token_key_generate(&G.tkey, &e) || sl_token_key_public_pem(G.tkey, &G.tkey_pub, &e))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ag_ca_close(G.ca);
    sl_token_key_free(G.tkey);
    free(G.tkey_pub);
    be_grants_free(G.grants);
    tu_rmtree(G.dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_grants)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
