/* Ed25519 keys for tokens: load, generate, export the public half, key id. */
#include "sluice/token.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "token_internal.h"

#define PEM_MAX (64 * 1024)

static sl_code finish(EVP_PKEY *pkey, int is_private, sl_token_key **out, sl_error *e)
{
    if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_ED25519) {
        EVP_PKEY_free(pkey);
        return sl_fail(e, SL_ERR_CONFIG, "token key is not an Ed25519 key");
    }
    uint8_t raw[32];
    size_t rawlen = sizeof raw;
    if (EVP_PKEY_get_raw_public_key(pkey, raw, &rawlen) != 1 || rawlen != sizeof raw) {
        EVP_PKEY_free(pkey);
        return sl_fail(e, SL_ERR_CONFIG, "token key: cannot read the public key");
    }
    sl_token_key *k = calloc(1, sizeof *k);
    if (!k) {
        EVP_PKEY_free(pkey);
        return sl_fail(e, SL_ERR_NOMEM, "token key: out of memory");
    }
    uint8_t digest[SHA256_DIGEST_LENGTH];
    SHA256(raw, rawlen, digest);
    sl_b64url_encode(digest, 12, k->kid);
    k->pkey = pkey;
    k->is_private = is_private;
    *out = k;
    return SL_OK;
}

sl_code sl_token_key_from_pem(const char *pem, size_t len, sl_token_key **out, sl_error *e)
{
    if (!pem || !out || len == 0 || len > PEM_MAX)
        return sl_fail(e, SL_ERR_INVALID, "token key: empty or oversized PEM");
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    if (!bio)
        return sl_fail(e, SL_ERR_NOMEM, "token key: out of memory");
    EVP_PKEY *pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    int is_private = pkey != NULL;
    if (!pkey) {
        (void)BIO_reset(bio);
        pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    }
    BIO_free(bio);
    if (!pkey)
        return sl_fail(e, SL_ERR_CONFIG, "token key: not a PEM private or public key");
    return finish(pkey, is_private, out, e);
}

sl_code sl_token_key_load(const char *path, sl_token_key **out, sl_error *e)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f)
        return sl_fail(e, SL_ERR_CONFIG, "token key %s: cannot open", path ? path : "(null)");
    char *buf = malloc(PEM_MAX);
    if (!buf) {
        fclose(f);
        return sl_fail(e, SL_ERR_NOMEM, "token key: out of memory");
    }
    size_t n = fread(buf, 1, PEM_MAX, f);
    int too_big = n == PEM_MAX;
    fclose(f);
    sl_code rc;
    if (too_big)
        rc = sl_fail(e, SL_ERR_CONFIG, "token key %s: larger than %d bytes", path, PEM_MAX);
    else
        rc = sl_token_key_from_pem(buf, n, out, e);
    if (rc != SL_OK && rc != SL_ERR_NOMEM && !too_big && e)
        snprintf(e->msg, sizeof e->msg, "token key %s: not an Ed25519 PEM key", path);
    OPENSSL_cleanse(buf, n);
    free(buf);
    return rc;
}

sl_code sl_token_key_generate(sl_token_key **out, sl_error *e)
{
    EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    if (!pkey)
        return sl_fail(e, SL_ERR_IO, "token key: Ed25519 key generation failed");
    return finish(pkey, 1, out, e);
}

static sl_code write_pem(const sl_token_key *k, int private_half, char **pem, sl_error *e)
{
    if (private_half && !k->is_private)
        return sl_fail(e, SL_ERR_INVALID, "token key: a public key has no private half");
    BIO *bio = BIO_new(BIO_s_mem());
    int ok = bio &&
             (private_half ? PEM_write_bio_PKCS8PrivateKey(bio, k->pkey, NULL, NULL, 0, NULL, NULL)
                           : PEM_write_bio_PUBKEY(bio, k->pkey)) == 1;
    if (!ok) {
        BIO_free(bio);
        return sl_fail(e, SL_ERR_IO, "token key: cannot write the %s key",
                       private_half ? "private" : "public");
    }
    char *data;
    long n = BIO_get_mem_data(bio, &data);
    char *s = malloc((size_t)n + 1);
    if (!s) {
        BIO_free(bio);
        return sl_fail(e, SL_ERR_NOMEM, "token key: out of memory");
    }
    memcpy(s, data, (size_t)n);
    s[n] = '\0';
    OPENSSL_cleanse(data, (size_t)n);
    BIO_free(bio);
    *pem = s;
    return SL_OK;
}

sl_code sl_token_key_public_pem(const sl_token_key *k, char **pem, sl_error *e)
{
    return write_pem(k, 0, pem, e);
}

sl_code sl_token_key_private_pem(const sl_token_key *k, char **pem, sl_error *e)
{
    return write_pem(k, 1, pem, e);
}

int sl_token_key_is_private(const sl_token_key *k)
{
    return k && k->is_private;
}

const char *sl_token_key_id(const sl_token_key *k)
{
    return k->kid;
}

void sl_token_key_free(sl_token_key *k)
{
    if (!k)
        return;
    EVP_PKEY_free(k->pkey);
    free(k);
}
