/* libmicrohttpd server for the vendordata endpoint. Every decision about a request is made on
 * its first callback (authentication, method, path, declared length); the body is then either
 * buffered (up to max_body) or discarded, and the answer is queued once it is complete. */
#include "http.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/log.h"

#define COMPONENT       "nova-hook/http"
#define HARD_CAP_FACTOR 16 /* a declared length over max_body * this is cut off at once */

struct nh_http {
    struct MHD_Daemon *d;
    char *cert, *key, *trust, *path, *cn;
    size_t max_body;
    const nh_vendordata *vd;
};

typedef struct req {
    int status; /* 0 until decided: then the error status to answer */
    char *buf;
    size_t len;
} req;

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n')
        line[--n] = '\0';
    sl_log(SL_LOG_WARNING, COMPONENT, "libmicrohttpd: %s", line);
}

static void peer_name(struct MHD_Connection *c, char *out, size_t cap)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(out, cap, "?");
    if (!ci || !ci->client_addr)
        return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
                  (socklen_t)cap);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out,
                  (socklen_t)cap);
}

/* 1 if name is in the comma-separated list. */
static int cn_allowed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && *p == ' ')
            p++, len--;
        while (len && p[len - 1] == ' ')
            len--;
        if (len == n && memcmp(p, name, n) == 0)
            return 1;
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

/* 0 when the client presented a certificate that verifies against our trust list (and has an
 * allowed CN); else the HTTP status to answer: 401 (none) or 403 (not trusted). */
static int authenticate(const nh_http *h, struct MHD_Connection *c, char *why, size_t cap)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (!ci || !ci->tls_session) {
        snprintf(why, cap, "no TLS session");
        return 401;
    }
    gnutls_session_t s = (gnutls_session_t)ci->tls_session;
    unsigned int n = 0;
    const gnutls_datum_t *certs = gnutls_certificate_get_peers(s, &n);
    if (!certs || n == 0) {
        snprintf(why, cap, "no client certificate");
        return 401;
    }
    unsigned int status = 0;
    int rc = gnutls_certificate_verify_peers2(s, &status);
    if (rc != GNUTLS_E_SUCCESS || status != 0) {
        gnutls_datum_t txt = {NULL, 0};
        if (rc == GNUTLS_E_SUCCESS &&
            gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &txt, 0) == 0)
            snprintf(why, cap, "client certificate refused: %s", (const char *)txt.data);
        else
            snprintf(why, cap, "client certificate refused: %s", gnutls_strerror(rc));
        gnutls_free(txt.data);
        return 403;
    }
    if (!h->cn || !*h->cn)
        return 0;
    gnutls_x509_crt_t crt;
    char cn[256] = "";
    size_t cnlen = sizeof cn;
    int ok = gnutls_x509_crt_init(&crt) == 0;
    if (ok) {
        ok = gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER) == 0 &&
             gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn, &cnlen) == 0;
        gnutls_x509_crt_deinit(crt);
    }
    if (!ok || !cn_allowed(h->cn, cn)) {
        snprintf(why, cap, "client certificate CN \"%.64s\" not allowed", ok ? cn : "?");
        return 403;
    }
    return 0;
}

static enum MHD_Result respond(struct MHD_Connection *c, int status, const char *body)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    if (*body)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned int)status, r);
    MHD_destroy_response(r);
    return ret;
}

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Every refusal is logged, with the peer: a guest left without a token must be explainable. */
static int refuse(struct MHD_Connection *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(struct MHD_Connection *c, int status, const char *fmt, ...)
{
    char why[320], peer[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    peer_name(c, peer, sizeof peer);
    sl_log(SL_LOG_WARNING, COMPONENT, "refused %s: %s (HTTP %d)", peer, why, status);
    return status;
}

/* The first callback of a request: decide everything that does not need the body. */
static int first_look(nh_http *h, struct MHD_Connection *c, const char *url, const char *method,
                      int *cut_off)
{
    char why[256];
    int st = authenticate(h, c, why, sizeof why);
    if (st)
        return refuse(c, st, "%s", why);
    if (strcmp(method, MHD_HTTP_METHOD_POST) != 0)
        return refuse(c, 405, "method %.16s (only POST)", method);
    if (strcmp(url, h->path) != 0)
        return refuse(c, 404, "path %.128s (the vendordata path is %s)", url, h->path);
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (cl) {
        unsigned long long n = strtoull(cl, NULL, 10);
        if (n > h->max_body) {
            *cut_off = n > (unsigned long long)h->max_body * HARD_CAP_FACTOR;
            return refuse(c, 413,
                          "a body of %llu bytes, over max_body %zu: the instance gets no token; "
                          "raise max_body (docs/nova-hook.md)",
                          n, h->max_body);
        }
    }
    return 0;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *size, void **ctx)
{
    (void)version;
    nh_http *h = cls;
    req *r = *ctx;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        *ctx = r;
        int cut_off = 0;
        r->status = first_look(h, c, url, method, &cut_off);
        if (cut_off)
            return respond(c, 413, ""); /* do not read a body that large at all */
        return MHD_YES;
    }
    if (*size) {
        if (!r->status) {
            if (r->len + *size > h->max_body) {
                r->status = refuse(c, 413,
                                   "a body (no Content-Length) over max_body %zu bytes: the "
                                   "instance gets no token; raise max_body (docs/nova-hook.md)",
                                   h->max_body);
                free(r->buf);
                r->buf = NULL;
            } else {
                char *nb = realloc(r->buf, r->len + *size + 1);
                if (!nb)
                    return MHD_NO;
                memcpy(nb + r->len, data, *size);
                r->buf = nb;
                r->len += *size;
            }
        }
        *size = 0; /* consumed (or discarded) */
        return MHD_YES;
    }
    if (r->status)
        return respond(c, r->status, r->status == 401 || r->status == 403 ? "" : "{}");
    int64_t t0 = mono_us();
    nh_vd_answer a;
    nh_vendordata_answer(h->vd, r->buf ? r->buf : "", r->len, (int64_t)time(NULL), &a);
    enum MHD_Result ret = respond(c, a.status, a.body ? a.body : "{}");
    int level = a.status == 200 ? SL_LOG_INFO : SL_LOG_WARNING;
    if (sl_log_enabled((enum sl_log_level)level))
        sl_log((enum sl_log_level)level, COMPONENT, "vendordata HTTP %d in %lld us: %s", a.status,
               (long long)(mono_us() - t0), a.why);
    free(a.body);
    return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **ctx,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    req *r = *ctx;
    if (r) {
        free(r->buf);
        free(r);
        *ctx = NULL;
    }
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

sl_code nh_http_start(const nh_http_opts *o, nh_http **out, sl_error *e)
{
    nh_http *h = calloc(1, sizeof *h);
    if (!h)
        return sl_fail(e, SL_ERR_NOMEM, "http: out of memory");
    h->cert = dup_or_null(o->cert_pem);
    h->key = dup_or_null(o->key_pem);
    h->trust = dup_or_null(o->trust_pem);
    h->path = dup_or_null(o->path);
    h->cn = dup_or_null(o->client_cn ? o->client_cn : "");
    h->max_body = o->max_body;
    h->vd = o->vd;
    if (!h->cert || !h->key || !h->trust || !h->path || !h->cn) {
        nh_http_stop(h);
        return sl_fail(e, SL_ERR_INVALID, "http: certificate, key, trust list and path needed");
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned int flags = MHD_USE_TLS | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, o->addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)o->port);
    } else if (inet_pton(AF_INET6, o->addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)o->port);
        flags |= MHD_USE_IPv6;
    } else {
        nh_http_stop(h);
        return sl_fail(e, SL_ERR_CONFIG, "http: listen address %s is not an IP literal", o->addr);
    }
    /* libmicrohttpd wants the logger first, or it warns through its default one */
    h->d = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, handle, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_HTTPS_MEM_CERT, h->cert,
        MHD_OPTION_HTTPS_MEM_KEY, h->key, MHD_OPTION_HTTPS_MEM_TRUST, h->trust,
        MHD_OPTION_HTTPS_PRIORITIES, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2",
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)o->threads, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)10, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)512,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)64, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)(64 * 1024), MHD_OPTION_NOTIFY_COMPLETED, completed, h, MHD_OPTION_END);
    if (!h->d) {
        nh_http_stop(h);
        return sl_fail(e, SL_ERR_IO,
                       "http: cannot start HTTPS on %s:%d (address in use, or a bad "
                       "certificate, key or CA)",
                       o->addr, o->port);
    }
    *out = h;
    return SL_OK;
}

int nh_http_port(const nh_http *h)
{
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    return di ? (int)di->port : -1;
}

void nh_http_stop(nh_http *h)
{
    if (!h)
        return;
    if (h->d)
        MHD_stop_daemon(h->d);
    free(h->cert);
    if (h->key) {
        memset(h->key, 0, strlen(h->key));
        free(h->key);
    }
    free(h->trust);
    free(h->path);
    free(h->cn);
    free(h);
}
