/* The tenant's one-liners (notice.h). */
#include "call/notice.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "component.h"
#include "sluice/log.h"
#include "sluice/tcp_probe.h"
#include "sluice/timefmt.h"
#include "sluice/wire.h"

#define PROBE_MS 2000
#define RENEW    "run 'sudo sluice-enroll --renew'"

static int64_t asn1_unix(const ASN1_TIME *t)
{
    struct tm tm;
    return t && ASN1_TIME_to_tm(t, &tm) == 1 ? (int64_t)timegm(&tm) : 0;
}

static CUresult check_dates(const struct sl_fe_config *cfg)
{
    FILE *f = fopen(cfg->cert, "r");
    X509 *x = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    ERR_clear_error();
    if (!x)
        return CUDA_SUCCESS; /* the channel says what is wrong with the file */
    int64_t now = (int64_t)time(NULL), nb = asn1_unix(X509_get0_notBefore(x)),
            na = asn1_unix(X509_get0_notAfter(x));
    X509_free(x);
    char when[48], span[48];
    if (na && now >= na) {
        sl_log(SL_LOG_ERR, SL_FE_COMPONENT,
               "the client certificate %s expired %s ago (%s): %s; sluice-enroll.timer should "
               "have renewed it (systemctl status sluice-enroll.timer)",
               cfg->cert, sl_time_span(now - na, span, sizeof span),
               sl_time_utc(na, when, sizeof when), RENEW);
        return CUDA_ERROR_NO_DEVICE;
    }
    if (nb && now < nb) {
        sl_log(SL_LOG_ERR, SL_FE_COMPONENT,
               "the client certificate %s is valid only from %s, %s from now: this instance's "
               "clock is behind; fix the time (NTP), then try again",
               cfg->cert, sl_time_utc(nb, when, sizeof when),
               sl_time_span(nb - now, span, sizeof span));
        return CUDA_ERROR_NO_DEVICE;
    }
    return CUDA_SUCCESS;
}

CUresult sl_fe_preflight(const struct sl_fe_config *cfg)
{
    CUresult rc = check_dates(cfg);
    if (rc != CUDA_SUCCESS)
        return rc;
    char why[96];
    if (sl_tcp_probe(cfg->endpoint, PROBE_MS, why, sizeof why) == SL_TCP_REFUSED) {
        sl_log(SL_LOG_ERR, SL_FE_COMPONENT,
               "cannot connect to the Sluice backend %s: connection refused (nothing listens "
               "there: your project's backend is not running on that port); if the instance was "
               "moved or the host restarted, %s",
               cfg->endpoint, RENEW);
        return CUDA_ERROR_NO_DEVICE;
    }
    return CUDA_SUCCESS;
}

void sl_fe_explain_connect(const struct sl_fe_config *cfg, const sl_error *err)
{
    const char *hint = "";
    switch (err->code) {
    case SL_ERR_REFUSED:
    case SL_ERR_REVOKED:
        hint = "; the backend does not accept this certificate: " RENEW;
        break;
    case SL_ERR_NO_PEER_CERT:
        hint = "; renew this instance's certificate: " RENEW;
        break;
    case SL_ERR_UNKNOWN_CA:
        hint = "; the host's CA changed since this instance enrolled: " RENEW;
        break;
    case SL_ERR_CERT_EXPIRED:
        /* the backend refused ours (the dates checked here passed: the clocks disagree), or
         * the backend's own certificate is out of its dates */
        if (strstr(err->msg, "refused our certificate"))
            hint = "; renew this instance's certificate: " RENEW;
        else
            hint = "; the backend's certificate is out of its dates, or this instance's clock "
                   "is wrong (tell the operator)";
        break;
    case SL_ERR_TIMEOUT:
    case SL_ERR_PEER_LOST:
        hint = "; the network between this instance and the host, or a firewall, holds the "
               "connection back (tell the operator)";
        break;
    default:
        break;
    }
    sl_log(SL_LOG_ERR, SL_FE_COMPONENT, "cannot connect to the Sluice backend %s: %s%s",
           cfg->endpoint, err->msg, hint);
}

void sl_fe_notice_reply(uint32_t call_id, int result, const char *detail)
{
    static atomic_int told;
    if (result != CUDA_ERROR_OUT_OF_MEMORY || !detail || !strstr(detail, "memory quota"))
        return;
    const struct sl_call_info *ci = sl_call_lookup(call_id);
    int first = atomic_fetch_add(&told, 1) == 0;
    sl_log(first ? SL_LOG_WARNING : SL_LOG_DEBUG, SL_FE_COMPONENT,
           "%s refused (out of memory): %s; your flavor's SLA sets the quota, cuMemGetInfo "
           "reports it as the total%s",
           ci ? ci->name : "an allocation", detail,
           first ? " (further quota refusals of this process are logged at debug level)" : "");
}
