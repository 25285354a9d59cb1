/* Enrollment end to end over the real channel: sluice-enroll's library against an in-process
 * enrollment server with a fake instance table; success, idempotence, renewal, every refusal,
 * rate limiting, a flood of connections without a request, a mutual-TLS channel with the
 * issued certificate, and locate requests (the backend moved; a certificate no longer granted is
 * replaced). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "ca.h"
#include "enroll.h"
#include "enroll_client.h"
#include "sluice/channel.h"
#include "sluice/token.h"
#include "sluice_control.pb-c.h"
#include "testutil.h"

#include <zmq.h>

#define INST    "6f1e0c2a-1b7d-4c55-9a0e-3f2b8d7c1e42"
#define PROJ    "3c9d2f7e8a1b4c6d9e0f1a2b3c4d5e6f"
#define BACKEND "tcp://127.0.0.1:47001"

static struct {
    char dir[256];
    ag_ca *ca;
    sl_token_key *tkey, *other_key;
    char *tkey_pub;
    pthread_mutex_t mu;
    ag_instance inst; /* the one domain of the fake host */
    int issued;
    char issued_fp[65];
    char backend[64]; /* the backend endpoint the fake agent answers ("": BACKEND) */
    int revoked;      /* the issued certificate is no longer granted */
} G = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ---------------------------------------------------------------- fake agent environment */

static int lookup(void *user, const char *uuid, ag_instance *out)
{
    (void)user;
    pthread_mutex_lock(&G.mu);
    int found = strcmp(uuid, G.inst.uuid) == 0;
    if (found)
        *out = G.inst;
    pthread_mutex_unlock(&G.mu);
    return found;
}

static int backend_endpoint(void *user, const char *project, char *out, size_t n)
{
    (void)user;
    if (strcmp(project, PROJ) != 0)
        return 0;
    pthread_mutex_lock(&G.mu);
    snprintf(out, n, "%s", G.backend[0] ? G.backend : BACKEND);
    pthread_mutex_unlock(&G.mu);
    return 1;
}

static int granted(void *user, const char *fp, char *instance, size_t n)
{
    (void)user;
    pthread_mutex_lock(&G.mu);
    int ok = !G.revoked && G.issued_fp[0] && !strcmp(fp, G.issued_fp);
    pthread_mutex_unlock(&G.mu);
    if (ok)
        snprintf(instance, n, INST);
    return ok;
}

static void issued(void *user, const ag_instance *inst, const char *fp, int64_t not_after)
{
    (void)user;
    (void)not_after;
    pthread_mutex_lock(&G.mu);
    assert_string_equal(inst->uuid, INST);
    G.issued++;
    snprintf(G.issued_fp, sizeof G.issued_fp, "%s", fp);
    pthread_mutex_unlock(&G.mu);
}

static void set_instance(int running, int gpu, const char *project, int with_loopback)
{
    pthread_mutex_lock(&G.mu);
    memset(&G.inst, 0, sizeof G.inst);
    snprintf(G.inst.uuid, sizeof G.inst.uuid, INST);
    snprintf(G.inst.domain, sizeof G.inst.domain, "instance-0000002a");
    snprintf(G.inst.project_id, sizeof G.inst.project_id, "%s", project);
    snprintf(G.inst.flavor, sizeof G.inst.flavor, gpu ? "g1.large" : "m1.small");
    G.inst.running = running;
    G.inst.gpu = gpu;
    snprintf(G.inst.ips[0], sizeof G.inst.ips[0], "10.0.0.5");
    snprintf(G.inst.ips[1], sizeof G.inst.ips[1], "2001:db8::5");
    G.inst.n_ips = 2;
    if (with_loopback)
        snprintf(G.inst.ips[G.inst.n_ips++], sizeof G.inst.ips[0], "127.0.0.1");
    pthread_mutex_unlock(&G.mu);
}

/* ---------------------------------------------------------------- the enrollment server */

typedef struct srv {
    ag_enroll *en;
    pthread_t th;
    volatile int stop, failed;
} srv;

static void *srv_loop(void *arg)
{
    srv *s = arg;
    sl_error e;
    while (!s->stop)
        if (ag_enroll_poll(s->en, 20, &e) != SL_OK) {
            fprintf(stderr, "ag_enroll_poll: %s\n", e.msg); /* no cmocka asserts off-thread */
            s->failed = 1;
            break;
        }
    return NULL;
}

static void srv_start_keys(srv *s, int burst, const char *key_file)
{
    memset(s, 0, sizeof *s);
    static const char *const names[] = {"127.0.0.1", "localhost"};
    char db[400];
    snprintf(db, sizeof db, "%s/replay.db", G.dir);
    ag_enroll_opts o = {.endpoint = "tcp://127.0.0.1:*",
                        .server_names = names,
                        .n_server_names = 2,
                        .token_key_file = key_file,
                        .token_key_pem = key_file ? NULL : G.tkey_pub,
                        .token_issuer = "sluice-nova-hook",
                        .replay_db = db,
                        .ratelimit = {.burst = burst, .per_minute = 1}};
    ag_enroll_env env = {lookup, backend_endpoint, issued, NULL, granted};
    sl_error e;
    assert_int_equal(ag_enroll_open(&o, G.ca, &env, &s->en, &e), SL_OK);
    assert_int_equal(pthread_create(&s->th, NULL, srv_loop, s), 0);
}

static void srv_start(srv *s, int burst)
{
    srv_start_keys(s, burst, NULL);
}

static void srv_stop(srv *s)
{
    s->stop = 1;
    pthread_join(s->th, NULL);
    ag_enroll_close(s->en);
    assert_int_equal(s->failed, 0);
}

/* ---------------------------------------------------------------- guest side helpers */

static char *token(const sl_token_key *k, const char *sub, const char *proj, int64_t age)
{
    sl_token_claims c;
    memset(&c, 0, sizeof c);
    snprintf(c.iss, sizeof c.iss, "sluice-nova-hook");
    snprintf(c.aud, sizeof c.aud, SL_TOKEN_AUDIENCE);
    snprintf(c.sub, sizeof c.sub, "%s", sub);
    snprintf(c.project_id, sizeof c.project_id, "%s", proj);
    sl_error e;
    assert_int_equal(sl_token_claims_stamp(&c, (int64_t)time(NULL) - age, 600, &e), SL_OK);
    char *t = NULL;
    assert_int_equal(sl_token_sign(k, &c, &t, &e), SL_OK);
    return t;
}

static void vendordata(const char *path, const char *tok, const char *endpoint)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"other\": {\"x\": 1}, \"sluice\": {\"token\": \"%s\", \"ca\": \"", tok);
    for (const char *p = ag_ca_cert_pem(G.ca); *p; p++)
        fputs(*p == '\n' ? "\\n" : (char[]){*p, 0}, f);
    fprintf(f, "\", \"enroll_endpoint\": \"%s\", \"expires\": %lld}}", endpoint,
            (long long)time(NULL) + 600);
    fclose(f);
}

/* Runs sluice-enroll with a fresh vendordata holding tok; returns its code. */
static sl_code enroll(srv *s, const char *tok, const char *gdir, int renew, se_result *r,
                      sl_error *e)
{
    char vd[400];
    snprintf(vd, sizeof vd, "%s/vendor_data2.json", G.dir);
    vendordata(vd, tok, ag_enroll_endpoint(s->en));
    se_opts o = {.source = vd, .dir = gdir, .renew = renew, .timeout_ms = 5000};
    return se_enroll(&o, r, e);
}

static void guest_dir(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", G.dir, name);
}

/* Sends raw bytes as the request; returns the reply's status (and its detail). */
static int raw_request(srv *s, const void *msg, size_t len, char *detail, size_t dn)
{
    sl_tls_config cfg = {.mode = SL_TLS_SERVER_ONLY, .ca_pem = ag_ca_cert_pem(G.ca)};
    sl_client *c = NULL;
    sl_error e;
    assert_int_equal(sl_client_connect(ag_enroll_endpoint(s->en), &cfg, NULL, &c, &e), SL_OK);
    assert_int_equal(sl_client_send(c, msg, len, NULL, 0, &e), SL_OK);
    const void *m;
    size_t ml;
    assert_int_equal(sl_client_recv(c, &m, &ml, NULL, 5000, &e), SL_OK);
    Sluice__Control__EnrollReply *r = sluice__control__enroll_reply__unpack(NULL, ml, m);
    assert_non_null(r);
    int st = (int)r->status;
    snprintf(detail, dn, "%s", r->detail);
    sluice__control__enroll_reply__free_unpacked(r, NULL);
    /* the server closes the session after its answer */
    assert_int_not_equal(sl_client_recv(c, &m, &ml, NULL, 3000, &e), SL_OK);
    sl_client_close(c);
    return st;
}

/* ---------------------------------------------------------------- a backend-like mTLS server */

typedef struct mtls {
    sl_server *srv;
    pthread_t th;
    volatile int stop;
    sl_peer_identity id;
    int accepted;
} mtls;

static void *mtls_loop(void *arg)
{
    mtls *m = arg;
    sl_error e;
    while (!m->stop) {
        sl_server_event ev;
        if (sl_server_poll(m->srv, 20, &ev, &e) != SL_OK)
            break;
        if (ev.kind == SL_EV_ACCEPTED) {
            pthread_mutex_lock(&G.mu);
            m->id = *ev.identity;
            m->accepted++;
            pthread_mutex_unlock(&G.mu);
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- fixtures */

static int setup(void **state)
{
    (void)state;
    tu_tmpdir(G.dir, sizeof G.dir);
    char cadir[300];
    snprintf(cadir, sizeof cadir, "%s/ca", G.dir);
    sl_error e;
    if (ag_ca_open(cadir, NULL, &G.ca, &e) != SL_OK || sl_token_key_generate(&G.tkey, &e) ||
        sl_token_key_generate(&G.other_key, &e) ||
        sl_token_key_public_pem(G.tkey, &G.tkey_pub, &e)) {
        fprintf(stderr, "setup: %s\n", e.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ag_ca_close(G.ca);
    sl_token_key_free(G.tkey);
    sl_token_key_free(G.other_key);
    free(G.tkey_pub);
    tu_rmtree(G.dir);
    return 0;
}

/* ---------------------------------------------------------------- tests */

static void test_enroll_success(void **state)
{
    (void)state;
    set_instance(1, 1, PROJ, 1);
    srv s;
    srv_start(&s, 100);
    char gdir[400], p[500];
    guest_dir(gdir, sizeof gdir, "guest-ok");
    char *tok = token(G.tkey, INST, PROJ, 0);
    se_result r;
    sl_error e;
    int before = G.issued;
    assert_int_equal(enroll(&s, tok, gdir, 0, &r, &e), SL_OK);
    assert_int_equal(r.enrolled, 1);
    assert_int_equal(r.status, 1);
    assert_string_equal(r.endpoint, BACKEND);
    assert_string_equal(r.instance_id, INST);
    assert_string_equal(r.project_id, PROJ);
    int64_t now = (int64_t)time(NULL);
    assert_true(r.not_after > now + AG_CA_CLIENT_LIFETIME_DEFAULT - 60);
    /* the files and their modes */
    assert_int_equal(tu_mode(gdir), 0750);
    snprintf(p, sizeof p, "%s/client.key", gdir);
    assert_int_equal(tu_mode(p), 0600);
    snprintf(p, sizeof p, "%s/client.pem", gdir);
    assert_int_equal(tu_mode(p), 0644);
    snprintf(p, sizeof p, "%s/ca.pem", gdir);
    assert_int_equal(tu_mode(p), 0644);
    snprintf(p, sizeof p, "%s/backend.conf", gdir);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    char conf[1024] = "";
    conf[fread(conf, 1, sizeof conf - 1, f)] = '\0';
    fclose(f);
    assert_non_null(strstr(conf, "\nendpoint = " BACKEND "\n"));
    /* the certificate: CN/OU from the token, verifies against the CA, as the agent announced */
    snprintf(p, sizeof p, "%s/client.pem", gdir);
    BIO *b = BIO_new_file(p, "r");
    X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    assert_non_null(x);
    char cn[64] = "", ou[64] = "";
    X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof cn);
    X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_organizationalUnitName, ou, sizeof ou);
    assert_string_equal(cn, INST);
    assert_string_equal(ou, PROJ);
    assert_int_equal(tu_verify(x, ag_ca_cert_pem(G.ca)), 1);
    X509_free(x);
    pthread_mutex_lock(&G.mu);
    assert_int_equal(G.issued, before + 1);
    char fp1[65];
    snprintf(fp1, sizeof fp1, "%s", G.issued_fp);
    pthread_mutex_unlock(&G.mu);

    /* a mutual-TLS channel with the issued certificate, as the frontend will open it */
    mtls m = {0};
    const char *sans[] = {"127.0.0.1"};
    char *scert = NULL, *skey = NULL;
    assert_int_equal(ag_ca_issue_server(G.ca, "backend", sans, 1, 0, &scert, &skey, &e), SL_OK);
    sl_tls_config scfg = {
        .mode = SL_TLS_MUTUAL, .ca_pem = ag_ca_cert_pem(G.ca), .cert_pem = scert, .key_pem = skey};
    assert_int_equal(sl_server_bind("tcp://127.0.0.1:*", &scfg, NULL, NULL, &m.srv, &e), SL_OK);
    assert_int_equal(pthread_create(&m.th, NULL, mtls_loop, &m), 0);
    char kf[500], cf[500], af[500];
    snprintf(kf, sizeof kf, "%s/client.key", gdir);
    snprintf(cf, sizeof cf, "%s/client.pem", gdir);
    snprintf(af, sizeof af, "%s/ca.pem", gdir);
    sl_tls_config ccfg = {.mode = SL_TLS_MUTUAL, .ca_file = af, .cert_file = cf, .key_file = kf};
    sl_client *c = NULL;
    assert_int_equal(sl_client_connect(sl_server_endpoint(m.srv), &ccfg, NULL, &c, &e), SL_OK);
    sl_client_close(c);
    m.stop = 1;
    pthread_join(m.th, NULL);
    assert_int_equal(m.accepted, 1);
    assert_string_equal(m.id.instance_id, INST);
    assert_string_equal(m.id.project_id, PROJ);
    assert_string_equal(m.id.fingerprint, fp1);
    sl_server_close(m.srv);
    free(scert);
    free(skey);

    /* idempotent: a second run does nothing (the used token is not even sent) */
    assert_int_equal(enroll(&s, tok, gdir, 0, &r, &e), SL_OK);
    assert_int_equal(r.enrolled, 0);
    assert_int_equal(r.status, 0);
    pthread_mutex_lock(&G.mu);
    assert_int_equal(G.issued, before + 1);
    pthread_mutex_unlock(&G.mu);
    /* --renew with the same token: replayed, the files stay */
    assert_int_equal(enroll(&s, tok, gdir, 1, &r, &e), SL_ERR_REFUSED);
    assert_int_equal(r.status, SLUICE__CONTROL__ENROLL_REPLY__STATUS__REPLAYED);
    assert_int_equal(se_check_current(gdir, now, NULL, &e), SL_OK);
    /* --renew with a fresh token: a new certificate */
    free(tok);
    tok = token(G.tkey, INST, PROJ, 0);
    assert_int_equal(enroll(&s, tok, gdir, 1, &r, &e), SL_OK);
    assert_int_equal(r.enrolled, 1);
    pthread_mutex_lock(&G.mu);
    assert_string_not_equal(G.issued_fp, fp1);
    pthread_mutex_unlock(&G.mu);
    /* renewal is due once two thirds of the lifetime have passed */
    assert_int_equal(se_check_current(gdir, now + AG_CA_CLIENT_LIFETIME_DEFAULT / 2, NULL, &e),
                     SL_OK);
    assert_int_equal(se_check_current(gdir, now + AG_CA_CLIENT_LIFETIME_DEFAULT * 3 / 4, NULL, &e),
                     SL_ERR_CERT_EXPIRED);
    free(tok);
    srv_stop(&s);
}

typedef struct refusal {
    const char *name;
    int running, gpu, loopback;
    const char *inst_project;
    const char *sub, *proj;
    int forged;
    int64_t age;
    int status;
    const char *detail;
} refusal;

static void read_conf(const char *gdir, char *conf, size_t n)
{
    char p[500];
    snprintf(p, sizeof p, "%s/backend.conf", gdir);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    conf[fread(conf, 1, n - 1, f)] = '\0';
    fclose(f);
}

/* The backend moved: a run of sluice-enroll with a good certificate asks the agent (locate)
 * and rewrites backend.conf, without a new certificate; a certificate the agent no longer
 * grants is replaced by a new enrollment; a locate from elsewhere is refused and changes
 * nothing. */
static void test_enroll_locate(void **state)
{
    (void)state;
    set_instance(1, 1, PROJ, 1);
    pthread_mutex_lock(&G.mu);
    G.backend[0] = '\0';
    G.revoked = 0;
    pthread_mutex_unlock(&G.mu);
    srv s;
    srv_start(&s, 100);
    char gdir[400], conf[1024];
    guest_dir(gdir, sizeof gdir, "guest-locate");
    char *tok = token(G.tkey, INST, PROJ, 0);
    se_result r;
    sl_error e;
    assert_int_equal(enroll(&s, tok, gdir, 0, &r, &e), SL_OK);
    assert_int_equal(r.enrolled, 1);
    read_conf(gdir, conf, sizeof conf);
    char want[200];
    snprintf(want, sizeof want, "\nenroll_endpoint = %s\n", ag_enroll_endpoint(s.en));
    assert_non_null(strstr(conf, want));
    int issued_before = G.issued;

    /* still there: confirmed, nothing written */
    se_opts o = {.source = "/nonexistent", .dir = gdir, .timeout_ms = 5000};
    assert_int_equal(se_enroll(&o, &r, &e), SL_OK);
    assert_int_equal(r.enrolled, 0);
    assert_int_equal(r.located, 1);
    assert_int_equal(r.moved, 0);
    assert_string_equal(r.endpoint, BACKEND);

    /* moved: backend.conf follows, the certificate stays */
    pthread_mutex_lock(&G.mu);
    snprintf(G.backend, sizeof G.backend, "tcp://127.0.0.1:47002");
    pthread_mutex_unlock(&G.mu);
    assert_int_equal(se_enroll(&o, &r, &e), SL_OK);
    assert_int_equal(r.located, 1);
    assert_int_equal(r.moved, 1);
    assert_string_equal(r.old_endpoint, BACKEND);
    assert_string_equal(r.endpoint, "tcp://127.0.0.1:47002");
    read_conf(gdir, conf, sizeof conf);
    assert_non_null(strstr(conf, "\nendpoint = tcp://127.0.0.1:47002\n"));
    assert_non_null(strstr(conf, want));
    assert_int_equal(G.issued, issued_before);

    /* from an address that is not the instance's: refused, the files are kept */
    set_instance(1, 1, PROJ, 0);
    assert_int_equal(se_enroll(&o, &r, &e), SL_OK);
    assert_int_equal(r.located, 0);
    assert_non_null(strstr(r.note, "WRONG_SOURCE"));
    read_conf(gdir, conf, sizeof conf);
    assert_non_null(strstr(conf, "\nendpoint = tcp://127.0.0.1:47002\n"));
    set_instance(1, 1, PROJ, 1);

    /* no longer granted (revoked, say): sluice-enroll enrolls anew with a fresh token */
    pthread_mutex_lock(&G.mu);
    G.revoked = 1;
    pthread_mutex_unlock(&G.mu);
    char *tok2 = token(G.tkey, INST, PROJ, 0);
    assert_int_equal(enroll(&s, tok2, gdir, 0, &r, &e), SL_OK);
    assert_int_equal(r.enrolled, 1);
    assert_int_equal(G.issued, issued_before + 1);
    pthread_mutex_lock(&G.mu);
    G.revoked = 0;
    G.backend[0] = '\0';
    pthread_mutex_unlock(&G.mu);
    free(tok);
    free(tok2);
    srv_stop(&s);
}

static void test_enroll_refusals(void **state)
{
    (void)state;
    static const refusal cases[] = {
        {"forged signature", 1, 1, 1, PROJ, INST, PROJ, 1, 0, 2, "token refused"},
        {"expired token", 1, 1, 1, PROJ, INST, PROJ, 0, 1200, 2,
         "token refused: expired: token claim exp: expired"},
        {"wrong project", 1, 1, 1, PROJ, INST, "0000aaaa0000bbbb0000cccc0000dddd", 0, 0, 5,
         "belongs to project"},
        {"unknown domain", 1, 1, 1, PROJ, "00000000-0000-0000-0000-000000000000", PROJ, 0, 0, 4,
         "no domain"},
        {"stopped domain", 0, 1, 1, PROJ, INST, PROJ, 0, 0, 4, "not running"},
        {"non-GPU flavor", 1, 0, 1, PROJ, INST, PROJ, 0, 0, 6, "m1.small"},
        {"wrong source", 1, 1, 0, PROJ, INST, PROJ, 0, 0, 7, "connection from 127.0.0.1"},
    };
    srv s;
    srv_start(&s, 100);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const refusal *c = &cases[i];
        set_instance(c->running, c->gpu, c->inst_project, c->loopback);
        char gdir[400], p[500];
        guest_dir(gdir, sizeof gdir, "guest-refused");
        char *tok = token(c->forged ? G.other_key : G.tkey, c->sub, c->proj, c->age);
        se_result r;
        sl_error e;
        print_message("refusal: %s\n", c->name);
        assert_int_equal(enroll(&s, tok, gdir, 0, &r, &e), SL_ERR_REFUSED);
        assert_int_equal(r.status, c->status);
        assert_non_null(strstr(e.msg, ag_enroll_status_name(c->status)));
        if (!strstr(e.msg, c->detail))
            fail_msg("%s: \"%s\" lacks \"%s\"", c->name, e.msg, c->detail);
        snprintf(p, sizeof p, "%s/client.pem", gdir);
        assert_int_equal(access(p, F_OK), -1); /* nothing written */
        free(tok);
    }
    /* a replayed token: once accepted, then refused */
    set_instance(1, 1, PROJ, 1);
    char gdir[400];
    guest_dir(gdir, sizeof gdir, "guest-replay");
    char *tok = token(G.tkey, INST, PROJ, 0);
    se_result r;
    sl_error e;
    assert_int_equal(enroll(&s, tok, gdir, 1, &r, &e), SL_OK);
    assert_int_equal(enroll(&s, tok, gdir, 1, &r, &e), SL_ERR_REFUSED);
    assert_int_equal(r.status, SLUICE__CONTROL__ENROLL_REPLY__STATUS__REPLAYED);
    free(tok);
    /* garbage instead of an EnrollRequest, and a request with a bad CSR */
    char detail[512];
    assert_int_equal(raw_request(&s, "\xff\xff\xff\xff garbage", 12, detail, sizeof detail),
                     SLUICE__CONTROL__ENROLL_REPLY__STATUS__BAD_TOKEN);
    assert_non_null(strstr(detail, "malformed"));
    Sluice__Control__EnrollRequest q = SLUICE__CONTROL__ENROLL_REQUEST__INIT;
    tok = token(G.tkey, INST, PROJ, 0);
    q.token = tok;
    uint8_t junk[64];
    memset(junk, 0x30, sizeof junk);
    q.csr_der.data = junk;
    q.csr_der.len = sizeof junk;
    uint8_t buf[4096];
    size_t n = sluice__control__enroll_request__pack(&q, buf);
    assert_int_equal(raw_request(&s, buf, n, detail, sizeof detail),
                     SLUICE__CONTROL__ENROLL_REPLY__STATUS__BAD_CSR);
    free(tok);
    /* a CSR for an RSA key: BAD_CSR too */
    tok = token(G.tkey, INST, PROJ, 0);
    q.token = tok;
    uint8_t *csr = NULL;
    size_t csr_len = 0;
    tu_make_csr("RSA", "x", &csr, &csr_len);
    q.csr_der.data = csr;
    q.csr_der.len = csr_len;
    n = sluice__control__enroll_request__pack(&q, buf);
    assert_int_equal(raw_request(&s, buf, n, detail, sizeof detail),
                     SLUICE__CONTROL__ENROLL_REPLY__STATUS__BAD_CSR);
    free(csr);
    free(tok);
    ag_enroll_stats st;
    ag_enroll_get_stats(s.en, &st);
    assert_int_equal(st.ok, 1);
    assert_int_equal(st.refused[4], 2);
    assert_int_equal(st.refused[8], 2);
    srv_stop(&s);
}

static void test_enroll_rate_limited(void **state)
{
    (void)state;
    set_instance(1, 1, PROJ, 1);
    srv s;
    srv_start(&s, 3);
    char gdir[400];
    guest_dir(gdir, sizeof gdir, "guest-rl");
    se_result r;
    sl_error e;
    for (int i = 0; i < 3; i++) {
        char *bad = token(G.other_key, INST, PROJ, 0);
        assert_int_equal(enroll(&s, bad, gdir, 0, &r, &e), SL_ERR_REFUSED);
        assert_int_equal(r.status, SLUICE__CONTROL__ENROLL_REPLY__STATUS__BAD_TOKEN);
        free(bad);
    }
    /* even a good token is refused now, before it is looked at (so it is not burnt) */
    char *tok = token(G.tkey, INST, PROJ, 0);
    assert_int_equal(enroll(&s, tok, gdir, 0, &r, &e), SL_ERR_REFUSED);
    assert_int_equal(r.status, SLUICE__CONTROL__ENROLL_REPLY__STATUS__RATE_LIMITED);
    assert_non_null(strstr(e.msg, "retry in"));
    srv_stop(&s);
    /* another server (fresh limits, same replay store): the token is still good */
    srv_start(&s, 3);
    assert_int_equal(enroll(&s, tok, gdir, 0, &r, &e), SL_OK);
    free(tok);
    srv_stop(&s);
}

/* A one-shot HTTP server for the metadata fetch. */
typedef struct httpd {
    int fd;
    int port;
    const char *answer;
    pthread_t th;
} httpd;

static void *httpd_once(void *arg)
{
    httpd *h = arg;
    int c = accept(h->fd, NULL, NULL);
    if (c >= 0) {
        char req[4096];
        ssize_t n = recv(c, req, sizeof req - 1, 0);
        (void)n;
        ssize_t w = send(c, h->answer, strlen(h->answer), MSG_NOSIGNAL);
        (void)w;
        close(c);
    }
    return NULL;
}

static void httpd_start(httpd *h, const char *answer)
{
    h->answer = answer;
    h->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(h->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(h->fd, 1), 0);
    getsockname(h->fd, (struct sockaddr *)&a, &al);
    h->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&h->th, NULL, httpd_once, h), 0);
}

static void httpd_stop(httpd *h)
{
    pthread_join(h->th, NULL);
    close(h->fd);
}

static void test_enroll_http_source(void **state)
{
    (void)state;
    set_instance(1, 1, PROJ, 1);
    srv s;
    srv_start(&s, 100);
    char *tok = token(G.tkey, INST, PROJ, 0);
    char vd[400];
    snprintf(vd, sizeof vd, "%s/vendor_data2.json", G.dir);
    vendordata(vd, tok, ag_enroll_endpoint(s.en));
    char *body = NULL;
    size_t blen = 0;
    sl_error e;
    assert_int_equal(se_fetch(vd, 0, &body, &blen, &e), SL_OK);
    size_t cap = blen + 256;
    char *answer = malloc(cap);
    snprintf(answer, cap,
             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n%s",
             blen, body);
    httpd h;
    httpd_start(&h, answer);
    char url[128], gdir[400];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/openstack/latest/vendor_data2.json", h.port);
    guest_dir(gdir, sizeof gdir, "guest-http");
    se_opts o = {.source = url, .dir = gdir, .timeout_ms = 5000};
    se_result r;
    assert_int_equal(se_enroll(&o, &r, &e), SL_OK);
    assert_int_equal(r.enrolled, 1);
    httpd_stop(&h);
    /* strictness: a 404, a lying Content-Length, and an entry-less vendordata */
    httpd_start(&h, "HTTP/1.0 404 Not Found\r\n\r\n");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/vendor_data2.json", h.port);
    char *b1 = NULL;
    assert_int_equal(se_fetch(url, 2000, &b1, &blen, &e), SL_ERR_IO);
    assert_non_null(strstr(e.msg, "404"));
    httpd_stop(&h);
    httpd_start(&h, "HTTP/1.0 200 OK\r\nContent-Length: 99\r\n\r\n{}");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/vendor_data2.json", h.port);
    char *b2 = NULL;
    assert_int_equal(se_fetch(url, 2000, &b2, &blen, &e), SL_ERR_PROTOCOL);
    httpd_stop(&h);
    httpd_start(&h, "HTTP/1.0 200 OK\r\n\r\n{\"other\": {}}");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/vendor_data2.json", h.port);
    o.renew = 1;
    assert_int_equal(se_enroll(&o, &r, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "no \"sluice\" entry"));
    httpd_stop(&h);
    free(answer);
    free(body);
    free(tok);
    srv_stop(&s);
}

/* Writes text to path through a temporary file and a rename, as a copy of new keys would. */
static void replace_file(const char *path, const char *text)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, path), 0);
}

/* A key rotation reaching the agent: token_public_key holds one key, a token of another key is
 * refused naming that key's id; the file is replaced with both keys (what `sluice-registry
 * token-keys public` prints), and the next enrollment, without a restart, accepts it. */
static void test_enroll_keys_reloaded(void **state)
{
    (void)state;
    set_instance(1, 1, PROJ, 1);
    char keys[400];
    snprintf(keys, sizeof keys, "%s/token-keys.pub", G.dir);
    replace_file(keys, G.tkey_pub);
    srv s;
    srv_start_keys(&s, 100, keys);
    char gdir[400];
    guest_dir(gdir, sizeof gdir, "guest-rotated");
    char *tok = token(G.other_key, INST, PROJ, 0);
    se_result r;
    sl_error e;
    assert_int_equal(enroll(&s, tok, gdir, 0, &r, &e), SL_ERR_REFUSED);
    assert_int_equal(r.status, SLUICE__CONTROL__ENROLL_REPLY__STATUS__BAD_TOKEN);
    assert_non_null(strstr(e.msg, sl_token_key_id(G.other_key)));
    char *other_pub;
    assert_int_equal(sl_token_key_public_pem(G.other_key, &other_pub, &e), SL_OK);
    size_t n = strlen(G.tkey_pub) + strlen(other_pub) + 1;
    char *both = malloc(n);
    snprintf(both, n, "%s%s", G.tkey_pub, other_pub);
    replace_file(keys, both);
    assert_int_equal(enroll(&s, tok, gdir, 0, &r, &e), SL_OK);
    assert_int_equal(r.enrolled, 1);
    /* the first key still verifies (a secondary after a rotation) */
    char *tok2 = token(G.tkey, INST, PROJ, 0);
    assert_int_equal(enroll(&s, tok2, gdir, 1, &r, &e), SL_OK);
    srv_stop(&s);
    free(tok);
    free(tok2);
    free(other_pub);
    free(both);
}

/* Nothing a guest sends forges a log line (issue 19.5): a client version holding a newline
 * and "<0>agent: ..." stays escaped inside the agent's line. (A token's claims never reach the
 * log raw: the token parser refuses claims that are not plain ids.) */
static void test_enroll_hostile_log(void **state)
{
    (void)state;
    set_instance(1, 1, PROJ, 1);
    srv s;
    srv_start(&s, 100);
    char path[400], detail[512];
    snprintf(path, sizeof path, "%s/stderr.log", G.dir);
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    Sluice__Control__EnrollRequest q = SLUICE__CONTROL__ENROLL_REQUEST__INIT;
    char *tok = token(G.tkey, INST, PROJ, 0);
    uint8_t *csr = NULL, buf[8192];
    size_t csr_len = 0;
    tu_make_csr("EC", "x", &csr, &csr_len);
    q.token = tok;
    q.csr_der.data = csr;
    q.csr_der.len = csr_len;
    q.client_version = "v1\n<0>agent: FORGED\r";
    size_t n = sluice__control__enroll_request__pack(&q, buf);
    int ok = raw_request(&s, buf, n, detail, sizeof detail);
    srv_stop(&s);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    free(tok);
    free(csr);
    assert_int_equal(ok, SLUICE__CONTROL__ENROLL_REPLY__STATUS__OK);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char log[65536];
    log[fread(log, 1, sizeof log - 1, f)] = '\0';
    fclose(f);
    if (!strstr(log, "(client v1\\n<0>agent: FORGED\\r)"))
        fail_msg("the hostile strings are not in the log, escaped:\n%s", log);
    for (const char *l = log; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
        if (!strncmp(l, "<0>", 3) || !strncmp(l, "agent:", 6))
            fail_msg("a line made by the guest:\n%s", log);
}

/* 1,100 connections from 127.0.0.2 that send half a TLS ClientHello and stop, and 40 that
 * finish the handshake and send nothing: a guest from 127.0.0.1 still enrolls at once (the
 * channel's limits on unauthenticated connections, docs/channel.md; the agent sets nothing). */
static void test_enroll_flood(void **state)
{
    (void)state;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    set_instance(1, 1, PROJ, 1);
    srv s;
    srv_start(&s, 100);
    const char *ep = ag_enroll_endpoint(s.en);
    char src_ep[300];
    snprintf(src_ep, sizeof src_ep, "tcp://127.0.0.2:0;%s", ep + strlen("tcp://"));
    void *z = zmq_ctx_new();
    zmq_ctx_set(z, ZMQ_MAX_SOCKETS, 1200);
    static void *flood[1100];
    for (int i = 0; i < 1100; i++) {
        flood[i] = zmq_socket(z, ZMQ_DEALER);
        assert_non_null(flood[i]);
        int zero = 0, never = -1;
        zmq_setsockopt(flood[i], ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(flood[i], ZMQ_RECONNECT_IVL, &never, sizeof never);
        assert_int_equal(zmq_connect(flood[i], src_ep), 0);
        zmq_send(flood[i], "\x16\x03\x01\x02\x00", 5, 0); /* queued until connected */
    }
    sl_tls_config cfg = {
        .mode = SL_TLS_SERVER_ONLY, .ca_pem = ag_ca_cert_pem(G.ca), .server_name = "127.0.0.1"};
    sl_channel_opts o;
    sl_channel_opts_default(&o);
    o.connect_attempts = 1;
    static sl_client *idle[40];
    int idle_ok = 0;
    for (int i = 0; i < 40; i++) {
        sl_error e;
        idle_ok += sl_client_connect(src_ep, &cfg, &o, &idle[i], &e) == SL_OK;
    }
    assert_true(idle_ok > 0);
    char gdir[400];
    guest_dir(gdir, sizeof gdir, "guest-flood");
    char *tok = token(G.tkey, INST, PROJ, 0);
    se_result r;
    sl_error e;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sl_code rc = enroll(&s, tok, gdir, 0, &r, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc != SL_OK)
        print_error("enroll during the flood: %s: %s\n", sl_code_name(rc), e.msg);
    assert_int_equal(rc, SL_OK);
    assert_int_equal(r.enrolled, 1);
    long ms = (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
    print_message("enrolled during the flood in %ld ms\n", ms);
    assert_true(ms < 5000);
    free(tok);
    for (int i = 0; i < 40; i++)
        sl_client_close(idle[i]);
    for (int i = 0; i < 1100; i++)
        zmq_close(flood[i]);
    zmq_ctx_term(z);
    srv_stop(&s);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enroll_success),     cmocka_unit_test(test_enroll_refusals),
        cmocka_unit_test(test_enroll_locate),      cmocka_unit_test(test_enroll_rate_limited),
        cmocka_unit_test(test_enroll_http_source), cmocka_unit_test(test_enroll_flood),
        cmocka_unit_test(test_enroll_hostile_log), cmocka_unit_test(test_enroll_keys_reloaded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
