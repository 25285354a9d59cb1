/* sluice-enroll: the exchange with the agent, locate requests and backend.conf. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "enroll_internal.h"
#include "sluice/channel.h"

#define PATH_MAX_SE 4096

sl_code se_write_conf(const char *dir, const char *endpoint, const char *instance,
                      const char *project, int64_t not_after, const char *enroll_endpoint,
                      sl_error *e)
{
    char conf[1400];
    int cl = snprintf(conf, sizeof conf,
                      "# Written by sluice-enroll; read by the Sluice frontend (libcuda.so.1).\n"
                      "endpoint = %s\ninstance_id = %s\nproject_id = %s\nnot_after = %lld\n"
                      "enroll_endpoint = %s\n",
                      endpoint, instance, project, (long long)not_after, enroll_endpoint);
    if (cl < 0 || (size_t)cl >= sizeof conf)
        return sl_fail(e, SL_ERR_INVALID, "backend.conf would be too long");
    return se_write_atomic(dir, "backend.conf", conf, (size_t)cl, 0644, e);
}

void se_conf_get(const char *dir, const char *key, char *out, size_t n)
{
    char path[PATH_MAX_SE], line[1024];
    out[0] = '\0';
    snprintf(path, sizeof path, "%s/backend.conf", dir);
    FILE *f = fopen(path, "r");
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp(p, key, kl) != 0)
            continue;
        p += kl;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p++ != '=')
            continue;
        while (*p == ' ' || *p == '\t')
            p++;
        p[strcspn(p, " \t\r\n#")] = '\0';
        snprintf(out, n, "%s", p);
        break;
    }
    if (f)
        fclose(f);
}

sl_code se_ask_agent(const char *endpoint, const char *ca_pem, int timeout_ms,
                     const Sluice__Control__EnrollRequest *q, Sluice__Control__EnrollReply **r,
                     sl_error *e)
{
    *r = NULL;
    size_t qn = sluice__control__enroll_request__get_packed_size(q);
    uint8_t *qbuf = malloc(qn ? qn : 1);
    if (!qbuf)
        return sl_fail(e, SL_ERR_NOMEM, "no memory");
    sluice__control__enroll_request__pack(q, qbuf);
    sl_client *c = NULL;
    sl_tls_config cfg = {.mode = SL_TLS_SERVER_ONLY, .ca_pem = ca_pem};
    sl_channel_opts co;
    sl_channel_opts_default(&co);
    co.handshake_timeout_ms = timeout_ms;
    co.io_timeout_ms = timeout_ms;
    co.max_message = 1 << 20;
    co.max_frame = 2 << 20;
    co.chunk_size = 64 * 1024;
    sl_error ce;
    sl_code rc = SL_OK;
    if (sl_client_connect(endpoint, &cfg, &co, &c, &ce) != SL_OK)
        rc = sl_fail(e, ce.code, "cannot reach the agent at %s: %s", endpoint, ce.msg);
    if (rc == SL_OK && sl_client_send(c, qbuf, qn, NULL, 0, &ce) != SL_OK)
        rc = sl_fail(e, ce.code, "cannot send the request to %s: %s", endpoint, ce.msg);
    const void *m = NULL;
    size_t mlen = 0;
    if (rc == SL_OK && sl_client_recv(c, &m, &mlen, NULL, timeout_ms, &ce) != SL_OK)
        rc = sl_fail(e, ce.code, "no answer from the agent at %s: %s", endpoint, ce.msg);
    if (rc == SL_OK && !(*r = sluice__control__enroll_reply__unpack(NULL, mlen, m)))
        rc = sl_fail(e, SL_ERR_PROTOCOL, "the agent's answer is not an EnrollReply");
    sl_client_close(c);
    free(qbuf);
    return rc;
}

/* The file's contents, NUL-terminated (malloc'd), or NULL. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(65537);
    size_t n = buf ? fread(buf, 1, 65536, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = '\0';
    *len = n;
    return buf;
}

sl_code se_locate(const char *dir, const char *enroll_endpoint, int timeout_ms, se_result *res,
                  int *not_granted, sl_error *e)
{
    *not_granted = 0;
    char p[PATH_MAX_SE];
    size_t calen = 0;
    snprintf(p, sizeof p, "%s/ca.pem", dir);
    char *ca = slurp(p, &calen);
    snprintf(p, sizeof p, "%s/client.pem", dir);
    BIO *b = BIO_new_file(p, "r");
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    unsigned char *der = NULL;
    int derlen = x ? i2d_X509(x, &der) : -1;
    char instance[64] = "", project[64] = "";
    if (x) {
        X509_NAME *subj = X509_get_subject_name(x);
        X509_NAME_get_text_by_NID(subj, NID_commonName, instance, sizeof instance);
        X509_NAME_get_text_by_NID(subj, NID_organizationalUnitName, project, sizeof project);
    }
    X509_free(x);
    ERR_clear_error();
    sl_code rc = SL_OK;
    Sluice__Control__EnrollReply *r = NULL;
    if (!ca || derlen <= 0) {
        rc = sl_fail(e, SL_ERR_CONFIG, "%s/ca.pem or client.pem cannot be read", dir);
    } else {
        Sluice__Control__EnrollRequest q = SLUICE__CONTROL__ENROLL_REQUEST__INIT;
        q.locate_cert_der.data = der;
        q.locate_cert_der.len = (size_t)derlen;
        q.client_version = (char *)SE_VERSION;
        rc = se_ask_agent(enroll_endpoint, ca, timeout_ms, &q, &r, e);
    }
    if (rc == SL_OK && r->status != SLUICE__CONTROL__ENROLL_REPLY__STATUS__OK) {
        *not_granted = r->status == SLUICE__CONTROL__ENROLL_REPLY__STATUS__NOT_GRANTED;
        rc = sl_fail(e, SL_ERR_REFUSED, "the agent answered the locate request with %s: %s",
                     se_status_name((int)r->status), r->detail ? r->detail : "");
    }
    if (rc == SL_OK && (!r->backend_endpoint || strncmp(r->backend_endpoint, "tcp://", 6) != 0 ||
                        strlen(r->backend_endpoint) >= sizeof res->endpoint ||
                        strpbrk(r->backend_endpoint, " \t\r\n#")))
        rc = sl_fail(e, SL_ERR_PROTOCOL, "the agent's backend endpoint is not tcp://HOST:PORT");
    if (rc == SL_OK) {
        char cur[256];
        se_conf_get(dir, "endpoint", cur, sizeof cur);
        snprintf(res->endpoint, sizeof res->endpoint, "%s", r->backend_endpoint);
        snprintf(res->instance_id, sizeof res->instance_id, "%s", instance);
        snprintf(res->project_id, sizeof res->project_id, "%s", project);
        res->located = 1;
        if (strcmp(cur, res->endpoint) != 0) {
            snprintf(res->old_endpoint, sizeof res->old_endpoint, "%s", cur);
            rc = se_write_conf(dir, res->endpoint, instance, project, res->not_after,
                               enroll_endpoint, e);
            res->moved = rc == SL_OK;
        }
    }
    if (r)
        sluice__control__enroll_reply__free_unpacked(r, NULL);
    OPENSSL_free(der);
    free(ca);
    return rc;
}
