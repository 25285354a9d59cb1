/* TLS contexts (TLS 1.3 only) and the mapping of OpenSSL failures to sl_error codes. */
#include "internal.h"

#include "sluice/log.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <string.h>

static void ossl_text(char *buf, size_t n)
{
    unsigned long e = ERR_peek_last_error();
    if (e)
        ERR_error_string_n(e, buf, n);
    else
        snprintf(buf, n, "no OpenSSL detail");
}

/* A certificate time as "2026-11-26T09:00:00Z" ("?" when unreadable). */
static void iso_time(const ASN1_TIME *t, char *out, size_t n)
{
    struct tm tm;
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1 || strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(out, n, "?");
}

/* Remembers, in the session, the dates of a certificate whose validity period failed the
 * verification: a server that refuses a client's certificate never keeps it as the peer's, so
 * the log could not name them afterwards. The verdict itself is OpenSSL's. */
static int verify_cb(int ok, X509_STORE_CTX *x)
{
    if (ok)
        return ok;
    int e = X509_STORE_CTX_get_error(x);
    SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
    ch_sess *sess = ssl ? SSL_get_app_data(ssl) : NULL;
    X509 *cert = X509_STORE_CTX_get_current_cert(x);
    if (sess && cert && !sess->verify_when[0] &&
        (e == X509_V_ERR_CERT_NOT_YET_VALID || e == X509_V_ERR_CERT_HAS_EXPIRED))
        iso_time(e == X509_V_ERR_CERT_NOT_YET_VALID ? X509_get0_notBefore(cert)
                                                    : X509_get0_notAfter(cert),
                 sess->verify_when, sizeof sess->verify_when);
    return ok;
}

static BIO *pem_bio(const char *pem, const char *file)
{
    if (pem)
        return BIO_new_mem_buf(pem, -1);
    return BIO_new_file(file, "r");
}

static sl_code load_ca(SSL_CTX *ctx, const sl_tls_config *cfg, sl_error *err)
{
    const char *what = cfg->ca_pem ? "in-memory CA PEM" : cfg->ca_file;
    BIO *b = pem_bio(cfg->ca_pem, cfg->ca_file);
    if (!b)
        return sl_fail(err, SL_ERR_CONFIG, "cannot open CA %s", what);
    X509_STORE *st = SSL_CTX_get_cert_store(ctx);
    int n = 0;
    X509 *x;
    while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
        if (X509_STORE_add_cert(st, x) == 1)
            n++;
        X509_free(x);
    }
    BIO_free(b);
    ERR_clear_error(); /* the loop ends on a "no start line" error */
    if (n == 0)
        return sl_fail(err, SL_ERR_CONFIG, "no CA certificate found in %s", what);
    return SL_OK;
}

static sl_code load_cert_key(SSL_CTX *ctx, const sl_tls_config *cfg, sl_error *err)
{
    char det[160];
    const char *cwhat = cfg->cert_pem ? "in-memory certificate PEM" : cfg->cert_file;
    const char *kwhat = cfg->key_pem ? "in-memory key PEM" : cfg->key_file;
    BIO *b = pem_bio(cfg->cert_pem, cfg->cert_file);
    if (!b)
        return sl_fail(err, SL_ERR_CONFIG, "cannot open certificate %s", cwhat);
    X509 *leaf = PEM_read_bio_X509(b, NULL, NULL, NULL);
    int ok = leaf && SSL_CTX_use_certificate(ctx, leaf) == 1;
    X509_free(leaf);
    /* intermediates, if any, follow the leaf */
    X509 *x;
    while (ok && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL)
        if (SSL_CTX_add0_chain_cert(ctx, x) != 1) {
            X509_free(x);
            ok = 0;
        }
    BIO_free(b);
    if (!ok) {
        ossl_text(det, sizeof det);
        return sl_fail(err, SL_ERR_CONFIG, "bad certificate %s: %s", cwhat, det);
    }
    ERR_clear_error();
    b = pem_bio(cfg->key_pem, cfg->key_file);
    if (!b)
        return sl_fail(err, SL_ERR_CONFIG, "cannot open private key %s", kwhat);
    EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    BIO_free(b);
    ok = k && SSL_CTX_use_PrivateKey(ctx, k) == 1 && SSL_CTX_check_private_key(ctx) == 1;
    EVP_PKEY_free(k);
    if (!ok) {
        ossl_text(det, sizeof det);
        return sl_fail(err, SL_ERR_CONFIG, "bad private key %s (or it does not match %s): %s",
                       kwhat, cwhat, det);
    }
    return SL_OK;
}

SSL_CTX *ch_ctx_new(const sl_tls_config *cfg, int server, sl_error *err)
{
    if (!cfg || (cfg->mode != SL_TLS_MUTUAL && cfg->mode != SL_TLS_SERVER_ONLY)) {
        sl_fail(err, SL_ERR_INVALID, "missing TLS config or unknown mode");
        return NULL;
    }
    int need_cert = server || cfg->mode == SL_TLS_MUTUAL;
    if (!(cfg->ca_pem || cfg->ca_file) ||
        (need_cert && !((cfg->cert_pem || cfg->cert_file) && (cfg->key_pem || cfg->key_file)))) {
        sl_fail(err, SL_ERR_CONFIG, "TLS config lacks the CA%s",
                need_cert ? ", certificate or key" : "");
        return NULL;
    }
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!ctx) {
        sl_fail(err, SL_ERR_NOMEM, "SSL_CTX_new failed");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                                  "TLS_CHACHA20_POLY1305_SHA256");
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
    SSL_CTX_clear_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (server)
        SSL_CTX_set_num_tickets(ctx, 0);
    sl_code rc = load_ca(ctx, cfg, err);
    if (rc == SL_OK && need_cert)
        rc = load_cert_key(ctx, cfg, err);
    if (rc != SL_OK) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (!server)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, verify_cb);
    else if (cfg->mode == SL_TLS_MUTUAL)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_cb);
    else
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    return ctx;
}

sl_code ch_verify_fail(SSL *ssl, sl_error *err)
{
    long v = SSL_get_verify_result(ssl);
    const char *txt = X509_verify_cert_error_string(v);
    switch (v) {
    case X509_V_OK:
        return SL_OK;
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
    case X509_V_ERR_CRL_HAS_EXPIRED: {
        char when[48] = "?";
        const ch_sess *sess = SSL_get_app_data(ssl);
        X509 *peer = SSL_get0_peer_certificate(ssl);
        if (sess && sess->verify_when[0])
            snprintf(when, sizeof when, "%s", sess->verify_when);
        else if (peer)
            iso_time(v == X509_V_ERR_CERT_NOT_YET_VALID ? X509_get0_notBefore(peer)
                                                        : X509_get0_notAfter(peer),
                     when, sizeof when);
        return sl_fail(err, SL_ERR_CERT_EXPIRED, "peer certificate refused: %s (%s %s)", txt,
                       v == X509_V_ERR_CERT_NOT_YET_VALID ? "valid from" : "expired at", when);
    }
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
        return sl_fail(err, SL_ERR_UNKNOWN_CA, "peer certificate does not chain to our CA: %s",
                       txt);
    default:
        return sl_fail(err, SL_ERR_TLS, "peer certificate rejected: %s", txt);
    }
}

/* An alert the peer sent us: OpenSSL's reason code is SSL_AD_REASON_OFFSET + the alert. */
static int peer_alert(unsigned long le)
{
    int r = ERR_GET_REASON(le);
    if (ERR_GET_LIB(le) != ERR_LIB_SSL || r < SSL_AD_REASON_OFFSET ||
        r >= SSL_AD_REASON_OFFSET + 256)
        return -1;
    return r - SSL_AD_REASON_OFFSET;
}

/* The peer refused the certificate we presented: say what it is and why, from the alert and
 * our own certificate (TLS 1.3 tells a client only after its side of the handshake is done,
 * so this arrives as an alert on an established session, never as tampering). */
static sl_code cert_refused(SSL *ssl, int alert, const char *what, sl_error *err)
{
    X509 *mine = SSL_get_certificate(ssl);
    char from[48] = "?", until[48] = "?";
    if (mine) {
        iso_time(X509_get0_notBefore(mine), from, sizeof from);
        iso_time(X509_get0_notAfter(mine), until, sizeof until);
    }
    switch (alert) {
    case SSL_AD_CERTIFICATE_EXPIRED:
        return sl_fail(err, SL_ERR_CERT_EXPIRED,
                       "%s: the peer refused our certificate: it expired at %s", what, until);
    case SSL_AD_BAD_CERTIFICATE:
    case SSL_AD_UNSUPPORTED_CERTIFICATE:
    case SSL_AD_CERTIFICATE_UNKNOWN:
        if (mine && X509_cmp_current_time(X509_get0_notBefore(mine)) > 0)
            return sl_fail(err, SL_ERR_CERT_EXPIRED,
                           "%s: the peer refused our certificate: it is not valid yet (valid from "
                           "%s; check this machine's clock)",
                           what, from);
        if (mine && X509_cmp_current_time(X509_get0_notAfter(mine)) < 0)
            return sl_fail(err, SL_ERR_CERT_EXPIRED,
                           "%s: the peer refused our certificate: it expired at %s", what, until);
        return sl_fail(err, SL_ERR_TLS, "%s: the peer refused our certificate (TLS alert %s)", what,
                       SSL_alert_desc_string_long(alert));
    case SSL_AD_UNKNOWN_CA:
        return sl_fail(err, SL_ERR_UNKNOWN_CA,
                       "%s: the peer refused our certificate: it is not signed by a CA the peer "
                       "trusts",
                       what);
    case SSL_AD_DECRYPT_ERROR: /* our certificate's signature did not verify under its CA */
        return sl_fail(err, SL_ERR_UNKNOWN_CA,
                       "%s: the peer refused our certificate: its signature does not verify "
                       "(not signed by the peer's CA)",
                       what);
    case SSL_AD_CERTIFICATE_REQUIRED:
        return sl_fail(err, SL_ERR_NO_PEER_CERT,
                       "%s: the peer requires a certificate and we sent none", what);
    case SSL_AD_CERTIFICATE_REVOKED:
    case SSL_AD_ACCESS_DENIED:
        return sl_fail(err, SL_ERR_REFUSED, "%s: the peer refused us (TLS alert %s)", what,
                       SSL_alert_desc_string_long(alert));
    default:
        return SL_OK;
    }
}

sl_code ch_ssl_fail(SSL *ssl, int ret, int established, const char *what, sl_error *err)
{
    int e = SSL_get_error(ssl, ret);
    unsigned long le = ERR_peek_last_error();
    char det[160];
    ossl_text(det, sizeof det);
    ERR_clear_error();
    if (e == SSL_ERROR_ZERO_RETURN)
        return sl_fail(err, SL_ERR_CLOSED, "%s: peer closed the TLS session", what);
    if (e != SSL_ERROR_SSL)
        return sl_fail(err, SL_ERR_TLS, "%s: SSL error %d (%s)", what, e, det);
    int reason = ERR_GET_REASON(le);
    if (!established && SSL_get0_peer_certificate(ssl) && SSL_get_verify_result(ssl) != X509_V_OK)
        return ch_verify_fail(ssl, err);
    int alert = peer_alert(le);
    if (alert == SSL_AD_BAD_RECORD_MAC || alert == SSL_AD_DECRYPTION_FAILED)
        return sl_fail(err, SL_ERR_TAMPERED,
                       "%s: the peer says a TLS record failed authentication (%s): frames were "
                       "lost, reordered, duplicated or modified",
                       what, det);
    if (alert >= 0) {
        sl_code c = cert_refused(ssl, alert, what, err);
        if (c != SL_OK)
            return c;
        return sl_fail(err, SL_ERR_TLS, "%s: the peer ended TLS with alert %s (%s)", what,
                       SSL_alert_desc_string_long(alert), det);
    }
    if (established)
        return sl_fail(err, SL_ERR_TAMPERED,
                       "%s: a TLS record failed authentication or framing (%s): frames were "
                       "lost, reordered, duplicated or modified",
                       what, det);
    if (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE)
        return sl_fail(err, SL_ERR_NO_PEER_CERT,
                       "%s: peer sent no certificate; mutual TLS requires one", what);
    if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED) {
        sl_code v = ch_verify_fail(ssl, err);
        if (v != SL_OK)
            return v;
        return sl_fail(err, SL_ERR_TLS, "%s: %s", what, det);
    }
    if (ERR_GET_LIB(le) == ERR_LIB_SSL &&
        (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_HTTP_REQUEST ||
         reason == SSL_R_UNEXPECTED_MESSAGE || reason == SSL_R_UNEXPECTED_RECORD ||
         reason == SSL_R_PACKET_LENGTH_TOO_LONG || reason == SSL_R_RECORD_LENGTH_MISMATCH ||
         reason == SSL_R_LENGTH_MISMATCH || reason == SSL_R_BAD_PACKET_LENGTH ||
         reason == SSL_R_UNSUPPORTED_PROTOCOL || reason == SSL_R_BAD_RECORD_TYPE))
        return sl_fail(err, SL_ERR_PROTOCOL, "%s: peer does not speak TLS 1.3 (%s)", what, det);
    return sl_fail(err, SL_ERR_TLS, "%s: %s", what, det);
}
