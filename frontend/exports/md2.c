#include "exports/md2.h"

#include <string.h>

/* RFC 1319, section 3.2: the permutation of 0..255 built from the digits of pi. */
static const uint8_t PI_SUBST[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,  98,  167, 5,
    243, 192, 199, 115, 140, 152, 147, 43,  217, 188, 76,  130, 202, 30,  155, 87,  60,  253, 212,
    224, 22,  103, 66,  111, 24,  138, 23,  229, 18,  190, 78,  196, 214, 218, 158, 222, 73,  160,
    251, 245, 142, 187, 47,  238, 122, 169, 104, 121, 145, 21,  178, 7,   63,  148, 194, 16,  137,
    11,  34,  95,  33,  128, 127, 93,  154, 90,  144, 50,  39,  53,  62,  204, 231, 191, 247, 151,
    3,   255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,  170, 198, 79,  184,
    56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241, 69,  157, 112, 89,  100,
    113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,   27,  96,  37,  173, 174, 176, 185, 246,
    28,  70,  97,  105, 52,  64,  126, 15,  85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249,
    206, 186, 197, 234, 38,  44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129,
    77,  82,  106, 220, 55,  200, 108, 193, 171, 250, 36,  225, 123, 8,   12,  189, 177, 74,  120,
    136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254, 59,  0,   29,  57,  242, 239, 183, 14,
    102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,  49,  68,  80,  180, 143, 237, 31,
    26,  219, 153, 141, 51,  159, 17,  131, 20};

/* Processes one 16-byte block: the checksum update of RFC 1319 3.2 (with the published
 * erratum: C[j] ^= S[M[j] ^ L]) and the 18-round transform of 3.4. */
static void md2_block(struct sl_md2 *ctx, const uint8_t block[SL_MD2_BLOCK])
{
    uint8_t l = ctx->checksum[15];
    for (int j = 0; j < 16; j++) {
        ctx->checksum[j] ^= PI_SUBST[block[j] ^ l];
        l = ctx->checksum[j];
    }
    for (int j = 0; j < 16; j++) {
        ctx->x[16 + j] = block[j];
        ctx->x[32 + j] = (uint8_t)(ctx->x[16 + j] ^ ctx->x[j]);
    }
    uint8_t t = 0;
    for (int round = 0; round < 18; round++) {
        for (int k = 0; k < 48; k++) {
            ctx->x[k] ^= PI_SUBST[t];
            t = ctx->x[k];
        }
        t = (uint8_t)(t + round);
    }
}

void sl_md2_init(struct sl_md2 *ctx)
{
    memset(ctx, 0, sizeof *ctx);
}

void sl_md2_update(struct sl_md2 *ctx, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len > 0) {
        size_t take = SL_MD2_BLOCK - ctx->buf_len;
        if (take > len)
            take = len;
        memcpy(ctx->buf + ctx->buf_len, p, take);
        ctx->buf_len += take;
        p += take;
        len -= take;
        if (ctx->buf_len == SL_MD2_BLOCK) {
            md2_block(ctx, ctx->buf);
            ctx->buf_len = 0;
        }
    }
}

void sl_md2_final(struct sl_md2 *ctx, uint8_t digest[SL_MD2_DIGEST])
{
    /* 3.1: always pad, with pad bytes of value pad length (1..16). */
    uint8_t pad = (uint8_t)(SL_MD2_BLOCK - ctx->buf_len);
    memset(ctx->buf + ctx->buf_len, pad, pad);
    md2_block(ctx, ctx->buf);
    /* 3.2: append the checksum as the last block. */
    uint8_t checksum[SL_MD2_BLOCK];
    memcpy(checksum, ctx->checksum, sizeof checksum);
    md2_block(ctx, checksum);
    memcpy(digest, ctx->x, SL_MD2_DIGEST);
    memset(ctx, 0, sizeof *ctx);
}

void sl_md2(const void *data, size_t len, uint8_t digest[SL_MD2_DIGEST])
{
    struct sl_md2 ctx;
    sl_md2_init(&ctx);
    sl_md2_update(&ctx, data, len);
    sl_md2_final(&ctx, digest);
}

/* RFC 2104 with B = 16 (MD2's block) and L = 16. */
void sl_hmac_md2_init(struct sl_hmac_md2 *ctx, const void *key, size_t key_len)
{
    memset(ctx->key_block, 0, sizeof ctx->key_block);
    if (key_len > SL_MD2_BLOCK)
        sl_md2(key, key_len, ctx->key_block);
    else if (key_len > 0)
        memcpy(ctx->key_block, key, key_len);
    uint8_t ipad[SL_MD2_BLOCK];
    for (int i = 0; i < SL_MD2_BLOCK; i++)
        ipad[i] = (uint8_t)(ctx->key_block[i] ^ 0x36);
    sl_md2_init(&ctx->inner);
    sl_md2_update(&ctx->inner, ipad, sizeof ipad);
}

void sl_hmac_md2_update(struct sl_hmac_md2 *ctx, const void *data, size_t len)
{
    sl_md2_update(&ctx->inner, data, len);
}

void sl_hmac_md2_final(struct sl_hmac_md2 *ctx, uint8_t mac[SL_MD2_DIGEST])
{
    uint8_t inner[SL_MD2_DIGEST];
    sl_md2_final(&ctx->inner, inner);
    uint8_t opad[SL_MD2_BLOCK];
    for (int i = 0; i < SL_MD2_BLOCK; i++)
        opad[i] = (uint8_t)(ctx->key_block[i] ^ 0x5c);
    struct sl_md2 outer;
    sl_md2_init(&outer);
    sl_md2_update(&outer, opad, sizeof opad);
    sl_md2_update(&outer, inner, sizeof inner);
    sl_md2_final(&outer, mac);
    memset(ctx, 0, sizeof *ctx);
}

void sl_hmac_md2(const void *key, size_t key_len, const void *data, size_t len,
                 uint8_t mac[SL_MD2_DIGEST])
{
    struct sl_hmac_md2 ctx;
    sl_hmac_md2_init(&ctx, key, key_len);
    sl_hmac_md2_update(&ctx, data, len);
    sl_hmac_md2_final(&ctx, mac);
}
