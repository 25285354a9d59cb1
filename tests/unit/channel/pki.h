/* Test PKI generated at run time with the OpenSSL C API (EC P-256); no committed keys. */
#ifndef SLUICE_TEST_PKI_H
#define SLUICE_TEST_PKI_H

#include <openssl/evp.h>
#include <openssl/x509.h>

typedef struct pki_ca {
    EVP_PKEY *key;
    X509 *cert;
    char *pem;
} pki_ca;

typedef struct pki_cred {
    char *cert_pem, *key_pem;
} pki_cred;

/* 0 on success. */
int pki_ca_new(pki_ca *ca, const char *cn);
/* Issues a leaf: server certs get SAN IP:127.0.0.1, DNS:localhost; ou may be NULL. Valid from
 * now+from_s to now+to_s seconds. */
int pki_issue(const pki_ca *ca, const char *cn, const char *ou, int server, long from_s, long to_s,
              pki_cred *out);
void pki_ca_free(pki_ca *ca);
void pki_cred_free(pki_cred *c);

#endif
