/* Helpers for the CA and enrollment tests: temporary folders, test PKI made with OpenSSL. */
#ifndef SLUICE_TEST_AGENT_ENROLL_UTIL_H
#define SLUICE_TEST_AGENT_ENROLL_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/x509.h>

void tu_tmpdir(char *out, size_t n);
void tu_rmtree(const char *dir);
int tu_mode(const char *path); /* permission bits, -1 if absent */
X509 *tu_pem_cert(const char *pem);
void tu_fingerprint_pem(const char *pem, char out[65]);
/* kind: "EC" (P-256), "P-384", "ED25519" or "RSA"; subject CN cn. */
void tu_make_csr(const char *kind, const char *cn, uint8_t **der, size_t *len);
/* 1 when x verifies against the certificates in pem (any of them may be the anchor). */
int tu_verify(X509 *x, const char *pem);
/* 1 when x verifies up to a self-signed root in pem. */
int tu_verify_strict(X509 *x, const char *pem);
/* A deployment root, an intermediate CA it signs (cert+key), and an unrelated root. */
void tu_make_deployment_pki(const char *int_cert, const char *int_key, const char *root_cert,
                            const char *other_root);

#endif
