/* The peer identity convention: subject CN = instance uuid, subject OU = project id. */
#include "internal.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <string.h>
#include <time.h>

/* Copies the single subject entry nid into out; 0 when absent, ambiguous or not plain. */
static int subject_field(X509_NAME *name, int nid, char *out, size_t n)
{
    int i = X509_NAME_get_index_by_NID(name, nid, -1);
    if (i < 0 || X509_NAME_get_index_by_NID(name, nid, i) >= 0)
        return 0;
    ASN1_STRING *d = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
    const unsigned char *p = ASN1_STRING_get0_data(d);
    int len = ASN1_STRING_length(d);
    if (len <= 0 || (size_t)len >= n)
        return 0;
    for (int k = 0; k < len; k++)
        if (!(isalnum(p[k]) || p[k] == '-' || p[k] == '_' || p[k] == '.' || p[k] == ':'))
            return 0;
    memcpy(out, p, (size_t)len);
    out[len] = '\0';
    return 1;
}

static void hex(const unsigned char *p, size_t n, char *out, size_t cap)
{
    static const char d[] = "0123456789abcdef";
    size_t k = 0;
    for (size_t i = 0; i < n && k + 2 < cap; i++) {
        out[k++] = d[p[i] >> 4];
        out[k++] = d[p[i] & 15];
    }
    out[k] = '\0';
}

sl_code ch_identity(SSL *ssl, int mutual, sl_peer_identity *id, sl_error *err)
{
    memset(id, 0, sizeof *id);
    if (!mutual)
        return SL_OK;
    X509 *x = SSL_get0_peer_certificate(ssl);
    if (!x)
        return sl_fail(err, SL_ERR_NO_PEER_CERT, "peer presented no certificate");
    X509_NAME *subj = X509_get_subject_name(x);
    if (!subject_field(subj, NID_commonName, id->instance_id, sizeof id->instance_id))
        return sl_fail(err, SL_ERR_REFUSED,
                       "peer certificate subject lacks a single plain CN (instance id)");
    if (!subject_field(subj, NID_organizationalUnitName, id->project_id, sizeof id->project_id))
        return sl_fail(err, SL_ERR_REFUSED,
                       "peer certificate subject lacks a single plain OU (project id)");
    const ASN1_INTEGER *ser = X509_get0_serialNumber(x);
    hex(ASN1_STRING_get0_data(ser), (size_t)ASN1_STRING_length(ser), id->serial, sizeof id->serial);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (X509_digest(x, EVP_sha256(), md, &mdlen) != 1)
        return sl_fail(err, SL_ERR_TLS, "cannot fingerprint the peer certificate");
    hex(md, mdlen, id->fingerprint, sizeof id->fingerprint);
    struct tm tm;
    if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) != 1)
        return sl_fail(err, SL_ERR_TLS, "peer certificate has an unreadable notAfter");
    id->not_after = (int64_t)timegm(&tm);
    id->authenticated = 1;
    return SL_OK;
}
