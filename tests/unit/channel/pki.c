#include "pki.h"

#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

static char *to_pem(X509 *x, EVP_PKEY *k)
{
    BIO *b = BIO_new(BIO_s_mem());
    int ok = x ? PEM_write_bio_X509(b, x) : PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, 0, 0);
    char *out = NULL;
    if (ok) {
        char *p;
        long n = BIO_get_mem_data(b, &p);
        out = malloc((size_t)n + 1);
        memcpy(out, p, (size_t)n);
        out[n] = '\0';
    }
    BIO_free(b);
    return out;
}

static int add_ext(X509 *issuer, X509 *x, int nid, const char *val)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, val);
    if (!e)
        return -1;
    int ok = X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
    return ok == 1 ? 0 : -1;
}

static X509 *make(EVP_PKEY *key, const char *cn, const char *ou, X509 *issuer, EVP_PKEY *issuer_key,
                  long from_s, long to_s)
{
    X509 *x = X509_new();
    unsigned char serial[12];
    RAND_bytes(serial, sizeof serial);
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
    BN_free(bn);
    X509_set_version(x, 2);
    X509_gmtime_adj(X509_getm_notBefore(x), from_s);
    X509_gmtime_adj(X509_getm_notAfter(x), to_s);
    X509_set_pubkey(x, key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC, (const unsigned char *)"sluice-test", -1, -1,
                               0);
    if (ou)
        X509_NAME_add_entry_by_txt(n, "OU", MBSTRING_ASC, (const unsigned char *)ou, -1, -1, 0);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : n);
    (void)issuer_key;
    return x;
}

int pki_ca_new(pki_ca *ca, const char *cn)
{
    memset(ca, 0, sizeof *ca);
    ca->key = EVP_EC_gen("P-256");
    if (!ca->key)
        return -1;
    ca->cert = make(ca->key, cn, NULL, NULL, NULL, -3600, 86400);
    if (add_ext(ca->cert, ca->cert, NID_basic_constraints, "critical,CA:TRUE") ||
        add_ext(ca->cert, ca->cert, NID_key_usage, "critical,keyCertSign,cRLSign") ||
        add_ext(ca->cert, ca->cert, NID_subject_key_identifier, "hash") ||
        !X509_sign(ca->cert, ca->key, EVP_sha256()))
        return -1;
    ca->pem = to_pem(ca->cert, NULL);
    return ca->pem ? 0 : -1;
}

int pki_issue(const pki_ca *ca, const char *cn, const char *ou, int server, long from_s, long to_s,
              pki_cred *out)
{
    memset(out, 0, sizeof *out);
    EVP_PKEY *k = EVP_EC_gen("P-256");
    if (!k)
        return -1;
    X509 *x = make(k, cn, ou, ca->cert, ca->key, from_s, to_s);
    int bad =
        add_ext(ca->cert, x, NID_basic_constraints, "critical,CA:FALSE") ||
        add_ext(ca->cert, x, NID_key_usage, "critical,digitalSignature") ||
        add_ext(ca->cert, x, NID_ext_key_usage, server ? "serverAuth" : "clientAuth") ||
        add_ext(ca->cert, x, NID_authority_key_identifier, "keyid:always") ||
        (server && add_ext(ca->cert, x, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost")) ||
        !X509_sign(x, ca->key, EVP_sha256());
    if (!bad) {
        out->cert_pem = to_pem(x, NULL);
        out->key_pem = to_pem(NULL, k);
    }
    X509_free(x);
    EVP_PKEY_free(k);
    return bad || !out->cert_pem || !out->key_pem ? -1 : 0;
}

void pki_ca_free(pki_ca *ca)
{
    EVP_PKEY_free(ca->key);
    X509_free(ca->cert);
    free(ca->pem);
    memset(ca, 0, sizeof *ca);
}

void pki_cred_free(pki_cred *c)
{
    free(c->cert_pem);
    free(c->key_pem);
    c->cert_pem = c->key_pem = NULL;
}
