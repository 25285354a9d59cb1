/* A frame of calls kept encoded (docs/remoting.md "Synchronous and asynchronous calls"): each
 * Call is packed as a CallFrame.calls element (tag 1, length, bytes) right behind room for the
 * ClientMessage.calls header, so sending needs no copy of the calls; the bulk of async calls is
 * copied behind, in call order. The caller serializes all use of one frame. */
#include <stdlib.h>
#include <string.h>

#include "call/frame.h"
#include "sluice/wire.h"

#define HDR_ROOM 16 /* ClientMessage tag + varint length, written right-aligned at send */

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        p[n++] = (uint8_t)(b | (v ? 0x80 : 0));
    } while (v);
    return n;
}

static int reserve(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    uint8_t *b = realloc(*buf, c);
    if (!b)
        return -1;
    *buf = b;
    *cap = c;
    return 0;
}

int sl_fe_frame_reserve_bulk(struct sl_fe_frame *f, size_t more)
{
    return reserve(&f->bulk, &f->bulk_cap, f->bulk_len + more);
}

void sl_fe_frame_add_bulk(struct sl_fe_frame *f, const void *data, size_t len)
{
    if (len)
        memcpy(f->bulk + f->bulk_len, data, len);
    f->bulk_len += len;
}

int sl_fe_frame_append(struct sl_fe_frame *f, const Sluice__Wire__Call *call)
{
    size_t sz = sl_wire_call_packed_size(call);
    if (reserve(&f->buf, &f->cap, HDR_ROOM + f->len + 11 + sz))
        return -1;
    uint8_t *p = f->buf + HDR_ROOM + f->len;
    size_t n = 0;
    p[n++] = 0x0a; /* CallFrame.calls = 1, length-delimited */
    n += put_varint(p + n, sz);
    n += sl_wire_call_pack(call, p + n);
    f->len += n;
    f->calls++;
    return 0;
}

int sl_fe_frame_join(struct sl_fe_frame *f, struct sl_fe_frame *later)
{
    if (reserve(&f->buf, &f->cap, HDR_ROOM + f->len + later->len) ||
        sl_fe_frame_reserve_bulk(f, later->bulk_len))
        return -1;
    if (later->len)
        memcpy(f->buf + HDR_ROOM + f->len, later->buf + HDR_ROOM, later->len);
    f->len += later->len;
    f->calls += later->calls;
    sl_fe_frame_add_bulk(f, later->bulk, later->bulk_len);
    sl_fe_frame_clear(later);
    return 0;
}

sl_code sl_fe_frame_send(struct sl_fe_frame *f, const struct sl_fe_transport *tr,
                         const struct iovec *extra, size_t n_extra, sl_error *e)
{
    uint8_t hdr[HDR_ROOM];
    size_t h = 0;
    hdr[h++] = 0x12; /* ClientMessage.calls = 2 */
    h += put_varint(hdr + h, f->len);
    uint8_t *msg = f->buf + HDR_ROOM - h;
    memcpy(msg, hdr, h);
    struct iovec iov[8];
    size_t ni = 0;
    if (f->bulk_len)
        iov[ni++] = (struct iovec){f->bulk, f->bulk_len};
    for (size_t i = 0; i < n_extra && ni < 8; i++)
        if (extra[i].iov_len)
            iov[ni++] = extra[i];
    sl_code rc = tr->send(tr->t, msg, h + f->len, iov, ni, e);
    sl_fe_frame_clear(f);
    return rc;
}

void sl_fe_frame_clear(struct sl_fe_frame *f)
{
    f->len = 0;
    f->calls = 0;
    f->bulk_len = 0;
}

void sl_fe_frame_free(struct sl_fe_frame *f)
{
    free(f->buf);
    free(f->bulk);
    *f = (struct sl_fe_frame){0};
}
