/* Host CA, replay store and rate limiter: PKI generated at test time, temporary directories. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "ca.h"
#include "ratelimit.h"
#include "replay.h"
#include "testutil.h"

static void test_ca_create_perms(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/ca", dir);
    ag_ca *ca = NULL;
    sl_error e;
    assert_int_equal(ag_ca_open(sub, NULL, &ca, &e), SL_OK);
    assert_int_equal(tu_mode(sub), 0700);
    char p[400];
    snprintf(p, sizeof p, "%s/ca.key", sub);
    assert_int_equal(tu_mode(p), 0600);
    const char *pem = ag_ca_cert_pem(ca);
    assert_non_null(strstr(pem, "BEGIN CERTIFICATE"));
    X509 *x = tu_pem_cert(pem);
    assert_non_null(x);
    assert_int_equal(X509_check_ca(x), 1);
    assert_int_equal(X509_self_signed(x, 1), 1);
    EVP_PKEY *k = X509_get0_pubkey(x);
    assert_true(EVP_PKEY_is_a(k, "EC"));
    X509_free(x);
    char fp1[65];
    tu_fingerprint_pem(pem, fp1);
    ag_ca_close(ca);
    /* reopening keeps the same CA */
    assert_int_equal(ag_ca_open(sub, NULL, &ca, &e), SL_OK);
    char fp2[65];
    tu_fingerprint_pem(ag_ca_cert_pem(ca), fp2);
    assert_string_equal(fp1, fp2);
    ag_ca_close(ca);
    /* a key readable by others is refused */
    assert_int_equal(chmod(p, 0644), 0);
    assert_int_equal(ag_ca_open(sub, NULL, &ca, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "chmod 600"));
    assert_int_equal(chmod(p, 0600), 0);
    /* a key without its certificate is refused, not silently replaced */
    snprintf(p, sizeof p, "%s/ca.pem", sub);
    unlink(p);
    assert_int_equal(ag_ca_open(sub, NULL, &ca, &e), SL_ERR_CONFIG);
    tu_rmtree(dir);
}

static void test_ca_lifetime_bounds(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    ag_ca *ca = NULL;
    sl_error e;
    ag_ca_opts o = {.client_lifetime_s = 31 * 86400};
    assert_int_equal(ag_ca_open(dir, &o, &ca, &e), SL_ERR_INVALID);
    o.client_lifetime_s = 60;
    assert_int_equal(ag_ca_open(dir, &o, &ca, &e), SL_ERR_INVALID);
    o.client_lifetime_s = 2 * 86400;
    assert_int_equal(ag_ca_open(dir, &o, &ca, &e), SL_OK);
    uint8_t *csr = NULL;
    size_t csr_len = 0;
    tu_make_csr("EC", "attacker-chosen", &csr, &csr_len);
    uint8_t *der = NULL;
    size_t len = 0;
    int64_t na = 0;
    char fp[65];
    int64_t now = (int64_t)time(NULL);
    assert_int_equal(ag_ca_sign_client(ca, csr, csr_len, "inst", "proj", &der, &len, &na, fp, &e),
                     SL_OK);
    assert_true(na >= now + 2 * 86400 - 5 && na <= now + 2 * 86400 + 5);
    const unsigned char *p = der;
    X509 *x = d2i_X509(NULL, &p, (long)len);
    assert_non_null(x);
    struct tm tm;
    ASN1_TIME_to_tm(X509_get0_notBefore(x), &tm);
    assert_true(timegm(&tm) <= now - AG_CA_BACKDATE_S + 5);
    X509_free(x);
    free(der);
    /* server lifetimes are bounded too */
    const char *sans[] = {"127.0.0.1"};
    char *cp = NULL, *kp = NULL;
    assert_int_equal(ag_ca_issue_server(ca, "b", sans, 1, 400 * 86400, &cp, &kp, &e),
                     SL_ERR_INVALID);
    free(csr);
    ag_ca_close(ca);
    tu_rmtree(dir);
}

static void test_ca_client_subject_forced(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    ag_ca *ca = NULL;
    sl_error e;
    assert_int_equal(ag_ca_open(dir, NULL, &ca, &e), SL_OK);
    const char *kinds[] = {"EC", "ED25519", "P-384"};
    for (int i = 0; i < 3; i++) {
        uint8_t *csr = NULL, *der = NULL;
        size_t csr_len = 0, len = 0;
        int64_t na = 0;
        char fp[65];
        /* the request asks for another instance: ignored */
        tu_make_csr(kinds[i], "11111111-2222-3333-4444-555555555555", &csr, &csr_len);
        assert_int_equal(ag_ca_sign_client(ca, csr, csr_len, "6f1e0c2a-1b7d-4c55-9a0e-3f2b8d7c1e42",
                                           "3c9d2f7e8a1b4c6d9e0f1a2b3c4d5e6f", &der, &len, &na, fp,
                                           &e),
                         SL_OK);
        assert_int_equal(strlen(fp), 64);
        const unsigned char *p = der;
        X509 *x = d2i_X509(NULL, &p, (long)len);
        assert_non_null(x);
        char cn[64] = "", ou[64] = "";
        X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof cn);
        X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_organizationalUnitName, ou,
                                  sizeof ou);
        assert_string_equal(cn, "6f1e0c2a-1b7d-4c55-9a0e-3f2b8d7c1e42");
        assert_string_equal(ou, "3c9d2f7e8a1b4c6d9e0f1a2b3c4d5e6f");
        assert_int_equal(X509_check_ca(x), 0);
        assert_true(X509_get_extended_key_usage(x) & XKU_SSL_CLIENT);
        assert_false(X509_get_extended_key_usage(x) & XKU_SSL_SERVER);
        const ASN1_INTEGER *ser = X509_get0_serialNumber(x);
        assert_true(ASN1_STRING_length(ser) == 16);
        assert_int_equal(tu_verify(x, ag_ca_cert_pem(ca)), 1);
        X509_free(x);
        free(der);
        free(csr);
    }
    /* a tampered request, garbage, a bad key type, a bad name */
    uint8_t *csr = NULL, *der = NULL;
    size_t csr_len = 0, len = 0;
    int64_t na = 0;
    char fp[65];
    tu_make_csr("EC", "x", &csr, &csr_len);
    csr[csr_len - 5] ^= 1; /* in the signature */
    assert_int_equal(ag_ca_sign_client(ca, csr, csr_len, "i", "p", &der, &len, &na, fp, &e),
                     SL_ERR_INVALID);
    assert_int_equal(
        ag_ca_sign_client(ca, (const uint8_t *)"junk", 4, "i", "p", &der, &len, &na, fp, &e),
        SL_ERR_INVALID);
    free(csr);
    tu_make_csr("RSA", "x", &csr, &csr_len);
    assert_int_equal(ag_ca_sign_client(ca, csr, csr_len, "i", "p", &der, &len, &na, fp, &e),
                     SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "P-256"));
    free(csr);
    tu_make_csr("EC", "x", &csr, &csr_len);
    assert_int_equal(ag_ca_sign_client(ca, csr, csr_len, "i/../x", "p", &der, &len, &na, fp, &e),
                     SL_ERR_INVALID);
    free(csr);
    ag_ca_close(ca);
    tu_rmtree(dir);
}

static void test_ca_server_sans(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    ag_ca *ca = NULL;
    sl_error e;
    assert_int_equal(ag_ca_open(dir, NULL, &ca, &e), SL_OK);
    const char *sans[] = {"192.0.2.10", "2001:db8::1", "gpu-host-1.example.org"};
    char *cp = NULL, *kp = NULL;
    assert_int_equal(ag_ca_issue_server(ca, "backend-p1", sans, 3, 0, &cp, &kp, &e), SL_OK);
    X509 *x = tu_pem_cert(cp);
    assert_non_null(x);
    assert_int_equal(X509_check_ip_asc(x, "192.0.2.10", 0), 1);
    assert_int_equal(X509_check_ip_asc(x, "2001:db8::1", 0), 1);
    assert_int_equal(X509_check_host(x, "gpu-host-1.example.org", 0, 0, NULL), 1);
    assert_int_equal(X509_check_ip_asc(x, "192.0.2.11", 0), 0);
    assert_true(X509_get_extended_key_usage(x) & XKU_SSL_SERVER);
    int64_t now = (int64_t)time(NULL);
    struct tm tm;
    ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm);
    assert_true(llabs((long long)(timegm(&tm) - now - AG_CA_SERVER_LIFETIME_DEFAULT)) < 10);
    BIO *b = BIO_new_mem_buf(kp, -1);
    EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    BIO_free(b);
    assert_int_equal(X509_check_private_key(x, k), 1);
    EVP_PKEY_free(k);
    X509_free(x);
    free(cp);
    free(kp);
    const char *bad[] = {"bad name,DNS:evil"};
    assert_int_equal(ag_ca_issue_server(ca, "b", bad, 1, 0, &cp, &kp, &e), SL_ERR_INVALID);
    ag_ca_close(ca);
    tu_rmtree(dir);
}

static void test_ca_intermediate_import(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    char cadir[300], certf[300], keyf[300], chainf[300], wrongf[300];
    snprintf(cadir, sizeof cadir, "%s/ca", dir);
    snprintf(certf, sizeof certf, "%s/int.pem", dir);
    snprintf(keyf, sizeof keyf, "%s/int.key", dir);
    snprintf(chainf, sizeof chainf, "%s/root.pem", dir);
    snprintf(wrongf, sizeof wrongf, "%s/other-root.pem", dir);
    tu_make_deployment_pki(certf, keyf, chainf, wrongf);
    sl_error e;
    /* a chain that does not lead to the intermediate's issuer is refused */
    assert_int_equal(ag_ca_import(cadir, certf, keyf, wrongf, 0, &e), SL_ERR_CONFIG);
    /* the chain file as the certificate: not matching the key */
    assert_int_equal(ag_ca_import(cadir, chainf, keyf, chainf, 0, &e), SL_ERR_CONFIG);
    assert_int_equal(ag_ca_import(cadir, certf, keyf, chainf, 0, &e), SL_OK);
    /* refuses to replace without force */
    assert_int_equal(ag_ca_import(cadir, certf, keyf, chainf, 0, &e), SL_ERR_CONFIG);
    assert_int_equal(ag_ca_import(cadir, certf, keyf, chainf, 1, &e), SL_OK);
    char p[400];
    snprintf(p, sizeof p, "%s/ca.key", cadir);
    assert_int_equal(tu_mode(p), 0600);
    ag_ca *ca = NULL;
    assert_int_equal(ag_ca_open(cadir, NULL, &ca, &e), SL_OK);
    /* the bundle holds the intermediate and the root; DER the same two */
    const char *pem = ag_ca_cert_pem(ca);
    const char *second = strstr(strstr(pem, "BEGIN CERTIFICATE") + 1, "BEGIN CERTIFICATE");
    assert_non_null(second);
    size_t dl = 0;
    const uint8_t *der = ag_ca_chain_der(ca, &dl);
    const unsigned char *q = der;
    X509 *a = d2i_X509(NULL, &q, (long)dl), *b = d2i_X509(NULL, &q, (long)(der + dl - q));
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_equal(q, der + dl);
    assert_int_equal(X509_self_signed(a, 0), 0);
    assert_int_equal(X509_self_signed(b, 0), 1);
    X509_free(a);
    X509_free(b);
    /* a client certificate verifies up to the deployment root */
    uint8_t *csr = NULL, *cd = NULL;
    size_t csr_len = 0, cl = 0;
    int64_t na = 0;
    char fp[65];
    tu_make_csr("EC", "x", &csr, &csr_len);
    assert_int_equal(ag_ca_sign_client(ca, csr, csr_len, "i", "p", &cd, &cl, &na, fp, &e), SL_OK);
    q = cd;
    X509 *x = d2i_X509(NULL, &q, (long)cl);
    assert_int_equal(tu_verify_strict(x, pem), 1);
    X509_free(x);
    free(cd);
    free(csr);
    char *text = NULL;
    assert_int_equal(ag_ca_describe(ca, &text, &e), SL_OK);
    assert_non_null(strstr(text, "intermediate"));
    free(text);
    ag_ca_close(ca);
    tu_rmtree(dir);
}

static void test_replay_durable(void **state)
{
    (void)state;
    char dir[256], db[300];
    tu_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/replay.db", dir);
    ag_replay *r = NULL;
    sl_error e;
    int64_t now = (int64_t)time(NULL);
    assert_int_equal(ag_replay_open(db, 60, &r, &e), SL_OK);
    assert_int_equal(tu_mode(db), 0600);
    int fresh = -1;
    assert_int_equal(ag_replay_use(r, "jti-1", now + 600, "inst", &fresh, &e), SL_OK);
    assert_int_equal(fresh, 1);
    assert_int_equal(ag_replay_use(r, "jti-1", now + 600, "inst", &fresh, &e), SL_OK);
    assert_int_equal(fresh, 0);
    assert_int_equal(ag_replay_use(r, "jti-old", now - 1000, "inst", &fresh, &e), SL_OK);
    assert_int_equal(fresh, 1);
    ag_replay_close(r);
    /* reopen: still remembered */
    assert_int_equal(ag_replay_open(db, 60, &r, &e), SL_OK);
    assert_int_equal(ag_replay_use(r, "jti-1", now + 600, "inst", &fresh, &e), SL_OK);
    assert_int_equal(fresh, 0);
    /* the first use after opening pruned the id whose token expired long ago */
    assert_int_equal(ag_replay_count(r), 1);
    /* pruning forgets only what expired more than skew ago */
    int removed = 0;
    assert_int_equal(ag_replay_prune(r, now, &removed, &e), SL_OK);
    assert_int_equal(removed, 0);
    assert_int_equal(ag_replay_prune(r, now + 600 + 30, &removed, &e), SL_OK);
    assert_int_equal(removed, 0); /* exp + skew not reached */
    assert_int_equal(ag_replay_prune(r, now + 600 + 61, &removed, &e), SL_OK);
    assert_int_equal(removed, 1);
    ag_replay_close(r);
    tu_rmtree(dir);
}

static void test_ratelimit(void **state)
{
    (void)state;
    ag_ratelimit_opts o = {.burst = 3, .per_minute = 6, .max_entries = 2};
    ag_ratelimit *rl = ag_ratelimit_new(&o);
    int64_t t = 1000000;
    assert_true(ag_ratelimit_allow(rl, "10.0.0.1", t));
    assert_int_equal(ag_ratelimit_fail(rl, "10.0.0.1", t), 2);
    assert_int_equal(ag_ratelimit_fail(rl, "10.0.0.1", t), 1);
    assert_int_equal(ag_ratelimit_fail(rl, "10.0.0.1", t), 0);
    assert_false(ag_ratelimit_allow(rl, "10.0.0.1", t));
    assert_true(ag_ratelimit_allow(rl, "10.0.0.2", t)); /* per address */
    assert_int_equal(ag_ratelimit_retry_after(rl, "10.0.0.1", t), 10);
    /* frequent polling must not stop the refill (6/min = one per 10 s) */
    for (int i = 1; i <= 99; i++)
        assert_false(ag_ratelimit_allow(rl, "10.0.0.1", t + i * 100));
    assert_true(ag_ratelimit_allow(rl, "10.0.0.1", t + 10000));
    /* a bounded table: a third address reuses the fullest entry, never the limited one */
    ag_ratelimit_fail(rl, "10.0.0.1", t + 10000);
    ag_ratelimit_fail(rl, "10.0.0.2", t + 10000);
    ag_ratelimit_fail(rl, "10.0.0.3", t + 10000);
    assert_false(ag_ratelimit_allow(rl, "10.0.0.1", t + 10000));
    ag_ratelimit_free(rl);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ca_create_perms),
        cmocka_unit_test(test_ca_lifetime_bounds),
        cmocka_unit_test(test_ca_client_subject_forced),
        cmocka_unit_test(test_ca_server_sans),
        cmocka_unit_test(test_ca_intermediate_import),
        cmocka_unit_test(test_replay_durable),
        cmocka_unit_test(test_ratelimit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
