/* sluice-enroll --status and the grant probe (status.h). */
#include "status.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "enroll_client.h"
#include "sluice/channel.h"
#include "sluice/tcp_probe.h"
#include "sluice/timefmt.h"

int se_read_endpoint(const char *dir, char *out, size_t cap)
{
    char path[600], line[512];
    snprintf(path, sizeof path, "%s/backend.conf", dir);
    FILE *f = fopen(path, "r");
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        char *v = line;
        while (*v == ' ' || *v == '\t')
            v++;
        if (strncmp(v, "endpoint", 8) != 0)
            continue;
        v += 8;
        while (*v == ' ' || *v == '\t')
            v++;
        if (*v++ != '=')
            continue;
        while (*v == ' ' || *v == '\t')
            v++;
        v[strcspn(v, " \t\r\n")] = '\0';
        found = *v && strlen(v) < cap;
        if (found)
            memcpy(out, v, strlen(v) + 1);
    }
    if (f)
        fclose(f);
    return found;
}

se_grant se_grant_probe(const char *dir, const char *endpoint, int timeout_ms, char *why, size_t n)
{
    char probe[96];
    sl_tcp_state tcp = sl_tcp_probe(endpoint, timeout_ms, probe, sizeof probe);
    if (tcp == SL_TCP_REFUSED) {
        snprintf(why, n, "nothing listens at %s (connection refused)", endpoint);
        return SE_GRANT_NO_BACKEND;
    }
    if (tcp != SL_TCP_OPEN) {
        snprintf(why, n, "%s does not answer: %s", endpoint, probe);
        return SE_GRANT_UNKNOWN;
    }
    char ca[600], cert[600], key[600];
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(cert, sizeof cert, "%s/client.pem", dir);
    snprintf(key, sizeof key, "%s/client.key", dir);
    sl_tls_config tls = {.mode = SL_TLS_MUTUAL, .ca_file = ca, .cert_file = cert, .key_file = key};
    sl_channel_opts o;
    sl_channel_opts_default(&o);
    o.handshake_timeout_ms = timeout_ms;
    o.connect_attempts = 1;
    sl_client *c = NULL;
    sl_error e;
    if (sl_client_connect(endpoint, &tls, &o, &c, &e) == SL_OK) {
        sl_client_close(c);
        snprintf(why, n, "the backend at %s accepts this certificate", endpoint);
        return SE_GRANT_LIVE;
    }
    snprintf(why, n, "%s", e.msg);
    switch (e.code) {
    case SL_ERR_REFUSED:
    case SL_ERR_REVOKED:
    case SL_ERR_UNKNOWN_CA:
    case SL_ERR_CERT_EXPIRED:
        return SE_GRANT_REFUSED;
    default:
        return SE_GRANT_UNKNOWN;
    }
}

static int64_t asn1_unix(const ASN1_TIME *t)
{
    struct tm tm;
    return t && ASN1_TIME_to_tm(t, &tm) == 1 ? (int64_t)timegm(&tm) : 0;
}

void se_status_read(const char *dir, int timeout_ms, se_status *st)
{
    memset(st, 0, sizeof *st);
    st->now = (int64_t)time(NULL);
    sl_error e;
    sl_code rc = se_check_current(dir, st->now, NULL, &e);
    st->enrolled = rc == SL_OK || rc == SL_ERR_CERT_EXPIRED;
    st->renew_due = rc == SL_ERR_CERT_EXPIRED;
    if (rc != SL_OK)
        snprintf(st->why, sizeof st->why, "%s", e.msg);
    char path[600];
    snprintf(path, sizeof path, "%s/client.pem", dir);
    FILE *f = fopen(path, "r");
    X509 *x = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    if (x) {
        st->not_before = asn1_unix(X509_get0_notBefore(x));
        st->not_after = asn1_unix(X509_get0_notAfter(x));
        X509_NAME *s = X509_get_subject_name(x);
        X509_NAME_get_text_by_NID(s, NID_commonName, st->instance_id, sizeof st->instance_id);
        X509_NAME_get_text_by_NID(s, NID_organizationalUnitName, st->project_id,
                                  sizeof st->project_id);
        X509_free(x);
    }
    ERR_clear_error();
    if (!se_read_endpoint(dir, st->endpoint, sizeof st->endpoint)) {
        snprintf(st->grant_why, sizeof st->grant_why, "no endpoint in %s/backend.conf", dir);
        return;
    }
    if (x)
        st->grant =
            se_grant_probe(dir, st->endpoint, timeout_ms, st->grant_why, sizeof st->grant_why);
}

int se_status_print(const se_status *st, const char *dir, FILE *f)
{
    char a[48], b[48], span[48];
    if (!st->not_after) {
        fprintf(f, "enrolled:      no (%s)\n", st->why[0] ? st->why : "no certificate");
        fprintf(f, "to enroll:     sudo sluice-enroll\n");
        return 1;
    }
    fprintf(f, "enrolled:      %s\n", st->enrolled ? "yes" : "no, the files are not usable");
    if (!st->enrolled || st->renew_due)
        fprintf(f, "               (%s)\n", st->why);
    fprintf(f, "instance:      %s\nproject:       %s\n", st->instance_id, st->project_id);
    fprintf(f, "certificate:   %s/client.pem, valid from %s until %s\n", dir,
            sl_time_utc(st->not_before, a, sizeof a), sl_time_utc(st->not_after, b, sizeof b));
    if (st->now >= st->not_after)
        fprintf(f, "               EXPIRED %s ago: run sudo sluice-enroll --renew\n",
                sl_time_span(st->now - st->not_after, span, sizeof span));
    else
        fprintf(f, "               %s left; renewed by the timer with a third left%s\n",
                sl_time_span(st->not_after - st->now, span, sizeof span),
                st->renew_due ? " (due now)" : "");
    static const char *const g[] = {"unknown (no answer)", "live", "REFUSED", "GONE"};
    fprintf(f, "backend:       %s\n", st->endpoint[0] ? st->endpoint : "none");
    fprintf(f, "grant:         %s: %s\n", g[st->grant], st->grant_why);
    if (st->grant == SE_GRANT_REFUSED)
        fprintf(f,
                "to fix:        sudo sluice-enroll --renew (the timer does it at its next run)\n");
    else if (st->grant == SE_GRANT_NO_BACKEND)
        fprintf(f, "to fix:        sudo sluice-enroll (asks the agent where the backend is now; "
                   "the timer does it at its next run)\n");
    return st->enrolled && st->now < st->not_after && st->grant == SE_GRANT_LIVE ? 0 : 1;
}
