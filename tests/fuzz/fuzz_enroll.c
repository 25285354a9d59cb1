/* fuzz_enroll: libFuzzer target for the enrollment request (agent/enroll.c, ag_enroll_answer:
 * what the enrollment server decides for each message a guest sends before it has any
 * credential): a real enrollment server (host CA, token key, replay store in a scratch folder,
 * /dev/shm when there is one) whose instance table holds one running GPU domain. The first
 * input byte picks what the rest is:
 *   0: the EnrollRequest as it comes, from 127.0.0.1;
 *   1: the CSR of a request whose token is valid and fresh (signed here), so the certificate
 *      request checks and the signing are reached;
 *   2: the source address of a locate request carrying a certificate this agent granted;
 *   3: the EnrollRequest as it comes, from an IPv4-mapped IPv6 address.
 * Every answer must decode as an EnrollReply; an OK one must carry a tcp:// endpoint, and a
 * certificate that is the one the agent reported issuing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "ca.h"
#include "enroll.h"
#include "sluice/token.h"
#include "sluice_control.pb-c.h"

#define INST "6f1e0c2a-1b7d-4c55-9a0e-3f2b8d7c1e42"
#define PROJ "3c9d2f7e8a1b4c6d9e0f1a2b3c4d5e6f"

static char dir[64];
static ag_ca *ca;
static ag_enroll *en;
static sl_token_key *tkey;
static uint8_t *granted_der;
static size_t granted_len;
static char granted_fp[65], issued_fp[65];
static unsigned long serial;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int lookup(void *user, const char *uuid, ag_instance *out)
{
    (void)user;
    if (strcmp(uuid, INST) != 0)
        return 0;
    memset(out, 0, sizeof *out);
    snprintf(out->uuid, sizeof out->uuid, INST);
    snprintf(out->project_id, sizeof out->project_id, PROJ);
    snprintf(out->domain, sizeof out->domain, "instance-0000002a");
    snprintf(out->flavor, sizeof out->flavor, "g1.large");
    out->running = out->gpu = 1;
    snprintf(out->ips[0], sizeof out->ips[0], "127.0.0.1");
    snprintf(out->ips[1], sizeof out->ips[1], "2001:db8::5");
    out->n_ips = 2;
    return 1;
}

static int endpoint(void *user, const char *project, char *out, size_t n)
{
    (void)user;
    if (strcmp(project, PROJ) != 0)
        return 0;
    snprintf(out, n, "tcp://127.0.0.1:47001");
    return 1;
}

static void issued(void *user, const ag_instance *inst, const char *fp, int64_t not_after)
{
    (void)user;
    (void)not_after;
    if (strcmp(inst->uuid, INST) != 0)
        abort();
    snprintf(issued_fp, sizeof issued_fp, "%s", fp);
}

static int granted(void *user, const char *fp, char *instance, size_t n)
{
    (void)user;
    if (strcmp(fp, granted_fp) != 0)
        return 0;
    snprintf(instance, n, INST);
    return 1;
}

static void cleanup(void)
{
    ag_enroll_close(en);
    ag_ca_close(ca);
    sl_token_key_free(tkey);
    free(granted_der);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_enroll: cannot remove %s\n", dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("SLUICE_LOG_LEVEL", "err", 1);
    snprintf(dir, sizeof dir, "%s/fuzz-enr-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(dir))
        abort();
    char cadir[128], db[128];
    snprintf(cadir, sizeof cadir, "%s/ca", dir);
    snprintf(db, sizeof db, "%s/replay.db", dir);
    sl_error e;
    char *pub = NULL;
    if (ag_ca_open(cadir, NULL, &ca, &e) != SL_OK || sl_token_key_generate(&tkey, &e) != SL_OK ||
        sl_token_key_public_pem(tkey, &pub, &e) != SL_OK)
        abort();
    static const char *const names[] = {"127.0.0.1"};
    ag_enroll_opts o = {.endpoint = "tcp://127.0.0.1:*",
                        .server_names = names,
                        .n_server_names = 1,
                        .token_key_pem = pub,
                        .token_issuer = "sluice-nova-hook",
                        .replay_db = db,
                        .ratelimit = {.burst = 100000000, .per_minute = 100000000}};
    ag_enroll_env env = {lookup, endpoint, issued, NULL, granted};
    if (ag_enroll_open(&o, ca, &env, &en, &e) != SL_OK)
        abort();
    free(pub);
    /* a granted client certificate for locate requests */
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    X509_REQ *req = X509_REQ_new();
    if (!k || !req || X509_REQ_set_pubkey(req, k) != 1 || X509_REQ_sign(req, k, EVP_sha256()) <= 0)
        abort();
    unsigned char *csr = NULL;
    int csrlen = i2d_X509_REQ(req, &csr);
    int64_t na;
    if (csrlen <= 0 || ag_ca_sign_client(ca, csr, (size_t)csrlen, INST, PROJ, &granted_der,
                                         &granted_len, &na, granted_fp, &e) != SL_OK)
        abort();
    OPENSSL_free(csr);
    X509_REQ_free(req);
    EVP_PKEY_free(k);
    atexit(cleanup);
    return 0;
}

static char *fresh_token(void)
{
    sl_token_claims c;
    memset(&c, 0, sizeof c);
    snprintf(c.iss, sizeof c.iss, "sluice-nova-hook");
    snprintf(c.aud, sizeof c.aud, SL_TOKEN_AUDIENCE);
    snprintf(c.sub, sizeof c.sub, INST);
    snprintf(c.project_id, sizeof c.project_id, PROJ);
    sl_error e;
    char *t = NULL;
    if (sl_token_claims_stamp(&c, (int64_t)time(NULL), 600, &e) != SL_OK)
        abort();
    snprintf(c.jti, sizeof c.jti, "fuzz-%lu-%d", ++serial, (int)getpid());
    if (sl_token_sign(tkey, &c, &t, &e) != SL_OK)
        abort();
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > AG_ENROLL_MAX_REQUEST)
        return 0;
    const uint8_t *rest = data + 1;
    size_t n = size - 1;
    uint8_t *msg = NULL;
    size_t len = 0;
    const char *addr = "127.0.0.1";
    char addrbuf[64];
    Sluice__Control__EnrollRequest q = SLUICE__CONTROL__ENROLL_REQUEST__INIT;
    char *token = NULL;
    switch (data[0] % 4) {
    case 1:
        q.token = token = fresh_token();
        q.csr_der = (ProtobufCBinaryData){n, (uint8_t *)rest};
        break;
    case 2:
        q.locate_cert_der = (ProtobufCBinaryData){granted_len, granted_der};
        snprintf(addrbuf, sizeof addrbuf, "%.*s", (int)(n < 63 ? n : 63), (const char *)rest);
        addr = addrbuf;
        break;
    case 3:
        addr = "::ffff:127.0.0.1";
        break;
    default:
        break;
    }
    if (data[0] % 4 == 1 || data[0] % 4 == 2) {
        len = sluice__control__enroll_request__get_packed_size(&q);
        msg = malloc(len ? len : 1);
        if (!msg)
            abort();
        sluice__control__enroll_request__pack(&q, msg);
    }
    issued_fp[0] = '\0';
    uint8_t *out = NULL;
    size_t out_len = 0;
    int st = ag_enroll_answer(en, addr, msg ? msg : rest, msg ? len : n, 0, &out, &out_len);
    Sluice__Control__EnrollReply *r =
        out ? sluice__control__enroll_reply__unpack(NULL, out_len, out) : NULL;
    if (!r || (int)r->status != st)
        abort(); /* every answer is an EnrollReply with the status decided */
    if (st == SLUICE__CONTROL__ENROLL_REPLY__STATUS__OK) {
        if (!r->backend_endpoint || strncmp(r->backend_endpoint, "tcp://", 6) != 0)
            abort();
        if (r->certificate_der.len) {
            uint8_t md[32];
            unsigned mdn = 0;
            char fp[65];
            EVP_Digest(r->certificate_der.data, r->certificate_der.len, md, &mdn, EVP_sha256(),
                       NULL);
            for (int i = 0; i < 32; i++)
                snprintf(fp + 2 * i, 3, "%02x", md[i]);
            if (strcmp(fp, issued_fp) != 0)
                abort(); /* the certificate sent is not the one granted */
        }
    }
    sluice__control__enroll_reply__free_unpacked(r, NULL);
    free(out);
    free(msg);
    free(token);
    return 0;
}
