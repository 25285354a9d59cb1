/* fuzz_token: libFuzzer target for the enrollment token parser (proto/token, sl_token_verify
 * and sl_token_decode_unverified), which every guest reaches through the enrollment endpoint.
 * The first input byte picks what the rest is:
 *   0: a whole compact token, as a guest may send it;
 *   1: the claims JSON, in a token whose header and Ed25519 signature are valid (so the claims
 *      checks after the signature are reached: a fuzzer cannot forge signatures);
 *   2: the header JSON, with valid claims and a valid signature over both.
 * In 1 and 2 only text that parses as JSON is signed (the signature is the costly part, and
 * what does not parse fails the same way as JSON that is not an object).
 * Whatever verifies must carry claims that pass the shape checks again. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "sluice/token.h"

#define NOW 1800000000LL

static EVP_PKEY *priv;
static sl_token_key *pub;
static char header[160];
static const char claims[] = "{\"iss\":\"sluice-nova-hook\",\"aud\":\"sluice-agent\",\"sub\":"
                             "\"3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60\",\"project_id\":"
                             "\"f241e906010e4917ae8153f4fb8aa021\",\"iat\":1799999990,\"exp\":"
                             "1800000500,\"jti\":\"5e1ce0de-0000-4000-8000-000000000001\"}";

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    priv = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    BIO *b = BIO_new(BIO_s_mem());
    if (!priv || !b || PEM_write_bio_PUBKEY(b, priv) != 1)
        abort();
    char *pem = NULL;
    long n = BIO_get_mem_data(b, &pem);
    sl_error e;
    if (sl_token_key_from_pem(pem, (size_t)n, &pub, &e) != SL_OK)
        abort();
    BIO_free(b);
    snprintf(header, sizeof header, "{\"alg\":\"EdDSA\",\"typ\":\"JWT\",\"kid\":\"%s\"}",
             sl_token_key_id(pub));
    return 0;
}

/* b64(h) "." b64(p) "." b64(sig); NULL when too long for a token anyway. */
static char *signed_token(const uint8_t *h, size_t hn, const uint8_t *p, size_t pn)
{
    if (hn > 4096 || pn > 4096)
        return NULL;
    size_t cap = (hn + pn + 64) / 3 * 4 + 32;
    char *t = malloc(cap);
    if (!t)
        abort();
    size_t len = sl_b64url_encode(h, hn, t);
    t[len++] = '.';
    len += sl_b64url_encode(p, pn, t + len);
    uint8_t sig[64];
    size_t siglen = sizeof sig;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestSignInit(md, NULL, NULL, NULL, priv) != 1 ||
        EVP_DigestSign(md, sig, &siglen, (const uint8_t *)t, len) != 1)
        abort();
    EVP_MD_CTX_free(md);
    t[len++] = '.';
    len += sl_b64url_encode(sig, siglen, t + len);
    t[len] = '\0';
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *rest = data + 1;
    size_t n = size - 1;
    char *token = NULL;
    if (data[0] % 3) {
        json_error_t je;
        json_t *j = json_loadb((const char *)rest, n, JSON_DECODE_ANY, &je);
        if (!j)
            return 0;
        json_decref(j);
    }
    switch (data[0] % 3) {
    case 0:
        token = malloc(n + 1);
        if (!token)
            abort();
        memcpy(token, rest, n);
        token[n] = '\0';
        break;
    case 1:
        token = signed_token((const uint8_t *)header, strlen(header), rest, n);
        break;
    default:
        token = signed_token(rest, n, (const uint8_t *)claims, strlen(claims));
        break;
    }
    if (!token)
        return 0;
    sl_token_verify_opts vo = {
        .issuer = data[0] & 4 ? "sluice-nova-hook" : NULL, .now = NOW, .skew = 60};
    sl_token_claims c, u;
    sl_error e;
    if (sl_token_verify(pub, token, &vo, &c, &e) == SL_OK) {
        if (!c.sub[0] || !c.project_id[0] || !c.jti[0] || c.exp <= c.iat || c.exp + 60 < NOW ||
            strlen(c.sub) > 64)
            abort(); /* verified claims that break the documented shape */
    }
    sl_token_decode_unverified(token, &u, &e);
    free(token);
    return 0;
}
