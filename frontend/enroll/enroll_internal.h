/* Private to sluice-enroll's files: enroll_client.c (vendordata, keys, enrollment, the files)
 * and locate.c (the exchange with the agent, locate requests, backend.conf). */
#ifndef SLUICE_ENROLL_INTERNAL_H
#define SLUICE_ENROLL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "enroll_client.h"
#include "sluice_control.pb-c.h"

/* Writes DIR/name atomically (temporary file, fsync, rename) with mode. */
sl_code se_write_atomic(const char *dir, const char *name, const void *data, size_t len,
                        mode_t mode, sl_error *e);
/* The name of an EnrollReply status. */
const char *se_status_name(int s);

/* DIR/backend.conf: the backend endpoint the frontend reads, the ids, the certificate's
 * notAfter and the agent's enrollment endpoint (for locate requests). */
sl_code se_write_conf(const char *dir, const char *endpoint, const char *instance,
                      const char *project, int64_t not_after, const char *enroll_endpoint,
                      sl_error *e);
/* The value of key in DIR/backend.conf ("" when there is none). */
void se_conf_get(const char *dir, const char *key, char *out, size_t n);

/* One request, one answer over the channel (server-authentication TLS against ca_pem).
 * *r: free with sluice__control__enroll_reply__free_unpacked. */
sl_code se_ask_agent(const char *endpoint, const char *ca_pem, int timeout_ms,
                     const Sluice__Control__EnrollRequest *q, Sluice__Control__EnrollReply **r,
                     sl_error *e);

/* Asks the agent at enroll_endpoint where the backend of DIR's certificate is now and rewrites
 * backend.conf when it moved (res->located, moved, old_endpoint, endpoint). *not_granted = 1
 * when the agent no longer accepts the certificate (enroll again). */
sl_code se_locate(const char *dir, const char *enroll_endpoint, int timeout_ms, se_result *res,
                  int *not_granted, sl_error *e);

#endif
