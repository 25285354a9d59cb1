/* sluice_token key sets: several verification keys at once (a key rotation, several
 * nova-hooks): a PEM bundle and a directory load; the token's kid picks the key; a key not in
 * the set is refused with its id named; private keys in a bundle give their public halves;
 * malformed bundles are refused naming the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sluice/token.h"

#define NOW 1800000000LL

static char *sign_with(const sl_token_key *k)
{
    sl_token_claims c;
    memset(&c, 0, sizeof c);
    strcpy(c.iss, "sluice-nova-hook");
    strcpy(c.aud, SL_TOKEN_AUDIENCE);
    strcpy(c.sub, "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60");
    strcpy(c.project_id, "f241e906010e4917ae8153f4fb8aa021");
    sl_error e;
    assert_int_equal(sl_token_claims_stamp(&c, NOW, 600, &e), SL_OK);
    char *t = NULL;
    assert_int_equal(sl_token_sign(k, &c, &t, &e), SL_OK);
    return t;
}

static char *public_pem(const sl_token_key *k)
{
    char *pem;
    sl_error e;
    assert_int_equal(sl_token_key_public_pem(k, &pem, &e), SL_OK);
    return pem;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void bundle_verifies_each_key(void **state)
{
    (void)state;
    sl_token_key *a, *b, *c;
    sl_error e;
    assert_int_equal(sl_token_key_generate(&a, &e), SL_OK);
    assert_int_equal(sl_token_key_generate(&b, &e), SL_OK);
    assert_int_equal(sl_token_key_generate(&c, &e), SL_OK);
    char *pa = public_pem(a), *pb = public_pem(b), *priv_b;
    assert_int_equal(sl_token_key_private_pem(b, &priv_b, &e), SL_OK);
    /* a, b (public), b again (its private key: the same id, one key) */
    size_t n = strlen(pa) + strlen(pb) + strlen(priv_b) + 16;
    char *bundle = malloc(n);
    snprintf(bundle, n, "%s\n%s%s", pa, pb, priv_b);
    sl_token_keyset *ks;
    assert_int_equal(sl_token_keyset_from_pem(bundle, strlen(bundle), "bundle", &ks, &e), SL_OK);
    assert_int_equal(sl_token_keyset_count(ks), 2);
    assert_non_null(sl_token_keyset_find(ks, sl_token_key_id(a)));
    assert_non_null(sl_token_keyset_find(ks, sl_token_key_id(b)));
    assert_null(sl_token_keyset_find(ks, sl_token_key_id(c)));
    sl_token_verify_opts o = {.now = NOW + 1, .skew = 30};
    sl_token_claims out;
    char *ta = sign_with(a), *tb = sign_with(b), *tc = sign_with(c);
    assert_int_equal(sl_token_verify_keyset(ks, ta, &o, &out, &e), SL_OK);
    assert_int_equal(sl_token_verify_keyset(ks, tb, &o, &out, &e), SL_OK);
    /* a key not handed out: refused, its id named */
    assert_int_equal(sl_token_verify_keyset(ks, tc, &o, &out, &e), SL_ERR_TAMPERED);
    assert_non_null(strstr(e.msg, sl_token_key_id(c)));
    /* a token of key a whose header names b's kid: b's key does not verify it */
    char kid[64];
    assert_int_equal(sl_token_header_kid(ta, kid, sizeof kid, &e), SL_OK);
    assert_string_equal(kid, sl_token_key_id(a));
    char hdr[256], hb64[400], forged[2048];
    snprintf(hdr, sizeof hdr, "{\"alg\":\"EdDSA\",\"typ\":\"JWT\",\"kid\":\"%s\"}",
             sl_token_key_id(b));
    sl_b64url_encode((const uint8_t *)hdr, strlen(hdr), hb64);
    snprintf(forged, sizeof forged, "%s%s", hb64, strchr(ta, '.'));
    assert_int_equal(sl_token_verify_keyset(ks, forged, &o, &out, &e), SL_ERR_TAMPERED);
    free(ta);
    free(tb);
    free(tc);
    free(bundle);
    free(pa);
    free(pb);
    memset(priv_b, 0, strlen(priv_b));
    free(priv_b);
    sl_token_keyset_free(ks);
    sl_token_key_free(a);
    sl_token_key_free(b);
    sl_token_key_free(c);
}

static void directory_and_errors(void **state)
{
    (void)state;
    char dir[] = "/tmp/sl-keyset-XXXXXX";
    assert_non_null(mkdtemp(dir));
    sl_token_key *a, *b;
    sl_error e;
    assert_int_equal(sl_token_key_generate(&a, &e), SL_OK);
    assert_int_equal(sl_token_key_generate(&b, &e), SL_OK);
    char *pa = public_pem(a), *pb = public_pem(b), path[128];
    snprintf(path, sizeof path, "%s/1.pem", dir);
    write_file(path, pa);
    snprintf(path, sizeof path, "%s/2.pem", dir);
    write_file(path, pb);
    snprintf(path, sizeof path, "%s/.hidden", dir);
    write_file(path, "not a key");
    sl_token_keyset *ks;
    assert_int_equal(sl_token_keyset_load(dir, &ks, &e), SL_OK);
    assert_int_equal(sl_token_keyset_count(ks), 2);
    sl_token_keyset_free(ks);
    /* a file with no key, a truncated block: refused, the file named */
    snprintf(path, sizeof path, "%s/3.pem", dir);
    write_file(path, "hello\n");
    assert_int_equal(sl_token_keyset_load(dir, &ks, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "3.pem"));
    write_file(path, "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n");
    assert_int_equal(sl_token_keyset_load(path, &ks, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "END"));
    unlink(path);
    assert_int_equal(sl_token_keyset_load("/nonexistent/keys", &ks, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "/nonexistent/keys"));
    const char *names[] = {"1.pem", "2.pem", ".hidden"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    free(pa);
    free(pb);
    sl_token_key_free(a);
    sl_token_key_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bundle_verifies_each_key),
        cmocka_unit_test(directory_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
