/* Private to sluice_token. */
#ifndef SLUICE_TOKEN_INTERNAL_H
#define SLUICE_TOKEN_INTERNAL_H

#include <openssl/evp.h>

struct sl_token_key {
    EVP_PKEY *pkey;
    int is_private;
    char kid[24]; /* base64url of 12 bytes = 16 characters */
};

#endif
