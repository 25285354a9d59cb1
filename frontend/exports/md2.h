/* MD2 (RFC 1319) and HMAC-MD2 (RFC 2104). OpenSSL 3 ships MD2 disabled; the INTEGRITY_CHECK
 * export table needs it. Not for any other use: MD2 is broken as a cryptographic hash. */
#ifndef SLUICE_FRONTEND_MD2_H
#define SLUICE_FRONTEND_MD2_H

#include <stddef.h>
#include <stdint.h>

#define SL_MD2_BLOCK  16
#define SL_MD2_DIGEST 16

struct sl_md2 {
    uint8_t x[48];        /* the state; x[0..16) is the digest at the end */
    uint8_t checksum[16]; /* the running checksum of the padded message */
    uint8_t buf[16];      /* bytes of an incomplete block */
    size_t buf_len;
};

void sl_md2_init(struct sl_md2 *ctx);
void sl_md2_update(struct sl_md2 *ctx, const void *data, size_t len);
/* Pads, appends the checksum and writes the digest. ctx must be re-initialised for reuse. */
void sl_md2_final(struct sl_md2 *ctx, uint8_t digest[SL_MD2_DIGEST]);
void sl_md2(const void *data, size_t len, uint8_t digest[SL_MD2_DIGEST]);

struct sl_hmac_md2 {
    struct sl_md2 inner;
    uint8_t key_block[SL_MD2_BLOCK]; /* the key, hashed if longer than a block, zero-padded */
};

void sl_hmac_md2_init(struct sl_hmac_md2 *ctx, const void *key, size_t key_len);
void sl_hmac_md2_update(struct sl_hmac_md2 *ctx, const void *data, size_t len);
/* Writes the MAC and wipes ctx. */
void sl_hmac_md2_final(struct sl_hmac_md2 *ctx, uint8_t mac[SL_MD2_DIGEST]);
void sl_hmac_md2(const void *key, size_t key_len, const void *data, size_t len,
                 uint8_t mac[SL_MD2_DIGEST]);

#endif
