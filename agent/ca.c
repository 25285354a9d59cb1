/* The host CA (OpenSSL 3): creation, intermediate import, client and server certificates. */
#include "ca.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "sluice/log.h"

#define CA_LOG         "ca"
#define CA_FILE_MAX    (1 << 20)
#define CA_VALIDITY_S  (10LL * 365 * 86400)
#define CA_PATH_MAX    4096
#define CA_NAME_MAX    64
#define CA_SAN_MAX_LEN 253

struct ag_ca {
    EVP_PKEY *key;
    X509 *cert;
    STACK_OF(X509) * chain; /* above the CA, up to the root; empty for a self-signed CA */
    char *pem;              /* CA + chain */
    uint8_t *der;           /* CA + chain, DER concatenated */
    size_t der_len;
    ag_ca_opts o;
    int64_t not_after;
};

/* ---------------------------------------------------------------- helpers */

static sl_code ossl_fail(sl_error *e, sl_code code, const char *what)
{
    char det[200];
    unsigned long x = ERR_peek_last_error();
    if (x)
        ERR_error_string_n(x, det, sizeof det);
    else
        snprintf(det, sizeof det, "no OpenSSL detail");
    ERR_clear_error();
    return sl_fail(e, code, "%s: %s", what, det);
}

static int join(char *out, const char *dir, const char *file)
{
    int n = snprintf(out, CA_PATH_MAX, "%s/%s", dir, file);
    return n > 0 && n < CA_PATH_MAX;
}

sl_code ag_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode,
                             sl_error *e)
{
    char tmp[CA_PATH_MAX + 16];
    if (snprintf(tmp, sizeof tmp, "%s.tmpXXXXXX", path) >= (int)sizeof tmp)
        return sl_fail(e, SL_ERR_INVALID, "path too long: %s", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return sl_fail(e, SL_ERR_IO, "cannot create a temporary file next to %s: %s", path,
                       strerror(errno));
    const uint8_t *p = data;
    size_t left = len;
    int ok = fchmod(fd, (mode_t)mode) == 0;
    while (ok && left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            ok = 0;
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    ok = ok && fsync(fd) == 0;
    int err = errno;
    ok = close(fd) == 0 && ok;
    if (ok && rename(tmp, path) != 0) {
        err = errno;
        ok = 0;
    }
    if (!ok) {
        unlink(tmp);
        return sl_fail(e, SL_ERR_IO, "cannot write %s: %s", path, strerror(err));
    }
    /* make the rename durable too */
    char dir[CA_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        if (slash == dir)
            slash[1] = '\0';
        else
            *slash = '\0';
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    return SL_OK;
}

static char *bio_string(BIO *b)
{
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    memcpy(s, data, (size_t)n);
    s[n] = '\0';
    return s;
}

static void hex(const unsigned char *p, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[p[i] >> 4];
        out[2 * i + 1] = d[p[i] & 15];
    }
    out[2 * n] = '\0';
}

static int fingerprint(X509 *x, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (X509_digest(x, EVP_sha256(), md, &n) != 1 || n != 32)
        return 0;
    hex(md, 32, out);
    return 1;
}

static int64_t asn1_time(const ASN1_TIME *t)
{
    struct tm tm;
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    return (int64_t)timegm(&tm);
}

/* Allowed key types: EC P-256/P-384 and Ed25519 (what guests and CAs may use). */
static const char *key_kind(EVP_PKEY *k)
{
    if (EVP_PKEY_is_a(k, "ED25519"))
        return "Ed25519";
    if (EVP_PKEY_is_a(k, "EC")) {
        char g[64] = "";
        size_t gl = 0;
        if (EVP_PKEY_get_group_name(k, g, sizeof g, &gl) != 1)
            return NULL;
        int nid = OBJ_txt2nid(g);
        if (nid == NID_undef)
            nid = EC_curve_nist2nid(g);
        if (nid == NID_X9_62_prime256v1)
            return "EC P-256";
        if (nid == NID_secp384r1)
            return "EC P-384";
    }
    return NULL;
}

static const EVP_MD *sign_md(EVP_PKEY *k)
{
    return EVP_PKEY_is_a(k, "ED25519") ? NULL : EVP_sha256();
}

static EVP_PKEY *new_p256(void)
{
    return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

static int random_serial(X509 *x)
{
    unsigned char b[16];
    if (RAND_bytes(b, sizeof b) != 1)
        return 0;
    b[0] = (unsigned char)((b[0] & 0x7f) | 0x40); /* positive, 127 significant bits */
    BIGNUM *bn = BN_bin2bn(b, sizeof b, NULL);
    ASN1_INTEGER *ai = bn ? BN_to_ASN1_INTEGER(bn, NULL) : NULL;
    int ok = ai && X509_set_serialNumber(x, ai) == 1;
    ASN1_INTEGER_free(ai);
    BN_free(bn);
    return ok;
}

static int add_ext(X509 *issuer, X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    int ok = ext && X509_add_ext(x, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok;
}

/* Plain identifiers only (what the channel's identity.c accepts in CN/OU). */
static int plain_name(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= CA_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.' ||
              s[i] == ':'))
            return 0;
    return 1;
}

static sl_code read_file(const char *path, char **out, size_t *len, sl_error *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return sl_fail(e, errno == ENOENT ? SL_ERR_CONFIG : SL_ERR_IO, "cannot open %s: %s", path,
                       strerror(errno));
    char *buf = malloc(CA_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return sl_fail(e, SL_ERR_NOMEM, "no memory to read %s", path);
    }
    size_t n = fread(buf, 1, CA_FILE_MAX + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > CA_FILE_MAX) {
        free(buf);
        return sl_fail(e, SL_ERR_CONFIG, "%s: %s", path, bad ? "read error" : "larger than 1 MiB");
    }
    buf[n] = '\0';
    *out = buf;
    if (len)
        *len = n;
    return SL_OK;
}

/* Every certificate of a PEM file; NULL (with e) when none or unreadable. */
static STACK_OF(X509) * load_certs(const char *path, sl_error *e)
{
    char *txt = NULL;
    size_t n = 0;
    if (read_file(path, &txt, &n, e) != SL_OK)
        return NULL;
    BIO *b = BIO_new_mem_buf(txt, (int)n);
    STACK_OF(X509) *sk = sk_X509_new_null();
    X509 *x;
    while (b && sk && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL)
        if (!sk_X509_push(sk, x))
            X509_free(x);
    BIO_free(b);
    free(txt);
    ERR_clear_error();
    if (!sk || sk_X509_num(sk) == 0) {
        sk_X509_pop_free(sk, X509_free);
        sl_fail(e, SL_ERR_CONFIG, "%s: no PEM certificate in it", path);
        return NULL;
    }
    return sk;
}

static EVP_PKEY *load_key(const char *path, sl_error *e)
{
    char *txt = NULL;
    size_t n = 0;
    if (read_file(path, &txt, &n, e) != SL_OK)
        return NULL;
    BIO *b = BIO_new_mem_buf(txt, (int)n);
    EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    OPENSSL_cleanse(txt, n);
    free(txt);
    if (!k) {
        char what[CA_PATH_MAX + 64];
        snprintf(what, sizeof what, "%s: not a PEM private key (an encrypted key is refused)",
                 path);
        ossl_fail(e, SL_ERR_CONFIG, what);
    }
    return k;
}

/* Checks that cert is a usable CA for key and that chain (may be empty) leads it to a
 * self-signed root. */
static sl_code check_ca(X509 *cert, EVP_PKEY *key, STACK_OF(X509) * chain, const char *where,
                        sl_error *e)
{
    if (X509_check_ca(cert) < 1)
        return sl_fail(e, SL_ERR_CONFIG, "%s: the certificate is not a CA (basicConstraints)",
                       where);
    if (!key_kind(key))
        return sl_fail(e, SL_ERR_CONFIG, "%s: the CA key must be EC P-256, EC P-384 or Ed25519",
                       where);
    if (X509_check_private_key(cert, key) != 1) {
        ERR_clear_error();
        return sl_fail(e, SL_ERR_CONFIG, "%s: the key does not match the CA certificate", where);
    }
    int64_t now = (int64_t)time(NULL);
    if (asn1_time(X509_get0_notAfter(cert)) <= now + AG_CA_LIFETIME_MIN)
        return sl_fail(e, SL_ERR_CONFIG, "%s: the CA certificate expires within the hour", where);
    X509_STORE *st = X509_STORE_new();
    STACK_OF(X509) *untrusted = sk_X509_new_null();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int nroots = 0;
    sl_code rc = SL_OK;
    if (!st || !untrusted || !ctx) {
        rc = sl_fail(e, SL_ERR_NOMEM, "no memory to verify the CA");
        goto out;
    }
    if (sk_X509_num(chain) == 0) {
        if (X509_self_signed(cert, 1) != 1) {
            rc =
                sl_fail(e, SL_ERR_CONFIG,
                        "%s: the CA is not self-signed and no chain.pem leads it to a root", where);
            goto out;
        }
        X509_STORE_add_cert(st, cert);
        nroots = 1;
    }
    for (int i = 0; i < sk_X509_num(chain); i++) {
        X509 *c = sk_X509_value(chain, i);
        if (X509_self_signed(c, 0) == 1) {
            X509_STORE_add_cert(st, c);
            nroots++;
        } else {
            sk_X509_push(untrusted, c);
        }
    }
    if (nroots == 0) {
        rc = sl_fail(e, SL_ERR_CONFIG, "%s: the chain does not end in a self-signed root", where);
        goto out;
    }
    if (X509_STORE_CTX_init(ctx, st, cert, untrusted) != 1) {
        rc = ossl_fail(e, SL_ERR_NOMEM, "X509_STORE_CTX_init");
        goto out;
    }
    if (X509_verify_cert(ctx) != 1)
        rc = sl_fail(e, SL_ERR_CONFIG, "%s: the CA certificate does not verify: %s", where,
                     X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
out:
    X509_STORE_CTX_free(ctx);
    sk_X509_free(untrusted);
    X509_STORE_free(st);
    ERR_clear_error();
    return rc;
}

static sl_code check_key_mode(const char *path, sl_error *e)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return sl_fail(e, SL_ERR_CONFIG, "cannot stat %s: %s", path, strerror(errno));
    if (st.st_mode & 077)
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s is accessible by group or others (mode %03o); run chmod 600 on it", path,
                       (unsigned)(st.st_mode & 0777));
    return SL_OK;
}

static sl_code ensure_dir(const char *dir, int create, sl_error *e)
{
    if (create && mkdir(dir, 0700) != 0 && errno != EEXIST)
        return sl_fail(e, SL_ERR_IO, "cannot create the CA directory %s: %s", dir, strerror(errno));
    struct stat st;
    if (!create && stat(dir, &st) != 0)
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s (no CA there: sluice-agent-ca init, or sluice-agent at its first "
                       "start, makes one)",
                       strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sl_fail(e, SL_ERR_CONFIG, "%s is not a directory", dir);
    if (st.st_mode & 022)
        return sl_fail(e, SL_ERR_CONFIG,
                       "the CA directory %s is writable by group or others (mode %03o); run "
                       "chmod 700 on it",
                       dir, (unsigned)(st.st_mode & 0777));
    return SL_OK;
}

static char *key_pem_string(EVP_PKEY *k)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *s = NULL;
    if (b && PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL) == 1)
        s = bio_string(b);
    BIO_free(b);
    return s;
}

static char *certs_pem_string(X509 *first, STACK_OF(X509) * rest)
{
    BIO *b = BIO_new(BIO_s_mem());
    int ok = b && (!first || PEM_write_bio_X509(b, first) == 1);
    for (int i = 0; ok && i < sk_X509_num(rest); i++)
        ok = PEM_write_bio_X509(b, sk_X509_value(rest, i)) == 1;
    char *s = ok ? bio_string(b) : NULL;
    BIO_free(b);
    return s;
}

static sl_code write_key(const char *path, EVP_PKEY *k, sl_error *e)
{
    char *pem = key_pem_string(k);
    if (!pem)
        return ossl_fail(e, SL_ERR_NOMEM, "cannot encode the CA key");
    size_t n = strlen(pem);
    sl_code rc = ag_write_file_atomic(path, pem, n, 0600, e);
    OPENSSL_cleanse(pem, n);
    free(pem);
    return rc;
}

/* ---------------------------------------------------------------- creation */

static sl_code create_self_signed(const char *dir, sl_error *e)
{
    char kp[CA_PATH_MAX], cp[CA_PATH_MAX], host[256] = "localhost", cn[320];
    join(kp, dir, "ca.key");
    join(cp, dir, "ca.pem");
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    snprintf(cn, sizeof cn, "Sluice host CA %.200s", host);
    EVP_PKEY *k = new_p256();
    X509 *x = X509_new();
    sl_code rc = SL_OK;
    X509_NAME *nm = x ? X509_get_subject_name(x) : NULL;
    if (!k || !x || X509_set_version(x, 2) != 1 || !random_serial(x) ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -AG_CA_BACKDATE_S) ||
        !X509_time_adj_ex(X509_getm_notAfter(x), 0, (long)CA_VALIDITY_S, NULL) ||
        X509_NAME_add_entry_by_NID(nm, NID_organizationName, MBSTRING_UTF8,
                                   (const unsigned char *)"Sluice", -1, -1, 0) != 1 ||
        X509_NAME_add_entry_by_NID(nm, NID_commonName, MBSTRING_UTF8, (const unsigned char *)cn, -1,
                                   -1, 0) != 1 ||
        X509_set_issuer_name(x, nm) != 1 || X509_set_pubkey(x, k) != 1 ||
        !add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
        !add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") ||
        !add_ext(x, x, NID_subject_key_identifier, "hash") || X509_sign(x, k, EVP_sha256()) <= 0)
        rc = ossl_fail(e, SL_ERR_NOMEM, "cannot make the CA certificate");
    char *pem = rc == SL_OK ? certs_pem_string(x, NULL) : NULL;
    if (rc == SL_OK && !pem)
        rc = ossl_fail(e, SL_ERR_NOMEM, "cannot encode the CA certificate");
    /* the key first: a certificate never exists without its key */
    if (rc == SL_OK)
        rc = write_key(kp, k, e);
    if (rc == SL_OK)
        rc = ag_write_file_atomic(cp, pem, strlen(pem), 0644, e);
    if (rc == SL_OK)
        sl_log(SL_LOG_NOTICE, CA_LOG, "created a self-signed EC P-256 CA \"%s\" in %s", cn, dir);
    free(pem);
    X509_free(x);
    EVP_PKEY_free(k);
    return rc;
}

/* ---------------------------------------------------------------- open / close */

static sl_code check_opts(const ag_ca_opts *in, ag_ca_opts *o, sl_error *e)
{
    *o = in ? *in : (ag_ca_opts){0};
    if (o->client_lifetime_s == 0)
        o->client_lifetime_s = AG_CA_CLIENT_LIFETIME_DEFAULT;
    if (o->server_lifetime_s == 0)
        o->server_lifetime_s = AG_CA_SERVER_LIFETIME_DEFAULT;
    if (o->client_lifetime_s < AG_CA_LIFETIME_MIN ||
        o->client_lifetime_s > AG_CA_CLIENT_LIFETIME_MAX)
        return sl_fail(e, SL_ERR_INVALID, "client certificate lifetime %d s is outside %d..%d s",
                       o->client_lifetime_s, AG_CA_LIFETIME_MIN, AG_CA_CLIENT_LIFETIME_MAX);
    if (o->server_lifetime_s < AG_CA_LIFETIME_MIN ||
        o->server_lifetime_s > AG_CA_SERVER_LIFETIME_MAX)
        return sl_fail(e, SL_ERR_INVALID, "server certificate lifetime %d s is outside %d..%d s",
                       o->server_lifetime_s, AG_CA_LIFETIME_MIN, AG_CA_SERVER_LIFETIME_MAX);
    return SL_OK;
}

static sl_code build_bundles(ag_ca *ca, sl_error *e)
{
    ca->pem = certs_pem_string(ca->cert, ca->chain);
    if (!ca->pem)
        return ossl_fail(e, SL_ERR_NOMEM, "cannot encode the CA bundle");
    size_t total = 0;
    int n = sk_X509_num(ca->chain);
    for (int i = -1; i < n; i++) {
        int l = i2d_X509(i < 0 ? ca->cert : sk_X509_value(ca->chain, i), NULL);
        if (l <= 0)
            return ossl_fail(e, SL_ERR_NOMEM, "cannot encode the CA bundle");
        total += (size_t)l;
    }
    ca->der = malloc(total);
    if (!ca->der)
        return sl_fail(e, SL_ERR_NOMEM, "no memory for the CA bundle");
    unsigned char *p = ca->der;
    for (int i = -1; i < n; i++)
        i2d_X509(i < 0 ? ca->cert : sk_X509_value(ca->chain, i), &p);
    ca->der_len = total;
    return SL_OK;
}

sl_code ag_ca_open(const char *dir, const ag_ca_opts *o, ag_ca **out, sl_error *e)
{
    sl_error_clear(e);
    if (!dir || !*dir || !out)
        return sl_fail(e, SL_ERR_INVALID, "ag_ca_open: NULL argument");
    *out = NULL;
    ag_ca_opts opts;
    sl_code rc = check_opts(o, &opts, e);
    if (rc != SL_OK)
        return rc;
    char kp[CA_PATH_MAX], cp[CA_PATH_MAX], chp[CA_PATH_MAX];
    if (!join(kp, dir, "ca.key") || !join(cp, dir, "ca.pem") || !join(chp, dir, "chain.pem"))
        return sl_fail(e, SL_ERR_INVALID, "CA directory path too long");
    if ((rc = ensure_dir(dir, !opts.existing_only, e)) != SL_OK)
        return rc;
    int have_cert = access(cp, F_OK) == 0, have_key = access(kp, F_OK) == 0;
    if (!have_cert && have_key)
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s exists without ca.pem; restore ca.pem or remove the key to start a "
                       "new CA",
                       kp);
    if (!have_cert && opts.existing_only)
        return sl_fail(e, SL_ERR_CONFIG,
                       "no CA in this directory (no ca.pem); sluice-agent-ca init, or "
                       "sluice-agent at its first start, makes one");
    if (!have_cert && (rc = create_self_signed(dir, e)) != SL_OK)
        return rc;
    if ((rc = check_key_mode(kp, e)) != SL_OK)
        return rc;
    ag_ca *ca = calloc(1, sizeof *ca);
    if (!ca)
        return sl_fail(e, SL_ERR_NOMEM, "no memory for the CA");
    ca->o = opts;
    STACK_OF(X509) *certs = load_certs(cp, e);
    if (!certs) {
        ag_ca_close(ca);
        return e ? e->code : SL_ERR_CONFIG;
    }
    ca->cert = sk_X509_shift(certs);
    sk_X509_pop_free(certs, X509_free);
    if (access(chp, F_OK) == 0) {
        if (!(ca->chain = load_certs(chp, e))) {
            ag_ca_close(ca);
            return e ? e->code : SL_ERR_CONFIG;
        }
    } else if (!(ca->chain = sk_X509_new_null())) {
        ag_ca_close(ca);
        return sl_fail(e, SL_ERR_NOMEM, "no memory for the CA");
    }
    if (!(ca->key = load_key(kp, e)) || (rc = check_ca(ca->cert, ca->key, ca->chain, cp, e)) ||
        (rc = build_bundles(ca, e))) {
        ag_ca_close(ca);
        return e && e->code ? e->code : SL_ERR_CONFIG;
    }
    ca->not_after = asn1_time(X509_get0_notAfter(ca->cert));
    char fp[65] = "";
    fingerprint(ca->cert, fp);
    char subj[256];
    X509_NAME_oneline(X509_get_subject_name(ca->cert), subj, sizeof subj);
    sl_log(SL_LOG_INFO, CA_LOG, "CA %s (%s, sha256 %.16s..., %d issuer certificate(s) above it)",
           subj, sk_X509_num(ca->chain) ? "intermediate" : "self-signed", fp,
           sk_X509_num(ca->chain));
    *out = ca;
    return SL_OK;
}

void ag_ca_close(ag_ca *ca)
{
    if (!ca)
        return;
    EVP_PKEY_free(ca->key);
    X509_free(ca->cert);
    sk_X509_pop_free(ca->chain, X509_free);
    free(ca->pem);
    free(ca->der);
    free(ca);
}

const char *ag_ca_cert_pem(const ag_ca *ca)
{
    return ca ? ca->pem : NULL;
}

const uint8_t *ag_ca_chain_der(const ag_ca *ca, size_t *len)
{
    if (len)
        *len = ca ? ca->der_len : 0;
    return ca ? ca->der : NULL;
}

/* ---------------------------------------------------------------- issuing */

/* A leaf certificate skeleton: serial, validity, issuer, subject key, basic extensions. */
static X509 *leaf(ag_ca *ca, EVP_PKEY *pub, int64_t lifetime, int64_t *not_after)
{
    X509 *x = X509_new();
    int64_t now = (int64_t)time(NULL), na = now + lifetime;
    if (na > ca->not_after)
        na = ca->not_after; /* never outlive the CA */
    if (!x || X509_set_version(x, 2) != 1 || !random_serial(x) ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -AG_CA_BACKDATE_S) ||
        !ASN1_TIME_set(X509_getm_notAfter(x), (time_t)na) ||
        X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) != 1 ||
        X509_set_pubkey(x, pub) != 1 ||
        !add_ext(ca->cert, x, NID_basic_constraints, "critical,CA:FALSE") ||
        !add_ext(ca->cert, x, NID_subject_key_identifier, "hash") ||
        !add_ext(ca->cert, x, NID_authority_key_identifier, "keyid:always")) {
        X509_free(x);
        return NULL;
    }
    *not_after = na;
    return x;
}

sl_code ag_ca_sign_client(ag_ca *ca, const uint8_t *csr_der, size_t csr_len,
                          const char *instance_uuid, const char *project_id, uint8_t **cert_der,
                          size_t *cert_len, int64_t *not_after, char fingerprint_hex[65],
                          sl_error *e)
{
    sl_error_clear(e);
    if (!ca || !csr_der || !cert_der || !cert_len || !not_after || !fingerprint_hex)
        return sl_fail(e, SL_ERR_INVALID, "ag_ca_sign_client: NULL argument");
    *cert_der = NULL;
    *cert_len = 0;
    if (!plain_name(instance_uuid) || !plain_name(project_id))
        return sl_fail(e, SL_ERR_INVALID, "instance uuid or project id is not a plain name");
    if (csr_len == 0 || csr_len > AG_CA_CSR_MAX)
        return sl_fail(e, SL_ERR_INVALID, "certificate request of %zu bytes (1..%d)", csr_len,
                       AG_CA_CSR_MAX);
    const unsigned char *p = csr_der;
    X509_REQ *req = d2i_X509_REQ(NULL, &p, (long)csr_len);
    if (!req || p != csr_der + csr_len) {
        X509_REQ_free(req);
        ERR_clear_error();
        return sl_fail(e, SL_ERR_INVALID, "the certificate request is not one DER PKCS#10 request");
    }
    sl_code rc = SL_OK;
    X509 *x = NULL;
    EVP_PKEY *pub = X509_REQ_get0_pubkey(req);
    const char *kind = pub ? key_kind(pub) : NULL;
    if (!kind)
        rc = sl_fail(e, SL_ERR_INVALID, "the request's key is not EC P-256, EC P-384 or Ed25519");
    else if (X509_REQ_verify(req, pub) != 1)
        rc = sl_fail(e, SL_ERR_INVALID, "the request's self-signature does not verify");
    ERR_clear_error();
    int64_t na = 0;
    if (rc == SL_OK && !(x = leaf(ca, pub, ca->o.client_lifetime_s, &na)))
        rc = ossl_fail(e, SL_ERR_NOMEM, "cannot build the client certificate");
    if (rc == SL_OK) {
        /* the subject comes from the verified token, never from the request */
        X509_NAME *nm = X509_get_subject_name(x);
        if (X509_NAME_add_entry_by_NID(nm, NID_organizationalUnitName, MBSTRING_UTF8,
                                       (const unsigned char *)project_id, -1, -1, 0) != 1 ||
            X509_NAME_add_entry_by_NID(nm, NID_commonName, MBSTRING_UTF8,
                                       (const unsigned char *)instance_uuid, -1, -1, 0) != 1 ||
            !add_ext(ca->cert, x, NID_key_usage, "critical,digitalSignature") ||
            !add_ext(ca->cert, x, NID_ext_key_usage, "clientAuth") ||
            X509_sign(x, ca->key, sign_md(ca->key)) <= 0)
            rc = ossl_fail(e, SL_ERR_NOMEM, "cannot sign the client certificate");
    }
    int len = rc == SL_OK ? i2d_X509(x, NULL) : -1;
    if (rc == SL_OK && (len <= 0 || !(*cert_der = malloc((size_t)len))))
        rc = sl_fail(e, SL_ERR_NOMEM, "cannot encode the client certificate");
    if (rc == SL_OK) {
        unsigned char *q = *cert_der;
        i2d_X509(x, &q);
        *cert_len = (size_t)len;
        *not_after = na;
        if (!fingerprint(x, fingerprint_hex)) {
            free(*cert_der);
            *cert_der = NULL;
            *cert_len = 0;
            rc = ossl_fail(e, SL_ERR_NOMEM, "cannot fingerprint the client certificate");
        }
    }
    X509_free(x);
    X509_REQ_free(req);
    return rc;
}

static int valid_dns(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > CA_SAN_MAX_LEN || s[0] == '.' || s[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '.'))
            return 0;
    return 1;
}

static int add_sans(X509 *x, const char *const *sans, size_t nsans, sl_error *e)
{
    GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
    if (!gens)
        return sl_fail(e, SL_ERR_NOMEM, "no memory for SANs"), 0;
    int ok = 1;
    for (size_t i = 0; ok && i < nsans; i++) {
        const char *s = sans[i];
        GENERAL_NAME *gn = NULL;
        unsigned char bin[16];
        if (!s) {
            ok = 0;
        } else if (inet_pton(AF_INET, s, bin) == 1 || inet_pton(AF_INET6, s, bin) == 1) {
            ASN1_OCTET_STRING *ip = a2i_IPADDRESS(s);
            if (ip && (gn = GENERAL_NAME_new()) != NULL)
                GENERAL_NAME_set0_value(gn, GEN_IPADD, ip);
            else
                ASN1_OCTET_STRING_free(ip);
        } else if (valid_dns(s)) {
            ASN1_IA5STRING *d = ASN1_IA5STRING_new();
            if (d && ASN1_STRING_set(d, s, -1) == 1 && (gn = GENERAL_NAME_new()) != NULL)
                GENERAL_NAME_set0_value(gn, GEN_DNS, d);
            else
                ASN1_IA5STRING_free(d);
        } else {
            sl_fail(e, SL_ERR_INVALID, "SAN \"%.64s\" is neither an IP address nor a DNS name", s);
            ok = -1;
            break;
        }
        if (!gn || !sk_GENERAL_NAME_push(gens, gn)) {
            GENERAL_NAME_free(gn);
            ok = 0;
        }
    }
    if (ok == 1 && X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, 0) != 1)
        ok = 0;
    if (ok == 0)
        ossl_fail(e, SL_ERR_NOMEM, "cannot add the SANs");
    GENERAL_NAMES_free(gens);
    return ok == 1;
}

sl_code ag_ca_issue_server(ag_ca *ca, const char *cn, const char *const *sans, size_t nsans,
                           int lifetime_s, char **cert_pem, char **key_pem, sl_error *e)
{
    sl_error_clear(e);
    if (!ca || !cert_pem || !key_pem || (nsans && !sans))
        return sl_fail(e, SL_ERR_INVALID, "ag_ca_issue_server: NULL argument");
    *cert_pem = *key_pem = NULL;
    if (!cn || !*cn || strlen(cn) >= CA_NAME_MAX || strpbrk(cn, "\r\n"))
        return sl_fail(e, SL_ERR_INVALID, "server certificate CN must be 1..63 printable bytes");
    if (nsans == 0 || nsans > 64)
        return sl_fail(e, SL_ERR_INVALID, "a server certificate needs 1..64 SANs (got %zu)", nsans);
    if (lifetime_s == 0)
        lifetime_s = ca->o.server_lifetime_s;
    if (lifetime_s < AG_CA_LIFETIME_MIN || lifetime_s > AG_CA_SERVER_LIFETIME_MAX)
        return sl_fail(e, SL_ERR_INVALID, "server certificate lifetime %d s is outside %d..%d s",
                       lifetime_s, AG_CA_LIFETIME_MIN, AG_CA_SERVER_LIFETIME_MAX);
    EVP_PKEY *k = new_p256();
    if (!k)
        return ossl_fail(e, SL_ERR_NOMEM, "cannot make a server key");
    int64_t na = 0;
    sl_code rc = SL_OK;
    X509 *x = leaf(ca, k, lifetime_s, &na);
    if (!x)
        rc = ossl_fail(e, SL_ERR_NOMEM, "cannot build the server certificate");
    if (rc == SL_OK &&
        X509_NAME_add_entry_by_NID(X509_get_subject_name(x), NID_commonName, MBSTRING_UTF8,
                                   (const unsigned char *)cn, -1, -1, 0) != 1)
        rc = ossl_fail(e, SL_ERR_INVALID, "bad server certificate CN");
    if (rc == SL_OK && !add_sans(x, sans, nsans, e))
        rc = e && e->code ? e->code : SL_ERR_INVALID;
    if (rc == SL_OK && (!add_ext(ca->cert, x, NID_key_usage, "critical,digitalSignature") ||
                        !add_ext(ca->cert, x, NID_ext_key_usage, "serverAuth") ||
                        X509_sign(x, ca->key, sign_md(ca->key)) <= 0))
        rc = ossl_fail(e, SL_ERR_NOMEM, "cannot sign the server certificate");
    if (rc == SL_OK) {
        STACK_OF(X509) *rest = sk_X509_new_null();
        if (rest && sk_X509_num(ca->chain) > 0)
            sk_X509_push(rest, ca->cert);
        *cert_pem = rest ? certs_pem_string(x, rest) : NULL;
        sk_X509_free(rest);
        *key_pem = key_pem_string(k);
        if (!*cert_pem || !*key_pem) {
            free(*cert_pem);
            free(*key_pem);
            *cert_pem = *key_pem = NULL;
            rc = ossl_fail(e, SL_ERR_NOMEM, "cannot encode the server certificate");
        }
    }
    X509_free(x);
    EVP_PKEY_free(k);
    return rc;
}

/* ---------------------------------------------------------------- administration */

sl_code ag_ca_import(const char *dir, const char *cert_file, const char *key_file,
                     const char *chain_file, int force, sl_error *e)
{
    sl_error_clear(e);
    if (!dir || !cert_file || !key_file || !chain_file)
        return sl_fail(e, SL_ERR_INVALID, "import needs the directory, certificate, key and chain");
    char kp[CA_PATH_MAX], cp[CA_PATH_MAX], chp[CA_PATH_MAX];
    if (!join(kp, dir, "ca.key") || !join(cp, dir, "ca.pem") || !join(chp, dir, "chain.pem"))
        return sl_fail(e, SL_ERR_INVALID, "CA directory path too long");
    sl_code rc = ensure_dir(dir, 1, e);
    if (rc != SL_OK)
        return rc;
    if (!force && (access(cp, F_OK) == 0 || access(kp, F_OK) == 0))
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s already holds a CA; replacing it invalidates every certificate it "
                       "issued (use --force)",
                       dir);
    STACK_OF(X509) *certs = load_certs(cert_file, e);
    if (!certs)
        return e ? e->code : SL_ERR_CONFIG;
    if (sk_X509_num(certs) != 1) {
        sk_X509_pop_free(certs, X509_free);
        return sl_fail(e, SL_ERR_CONFIG, "%s: expected exactly one certificate (the intermediate)",
                       cert_file);
    }
    X509 *cert = sk_X509_value(certs, 0);
    STACK_OF(X509) *chain = load_certs(chain_file, e);
    EVP_PKEY *key = chain ? load_key(key_file, e) : NULL;
    char *cpem = NULL, *chpem = NULL;
    if (!chain || !key)
        rc = e && e->code ? e->code : SL_ERR_CONFIG;
    else if ((rc = check_ca(cert, key, chain, cert_file, e)) == SL_OK) {
        cpem = certs_pem_string(cert, NULL);
        chpem = certs_pem_string(NULL, chain);
        if (!cpem || !chpem)
            rc = ossl_fail(e, SL_ERR_NOMEM, "cannot encode the certificates");
    }
    /* key, chain, then the certificate: ca.pem appears last */
    if (rc == SL_OK && (rc = write_key(kp, key, e)) == SL_OK &&
        (rc = ag_write_file_atomic(chp, chpem, strlen(chpem), 0644, e)) == SL_OK)
        rc = ag_write_file_atomic(cp, cpem, strlen(cpem), 0644, e);
    if (rc == SL_OK)
        sl_log(SL_LOG_NOTICE, CA_LOG,
               "imported an intermediate CA into %s (%d certificate(s) "
               "above it)",
               dir, sk_X509_num(chain));
    free(cpem);
    free(chpem);
    EVP_PKEY_free(key);
    sk_X509_pop_free(chain, X509_free);
    sk_X509_pop_free(certs, X509_free);
    return rc;
}

sl_code ag_ca_describe(const ag_ca *ca, char **text, sl_error *e)
{
    if (!ca || !text)
        return sl_fail(e, SL_ERR_INVALID, "ag_ca_describe: NULL argument");
    BIO *b = BIO_new(BIO_s_mem());
    if (!b)
        return sl_fail(e, SL_ERR_NOMEM, "no memory");
    char fp[65] = "";
    fingerprint(ca->cert, fp);
    BIO_printf(b, "subject:     ");
    X509_NAME_print_ex(b, X509_get_subject_name(ca->cert), 0, XN_FLAG_ONELINE);
    BIO_printf(b, "\nissuer:      ");
    X509_NAME_print_ex(b, X509_get_issuer_name(ca->cert), 0, XN_FLAG_ONELINE);
    BIO_printf(b, "\nnot before:  ");
    ASN1_TIME_print(b, X509_get0_notBefore(ca->cert));
    BIO_printf(b, "\nnot after:   ");
    ASN1_TIME_print(b, X509_get0_notAfter(ca->cert));
    BIO_printf(b, "\nkey:         %s\nsha256:      %s\nkind:        %s\n", key_kind(ca->key), fp,
               sk_X509_num(ca->chain) ? "intermediate" : "self-signed root");
    for (int i = 0; i < sk_X509_num(ca->chain); i++) {
        BIO_printf(b, "chain[%d]:    ", i);
        X509_NAME_print_ex(b, X509_get_subject_name(sk_X509_value(ca->chain, i)), 0,
                           XN_FLAG_ONELINE);
        BIO_printf(b, "\n");
    }
    BIO_printf(b, "client certs: %d s, server certs: %d s\n", ca->o.client_lifetime_s,
               ca->o.server_lifetime_s);
    *text = bio_string(b);
    BIO_free(b);
    return *text ? SL_OK : sl_fail(e, SL_ERR_NOMEM, "no memory");
}
