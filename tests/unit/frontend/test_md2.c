/* MD2 against RFC 1319's test suite (appendix A.5); HMAC-MD2 (RFC 2104) by its definition. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "exports/md2.h"

static void hex(const uint8_t d[16], char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void test_rfc1319_vectors(void **state)
{
    (void)state;
    static const struct {
        const char *msg, *digest;
    } v[] = {
        {"", "8350e5a3e24c153df2275c9f80692773"},
        {"a", "32ec01ec4a6dac72c0ab96fb34c0b5d1"},
        {"abc", "da853b0d3f88d99b30283a69e6ded6bb"},
        {"message digest", "ab4f496bfb2a530b219ff33031fe06b0"},
        {"abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
         "da33def2a42df13975352846c30338cd"},
        {"1234567890123456789012345678901234567890123456789012345678901234567890123456"
         "7890",
         "d5976f79d83d3a0dc9806c3c66f3efd8"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t d[16];
        char h[33];
        sl_md2(v[i].msg, strlen(v[i].msg), d);
        hex(d, h);
        assert_string_equal(h, v[i].digest);
    }
}

static void test_streaming_matches_one_shot(void **state)
{
    (void)state;
    uint8_t msg[100];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 37 + 11);
    for (size_t len = 0; len <= sizeof msg; len++) {
        uint8_t one[16];
        sl_md2(msg, len, one);
        for (size_t cut = 0; cut <= len; cut += 7) {
            struct sl_md2 ctx;
            uint8_t two[16];
            sl_md2_init(&ctx);
            sl_md2_update(&ctx, msg, cut);
            sl_md2_update(&ctx, msg + cut, 0);
            sl_md2_update(&ctx, msg + cut, len - cut);
            sl_md2_final(&ctx, two);
            assert_memory_equal(one, two, 16);
        }
    }
}

/* HMAC(K, m) = H((K ^ opad) || H((K ^ ipad) || m)) with B = 16, composed from sl_md2. */
static void hmac_by_definition(const uint8_t key[16], const void *msg, size_t len, uint8_t out[16])
{
    uint8_t buf[16 + 256];
    uint8_t inner[16];
    for (int i = 0; i < 16; i++)
        buf[i] = key[i] ^ 0x36;
    memcpy(buf + 16, msg, len);
    sl_md2(buf, 16 + len, inner);
    for (int i = 0; i < 16; i++)
        buf[i] = key[i] ^ 0x5c;
    memcpy(buf + 16, inner, 16);
    sl_md2(buf, 32, out);
}

static void test_hmac_definition(void **state)
{
    (void)state;
    const uint8_t key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    const char *msgs[] = {"", "abc", "a message longer than one sixteen-byte MD2 block"};
    for (size_t i = 0; i < 3; i++) {
        uint8_t a[16], b[16];
        sl_hmac_md2(key, 16, msgs[i], strlen(msgs[i]), a);
        hmac_by_definition(key, msgs[i], strlen(msgs[i]), b);
        assert_memory_equal(a, b, 16);
    }
    /* a short key is zero-padded; a long key is hashed first */
    uint8_t padded[16] = {0x4b, 0x65, 0x79}, a[16], b[16];
    sl_hmac_md2("Key", 3, "abc", 3, a);
    hmac_by_definition(padded, "abc", 3, b);
    assert_memory_equal(a, b, 16);
    const char *long_key = "a key of more than sixteen bytes";
    uint8_t hashed[16];
    sl_md2(long_key, strlen(long_key), hashed);
    sl_hmac_md2(long_key, strlen(long_key), "abc", 3, a);
    hmac_by_definition(hashed, "abc", 3, b);
    assert_memory_equal(a, b, 16);
    /* streaming */
    struct sl_hmac_md2 ctx;
    sl_hmac_md2_init(&ctx, key, 16);
    sl_hmac_md2_update(&ctx, "a message longer ", 17);
    sl_hmac_md2_update(&ctx, "than one sixteen-byte MD2 block", 31);
    sl_hmac_md2_final(&ctx, a);
    hmac_by_definition(key, msgs[2], strlen(msgs[2]), b);
    assert_memory_equal(a, b, 16);
    /* the key matters */
    uint8_t key2[16];
    memcpy(key2, key, 16);
    key2[15] ^= 1;
    sl_hmac_md2(key2, 16, "abc", 3, b);
    sl_hmac_md2(key, 16, "abc", 3, a);
    assert_memory_not_equal(a, b, 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc1319_vectors),
        cmocka_unit_test(test_streaming_matches_one_shot),
        cmocka_unit_test(test_hmac_definition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
