/* Ed25519 JWS tokens: stamp, sign, verify, decode. See sluice/token.h for the format. */
#include "sluice/token.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "token_internal.h"

#define SIG_LEN        64
#define PART_MAX       1024 /* a decoded header or payload, bytes */
#define MAX_TTL        3600
#define DEFAULT_MAXLIF 3600

/* -------------------------------------------------------------------------- claim shapes */

/* Printable ASCII, 1..SL_TOKEN_CLAIM_MAX-1 bytes. */
static int printable(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= SL_TOKEN_CLAIM_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

/* An instance or project id: hex digits and dashes, 1..64 (Keystone ids have no dashes). */
static int id_like(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
              c == '-'))
            return 0;
    }
    return 1;
}

static sl_code check_claims(const sl_token_claims *c, sl_error *e)
{
    if (!printable(c->iss))
        return sl_fail(e, SL_ERR_INVALID, "token claim iss: missing or not printable ASCII");
    if (!printable(c->aud))
        return sl_fail(e, SL_ERR_INVALID, "token claim aud: missing or not printable ASCII");
    if (!id_like(c->sub))
        return sl_fail(e, SL_ERR_INVALID, "token claim sub: missing or not an instance id");
    if (!id_like(c->project_id))
        return sl_fail(e, SL_ERR_INVALID, "token claim project_id: missing or not a project id");
    if (!printable(c->jti))
        return sl_fail(e, SL_ERR_INVALID, "token claim jti: missing or not printable ASCII");
    if (c->iat <= 0)
        return sl_fail(e, SL_ERR_INVALID, "token claim iat: missing or not positive");
    if (c->exp <= c->iat)
        return sl_fail(e, SL_ERR_INVALID, "token claim exp: not after iat");
    return SL_OK;
}

sl_code sl_token_claims_stamp(sl_token_claims *c, int64_t now, int64_t ttl, sl_error *e)
{
    if (ttl < 1 || ttl > MAX_TTL)
        return sl_fail(e, SL_ERR_INVALID, "token ttl %lld: must be 1..%d seconds", (long long)ttl,
                       MAX_TTL);
    uint8_t r[16];
    if (RAND_bytes(r, sizeof r) != 1)
        return sl_fail(e, SL_ERR_IO, "token: no random bytes for jti");
    r[6] = (uint8_t)((r[6] & 0x0f) | 0x40); /* UUID version 4 */
    r[8] = (uint8_t)((r[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(c->jti, sizeof c->jti,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0], r[1],
             r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14],
             r[15]);
    c->iat = now;
    c->exp = now + ttl;
    return SL_OK;
}

/* ------------------------------------------------------------------------------- signing */

/* base64url(s) appended at out + *len (out has room). */
static void append_b64(char *out, size_t *len, const uint8_t *s, size_t n)
{
    *len += sl_b64url_encode(s, n, out + *len);
}

sl_code sl_token_sign(const sl_token_key *priv, const sl_token_claims *c, char **token, sl_error *e)
{
    if (!priv || !c || !token)
        return sl_fail(e, SL_ERR_INVALID, "token sign: NULL argument");
    if (!priv->is_private)
        return sl_fail(e, SL_ERR_INVALID, "token sign: the key is a public key");
    sl_code rc = check_claims(c, e);
    if (rc != SL_OK)
        return rc;

    json_t *hdr = json_pack("{s:s, s:s, s:s}", "alg", "EdDSA", "typ", "JWT", "kid", priv->kid);
    json_t *pl = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "iss", c->iss, "aud", c->aud,
                           "sub", c->sub, "project_id", c->project_id, "iat", (json_int_t)c->iat,
                           "exp", (json_int_t)c->exp, "jti", c->jti);
    char *hs = hdr ? json_dumps(hdr, JSON_COMPACT) : NULL;
    char *ps = pl ? json_dumps(pl, JSON_COMPACT) : NULL;
    json_decref(hdr);
    json_decref(pl);
    char *out = NULL;
    if (!hs || !ps) {
        rc = sl_fail(e, SL_ERR_NOMEM, "token sign: out of memory");
        goto done;
    }
    size_t hn = strlen(hs), pn = strlen(ps);
    size_t cap = (hn + pn + SIG_LEN) / 3 * 4 + 16;
    if (cap > SL_TOKEN_MAX_LEN + 16) {
        rc = sl_fail(e, SL_ERR_TOO_LARGE, "token sign: claims too long");
        goto done;
    }
    out = malloc(cap);
    if (!out) {
        rc = sl_fail(e, SL_ERR_NOMEM, "token sign: out of memory");
        goto done;
    }
    size_t len = 0;
    append_b64(out, &len, (const uint8_t *)hs, hn);
    out[len++] = '.';
    append_b64(out, &len, (const uint8_t *)ps, pn);

    uint8_t sig[SIG_LEN];
    size_t siglen = sizeof sig;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md && EVP_DigestSignInit(md, NULL, NULL, NULL, priv->pkey) == 1 &&
             EVP_DigestSign(md, sig, &siglen, (const uint8_t *)out, len) == 1 && siglen == SIG_LEN;
    EVP_MD_CTX_free(md);
    if (!ok) {
        rc = sl_fail(e, SL_ERR_IO, "token sign: Ed25519 signing failed");
        goto done;
    }
    out[len++] = '.';
    append_b64(out, &len, sig, siglen);
    *token = out;
    out = NULL;
    rc = SL_OK;
done:
    free(out);
    free(hs);
    free(ps);
    return rc;
}

/* ------------------------------------------------------------------------------ decoding */

typedef struct parts {
    const char *h, *p, *s; /* starts of the three base64url parts */
    size_t hn, pn, sn;
} parts;

static sl_code split(const char *token, parts *t, sl_error *e)
{
    if (!token)
        return sl_fail(e, SL_ERR_INVALID, "token: missing");
    size_t n = strnlen(token, SL_TOKEN_MAX_LEN + 1);
    if (n == 0)
        return sl_fail(e, SL_ERR_INVALID, "token: empty");
    if (n > SL_TOKEN_MAX_LEN)
        return sl_fail(e, SL_ERR_TOO_LARGE, "token: longer than %d bytes", SL_TOKEN_MAX_LEN);
    const char *d1 = memchr(token, '.', n);
    const char *d2 = d1 ? memchr(d1 + 1, '.', n - (size_t)(d1 + 1 - token)) : NULL;
    if (!d1 || !d2 || memchr(d2 + 1, '.', n - (size_t)(d2 + 1 - token)))
        return sl_fail(e, SL_ERR_INVALID, "token: not three dot-separated parts (JWS compact)");
    t->h = token;
    t->hn = (size_t)(d1 - token);
    t->p = d1 + 1;
    t->pn = (size_t)(d2 - t->p);
    t->s = d2 + 1;
    t->sn = n - (size_t)(t->s - token);
    return SL_OK;
}

static json_t *decode_json(const char *b64, size_t n, const char *what, sl_error *e)
{
    uint8_t buf[PART_MAX + 1];
    long len = sl_b64url_decode(b64, n, buf, PART_MAX);
    if (len <= 0) {
        sl_fail(e, SL_ERR_INVALID, "token %s: not base64url or too long", what);
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadb((const char *)buf, (size_t)len, JSON_REJECT_DUPLICATES, &je);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        sl_fail(e, SL_ERR_INVALID, "token %s: not a JSON object", what);
        return NULL;
    }
    return j;
}

static sl_code check_header(json_t *h, sl_error *e)
{
    json_t *alg = json_object_get(h, "alg");
    if (!json_is_string(alg) || strcmp(json_string_value(alg), "EdDSA") != 0)
        return sl_fail(e, SL_ERR_INVALID, "token header: alg is not EdDSA");
    json_t *typ = json_object_get(h, "typ");
    if (typ && (!json_is_string(typ) || strcmp(json_string_value(typ), "JWT") != 0))
        return sl_fail(e, SL_ERR_INVALID, "token header: typ is not JWT");
    if (json_object_get(h, "crit"))
        return sl_fail(e, SL_ERR_INVALID, "token header: crit is not supported");
    json_t *kid = json_object_get(h, "kid");
    if (kid && !json_is_string(kid))
        return sl_fail(e, SL_ERR_INVALID, "token header: kid is not a string");
    return SL_OK;
}

static sl_code get_string(json_t *o, const char *name, char *dst, sl_error *e)
{
    json_t *v = json_object_get(o, name);
    if (!v)
        return sl_fail(e, SL_ERR_INVALID, "token claim %s: missing", name);
    if (!json_is_string(v) || json_string_length(v) >= SL_TOKEN_CLAIM_MAX)
        return sl_fail(e, SL_ERR_INVALID, "token claim %s: not a string of at most %d bytes", name,
                       SL_TOKEN_CLAIM_MAX - 1);
    memcpy(dst, json_string_value(v), json_string_length(v) + 1);
    return SL_OK;
}

static sl_code get_int(json_t *o, const char *name, int64_t *dst, sl_error *e)
{
    json_t *v = json_object_get(o, name);
    if (!v)
        return sl_fail(e, SL_ERR_INVALID, "token claim %s: missing", name);
    if (!json_is_integer(v))
        return sl_fail(e, SL_ERR_INVALID, "token claim %s: not an integer", name);
    *dst = (int64_t)json_integer_value(v);
    return SL_OK;
}

static sl_code parse_claims(const parts *t, sl_token_claims *c, sl_error *e)
{
    json_t *p = decode_json(t->p, t->pn, "payload", e);
    if (!p)
        return SL_ERR_INVALID;
    memset(c, 0, sizeof *c);
    sl_code rc;
    if ((rc = get_string(p, "iss", c->iss, e)) != SL_OK ||
        (rc = get_string(p, "aud", c->aud, e)) != SL_OK ||
        (rc = get_string(p, "sub", c->sub, e)) != SL_OK ||
        (rc = get_string(p, "project_id", c->project_id, e)) != SL_OK ||
        (rc = get_string(p, "jti", c->jti, e)) != SL_OK ||
        (rc = get_int(p, "iat", &c->iat, e)) != SL_OK ||
        (rc = get_int(p, "exp", &c->exp, e)) != SL_OK)
        goto done;
    rc = check_claims(c, e);
done:
    json_decref(p);
    return rc;
}

sl_code sl_token_decode_unverified(const char *token, sl_token_claims *out, sl_error *e)
{
    parts t = {0};
    sl_code rc = split(token, &t, e);
    if (rc != SL_OK)
        return rc;
    if (!out)
        return sl_fail(e, SL_ERR_INVALID, "token decode: NULL claims");
    return parse_claims(&t, out, e);
}

/* ---------------------------------------------------------------------------- verifying */

static sl_code check_signature(const sl_token_key *k, const parts *t, sl_error *e)
{
    uint8_t sig[SIG_LEN + 3];
    long n = sl_b64url_decode(t->s, t->sn, sig, sizeof sig);
    if (n != SIG_LEN)
        return sl_fail(e, SL_ERR_INVALID, "token signature: not %d base64url bytes", SIG_LEN);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md)
        return sl_fail(e, SL_ERR_NOMEM, "token verify: out of memory");
    size_t signed_len = t->hn + 1 + t->pn;
    int ok = EVP_DigestVerifyInit(md, NULL, NULL, NULL, k->pkey) == 1 &&
             EVP_DigestVerify(md, sig, SIG_LEN, (const uint8_t *)t->h, signed_len) == 1;
    EVP_MD_CTX_free(md);
    if (!ok)
        return sl_fail(e, SL_ERR_TAMPERED, "token signature: does not verify with key %s", k->kid);
    return SL_OK;
}

static sl_code check_time(const sl_token_claims *c, const sl_token_verify_opts *o, sl_error *e)
{
    int64_t now = o && o->now ? o->now : (int64_t)time(NULL);
    int64_t skew = o ? o->skew : 0;
    int64_t maxlife = o && o->max_lifetime ? o->max_lifetime : DEFAULT_MAXLIF;
    if (skew < 0 || skew > SL_TOKEN_MAX_SKEW)
        return sl_fail(e, SL_ERR_INVALID, "token verify: skew %lld outside 0..%d", (long long)skew,
                       SL_TOKEN_MAX_SKEW);
    if (c->exp - c->iat > maxlife)
        return sl_fail(e, SL_ERR_INVALID, "token claim exp: lifetime %lld s exceeds %lld s",
                       (long long)(c->exp - c->iat), (long long)maxlife);
    if (c->iat > now + skew)
        return sl_fail(e, SL_ERR_CERT_EXPIRED, "token claim iat: issued %lld s in the future",
                       (long long)(c->iat - now));
    if (now >= c->exp + skew)
        return sl_fail(e, SL_ERR_CERT_EXPIRED, "token claim exp: expired %lld s ago",
                       (long long)(now - c->exp));
    return SL_OK;
}

sl_code sl_token_verify(const sl_token_key *pub, const char *token,
                        const sl_token_verify_opts *opts, sl_token_claims *out, sl_error *e)
{
    if (!pub || !out)
        return sl_fail(e, SL_ERR_INVALID, "token verify: NULL argument");
    parts t = {0};
    sl_code rc = split(token, &t, e);
    if (rc != SL_OK)
        return rc;
    json_t *h = decode_json(t.h, t.hn, "header", e);
    if (!h)
        return SL_ERR_INVALID;
    rc = check_header(h, e);
    json_decref(h);
    if (rc != SL_OK)
        return rc;
    if ((rc = check_signature(pub, &t, e)) != SL_OK)
        return rc;
    sl_token_claims c;
    if ((rc = parse_claims(&t, &c, e)) != SL_OK)
        return rc;
    const char *aud = opts && opts->audience ? opts->audience : SL_TOKEN_AUDIENCE;
    if (strcmp(c.aud, aud) != 0)
        return sl_fail(e, SL_ERR_INVALID, "token claim aud: \"%s\" is not \"%s\"", c.aud, aud);
    if (opts && opts->issuer && strcmp(c.iss, opts->issuer) != 0)
        return sl_fail(e, SL_ERR_INVALID, "token claim iss: \"%s\" is not \"%s\"", c.iss,
                       opts->issuer);
    if ((rc = check_time(&c, opts, e)) != SL_OK)
        return rc;
    *out = c;
    return SL_OK;
}

sl_code sl_token_header_kid(const char *token, char *kid, size_t cap, sl_error *e)
{
    parts t = {0};
    sl_code rc = split(token, &t, e);
    if (rc != SL_OK)
        return rc;
    json_t *h = decode_json(t.h, t.hn, "header", e);
    if (!h)
        return SL_ERR_INVALID;
    if ((rc = check_header(h, e)) == SL_OK) {
        json_t *k = json_object_get(h, "kid");
        const char *v = k ? json_string_value(k) : "";
        if (strlen(v) >= cap)
            rc = sl_fail(e, SL_ERR_INVALID, "token header: kid longer than %zu bytes", cap - 1);
        else
            memcpy(kid, v, strlen(v) + 1);
    }
    json_decref(h);
    return rc;
}
