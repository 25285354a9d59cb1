/* The enrollment server (see enroll.h for the checks and their order). */
#include "enroll.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/evp.h>

#include "replay.h"
#include "sluice/channel.h"
#include "sluice/log.h"
#include "sluice/timefmt.h"
#include "sluice/token.h"
#include "sluice_control.pb-c.h"

#define COMPONENT       "enroll"
#define MAX_EVENTS      1024
#define SERVER_CN       "sluice-agent enrollment"
#define SERVER_LIFETIME (90 * 86400)

typedef Sluice__Control__EnrollReply Reply;

struct ag_enroll {
    ag_enroll_opts o;
    char *endpoint_cfg;
    char **names;
    ag_ca *ca;
    ag_enroll_env env;
    sl_token_keyset *tkeys;
    struct timespec tkeys_mtime; /* of token_key_file when it was loaded */
    ag_replay *replay;
    ag_ratelimit *rl;
    sl_server *srv;
    int64_t renew_at; /* re-issue the server certificate (and re-bind) after this */
    ag_enroll_stats stats;
};

static const char *const status_names[] = {
    "STATUS_UNSPECIFIED",
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
    "NOT_GRANTED",
};

const char *ag_enroll_status_name(int status)
{
    if (status < 0 || (size_t)status >= sizeof status_names / sizeof *status_names)
        return "UNKNOWN_STATUS";
    return status_names[status];
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------- addresses */

/* Parses an IPv4 or IPv6 literal; IPv4-mapped IPv6 becomes IPv4. Returns the family or 0. */
static int parse_ip(const char *s, unsigned char out[16])
{
    memset(out, 0, 16);
    if (!s || !*s)
        return 0;
    if (inet_pton(AF_INET, s, out) == 1)
        return AF_INET;
    char buf[64];
    size_t n = strcspn(s, "%"); /* a zone id does not identify a host */
    if (n >= sizeof buf)
        return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET6, buf, out) != 1)
        return 0;
    if (IN6_IS_ADDR_V4MAPPED((struct in6_addr *)out)) {
        memmove(out, out + 12, 4);
        memset(out + 4, 0, 12);
        return AF_INET;
    }
    return AF_INET6;
}

static int source_allowed(const ag_instance *inst, const char *addr)
{
    unsigned char a[16], b[16];
    int fa = parse_ip(addr, a);
    if (!fa)
        return 0;
    for (int i = 0; i < inst->n_ips && i < AG_MAX_IPS; i++) {
        int fb = parse_ip(inst->ips[i], b);
        if (fb == fa && memcmp(a, b, fa == AF_INET ? 4 : 16) == 0)
            return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- server (re)binding */

static sl_code bind_server(ag_enroll *en, sl_error *e)
{
    char *cert = NULL, *key = NULL;
    sl_code rc = ag_ca_issue_server(en->ca, SERVER_CN, (const char *const *)en->names,
                                    en->o.n_server_names, SERVER_LIFETIME, &cert, &key, e);
    if (rc != SL_OK)
        return rc;
    sl_tls_config cfg = {.mode = SL_TLS_SERVER_ONLY,
                         .ca_pem = ag_ca_cert_pem(en->ca),
                         .cert_pem = cert,
                         .key_pem = key};
    sl_channel_opts co;
    sl_channel_opts_default(&co);
    co.max_message = en->o.max_request;
    co.max_frame = 1 << 20;
    co.chunk_size = 64 * 1024;
    co.handshake_timeout_ms = en->o.handshake_timeout_ms;
    co.idle_timeout_ms = 10000; /* one request, one answer: nobody needs to linger */
    co.max_peers = 256;
    co.hwm = 16;
    sl_server *srv = NULL;
    sl_server_close(en->srv); /* a re-bind takes the same address */
    en->srv = NULL;
    rc = sl_server_bind(en->endpoint_cfg, &cfg, &co, NULL, &srv, e);
    size_t kl = strlen(key);
    memset(key, 0, kl);
    free(key);
    free(cert);
    if (rc != SL_OK) {
        en->renew_at = (int64_t)time(NULL) + 60; /* try again in a minute */
        return rc;
    }
    en->srv = srv;
    /* renew when a third of the lifetime is left */
    en->renew_at = (int64_t)time(NULL) + (SERVER_LIFETIME * 2) / 3;
    /* a port picked by the system stays the same across re-binds */
    if (strstr(en->endpoint_cfg, ":*")) {
        char *ep = strdup(sl_server_endpoint(srv));
        if (ep) {
            free(en->endpoint_cfg);
            en->endpoint_cfg = ep;
        }
    }
    sl_log(SL_LOG_INFO, COMPONENT, "enrollment endpoint %s (server certificate for %zu name(s))",
           sl_server_endpoint(srv), en->o.n_server_names);
    return SL_OK;
}

/* "K1, K2 and K3" for the log. */
static void describe_keys(const sl_token_keyset *ks, char *out, size_t cap)
{
    size_t n = sl_token_keyset_count(ks), len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? ", " : "",
                                sl_token_key_id(sl_token_keyset_key(ks, i)));
}

/* The token keys are loaded again when their file (or directory) changed: a key rotation's
 * public keys copied in; on failure the keys loaded before stay. */
static void refresh_keys(ag_enroll *en)
{
    struct stat st;
    if (en->o.token_key_pem || !en->o.token_key_file || stat(en->o.token_key_file, &st) != 0 ||
        (st.st_mtim.tv_sec == en->tkeys_mtime.tv_sec &&
         st.st_mtim.tv_nsec == en->tkeys_mtime.tv_nsec))
        return;
    en->tkeys_mtime = st.st_mtim;
    sl_token_keyset *fresh;
    sl_error e;
    if (sl_token_keyset_load(en->o.token_key_file, &fresh, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT,
               "token keys changed but are unusable, verifying with the "
               "keys loaded before: %s",
               e.msg);
        return;
    }
    sl_token_keyset_free(en->tkeys);
    en->tkeys = fresh;
    char kids[256];
    describe_keys(fresh, kids, sizeof kids);
    sl_log(SL_LOG_NOTICE, COMPONENT, "token keys reloaded from %s: %s", en->o.token_key_file, kids);
}

sl_code ag_enroll_open(const ag_enroll_opts *o, ag_ca *ca, const ag_enroll_env *env,
                       ag_enroll **out, sl_error *e)
{
    sl_error_clear(e);
    if (!o || !ca || !env || !out || !env->lookup || !env->backend_endpoint)
        return sl_fail(e, SL_ERR_INVALID, "ag_enroll_open: NULL argument or callback");
    *out = NULL;
    if (!o->endpoint || !o->replay_db || (!o->token_key_file && !o->token_key_pem))
        return sl_fail(e, SL_ERR_CONFIG,
                       "enrollment needs an endpoint, a replay database and the token key");
    if (o->n_server_names == 0 || !o->server_names)
        return sl_fail(e, SL_ERR_CONFIG,
                       "enrollment needs the names guests dial (server certificate SANs)");
    ag_enroll *en = calloc(1, sizeof *en);
    if (!en)
        return sl_fail(e, SL_ERR_NOMEM, "no memory for the enrollment server");
    en->o = *o;
    en->ca = ca;
    en->env = *env;
    if (en->o.token_skew_s == 0)
        en->o.token_skew_s = 60;
    else if (en->o.token_skew_s < 0)
        en->o.token_skew_s = 0;
    if (en->o.max_request == 0)
        en->o.max_request = AG_ENROLL_MAX_REQUEST;
    if (en->o.handshake_timeout_ms <= 0)
        en->o.handshake_timeout_ms = 5000;
    sl_code rc = SL_OK;
    if (en->o.token_skew_s > SL_TOKEN_MAX_SKEW || en->o.max_request < 1024 ||
        en->o.max_request > (1 << 20))
        rc = sl_fail(e, SL_ERR_CONFIG,
                     "enrollment: token skew (0..%d s) or max request "
                     "(1 KiB..1 MiB) out of range",
                     SL_TOKEN_MAX_SKEW);
    en->endpoint_cfg = strdup(o->endpoint);
    en->names = calloc(o->n_server_names, sizeof *en->names);
    if (rc == SL_OK && (!en->endpoint_cfg || !en->names))
        rc = sl_fail(e, SL_ERR_NOMEM, "no memory");
    for (size_t i = 0; rc == SL_OK && i < o->n_server_names; i++)
        if (!o->server_names[i] || !(en->names[i] = strdup(o->server_names[i])))
            rc = sl_fail(e, SL_ERR_INVALID, "bad server name %zu", i);
    en->o.server_names = NULL; /* the copies in en->names are used */
    if (rc == SL_OK) {
        struct stat st;
        if (o->token_key_pem)
            rc = sl_token_keyset_from_pem(o->token_key_pem, strlen(o->token_key_pem),
                                          "token_key_pem", &en->tkeys, e);
        else if ((rc = sl_token_keyset_load(o->token_key_file, &en->tkeys, e)) == SL_OK &&
                 stat(o->token_key_file, &st) == 0)
            en->tkeys_mtime = st.st_mtim;
    }
    if (rc == SL_OK)
        rc = ag_replay_open(o->replay_db, en->o.token_skew_s, &en->replay, e);
    if (rc == SL_OK && !(en->rl = ag_ratelimit_new(&o->ratelimit)))
        rc = sl_fail(e, SL_ERR_NOMEM, "no memory for the rate limiter");
    if (rc == SL_OK)
        rc = bind_server(en, e);
    if (rc != SL_OK) {
        ag_enroll_close(en);
        return rc;
    }
    char kids[256];
    describe_keys(en->tkeys, kids, sizeof kids);
    sl_log(SL_LOG_NOTICE, COMPONENT, "enrollment open on %s (token keys %s, skew %d s)",
           sl_server_endpoint(en->srv), kids, en->o.token_skew_s);
    *out = en;
    return SL_OK;
}

void ag_enroll_close(ag_enroll *en)
{
    if (!en)
        return;
    sl_server_close(en->srv);
    ag_ratelimit_free(en->rl);
    ag_replay_close(en->replay);
    sl_token_keyset_free(en->tkeys);
    if (en->names)
        for (size_t i = 0; i < en->o.n_server_names; i++)
            free(en->names[i]);
    free(en->names);
    free(en->endpoint_cfg);
    free(en);
}

int ag_enroll_fd(const ag_enroll *en)
{
    return en ? sl_server_fd(en->srv) : -1;
}

const char *ag_enroll_endpoint(const ag_enroll *en)
{
    return en ? sl_server_endpoint(en->srv) : "";
}

void ag_enroll_get_stats(const ag_enroll *en, ag_enroll_stats *st)
{
    if (en && st)
        *st = en->stats;
}

/* ---------------------------------------------------------------- one request */

typedef struct verdict {
    int status;
    char detail[SL_ERROR_MSG_MAX + 64];
    int counts; /* a failure charged to the source address */
} verdict;

static int refuse(verdict *v, int status, int counts, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(verdict *v, int status, int counts, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->detail, sizeof v->detail, fmt, ap);
    va_end(ap);
    v->status = status;
    v->counts = counts;
    return status;
}

#define S(x) SLUICE__CONTROL__ENROLL_REPLY__STATUS__##x

/* A locate request: the guest's current certificate, for the endpoint of its backend now. The
 * certificate counts only as the fingerprint (SHA-256 of its DER) of a grant the agent holds
 * and that has not expired, so only certificates this agent issued and has not revoked are
 * answered; the rest of the checks are enrollment's (running GPU domain, source address). The
 * answer is no secret (a port on the host), and proof of the key is left to the backend. */
static int locate(ag_enroll *en, const char *addr, const Sluice__Control__EnrollRequest *q,
                  Reply *r, char *endpoint, size_t endpoint_n, verdict *v, char *who, size_t who_n)
{
    if ((q->token && *q->token) || q->csr_der.len)
        return refuse(v, S(NOT_GRANTED), 1, "a locate request carries no token and no CSR");
    uint8_t md[32];
    unsigned mdn = 0;
    char fp[65], uuid[64] = "";
    if (EVP_Digest(q->locate_cert_der.data, q->locate_cert_der.len, md, &mdn, EVP_sha256(), NULL) !=
            1 ||
        mdn != sizeof md)
        return refuse(v, S(INTERNAL), 0, "cannot hash the certificate");
    for (int i = 0; i < 32; i++)
        snprintf(fp + 2 * i, 3, "%02x", md[i]);
    snprintf(who, who_n, " (locate, certificate sha256 %.16s...)", fp);
    if (!en->env.granted || !en->env.granted(en->env.user, fp, uuid, sizeof uuid))
        return refuse(v, S(NOT_GRANTED), 1,
                      "the certificate is not one this host's backends accept (not issued here, "
                      "expired or revoked): enroll again");
    ag_instance inst;
    if (!en->env.lookup(en->env.user, uuid, &inst) || !inst.running)
        return refuse(v, S(UNKNOWN_DOMAIN), 1, "domain %s is not running here", uuid);
    if (!inst.gpu)
        return refuse(v, S(NOT_GPU_FLAVOR), 1, "flavor %s of domain %s is not a GPU flavor",
                      inst.flavor, uuid);
    if (!source_allowed(&inst, addr))
        return refuse(v, S(WRONG_SOURCE), 1,
                      "connection from %s is not from one of the %d port address(es) of domain %s",
                      addr, inst.n_ips, uuid);
    if (!en->env.backend_endpoint(en->env.user, inst.project_id, endpoint, endpoint_n) ||
        !*endpoint)
        return refuse(v, S(INTERNAL), 0, "the backend of project %s is not running; retry",
                      inst.project_id);
    snprintf(who, who_n, " instance %.40s project %.64s (locate)", uuid, inst.project_id);
    r->backend_endpoint = endpoint;
    v->status = S(OK);
    snprintf(v->detail, sizeof v->detail, "backend %s", endpoint);
    sl_log(SL_LOG_INFO, COMPONENT, "located the backend of instance %s project %s for %s: %s", uuid,
           inst.project_id, addr, endpoint);
    return S(OK);
}

/* Decides one request; on OK fills the reply's certificate fields (cert is malloc'd). */
static int decide(ag_enroll *en, const char *addr, const void *msg, size_t len, uint64_t bulk,
                  Reply *r, uint8_t **cert, char *endpoint, size_t endpoint_n, verdict *v,
                  char *who, size_t who_n)
{
    int64_t now_ms = mono_ms();
    if (!ag_ratelimit_allow(en->rl, addr, now_ms))
        return refuse(v, S(RATE_LIMITED), 0, "too many failed attempts from %s; retry in %d s",
                      addr, ag_ratelimit_retry_after(en->rl, addr, now_ms));
    if (bulk)
        return refuse(v, S(BAD_TOKEN), 1, "malformed request: %llu unexpected bulk bytes",
                      (unsigned long long)bulk);
    Sluice__Control__EnrollRequest *q = sluice__control__enroll_request__unpack(NULL, len, msg);
    if (!q)
        return refuse(v, S(BAD_TOKEN), 1, "malformed request: %zu bytes are not an EnrollRequest",
                      len);
    if (q->locate_cert_der.len) {
        int ls = locate(en, addr, q, r, endpoint, endpoint_n, v, who, who_n);
        sluice__control__enroll_request__free_unpacked(q, NULL);
        return ls;
    }
    int st = S(OK);
    sl_error err;
    sl_token_claims c;
    memset(&c, 0, sizeof c);
    sl_token_verify_opts vo = {.issuer = en->o.token_issuer, .skew = en->o.token_skew_s};
    refresh_keys(en);
    if (!q->token || !*q->token) {
        st = refuse(v, S(BAD_TOKEN), 1, "request carries no token");
    } else if (sl_token_verify_keyset(en->tkeys, q->token, &vo, &c, &err) != SL_OK) {
        sl_token_claims u;
        if (sl_token_decode_unverified(q->token, &u, NULL) == SL_OK)
            snprintf(who, who_n, " (unverified sub %.64s)", u.sub);
        /* the token's own dates, in words a tenant reads: 'cert-expired' named no certificate */
        int late = err.code == SL_ERR_CERT_EXPIRED && strstr(err.msg, "claim exp");
        int early = err.code == SL_ERR_CERT_EXPIRED && !late;
        st = refuse(v, S(BAD_TOKEN), 1, "token refused: %s: %s%s",
                    late    ? "expired"
                    : early ? "not yet valid"
                            : sl_code_name(err.code),
                    err.msg,
                    late ? " (a token lives 10 minutes: sluice-enroll fetches a new one when run "
                           "again; if this repeats, the clocks of this host and of nova-hook's "
                           "host differ)"
                    : early ? " (the clocks of this host and of nova-hook's host differ: NTP)"
                            : "");
    }
    if (st == S(OK)) {
        snprintf(who, who_n, " instance %.64s project %.64s jti %.64s", c.sub, c.project_id, c.jti);
        /* the token verified: its instance and project are the journal's fields from here */
        sl_log_set_thread_fields(&(sl_log_fields){.project = c.project_id, .instance = c.sub});
    }
    int fresh = 0;
    if (st == S(OK) && ag_replay_use(en->replay, c.jti, c.exp, c.sub, &fresh, &err) != SL_OK)
        st = refuse(v, S(INTERNAL), 0, "cannot record the token id: %s", err.msg);
    else if (st == S(OK) && !fresh)
        st = refuse(v, S(REPLAYED), 1, "token %s was already used", c.jti);
    ag_instance inst;
    memset(&inst, 0, sizeof inst);
    if (st == S(OK)) {
        if (!en->env.lookup(en->env.user, c.sub, &inst))
            st = refuse(v, S(UNKNOWN_DOMAIN), 1, "no domain with uuid %s on this host", c.sub);
        else if (!inst.running)
            st = refuse(v, S(UNKNOWN_DOMAIN), 1, "domain %s (%s) is not running", c.sub,
                        inst.domain);
        else if (strcmp(inst.project_id, c.project_id) != 0)
            st = refuse(v, S(WRONG_PROJECT), 1, "domain %s belongs to project %s, not %s", c.sub,
                        inst.project_id, c.project_id);
        else if (!inst.gpu)
            st = refuse(v, S(NOT_GPU_FLAVOR), 1, "flavor %s of domain %s is not a GPU flavor",
                        inst.flavor, c.sub);
        else if (!source_allowed(&inst, addr))
            st = refuse(v, S(WRONG_SOURCE), 1,
                        "connection from %s is not from one of the %d port address(es) of "
                        "domain %s",
                        addr, inst.n_ips, c.sub);
        else if (!en->env.backend_endpoint(en->env.user, c.project_id, endpoint, endpoint_n) ||
                 !*endpoint)
            st = refuse(v, S(INTERNAL), 0, "the backend of project %s is not running; retry",
                        c.project_id);
    }
    if (st == S(OK)) {
        size_t cert_len = 0;
        int64_t na = 0;
        char fp[65];
        sl_code rc = ag_ca_sign_client(en->ca, q->csr_der.data, q->csr_der.len, c.sub, c.project_id,
                                       cert, &cert_len, &na, fp, &err);
        if (rc == SL_ERR_INVALID) {
            st = refuse(v, S(BAD_CSR), 1, "certificate request refused: %s", err.msg);
        } else if (rc != SL_OK) {
            st = refuse(v, S(INTERNAL), 0, "cannot sign: %s", err.msg);
        } else {
            if (en->env.issued)
                en->env.issued(en->env.user, &inst, fp, na);
            size_t chain_len = 0;
            const uint8_t *chain = ag_ca_chain_der(en->ca, &chain_len);
            r->certificate_der.data = *cert;
            r->certificate_der.len = cert_len;
            r->ca_chain_der.data = (uint8_t *)chain;
            r->ca_chain_der.len = chain_len;
            r->backend_endpoint = endpoint;
            r->not_after_unix = na;
            v->status = S(OK);
            char until[48];
            sl_time_utc(na, until, sizeof until);
            snprintf(v->detail, sizeof v->detail,
                     "enrolled: certificate sha256 %s until %s, backend %s", fp, until, endpoint);
            sl_log(SL_LOG_NOTICE, COMPONENT,
                   "enrolled instance %s project %s (domain %s, flavor %s) from %s (client %.32s): "
                   "certificate sha256 %s until %s",
                   c.sub, c.project_id, inst.domain, inst.flavor, addr,
                   q->client_version ? q->client_version : "", fp, until);
        }
    }
    sluice__control__enroll_request__free_unpacked(q, NULL);
    return st;
}

int ag_enroll_answer(ag_enroll *en, const char *addr, const void *msg, size_t len, uint64_t bulk,
                     uint8_t **out, size_t *out_len)
{
    Reply r = SLUICE__CONTROL__ENROLL_REPLY__INIT;
    uint8_t *cert = NULL;
    char endpoint[256] = "", who[320] = "";
    verdict v = {0};
    int st =
        decide(en, addr, msg, len, bulk, &r, &cert, endpoint, sizeof endpoint, &v, who, sizeof who);
    r.status = (Sluice__Control__EnrollReply__Status)st;
    r.detail = v.detail;
    if (st == S(OK)) {
        en->stats.ok++;
    } else {
        en->stats.refused[st & 15]++;
        int left = v.counts ? ag_ratelimit_fail(en->rl, addr, mono_ms()) : -1;
        sl_log(SL_LOG_WARNING, COMPONENT, "refused enrollment from %s%s: %s: %s%s", addr, who,
               ag_enroll_status_name(st), v.detail,
               left == 0 ? " (further attempts from this address are now rate-limited)" : "");
    }
    size_t n = sluice__control__enroll_reply__get_packed_size(&r);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf)
        sluice__control__enroll_reply__pack(&r, buf);
    free(cert);
    *out = buf;
    *out_len = buf ? n : 0;
    return st;
}

static void handle(ag_enroll *en, const sl_server_event *ev)
{
    const char *addr =
        ev->identity && ev->identity->address[0] ? ev->identity->address : "unknown-address";
    uint8_t *buf = NULL;
    size_t n = 0;
    ag_enroll_answer(en, addr, ev->msg, ev->len, ev->bulk_len, &buf, &n);
    sl_error err;
    if (buf && sl_server_send(en->srv, ev->peer, buf, n, NULL, 0, &err) != SL_OK)
        sl_log(SL_LOG_WARNING, COMPONENT, "cannot answer %s: %s", addr, err.msg);
    free(buf);
    sl_server_disconnect(en->srv, ev->peer, SL_ERR_CLOSED, "enrollment answered", &err);
    sl_log_set_thread_fields(NULL);
}

sl_code ag_enroll_poll(ag_enroll *en, int timeout_ms, sl_error *err)
{
    sl_error_clear(err);
    if (!en)
        return sl_fail(err, SL_ERR_INVALID, "ag_enroll_poll: NULL server");
    if ((int64_t)time(NULL) >= en->renew_at) {
        sl_error re;
        if (bind_server(en, &re) != SL_OK)
            sl_log(SL_LOG_ERR, COMPONENT, "cannot renew the enrollment certificate: %s", re.msg);
    }
    if (!en->srv)
        return sl_fail(err, SL_ERR_IO, "the enrollment endpoint is not bound (see the log)");
    for (int i = 0; i < MAX_EVENTS; i++) {
        sl_server_event ev;
        sl_code rc = sl_server_poll(en->srv, i == 0 ? timeout_ms : 0, &ev, err);
        if (rc != SL_OK)
            return rc;
        if (ev.kind == SL_EV_NONE)
            break;
        if (ev.kind == SL_EV_MESSAGE)
            handle(en, &ev);
    }
    return SL_OK;
}
