/* Enrollment tokens: JWS compact serialization (RFC 7515) signed with Ed25519 (alg "EdDSA",
 * RFC 8037), so standard JWT tooling can read them:
 *
 *   base64url({"alg":"EdDSA","typ":"JWT","kid":K}) "." base64url(claims) "." base64url(sig)
 *   claims = {"iss","aud":"sluice-agent","sub":instance uuid,"project_id","iat","exp","jti"}
 *
 * nova-hook signs them (private key); agents verify them (public key only). Verification checks
 * the header, the signature, the audience, iat/exp against the clock with a bounded skew, the
 * lifetime, the presence and shape of every claim and the sizes. Remembering used token ids
 * (jti) to refuse replays is the verifier's job; the id is returned in the claims. */
#ifndef SLUICE_TOKEN_H
#define SLUICE_TOKEN_H

#include <stdint.h>
#include <stddef.h>

#include "sluice/error.h"

#define SL_TOKEN_AUDIENCE    "sluice-agent"
#define SL_TOKEN_MAX_LEN     2048 /* a whole compact token, bytes */
#define SL_TOKEN_CLAIM_MAX   128  /* a string claim, bytes including the NUL */
#define SL_TOKEN_DEFAULT_TTL 600  /* seconds */
#define SL_TOKEN_MAX_SKEW    300  /* the largest clock skew a verifier may allow, seconds */

typedef struct sl_token_claims {
    char iss[SL_TOKEN_CLAIM_MAX];
    char aud[SL_TOKEN_CLAIM_MAX];
    char sub[SL_TOKEN_CLAIM_MAX];        /* instance uuid */
    char project_id[SL_TOKEN_CLAIM_MAX]; /* Keystone project id */
    char jti[SL_TOKEN_CLAIM_MAX];        /* unique token id (a random UUID) */
    int64_t iat;                         /* issued at, seconds since the epoch */
    int64_t exp;                         /* expires at, seconds since the epoch */
} sl_token_claims;

/* An Ed25519 key: private (can sign and verify) or public (can verify). */
typedef struct sl_token_key sl_token_key;

/* Loads a PEM key (PKCS#8 private or SubjectPublicKeyInfo public) from a file or a buffer.
 * Anything but Ed25519 is refused. */
sl_code sl_token_key_load(const char *path, sl_token_key **out, sl_error *e);
sl_code sl_token_key_from_pem(const char *pem, size_t len, sl_token_key **out, sl_error *e);
/* Makes a fresh private key (tests, tools). */
sl_code sl_token_key_generate(sl_token_key **out, sl_error *e);
/* The private key as PKCS#8 PEM (malloc'd, NUL-terminated; clear and free() it). */
sl_code sl_token_key_private_pem(const sl_token_key *k, char **pem, sl_error *e);
/* The public half as PEM (malloc'd, NUL-terminated; free()). */
sl_code sl_token_key_public_pem(const sl_token_key *k, char **pem, sl_error *e);
int sl_token_key_is_private(const sl_token_key *k);
/* The key id put in the header: base64url of the first 12 bytes of SHA-256(raw public key). */
const char *sl_token_key_id(const sl_token_key *k);
void sl_token_key_free(sl_token_key *k);

/* Fills a fresh jti (random UUID) and iat = now, exp = now + ttl into *c; sub, project_id and
 * iss are the caller's. ttl must be 1..3600. */
sl_code sl_token_claims_stamp(sl_token_claims *c, int64_t now, int64_t ttl, sl_error *e);

/* Signs the claims; *token is malloc'd (free()). Every claim is checked as verify would. */
sl_code sl_token_sign(const sl_token_key *priv, const sl_token_claims *c, char **token,
                      sl_error *e);

typedef struct sl_token_verify_opts {
    const char *audience; /* NULL: SL_TOKEN_AUDIENCE */
    const char *issuer;   /* NULL: any issuer */
    int64_t now;          /* 0: time(NULL) */
    int64_t skew;         /* allowed clock skew, 0..SL_TOKEN_MAX_SKEW seconds */
    int64_t max_lifetime; /* exp - iat at most this; 0: 3600 */
} sl_token_verify_opts;

/* Verifies a compact token with a public (or private) key. SL_OK and *out filled only when
 * everything holds; otherwise SL_ERR_INVALID (format, claims), SL_ERR_TAMPERED (signature)
 * or SL_ERR_CERT_EXPIRED (expired or not yet valid), with a message naming what was wrong. */
sl_code sl_token_verify(const sl_token_key *pub, const char *token,
                        const sl_token_verify_opts *opts, sl_token_claims *out, sl_error *e);

/* ---- several verification keys at once (key rotation; several nova-hooks) */
#define SL_TOKEN_KEYSET_MAX 64

typedef struct sl_token_keyset sl_token_keyset;

/* Every PEM key (public, or private: its public half is used) of a file holding one or more
 * PEM blocks, or of every regular file of a directory whose name does not start with '.'
 * (a key repository: nova-hook/keyrepo.h). At least one, at most SL_TOKEN_KEYSET_MAX; a key id
 * twice is one key. Anything but Ed25519 is refused, naming the file. */
sl_code sl_token_keyset_load(const char *path, sl_token_keyset **out, sl_error *e);
/* The same from PEM text (what: named in messages). */
sl_code sl_token_keyset_from_pem(const char *pem, size_t len, const char *what,
                                 sl_token_keyset **out, sl_error *e);
size_t sl_token_keyset_count(const sl_token_keyset *ks);
const sl_token_key *sl_token_keyset_key(const sl_token_keyset *ks, size_t i);
/* The key with this id, or NULL. */
const sl_token_key *sl_token_keyset_find(const sl_token_keyset *ks, const char *kid);
void sl_token_keyset_free(sl_token_keyset *ks);

/* sl_token_verify with the key of the set whose id is the token header's kid; a token without
 * a kid is tried with each key. An unknown kid is SL_ERR_TAMPERED with a message naming it (a
 * key this host was not given: the public keys of a rotation not distributed yet). */
sl_code sl_token_verify_keyset(const sl_token_keyset *ks, const char *token,
                               const sl_token_verify_opts *opts, sl_token_claims *out, sl_error *e);

/* The header's kid ("" when it has none) WITHOUT checking anything else: to pick a key. */
sl_code sl_token_header_kid(const char *token, char *kid, size_t cap, sl_error *e);

/* Decodes the claims WITHOUT checking the signature or the clock: for logs and diagnostics
 * only, never for a decision. */
sl_code sl_token_decode_unverified(const char *token, sl_token_claims *out, sl_error *e);

/* base64url without padding (RFC 4648 §5). encode: out must hold 4*ceil(n/3)+1 bytes; returns
 * the length written (NUL-terminated). decode: returns -1 on a bad character or length, else
 * the decoded length (at most out_cap). */
size_t sl_b64url_encode(const uint8_t *in, size_t n, char *out);
long sl_b64url_decode(const char *in, size_t n, uint8_t *out, size_t out_cap);

#endif
