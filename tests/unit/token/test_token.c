/* sluice_token: sign, verify, tampering, expiry, wrong key, wrong audience, sizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/token.h"

#define NOW 1800000000LL

typedef struct fixture {
    sl_token_key *priv, *pub, *other;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    sl_error e;
    assert_int_equal(sl_token_key_generate(&f->priv, &e), SL_OK);
    assert_int_equal(sl_token_key_generate(&f->other, &e), SL_OK);
    char *pem = NULL;
    assert_int_equal(sl_token_key_public_pem(f->priv, &pem, &e), SL_OK);
    assert_int_equal(sl_token_key_from_pem(pem, strlen(pem), &f->pub, &e), SL_OK);
    free(pem);
    assert_false(sl_token_key_is_private(f->pub));
    assert_true(sl_token_key_is_private(f->priv));
    assert_string_equal(sl_token_key_id(f->pub), sl_token_key_id(f->priv));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    sl_token_key_free(f->priv);
    sl_token_key_free(f->pub);
    sl_token_key_free(f->other);
    free(f);
    return 0;
}

static void claims(sl_token_claims *c, int64_t now, int64_t ttl)
{
    memset(c, 0, sizeof *c);
    strcpy(c->iss, "sluice-nova-hook");
    strcpy(c->aud, SL_TOKEN_AUDIENCE);
    strcpy(c->sub, "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60");
    strcpy(c->project_id, "f241e906010e4917ae8153f4fb8aa021");
    sl_error e;
    assert_int_equal(sl_token_claims_stamp(c, now, ttl, &e), SL_OK);
}

__attribute__((noinline)) static char *make(fixture *f, int64_t now, int64_t ttl)
{
    sl_token_claims c;
    claims(&c, now, ttl);
    char *t = NULL;
    sl_error e;
    assert_int_equal(sl_token_sign(f->priv, &c, &t, &e), SL_OK);
    return t;
}

static sl_code verify_at(const sl_token_key *k, const char *t, int64_t now, sl_token_claims *out,
                         sl_error *e)
{
    sl_token_verify_opts o = {.now = now, .skew = 30};
    return sl_token_verify(k, t, &o, out, e);
}

static void round_trip(void **state)
{
    fixture *f = *state;
    char *t = make(f, NOW, 600);
    sl_token_claims c;
    sl_error e;
    assert_int_equal(verify_at(f->pub, t, NOW + 1, &c, &e), SL_OK);
    assert_string_equal(c.sub, "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60");
    assert_string_equal(c.project_id, "f241e906010e4917ae8153f4fb8aa021");
    assert_string_equal(c.aud, "sluice-agent");
    assert_int_equal(c.iat, NOW);
    assert_int_equal(c.exp, NOW + 600);
    assert_int_equal(strlen(c.jti), 36);
    assert_int_equal(c.jti[14], '4');
    /* two tokens for one instance differ in jti */
    char *t2 = make(f, NOW, 600);
    sl_token_claims c2;
    assert_int_equal(verify_at(f->pub, t2, NOW, &c2, &e), SL_OK);
    assert_string_not_equal(c.jti, c2.jti);
    /* decode without verification gives the same claims */
    sl_token_claims d;
    assert_int_equal(sl_token_decode_unverified(t, &d, &e), SL_OK);
    assert_string_equal(d.jti, c.jti);
    free(t);
    free(t2);
}

static void header_is_jws_eddsa(void **state)
{
    fixture *f = *state;
    char *t = make(f, NOW, 600);
    const char *dot = strchr(t, '.');
    uint8_t buf[256];
    long n = sl_b64url_decode(t, (size_t)(dot - t), buf, sizeof buf - 1);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr((char *)buf, "\"alg\":\"EdDSA\""));
    assert_non_null(strstr((char *)buf, "\"typ\":\"JWT\""));
    assert_non_null(strstr((char *)buf, sl_token_key_id(f->priv)));
    free(t);
}

static void tampered_payload_refused(void **state)
{
    fixture *f = *state;
    char *t = make(f, NOW, 600);
    /* flip one character of the payload (keep it valid base64url) */
    char *p = strchr(t, '.') + 5;
    *p = *p == 'A' ? 'B' : 'A';
    sl_token_claims c;
    sl_error e;
    sl_code rc = verify_at(f->pub, t, NOW, &c, &e);
    assert_true(rc == SL_ERR_TAMPERED || rc == SL_ERR_INVALID);
    /* flip one character of the signature */
    free(t);
    t = make(f, NOW, 600);
    p = strrchr(t, '.') + 3;
    *p = *p == 'A' ? 'B' : 'A';
    assert_int_equal(verify_at(f->pub, t, NOW, &c, &e), SL_ERR_TAMPERED);
    assert_non_null(strstr(e.msg, "signature"));
    free(t);
}

static void substituted_claims_refused(void **state)
{
    fixture *f = *state;
    /* a token whose payload is swapped for another instance's, with the old signature */
    char *a = make(f, NOW, 600);
    sl_token_claims c;
    claims(&c, NOW, 600);
    strcpy(c.sub, "aaaaaaaa-9a1c-4e27-8f34-1b2c3d4e5f60");
    char *b = NULL;
    sl_error e;
    assert_int_equal(sl_token_sign(f->priv, &c, &b, &e), SL_OK);
    char forged[SL_TOKEN_MAX_LEN + 1];
    const char *a_sig = strrchr(a, '.');
    const char *b_sig = strrchr(b, '.');
    snprintf(forged, sizeof forged, "%.*s%s", (int)(b_sig - b), b, a_sig);
    assert_int_equal(verify_at(f->pub, forged, NOW, &c, &e), SL_ERR_TAMPERED);
    free(a);
    free(b);
}

static void expiry_enforced(void **state)
{
    fixture *f = *state;
    char *t = make(f, NOW, 600);
    sl_token_claims c;
    sl_error e;
    assert_int_equal(verify_at(f->pub, t, NOW + 599, &c, &e), SL_OK);
    assert_int_equal(verify_at(f->pub, t, NOW + 629, &c, &e), SL_OK); /* within skew */
    assert_int_equal(verify_at(f->pub, t, NOW + 630, &c, &e), SL_ERR_CERT_EXPIRED);
    assert_non_null(strstr(e.msg, "expired"));
    assert_int_equal(verify_at(f->pub, t, NOW - 31, &c, &e), SL_ERR_CERT_EXPIRED);
    assert_non_null(strstr(e.msg, "future"));
    /* a too long lifetime is refused even when the clock is fine */
    sl_token_verify_opts o = {.now = NOW, .skew = 0, .max_lifetime = 300};
    assert_int_equal(sl_token_verify(f->pub, t, &o, &c, &e), SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "lifetime"));
    o.max_lifetime = 0;
    o.skew = SL_TOKEN_MAX_SKEW + 1;
    assert_int_equal(sl_token_verify(f->pub, t, &o, &c, &e), SL_ERR_INVALID);
    free(t);
    assert_int_equal(sl_token_claims_stamp(&c, NOW, 0, &e), SL_ERR_INVALID);
    assert_int_equal(sl_token_claims_stamp(&c, NOW, 3601, &e), SL_ERR_INVALID);
}

static void wrong_key_refused(void **state)
{
    fixture *f = *state;
    char *t = make(f, NOW, 600);
    sl_token_claims c;
    sl_error e;
    assert_int_equal(verify_at(f->other, t, NOW, &c, &e), SL_ERR_TAMPERED);
    free(t);
}

static void wrong_audience_refused(void **state)
{
    fixture *f = *state;
    sl_token_claims c;
    claims(&c, NOW, 600);
    strcpy(c.aud, "someone-else");
    char *t = NULL;
    sl_error e;
    assert_int_equal(sl_token_sign(f->priv, &c, &t, &e), SL_OK);
    assert_int_equal(verify_at(f->pub, t, NOW, &c, &e), SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "aud"));
    sl_token_verify_opts o = {.now = NOW, .audience = "someone-else", .issuer = "other-issuer"};
    assert_int_equal(sl_token_verify(f->pub, t, &o, &c, &e), SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "iss"));
    o.issuer = "sluice-nova-hook";
    assert_int_equal(sl_token_verify(f->pub, t, &o, &c, &e), SL_OK);
    free(t);
}

static void public_key_cannot_sign(void **state)
{
    fixture *f = *state;
    sl_token_claims c;
    claims(&c, NOW, 600);
    char *t = NULL;
    sl_error e;
    assert_int_equal(sl_token_sign(f->pub, &c, &t, &e), SL_ERR_INVALID);
    assert_null(t);
    c.sub[0] = '\0';
    assert_int_equal(sl_token_sign(f->priv, &c, &t, &e), SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "sub"));
}

/* Builds header.payload.signature from JSON texts, signed with the right key. */
static char *forge(fixture *f, const char *hdr, const char *payload)
{
    (void)f;
    static char out[4 * SL_TOKEN_MAX_LEN];
    size_t n = sl_b64url_encode((const uint8_t *)hdr, strlen(hdr), out);
    out[n++] = '.';
    n += sl_b64url_encode((const uint8_t *)payload, strlen(payload), out + n);
    out[n++] = '.';
    uint8_t zero[64] = {0};
    sl_b64url_encode(zero, sizeof zero, out + n);
    return out;
}

static void malformed_refused(void **state)
{
    fixture *f = *state;
    sl_token_claims c;
    sl_error e;
    const char *bad[] = {"", "abc", "a.b", "a.b.c.d", "!!.??.**", "..", NULL};
    for (int i = 0; bad[i]; i++)
        assert_int_not_equal(verify_at(f->pub, bad[i], NOW, &c, &e), SL_OK);
    assert_int_equal(verify_at(f->pub, NULL, NOW, &c, &e), SL_ERR_INVALID);
    char *huge = malloc(SL_TOKEN_MAX_LEN + 10);
    memset(huge, 'A', SL_TOKEN_MAX_LEN + 9);
    huge[SL_TOKEN_MAX_LEN + 9] = '\0';
    assert_int_equal(verify_at(f->pub, huge, NOW, &c, &e), SL_ERR_TOO_LARGE);
    free(huge);
    /* alg none / HS256 refused before any signature check */
    const char *p = "{\"iss\":\"x\",\"aud\":\"sluice-agent\",\"sub\":\"ab\",\"project_id\":\"cd\","
                    "\"iat\":1800000000,\"exp\":1800000600,\"jti\":\"j\"}";
    assert_int_equal(verify_at(f->pub, forge(f, "{\"alg\":\"none\"}", p), NOW, &c, &e),
                     SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "alg"));
    assert_int_equal(verify_at(f->pub, forge(f, "{\"alg\":\"HS256\"}", p), NOW, &c, &e),
                     SL_ERR_INVALID);
    assert_int_equal(verify_at(f->pub, forge(f, "[1]", p), NOW, &c, &e), SL_ERR_INVALID);
    assert_int_equal(
        verify_at(f->pub, forge(f, "{\"alg\":\"EdDSA\",\"crit\":[\"x\"]}", p), NOW, &c, &e),
        SL_ERR_INVALID);
    /* a right header and a zero signature: tampered */
    assert_int_equal(verify_at(f->pub, forge(f, "{\"alg\":\"EdDSA\"}", p), NOW, &c, &e),
                     SL_ERR_TAMPERED);
    /* decode_unverified sees missing and wrongly typed claims */
    assert_int_equal(
        sl_token_decode_unverified(forge(f, "{\"alg\":\"EdDSA\"}", "{\"iss\":\"x\"}"), &c, &e),
        SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "aud"));
    assert_int_equal(sl_token_decode_unverified(
                         forge(f, "{}",
                               "{\"iss\":\"x\",\"aud\":\"a\",\"sub\":\"ab\",\"project_id\":\"cd\","
                               "\"iat\":\"1\",\"exp\":2,\"jti\":\"j\"}"),
                         &c, &e),
                     SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "iat"));
}

static void b64url_vectors(void **state)
{
    (void)state;
    char out[16];
    assert_int_equal(sl_b64url_encode((const uint8_t *)"f", 1, out), 2);
    assert_string_equal(out, "Zg");
    sl_b64url_encode((const uint8_t *)"fo", 2, out);
    assert_string_equal(out, "Zm8");
    sl_b64url_encode((const uint8_t *)"foo", 3, out);
    assert_string_equal(out, "Zm9v");
    const uint8_t hi[] = {0xfb, 0xff};
    sl_b64url_encode(hi, 2, out);
    assert_string_equal(out, "-_8");
    uint8_t d[8];
    assert_int_equal(sl_b64url_decode("Zm9v", 4, d, sizeof d), 3);
    assert_memory_equal(d, "foo", 3);
    assert_int_equal(sl_b64url_decode("Zm8", 3, d, sizeof d), 2);
    assert_int_equal(sl_b64url_decode("Zm9", 3, d, sizeof d), -1); /* non-canonical */
    assert_int_equal(sl_b64url_decode("Z", 1, d, sizeof d), -1);
    assert_int_equal(sl_b64url_decode("Zm9v+A", 6, d, sizeof d), -1);
    assert_int_equal(sl_b64url_decode("Zm9vZm9v", 8, d, 5), -1);
}

static void key_files(void **state)
{
    (void)state;
    sl_token_key *k = NULL;
    sl_error e;
    assert_int_equal(sl_token_key_load("/nonexistent/key.pem", &k, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "/nonexistent/key.pem"));
    const char junk[] = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
    assert_int_equal(sl_token_key_from_pem(junk, sizeof junk - 1, &k, &e), SL_ERR_CONFIG);
    assert_null(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(header_is_jws_eddsa),
        cmocka_unit_test(tampered_payload_refused),
        cmocka_unit_test(substituted_claims_refused),
        cmocka_unit_test(expiry_enforced),
        cmocka_unit_test(wrong_key_refused),
        cmocka_unit_test(wrong_audience_refused),
        cmocka_unit_test(public_key_cannot_sign),
        cmocka_unit_test(malformed_refused),
        cmocka_unit_test(b64url_vectors),
        cmocka_unit_test(key_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
