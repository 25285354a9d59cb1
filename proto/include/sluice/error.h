/* Errors as values: every fallible Sluice function fills an sl_error and returns a code.
 * Nothing in the libraries calls exit(); callers decide what an error means. */
#ifndef SLUICE_ERROR_H
#define SLUICE_ERROR_H

#include <stddef.h>

typedef enum sl_code {
    SL_OK = 0,
    SL_ERR_INVALID,      /* a bad argument or a malformed input */
    SL_ERR_NOMEM,        /* an allocation failed */
    SL_ERR_IO,           /* a system or ZeroMQ call failed */
    SL_ERR_CONFIG,       /* a configuration or credential file is missing or wrong */
    SL_ERR_TIMEOUT,      /* nothing arrived in time (handshake, reply, connect) */
    SL_ERR_TLS,          /* TLS failed for a reason not named below */
    SL_ERR_CERT_EXPIRED, /* the peer's certificate is expired or not yet valid */
    SL_ERR_UNKNOWN_CA,   /* the peer's certificate chain does not lead to our CA */
    SL_ERR_NO_PEER_CERT, /* mutual mode and the peer sent no certificate */
    SL_ERR_REFUSED,      /* the accept hook refused the peer (not granted) */
    SL_ERR_REVOKED,      /* the peer's grant was revoked; its session is closed */
    SL_ERR_PEER_LOST,    /* the peer stopped answering or disconnected */
    SL_ERR_TAMPERED,     /* a record failed authentication, or records were lost or reordered */
    SL_ERR_PROTOCOL,     /* the peer broke the framing (plaintext, garbage, wrong kind) */
    SL_ERR_TOO_LARGE,    /* a frame or message is over the configured limit */
    SL_ERR_CLOSED,       /* the channel or session is closed */
    SL_ERR_UNSUPPORTED,  /* the feature or call is not implemented */
    SL_CODE_COUNT
} sl_code;

#define SL_ERROR_MSG_MAX 256

typedef struct sl_error {
    sl_code code;
    char msg[SL_ERROR_MSG_MAX];
} sl_error;

/* Sets *e (if not NULL) and returns code, so callers can write `return sl_fail(e, ...)`. */
sl_code sl_fail(sl_error *e, sl_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Resets *e to SL_OK with an empty message. */
void sl_error_clear(sl_error *e);

/* A stable lower-case name for a code, e.g. "cert-expired". */
const char *sl_code_name(sl_code code);

#endif
