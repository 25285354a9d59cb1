/* Test helpers (see testutil.h). Failures abort: they are test set-up errors. */
#include "testutil.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "%s:%d: test set-up failed: %s\n", __FILE__, __LINE__, #x);            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

void tu_tmpdir(char *out, size_t n)
{
    const char *base = getenv("TMPDIR");
    snprintf(out, n, "%s/sluice-enroll-test-XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(out) != NULL);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

void tu_rmtree(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int tu_mode(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int)(st.st_mode & 0777) : -1;
}

X509 *tu_pem_cert(const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    return x;
}

void tu_fingerprint_pem(const char *pem, char out[65])
{
    X509 *x = tu_pem_cert(pem);
    unsigned char md[32];
    unsigned int n = 0;
    CHECK(x && X509_digest(x, EVP_sha256(), md, &n) == 1);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    X509_free(x);
}

static EVP_PKEY *keygen(const char *kind)
{
    if (strcmp(kind, "ED25519") == 0)
        return EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    if (strcmp(kind, "RSA") == 0)
        return EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    if (strcmp(kind, "P-384") == 0)
        return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
    return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

void tu_make_csr(const char *kind, const char *cn, uint8_t **der, size_t *len)
{
    EVP_PKEY *k = keygen(kind);
    X509_REQ *r = X509_REQ_new();
    CHECK(k && r);
    X509_NAME_add_entry_by_NID(X509_REQ_get_subject_name(r), NID_commonName, MBSTRING_UTF8,
                               (const unsigned char *)cn, -1, -1, 0);
    X509_NAME_add_entry_by_NID(X509_REQ_get_subject_name(r), NID_organizationalUnitName,
                               MBSTRING_UTF8, (const unsigned char *)"evil-project", -1, -1, 0);
    CHECK(X509_REQ_set_pubkey(r, k) == 1);
    CHECK(X509_REQ_sign(r, k, strcmp(kind, "ED25519") == 0 ? NULL : EVP_sha256()) > 0);
    int n = i2d_X509_REQ(r, NULL);
    CHECK(n > 0);
    *der = malloc((size_t)n);
    unsigned char *p = *der;
    i2d_X509_REQ(r, &p);
    *len = (size_t)n;
    X509_REQ_free(r);
    EVP_PKEY_free(k);
}

static int verify(X509 *x, const char *pem, int partial)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509_STORE *st = X509_STORE_new();
    X509 *c;
    while ((c = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
        X509_STORE_add_cert(st, c);
        X509_free(c);
    }
    BIO_free(b);
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(ctx, st, x, NULL);
    if (partial)
        X509_STORE_CTX_set_flags(ctx, X509_V_FLAG_PARTIAL_CHAIN);
    int ok = X509_verify_cert(ctx) == 1;
    if (!ok)
        fprintf(stderr, "verify: %s\n",
                X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(st);
    return ok;
}

int tu_verify(X509 *x, const char *pem)
{
    return verify(x, pem, 1);
}

int tu_verify_strict(X509 *x, const char *pem)
{
    return verify(x, pem, 0);
}

static void ext(X509 *issuer, X509 *x, int nid, const char *v)
{
    X509V3_CTX c;
    X509V3_set_ctx(&c, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &c, nid, v);
    CHECK(e && X509_add_ext(x, e, -1) == 1);
    X509_EXTENSION_free(e);
}

static X509 *make_ca(const char *cn, EVP_PKEY *k, X509 *issuer, EVP_PKEY *ikey, long serial)
{
    X509 *x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400L * 365);
    X509_NAME_add_entry_by_NID(X509_get_subject_name(x), NID_commonName, MBSTRING_UTF8,
                               (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, X509_get_subject_name(issuer ? issuer : x));
    X509_set_pubkey(x, k);
    ext(issuer ? issuer : x, x, NID_basic_constraints,
        issuer ? "critical,CA:TRUE,pathlen:0" : "critical,CA:TRUE");
    ext(issuer ? issuer : x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
    ext(issuer ? issuer : x, x, NID_subject_key_identifier, "hash");
    CHECK(X509_sign(x, ikey ? ikey : k, EVP_sha256()) > 0);
    return x;
}

static void write_pem(const char *path, X509 *x, EVP_PKEY *k)
{
    FILE *f = fopen(path, "w");
    CHECK(f);
    if (x)
        PEM_write_X509(f, x);
    if (k)
        PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
    fclose(f);
    chmod(path, 0600);
}

void tu_make_deployment_pki(const char *int_cert, const char *int_key, const char *root_cert,
                            const char *other_root)
{
    EVP_PKEY *rk = keygen("EC"), *ik = keygen("EC"), *ok = keygen("EC");
    X509 *root = make_ca("Deployment root", rk, NULL, NULL, 1);
    X509 *inter = make_ca("Sluice host CA gpu-1", ik, root, rk, 2);
    X509 *other = make_ca("Deployment root", ok, NULL, NULL, 1); /* same name, other key */
    write_pem(int_cert, inter, NULL);
    write_pem(int_key, NULL, ik);
    write_pem(root_cert, root, NULL);
    write_pem(other_root, other, NULL);
    X509_free(root);
    X509_free(inter);
    X509_free(other);
    EVP_PKEY_free(rk);
    EVP_PKEY_free(ik);
    EVP_PKEY_free(ok);
}
