/* What the tenant should do when the GPU is out of reach: one sentence per kind of failure,
 * appended to the frontend's error lines (docs/tenant-guide.md, "When something fails"). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "fe.h"

const char *sl_fe_advice(sl_code code)
{
    switch (code) {
    case SL_ERR_CERT_EXPIRED:
        return "this instance's Sluice certificate is out of date (or the clock is wrong): run "
               "'sudo sluice-enroll --renew', then start the program again";
    case SL_ERR_UNKNOWN_CA:
    case SL_ERR_NO_PEER_CERT:
        return "this instance's Sluice credentials do not match its GPU host (a new host CA, a "
               "migration): run 'sudo sluice-enroll --renew', then start the program again";
    case SL_ERR_REFUSED:
    case SL_ERR_REVOKED:
        return "the GPU host no longer admits this instance (it was stopped, moved, or its "
               "flavor has no GPU any more): run 'sudo sluice-enroll --renew'; if that is "
               "refused too, ask your operator";
    case SL_ERR_TIMEOUT:
    case SL_ERR_IO:
    case SL_ERR_PEER_LOST:
        return "the GPU host did not answer (the network between this instance and it, or the "
               "Sluice backend, is down): try again in a minute; if it lasts, give your operator "
               "this message and the instance id of /etc/sluice/backend.conf";
    case SL_ERR_CLOSED:
        return "the GPU host ended this program's session: its GPU state is gone; start the "
               "program again (if the instance was revoked, ask your operator why)";
    case SL_ERR_CONFIG:
        return "this instance is not enrolled for a GPU: run 'sudo sluice-enroll' (the "
               "instance needs a GPU flavor)";
    default:
        return "start the program again; if it fails again, give your operator this message";
    }
}

sl_code sl_fe_config_check_cert(const struct sl_fe_config *cfg, int64_t now, sl_error *err)
{
    FILE *f = fopen(cfg->cert, "r");
    X509 *x = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    ERR_clear_error();
    if (!x)
        return sl_fail(err, SL_ERR_CONFIG, "%s is not a PEM certificate", cfg->cert);
    time_t t = (time_t)now;
    int late = X509_cmp_time(X509_get0_notAfter(x), &t) < 0;
    int early = X509_cmp_time(X509_get0_notBefore(x), &t) > 0;
    char when[64] = "";
    if (late || early) {
        BIO *b = BIO_new(BIO_s_mem());
        if (b && ASN1_TIME_print(b, late ? X509_get0_notAfter(x) : X509_get0_notBefore(x)) == 1) {
            int n = BIO_read(b, when, (int)sizeof when - 1);
            when[n > 0 ? n : 0] = '\0';
        }
        BIO_free(b);
    }
    X509_free(x);
    if (late)
        return sl_fail(err, SL_ERR_CERT_EXPIRED, "the client certificate %s expired on %s",
                       cfg->cert, when);
    if (early)
        return sl_fail(err, SL_ERR_CERT_EXPIRED,
                       "the client certificate %s is valid only from %s (is the clock right?)",
                       cfg->cert, when);
    return SL_OK;
}
