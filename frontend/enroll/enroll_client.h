/* sluice-enroll, as a library (the tool's main() and the tests use it): reads our entry of
 * the metadata service's vendor_data2.json, makes a key and a certificate request, enrolls with
 * the agent over the channel (server-authentication TLS, verifying the agent against the CA
 * from vendordata) and writes what the frontend reads (docs/enrollment.md, "Files in the
 * guest"):
 *
 *   DIR/client.key   the guest's private key (EC P-256, made here, never sent), 0600
 *   DIR/client.pem   its certificate (CN = instance uuid, OU = project id), 0644
 *   DIR/ca.pem       the host CA bundle (to verify the backend), 0644
 *   DIR/backend.conf "endpoint = tcp://HOST:PORT", the agent's enroll_endpoint and a few
 *                    informational keys, 0644
 *
 * DIR is 0750. Every file is written atomically (temporary file + rename).
 *
 * While the certificate is still good, a run asks the agent where the backend is now (a
 * locate request with the certificate, docs/enrollment.md "The backend moved") and rewrites
 * backend.conf when the endpoint changed; a certificate the agent no longer accepts, or (with
 * check_grant) that its backend refuses, is replaced by a new enrollment. */
#ifndef SLUICE_ENROLL_CLIENT_H
#define SLUICE_ENROLL_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/error.h"

#define SE_DEFAULT_SOURCE "http://169.254.169.254/openstack/latest/vendor_data2.json"
#define SE_DEFAULT_KEY    "sluice"
#define SE_DEFAULT_DIR    "/etc/sluice"
#define SE_VERSION        "sluice-enroll/0.1"
#define SE_BODY_MAX       (1 << 20) /* largest vendor_data2.json accepted */

typedef struct se_opts {
    /* "http://..." URL or a file path; NULL: the config drive's file if one is mounted
     * (SE_CONFIG_DRIVE_SOURCE, vendordata.h), then SE_DEFAULT_SOURCE (the metadata service) */
    const char *source;
    const char *key; /* our key in vendor_data2.json; NULL: "sluice" */
    const char *dir; /* NULL: SE_DEFAULT_DIR */
    int renew;       /* enroll even if the current certificate is still good */
    int timeout_ms;  /* metadata fetch and agent exchange, each; 0: 10000 */
    int check_grant; /* a good certificate: ask its backend too (after the locate request),
                      * and enroll again when it refuses the certificate (status.h) */
} se_opts;

typedef struct se_result {
    int enrolled; /* 1: a new certificate was written; 0: the current one is still good */
    int regrant;  /* enrolled although the certificate was young: the agent no longer grants it,
                   * or its backend refused it (regrant_why) */
    char regrant_why[256]; /* why; else, with check_grant, what the backend answered */
    int located;           /* the agent confirmed the backend endpoint of the current certificate */
    int moved;             /* ... and it had changed: backend.conf was rewritten (old_endpoint) */
    char old_endpoint[256];
    char note[320]; /* why the endpoint could not be confirmed (the files were kept) */
    int status;     /* the agent's EnrollReply status (0 when no answer was read) */
    int64_t not_after;
    char endpoint[256]; /* the backend endpoint */
    char instance_id[64], project_id[64];
    /* why the sources tried before the one that decided failed (the config drive's expired
     * token, say, before the metadata service); each message names its source */
    int n_tried;
    char tried[1][320];
} se_result;

/* Does it all, from the first source that works (o->source, else the config drive, then the
 * metadata service). Refused by the agent: SL_ERR_REFUSED with "agent refused enrollment: STATUS:
 * detail" and r->status set. Other failures name what failed (fetch, vendordata, channel,
 * files). */
sl_code se_enroll(const se_opts *o, se_result *r, sl_error *e);

/* SL_OK when DIR holds a certificate that matches its key, verifies against DIR/ca.pem, has a
 * backend.conf and has more than a third of its lifetime left at now; else the reason. */
sl_code se_check_current(const char *dir, int64_t now, int64_t *not_after, sl_error *e);

/* Reads a file path or fetches an http:// URL (HTTP/1.0 GET, 200 only, at most SE_BODY_MAX
 * bytes). *body is malloc'd and NUL-terminated. */
sl_code se_fetch(const char *source, int timeout_ms, char **body, size_t *len, sl_error *e);

#endif
