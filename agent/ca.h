/* The host CA: signs the client certificates of enrolled guests and the server certificates of
 * the tenant backends and of the enrollment endpoint (docs/enrollment.md, "The host CA").
 *
 * A CA directory holds ca.pem (the CA certificate), ca.key (its private key, mode 0600) and,
 * when the CA is an intermediate signed by a deployment CA, chain.pem (the certificates above
 * it, up to and including the deployment root). The directory is mode 0700. */
#ifndef SLUICE_AGENT_CA_H
#define SLUICE_AGENT_CA_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/error.h"

#define AG_CA_CLIENT_LIFETIME_DEFAULT (7 * 86400)
#define AG_CA_CLIENT_LIFETIME_MAX     (30 * 86400)
#define AG_CA_SERVER_LIFETIME_DEFAULT (30 * 86400)
#define AG_CA_SERVER_LIFETIME_MAX     (397 * 86400)
#define AG_CA_LIFETIME_MIN            3600
#define AG_CA_BACKDATE_S              300 /* notBefore = now - this, for guests' clock skew */
#define AG_CA_CSR_MAX                 8192

typedef struct ag_ca ag_ca;

typedef struct ag_ca_opts {
    int client_lifetime_s; /* 0: default 7 days; 3600 .. 30 days */
    int server_lifetime_s; /* 0: default 30 days; 3600 .. 397 days */
    int existing_only;     /* 1: open a CA that exists, never create or change anything */
} ag_ca_opts;

/* Opens the CA in dir (ca.pem, ca.key, optional chain.pem when the CA is an intermediate signed
 * by a deployment CA); creates a self-signed EC P-256 CA if none exists (key 0600, dir 0700)
 * unless o->existing_only (then a missing directory or CA is SL_ERR_CONFIG).
 * A key readable by group or others, a key that does not match the certificate, a certificate
 * that is not a CA or has expired, or a chain.pem that does not verify it: SL_ERR_CONFIG.
 * o may be NULL (defaults). */
sl_code ag_ca_open(const char *dir, const ag_ca_opts *o, ag_ca **out, sl_error *e);
void ag_ca_close(ag_ca *ca);

/* CA cert (+ chain) PEM for guests: what they trust (ca.pem in the guest). */
const char *ag_ca_cert_pem(const ag_ca *ca);

/* The same certificates as concatenated DER (EnrollReply.ca_chain_der): the host CA first,
 * then each issuer up to the root. */
const uint8_t *ag_ca_chain_der(const ag_ca *ca, size_t *len);

/* Signs a guest CSR (DER). Subject is SET by the CA, never taken from the CSR: CN = instance
 * uuid, OU = project id. Checks the CSR's signature and key type (EC P-256/P-384 or Ed25519).
 * Client-auth EKU, serial random 128-bit. notAfter = now + client lifetime (never past the CA's
 * own notAfter). *cert_der is malloc'd (free()). Bad CSR: SL_ERR_INVALID. */
sl_code ag_ca_sign_client(ag_ca *ca, const uint8_t *csr_der, size_t csr_len,
                          const char *instance_uuid, const char *project_id, uint8_t **cert_der,
                          size_t *cert_len, int64_t *not_after, char fingerprint_hex[65],
                          sl_error *e);

/* A server certificate for a tenant backend (SANs: IPs and DNS names), new key (EC P-256).
 * lifetime_s 0: the server default. *cert_pem holds the leaf then, for an intermediate CA, the
 * CA certificate; both strings are malloc'd (free()). */
sl_code ag_ca_issue_server(ag_ca *ca, const char *cn, const char *const *sans, size_t nsans,
                           int lifetime_s, char **cert_pem, char **key_pem, sl_error *e);

/* ---- administration (sluice-agent-ca) */

/* Installs an intermediate CA signed by a deployment CA into dir: cert_file (the intermediate,
 * a CA certificate), key_file (its key), chain_file (the deployment CA certificates above it,
 * up to the root). Everything is checked before anything is written; an existing CA in dir is
 * replaced only with force. Files are written atomically with safe modes. */
sl_code ag_ca_import(const char *dir, const char *cert_file, const char *key_file,
                     const char *chain_file, int force, sl_error *e);

/* A few lines describing the CA (subject, issuer, validity, key, fingerprint, chain);
 * malloc'd (free()). */
sl_code ag_ca_describe(const ag_ca *ca, char **text, sl_error *e);

/* Writes data to path atomically (temp file in the same folder, fsync, rename) with mode. */
sl_code ag_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode,
                             sl_error *e);

#endif
