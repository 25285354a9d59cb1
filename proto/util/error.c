#include "sluice/error.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const names[SL_CODE_COUNT] = {
    [SL_OK] = "ok",
    [SL_ERR_INVALID] = "invalid",
    [SL_ERR_NOMEM] = "no-memory",
    [SL_ERR_IO] = "io",
    [SL_ERR_CONFIG] = "config",
    [SL_ERR_TIMEOUT] = "timeout",
    [SL_ERR_TLS] = "tls",
    [SL_ERR_CERT_EXPIRED] = "cert-expired",
    [SL_ERR_UNKNOWN_CA] = "unknown-ca",
    [SL_ERR_NO_PEER_CERT] = "no-peer-cert",
    [SL_ERR_REFUSED] = "refused",
    [SL_ERR_REVOKED] = "revoked",
    [SL_ERR_PEER_LOST] = "peer-lost",
    [SL_ERR_TAMPERED] = "tampered",
    [SL_ERR_PROTOCOL] = "protocol",
    [SL_ERR_TOO_LARGE] = "too-large",
    [SL_ERR_CLOSED] = "closed",
    [SL_ERR_UNSUPPORTED] = "unsupported",
};

sl_code sl_fail(sl_error *e, sl_code code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        e->code = code;
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void sl_error_clear(sl_error *e)
{
    if (e) {
        e->code = SL_OK;
        e->msg[0] = '\0';
    }
}

const char *sl_code_name(sl_code code)
{
    if ((unsigned)code >= SL_CODE_COUNT)
        return "unknown";
    return names[code];
}
