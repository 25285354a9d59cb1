/* The record framing inside the TLS stream: a 16-byte header, big-endian fields. */
#include "internal.h"

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void rec_encode(uint8_t out[REC_HDR_LEN], const rec_hdr *h)
{
    out[0] = h->kind;
    out[1] = h->flags;
    out[2] = (uint8_t)(h->reserved >> 8);
    out[3] = (uint8_t)h->reserved;
    put32(out + 4, h->length);
    put32(out + 8, (uint32_t)(h->aux >> 32));
    put32(out + 12, (uint32_t)h->aux);
}

void rec_decode(const uint8_t in[REC_HDR_LEN], rec_hdr *h)
{
    h->kind = in[0];
    h->flags = in[1];
    h->reserved = (uint16_t)(in[2] << 8 | in[3]);
    h->length = get32(in + 4);
    h->aux = (uint64_t)get32(in + 8) << 32 | get32(in + 12);
}

sl_code rec_check(const rec_hdr *h, uint64_t bulk_left, uint64_t bulk_off, size_t max_message,
                  size_t max_chunk, sl_error *err)
{
    if (h->flags != 0 || h->reserved != 0)
        return sl_fail(err, SL_ERR_PROTOCOL, "record kind %u has non-zero flags/reserved bits",
                       h->kind);
    switch (h->kind) {
    case REC_MESSAGE:
        if (bulk_left)
            return sl_fail(err, SL_ERR_PROTOCOL,
                           "MESSAGE arrived while %llu bulk bytes were still expected",
                           (unsigned long long)bulk_left);
        if (h->length == 0)
            return sl_fail(err, SL_ERR_PROTOCOL, "empty MESSAGE record");
        if (h->length > max_message)
            return sl_fail(err, SL_ERR_TOO_LARGE, "MESSAGE of %u bytes is over the %zu-byte limit",
                           h->length, max_message);
        return SL_OK;
    case REC_BULK:
    case REC_SEALED:
        if (!bulk_left)
            return sl_fail(err, SL_ERR_PROTOCOL, "%s record without a MESSAGE announcing it",
                           h->kind == REC_BULK ? "BULK" : "SEALED");
        if (h->length == 0 || h->length > bulk_left || h->length > max_chunk)
            return sl_fail(err, SL_ERR_PROTOCOL,
                           "BULK record of %u bytes (expected 1..%llu, chunk limit %zu)", h->length,
                           (unsigned long long)bulk_left, max_chunk);
        if (h->aux != bulk_off)
            return sl_fail(err, SL_ERR_PROTOCOL, "BULK record at offset %llu, expected %llu",
                           (unsigned long long)h->aux, (unsigned long long)bulk_off);
        return SL_OK;
    case REC_CLOSE:
        if (h->length > REC_CLOSE_MAX || h->aux == SL_OK || h->aux >= SL_CODE_COUNT)
            return sl_fail(err, SL_ERR_PROTOCOL, "malformed CLOSE record (code %llu, %u bytes)",
                           (unsigned long long)h->aux, h->length);
        return SL_OK;
    case REC_READY:
        if (h->length != 0 || h->aux != REC_VERSION || bulk_left)
            return sl_fail(err, SL_ERR_PROTOCOL, "malformed READY record (version %llu)",
                           (unsigned long long)h->aux);
        return SL_OK;
    default:
        return sl_fail(err, SL_ERR_PROTOCOL, "unknown record kind %u", h->kind);
    }
}
