/* sluice-enroll: the guest side of enrollment (see enroll_client.h). */
#include "enroll_client.h"

#include "enroll_internal.h"
#include "status.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "sluice/channel.h"
#include "sluice/token.h"
#include "sluice_control.pb-c.h"
#include "vendordata.h"

#define PATH_MAX_SE 4096
#define HDR_MAX     16384

/* ---------------------------------------------------------------- fetching */

static sl_code read_path(const char *path, char **body, size_t *len, sl_error *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return sl_fail(e, SL_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    char *buf = malloc(SE_BODY_MAX + 1);
    size_t n = buf ? fread(buf, 1, SE_BODY_MAX + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!buf)
        return sl_fail(e, SL_ERR_NOMEM, "no memory");
    if (bad || n > SE_BODY_MAX) {
        free(buf);
        return sl_fail(e, SL_ERR_IO, "%s: %s", path, bad ? "read error" : "larger than 1 MiB");
    }
    buf[n] = '\0';
    *body = buf;
    *len = n;
    return SL_OK;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for fd to be ready for ev until deadline; 1 ready, 0 timeout, -1 error. */
static int wait_fd(int fd, short ev, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {fd, ev, 0};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        return 1;
    }
}

/* Splits "http://HOST[:PORT]/PATH"; IPv6 hosts in brackets. */
static sl_code parse_url(const char *url, char *host, size_t hn, char *port, size_t pn,
                         const char **path, sl_error *e)
{
    const char *p = url + 7, *end = p + strcspn(p, "/");
    const char *h = p, *he, *colon;
    if (*p == '[') {
        h = p + 1;
        he = memchr(h, ']', (size_t)(end - h));
        if (!he)
            return sl_fail(e, SL_ERR_INVALID, "bad URL %s: unclosed [", url);
        colon = he[1] == ':' ? he + 1 : NULL;
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        he = colon ? colon : end;
    }
    size_t hl = (size_t)(he - h), pl = colon ? (size_t)(end - colon - 1) : 2;
    if (hl == 0 || hl >= hn || pl == 0 || pl >= pn)
        return sl_fail(e, SL_ERR_INVALID, "bad URL %s: host or port", url);
    memcpy(host, h, hl);
    host[hl] = '\0';
    if (colon) {
        memcpy(port, colon + 1, pl);
        port[pl] = '\0';
    } else {
        snprintf(port, pn, "80");
    }
    for (const char *c = port; *c; c++)
        if (!isdigit((unsigned char)*c))
            return sl_fail(e, SL_ERR_INVALID, "bad URL %s: port", url);
    *path = *end ? end : "/";
    for (const char *c = *path; *c; c++)
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
            return sl_fail(e, SL_ERR_INVALID, "bad URL %s: path has a space or control byte", url);
    return SL_OK;
}

static sl_code http_get(const char *url, int timeout_ms, char **body, size_t *len, sl_error *e)
{
    char host[256], port[8];
    const char *path = NULL;
    sl_code rc = parse_url(url, host, sizeof host, port, sizeof port, &path, e);
    if (rc != SL_OK)
        return rc;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(host, port, &hints, &ai);
    if (g != 0)
        return sl_fail(e, SL_ERR_IO, "%s: cannot resolve %s: %s", url, host, gai_strerror(g));
    int64_t deadline = now_ms() + timeout_ms;
    int fd = -1, err = ETIMEDOUT;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int r = connect(fd, a->ai_addr, a->ai_addrlen);
        if (r != 0 && errno == EINPROGRESS) {
            socklen_t sl = sizeof err;
            r = wait_fd(fd, POLLOUT, deadline) == 1 &&
                        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) == 0 && err == 0
                    ? 0
                    : -1;
            if (r != 0 && err == 0)
                err = ETIMEDOUT;
        } else if (r != 0) {
            err = errno;
        }
        if (r != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return sl_fail(e, SL_ERR_IO, "%s: cannot connect: %s", url, strerror(err));
    char req[PATH_MAX_SE + 512];
    int rl = snprintf(req, sizeof req,
                      "GET %s HTTP/1.0\r\nHost: %s\r\nAccept: application/json\r\n"
                      "User-Agent: " SE_VERSION "\r\nConnection: close\r\n\r\n",
                      path, host);
    if (rl <= 0 || (size_t)rl >= sizeof req) {
        close(fd);
        return sl_fail(e, SL_ERR_INVALID, "%s: URL too long", url);
    }
    for (size_t off = 0; off < (size_t)rl;) {
        ssize_t w = send(fd, req + off, (size_t)rl - off, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(fd, POLLOUT, deadline) != 1) {
                close(fd);
                return sl_fail(e, SL_ERR_TIMEOUT, "%s: timed out sending the request", url);
            }
            continue;
        }
        if (w <= 0) {
            int se = errno;
            close(fd);
            return sl_fail(e, SL_ERR_IO, "%s: send: %s", url, strerror(se));
        }
        off += (size_t)w;
    }
    size_t cap = HDR_MAX + SE_BODY_MAX + 1, got = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return sl_fail(e, SL_ERR_NOMEM, "no memory");
    }
    for (;;) {
        ssize_t r = recv(fd, buf + got, cap - got, 0);
        if (r > 0) {
            got += (size_t)r;
            if (got == cap)
                break;
            continue;
        }
        if (r == 0)
            break;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN && wait_fd(fd, POLLIN, deadline) == 1)
            continue;
        int se = errno;
        close(fd);
        free(buf);
        return sl_fail(e, errno == EAGAIN ? SL_ERR_TIMEOUT : SL_ERR_IO, "%s: %s", url,
                       se == EAGAIN ? "timed out reading the answer" : strerror(se));
    }
    close(fd);
    buf[got] = '\0';
    rc = SL_OK;
    char *hend = got ? memmem(buf, got, "\r\n\r\n", 4) : NULL;
    int status = 0;
    if (got == cap)
        rc = sl_fail(e, SL_ERR_TOO_LARGE, "%s: answer larger than 1 MiB", url);
    else if (!hend || hend - buf > HDR_MAX)
        rc = sl_fail(e, SL_ERR_PROTOCOL, "%s: no complete HTTP header in the answer", url);
    else if (sscanf(buf, "HTTP/1.%*1[01] %3d", &status) != 1 || strncmp(buf, "HTTP/1.", 7) != 0)
        rc = sl_fail(e, SL_ERR_PROTOCOL, "%s: not an HTTP/1.x answer", url);
    else if (status != 200)
        rc = sl_fail(e, SL_ERR_IO, "%s: HTTP status %d", url, status);
    size_t blen = 0;
    if (rc == SL_OK) {
        *hend = '\0';
        char *body_start = hend + 4;
        blen = got - (size_t)(body_start - buf);
        /* strict header checks: no chunking; a Content-Length must match what came */
        for (char *line = strstr(buf, "\r\n"); rc == SL_OK && line; line = strstr(line, "\r\n")) {
            line += 2;
            if (strncasecmp(line, "Transfer-Encoding:", 18) == 0)
                rc = sl_fail(e, SL_ERR_PROTOCOL, "%s: Transfer-Encoding is not supported", url);
            else if (strncasecmp(line, "Content-Length:", 15) == 0) {
                char *end = NULL;
                errno = 0;
                unsigned long long cl = strtoull(line + 15, &end, 10);
                if (errno || end == line + 15 || (*end != '\r' && *end != '\0') ||
                    cl != (unsigned long long)blen)
                    rc = sl_fail(e, SL_ERR_PROTOCOL,
                                 "%s: Content-Length does not match the %zu body bytes", url, blen);
            }
        }
        if (rc == SL_OK)
            memmove(buf, body_start, blen + 1);
    }
    if (rc != SL_OK) {
        free(buf);
        return rc;
    }
    *body = buf;
    *len = blen;
    return SL_OK;
}

sl_code se_fetch(const char *source, int timeout_ms, char **body, size_t *len, sl_error *e)
{
    if (!source || !body || !len)
        return sl_fail(e, SL_ERR_INVALID, "se_fetch: NULL argument");
    *body = NULL;
    *len = 0;
    if (strncmp(source, "https://", 8) == 0)
        return sl_fail(e, SL_ERR_UNSUPPORTED,
                       "%s: https is not supported (the metadata service is plain http)", source);
    if (strncmp(source, "http://", 7) == 0)
        return http_get(source, timeout_ms > 0 ? timeout_ms : 10000, body, len, e);
    return read_path(source, body, len, e);
}

/* ---------------------------------------------------------------- files */

sl_code se_write_atomic(const char *dir, const char *name, const void *data, size_t len,
                        mode_t mode, sl_error *e)
{
    char path[PATH_MAX_SE], tmp[PATH_MAX_SE + 16];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmpXXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return sl_fail(e, SL_ERR_IO, "cannot create a temporary file for %s: %s", path,
                       strerror(errno));
    int ok = fchmod(fd, mode) == 0;
    for (size_t off = 0; ok && off < len;) {
        ssize_t w = write(fd, (const char *)data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        ok = w > 0;
        off += ok ? (size_t)w : 0;
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
    return SL_OK;
}

static char *bio_str(BIO *b)
{
    char *d = NULL;
    long n = BIO_get_mem_data(b, &d);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) {
        memcpy(s, d, (size_t)n);
        s[n] = '\0';
    }
    return s;
}

static int64_t asn1_unix(const ASN1_TIME *t)
{
    struct tm tm;
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    return (int64_t)timegm(&tm);
}

static X509 *read_cert(const char *path)
{
    BIO *b = BIO_new_file(path, "r");
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return x;
}

/* Verifies cert against the certificates of ca (trusting each one; the host CA may be an
 * intermediate whose root the bundle includes). */
static int verify_cert(X509 *cert, STACK_OF(X509) * ca, int64_t at, char *why, size_t wn)
{
    X509_STORE *st = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int ok = st && ctx;
    for (int i = 0; ok && i < sk_X509_num(ca); i++)
        ok = X509_STORE_add_cert(st, sk_X509_value(ca, i)) == 1;
    if (ok && X509_STORE_CTX_init(ctx, st, cert, NULL) == 1) {
        X509_VERIFY_PARAM *p = X509_STORE_CTX_get0_param(ctx);
        X509_VERIFY_PARAM_set_flags(p, X509_V_FLAG_PARTIAL_CHAIN | X509_V_FLAG_USE_CHECK_TIME);
        X509_VERIFY_PARAM_set_time(p, (time_t)at);
        X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT);
        ok = X509_verify_cert(ctx) == 1;
        if (!ok)
            snprintf(why, wn, "%s", X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
    } else {
        ok = 0;
        snprintf(why, wn, "cannot set up verification");
    }
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(st);
    ERR_clear_error();
    return ok;
}

sl_code se_check_current(const char *dir, int64_t now, int64_t *not_after, sl_error *e)
{
    char p[PATH_MAX_SE], why[160] = "";
    sl_code rc = SL_OK;
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    STACK_OF(X509) *ca = sk_X509_new_null();
    snprintf(p, sizeof p, "%s/backend.conf", dir);
    if (access(p, R_OK) != 0) {
        rc = sl_fail(e, SL_ERR_CONFIG, "%s: %s", p, strerror(errno));
        goto out;
    }
    snprintf(p, sizeof p, "%s/client.pem", dir);
    if (!(x = read_cert(p))) {
        rc = sl_fail(e, SL_ERR_CONFIG, "%s: no certificate", p);
        goto out;
    }
    snprintf(p, sizeof p, "%s/client.key", dir);
    BIO *b = BIO_new_file(p, "r");
    k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    if (!k || X509_check_private_key(x, k) != 1) {
        rc = sl_fail(e, SL_ERR_CONFIG, "%s: missing, or does not match client.pem", p);
        goto out;
    }
    snprintf(p, sizeof p, "%s/ca.pem", dir);
    b = BIO_new_file(p, "r");
    X509 *c;
    while (b && ca && (c = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL)
        if (!sk_X509_push(ca, c))
            X509_free(c);
    BIO_free(b);
    if (!ca || sk_X509_num(ca) == 0) {
        rc = sl_fail(e, SL_ERR_CONFIG, "%s: no CA certificate", p);
        goto out;
    }
    if (!verify_cert(x, ca, now, why, sizeof why)) {
        rc = sl_fail(e, SL_ERR_CONFIG, "client.pem does not verify against ca.pem: %s", why);
        goto out;
    }
    int64_t nb = asn1_unix(X509_get0_notBefore(x)), na = asn1_unix(X509_get0_notAfter(x));
    if (not_after)
        *not_after = na;
    if (na - now <= (na - nb) / 3)
        rc = sl_fail(e, SL_ERR_CERT_EXPIRED,
                     "client.pem has %lld s left, a third of its lifetime or less: renew",
                     (long long)(na - now));
out:
    ERR_clear_error();
    sk_X509_pop_free(ca, X509_free);
    EVP_PKEY_free(k);
    X509_free(x);
    return rc;
}

/* ---------------------------------------------------------------- enrolling */

static sl_code make_csr(EVP_PKEY **key, uint8_t **der, size_t *len, sl_error *e)
{
    *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    X509_REQ *req = X509_REQ_new();
    int ok =
        *key && req && X509_REQ_set_version(req, 0) == 1 &&
        X509_NAME_add_entry_by_NID(X509_REQ_get_subject_name(req), NID_commonName, MBSTRING_UTF8,
                                   (const unsigned char *)"sluice-guest", -1, -1, 0) == 1 &&
        X509_REQ_set_pubkey(req, *key) == 1 && X509_REQ_sign(req, *key, EVP_sha256()) > 0;
    int n = ok ? i2d_X509_REQ(req, NULL) : -1;
    *der = n > 0 ? malloc((size_t)n) : NULL;
    if (*der) {
        unsigned char *p = *der;
        i2d_X509_REQ(req, &p);
        *len = (size_t)n;
    }
    X509_REQ_free(req);
    ERR_clear_error();
    if (!*der) {
        EVP_PKEY_free(*key);
        *key = NULL;
        return sl_fail(e, SL_ERR_NOMEM, "cannot make the key and certificate request");
    }
    return SL_OK;
}

static sl_code ensure_dir(const char *dir, sl_error *e)
{
    if (mkdir(dir, 0750) != 0 && errno != EEXIST)
        return sl_fail(e, SL_ERR_IO, "cannot create %s: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sl_fail(e, SL_ERR_IO, "%s is not a directory", dir);
    if ((st.st_mode & 0777) != 0750 && chmod(dir, 0750) != 0)
        return sl_fail(e, SL_ERR_IO, "cannot chmod 0750 %s: %s", dir, strerror(errno));
    return SL_OK;
}

const char *se_status_name(int s)
{
    static const char *const n[] = {"STATUS_UNSPECIFIED",
                                    "OK",
                                    "BAD_TOKEN",
                                    "REPLAYED",
                                    "UNKNOWN_DOMAIN",
                                    "WRONG_PROJECT",
                                    "NOT_GPU_FLAVOR",
                                    "WRONG_SOURCE",
                                    "BAD_CSR",
                                    "RATE_LIMITED",
                                    "INTERNAL",
                                    "NOT_GRANTED"};
    return s >= 0 && s < (int)(sizeof n / sizeof *n) ? n[s] : "UNKNOWN_STATUS";
}

/* Checks the answer and writes the four files. */
static sl_code install(const char *dir, EVP_PKEY *key, const Sluice__Control__EnrollReply *r,
                       const char *enroll_endpoint, se_result *res, sl_error *e)
{
    const unsigned char *p = r->certificate_der.data;
    X509 *x = p ? d2i_X509(NULL, &p, (long)r->certificate_der.len) : NULL;
    STACK_OF(X509) *ca = sk_X509_new_null();
    const unsigned char *q = r->ca_chain_der.data, *qend = q + r->ca_chain_der.len;
    while (ca && q && q < qend) {
        X509 *c = d2i_X509(NULL, &q, (long)(qend - q));
        if (!c || !sk_X509_push(ca, c)) {
            X509_free(c);
            break;
        }
    }
    sl_code rc = SL_OK;
    char why[160] = "";
    BIO *cb = BIO_new(BIO_s_mem()), *kb = BIO_new(BIO_s_mem()), *ab = BIO_new(BIO_s_mem());
    char *cpem = NULL, *kpem = NULL, *apem = NULL;
    if (!x || p != r->certificate_der.data + r->certificate_der.len)
        rc = sl_fail(e, SL_ERR_PROTOCOL, "the agent's certificate is not one DER certificate");
    else if (!ca || sk_X509_num(ca) == 0 || q != qend)
        rc = sl_fail(e, SL_ERR_PROTOCOL, "the agent's CA chain is not a list of DER certificates");
    else if (X509_check_private_key(x, key) != 1)
        rc = sl_fail(e, SL_ERR_PROTOCOL, "the agent's certificate is not for our key");
    else if (!verify_cert(x, ca, (int64_t)time(NULL), why, sizeof why))
        rc = sl_fail(e, SL_ERR_PROTOCOL, "the agent's certificate does not verify: %s", why);
    else if (!r->backend_endpoint || strncmp(r->backend_endpoint, "tcp://", 6) != 0 ||
             strlen(r->backend_endpoint) >= sizeof res->endpoint ||
             strpbrk(r->backend_endpoint, "\r\n"))
        rc = sl_fail(e, SL_ERR_PROTOCOL, "the agent's backend endpoint is not tcp://HOST:PORT");
    if (rc == SL_OK) {
        int ok = cb && kb && ab && PEM_write_bio_X509(cb, x) == 1 &&
                 PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) == 1;
        for (int i = 0; ok && i < sk_X509_num(ca); i++)
            ok = PEM_write_bio_X509(ab, sk_X509_value(ca, i)) == 1;
        if (!ok || !(cpem = bio_str(cb)) || !(kpem = bio_str(kb)) || !(apem = bio_str(ab)))
            rc = sl_fail(e, SL_ERR_NOMEM, "cannot encode the files");
    }
    X509_NAME *subj = x ? X509_get_subject_name(x) : NULL;
    if (rc == SL_OK) {
        X509_NAME_get_text_by_NID(subj, NID_commonName, res->instance_id, sizeof res->instance_id);
        X509_NAME_get_text_by_NID(subj, NID_organizationalUnitName, res->project_id,
                                  sizeof res->project_id);
        snprintf(res->endpoint, sizeof res->endpoint, "%s", r->backend_endpoint);
        res->not_after = asn1_unix(X509_get0_notAfter(x));
    }
    /* the CA and the endpoint first, the key, then the certificate: a certificate that is
     * there always has its key (se_check_current checks that they match) */
    if (rc == SL_OK && (rc = ensure_dir(dir, e)) == SL_OK &&
        (rc = se_write_atomic(dir, "ca.pem", apem, strlen(apem), 0644, e)) == SL_OK &&
        (rc = se_write_conf(dir, res->endpoint, res->instance_id, res->project_id, res->not_after,
                            enroll_endpoint, e)) == SL_OK &&
        (rc = se_write_atomic(dir, "client.key", kpem, strlen(kpem), 0600, e)) == SL_OK)
        rc = se_write_atomic(dir, "client.pem", cpem, strlen(cpem), 0644, e);
    if (kpem)
        OPENSSL_cleanse(kpem, strlen(kpem));
    free(cpem);
    free(kpem);
    free(apem);
    BIO_free(cb);
    BIO_free(kb);
    BIO_free(ab);
    sk_X509_pop_free(ca, X509_free);
    X509_free(x);
    ERR_clear_error();
    return rc;
}

/* One source: its vendordata, the token's time, the exchange with the agent, the files. */
static sl_code enroll_from(const char *src, const char *key, const char *dir, int timeout,
                           se_result *res, sl_error *e)
{
    char *body = NULL;
    size_t blen = 0;
    sl_code rc = se_fetch(src, timeout, &body, &blen, e);
    if (rc != SL_OK)
        return rc;
    se_vendordata v;
    rc = se_vendordata_parse(src, body, blen, key, &v, e);
    free(body);
    if (rc != SL_OK)
        return rc;
    rc = se_vendordata_check_time(src, &v, (int64_t)time(NULL), e);
    EVP_PKEY *pk = NULL;
    uint8_t *csr = NULL;
    size_t csr_len = 0;
    if (rc == SL_OK)
        rc = make_csr(&pk, &csr, &csr_len, e);
    Sluice__Control__EnrollRequest q = SLUICE__CONTROL__ENROLL_REQUEST__INIT;
    q.token = v.token;
    q.csr_der.data = csr;
    q.csr_der.len = csr_len;
    q.client_version = (char *)SE_VERSION;
    Sluice__Control__EnrollReply *r = NULL;
    if (rc == SL_OK)
        rc = se_ask_agent(v.endpoint, v.ca, timeout, &q, &r, e);
    if (rc == SL_OK) {
        res->status = (int)r->status;
        if (r->status != SLUICE__CONTROL__ENROLL_REPLY__STATUS__OK)
            rc = sl_fail(e, SL_ERR_REFUSED, "agent refused enrollment: %s: %s",
                         se_status_name((int)r->status), r->detail ? r->detail : "");
        else if ((rc = install(dir, pk, r, v.endpoint, res, e)) == SL_OK)
            res->enrolled = 1;
    }
    if (r)
        sluice__control__enroll_reply__free_unpacked(r, NULL);
    free(csr);
    EVP_PKEY_free(pk);
    se_vendordata_free(&v);
    return rc;
}

/* The certificate in dir is good: asks the agent where the backend is now (a locate
 * request) and rewrites backend.conf if it moved; with check_grant asks the backend too.
 * 1: done (the files stay, res->note says why when the endpoint could not be confirmed);
 * 0: the agent or the backend no longer accepts the certificate (res->regrant): enroll anew. */
static int locate_current(const char *const *srcs, int n, const char *key, const char *dir,
                          int timeout, int check_grant, se_result *res)
{
    char ep[256];
    se_conf_get(dir, "enroll_endpoint", ep, sizeof ep);
    for (int i = 0; !ep[0] && i < n; i++) { /* an older backend.conf: vendordata names the agent */
        char *vbody = NULL;
        size_t vlen = 0;
        se_vendordata vv;
        sl_error ve;
        if (se_fetch(srcs[i], timeout, &vbody, &vlen, &ve) == SL_OK &&
            se_vendordata_parse(srcs[i], vbody, vlen, key, &vv, &ve) == SL_OK) {
            snprintf(ep, sizeof ep, "%s", vv.endpoint);
            se_vendordata_free(&vv);
        } else {
            snprintf(res->note, sizeof res->note, "%s", ve.msg);
        }
        free(vbody);
    }
    int not_granted = 0;
    sl_error le;
    if (ep[0] && se_locate(dir, ep, timeout, res, &not_granted, &le) != SL_OK && !not_granted)
        snprintf(res->note, sizeof res->note, "%s", le.msg);
    if (not_granted) { /* the agent no longer accepts the certificate: enroll anew */
        int64_t na = res->not_after;
        memset(res, 0, sizeof *res);
        res->not_after = na;
        res->regrant = 1;
        snprintf(res->regrant_why, sizeof res->regrant_why, "%s", le.msg);
        return 0;
    }
    /* the agent's answer or not, the backend has the last word on the certificate (a grant it
     * lost, a host CA that changed): only its refusal makes a new enrollment worth it; a
     * backend that does not answer may be restarting (status.h) */
    char bep[256];
    if (!check_grant || !se_read_endpoint(dir, bep, sizeof bep))
        return 1;
    se_grant g = se_grant_probe(dir, bep, timeout, res->regrant_why, sizeof res->regrant_why);
    if (g != SE_GRANT_REFUSED)
        return 1;     /* accepted, or the backend cannot be asked now */
    res->regrant = 1; /* a dead grant: enroll again */
    return 0;
}

sl_code se_enroll(const se_opts *o, se_result *res, sl_error *e)
{
    sl_error_clear(e);
    se_opts d = {0};
    if (o)
        d = *o;
    if (!res)
        return sl_fail(e, SL_ERR_INVALID, "se_enroll: NULL result");
    memset(res, 0, sizeof *res);
    const char *key = d.key ? d.key : SE_DEFAULT_KEY;
    const char *dir = d.dir ? d.dir : SE_DEFAULT_DIR;
    int timeout = d.timeout_ms > 0 ? d.timeout_ms : 10000;
    if (strlen(dir) > PATH_MAX_SE - 64)
        return sl_fail(e, SL_ERR_INVALID, "directory path too long");
    const char *srcs[2] = {d.source, NULL};
    int n = d.source ? 1 : se_default_sources(srcs);
    if (!d.renew && se_check_current(dir, (int64_t)time(NULL), &res->not_after, NULL) == SL_OK &&
        locate_current(srcs, n, key, dir, timeout, d.check_grant, res))
        return SL_OK;
    sl_code rc = SL_ERR_INVALID;
    for (int i = 0; i < n; i++) {
        rc = enroll_from(srcs[i], key, dir, timeout, res, e);
        if (rc == SL_OK)
            break;
        if (i + 1 < n) { /* kept for the caller; the next source may work */
            snprintf(res->tried[res->n_tried], sizeof res->tried[0], "%s", e->msg);
            res->n_tried++;
            sl_error_clear(e);
            res->status = 0;
        }
    }
    return rc;
}
