/* Call and Reply without walking their oneof. Each has a few plain fields and a oneof with one
 * member per driver call (about a thousand); protobuf-c's pack, get_packed_size and
 * free_unpacked visit every field of a message's descriptor, so a 50-byte launch cost ~1.5 us
 * to encode, most of it spent skipping the 999 members that are not set. Here the plain fields
 * go through protobuf-c with a "head" descriptor that lists only them (same struct, same
 * offsets), and the one member that is set is packed or freed on its own. The bytes are the
 * ones protobuf-c writes: fields in number order, the member (numbers >= 101) last; a unit test
 * compares them. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/wire.h"

#define HEAD_MAX 16 /* plain fields of Call (5) and Reply (8), with room */

struct head {
    const ProtobufCMessageDescriptor *full;
    ProtobufCMessageDescriptor desc;
    ProtobufCFieldDescriptor fields[HEAD_MAX];
    unsigned sorted[HEAD_MAX];
    ProtobufCIntRange ranges[HEAD_MAX + 1];
    size_t case_offset; /* the oneof's case member */
    int ok;
};

static struct head g_call = {.full = &sluice__wire__call__descriptor};
static struct head g_reply = {.full = &sluice__wire__reply__descriptor};
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void head_init(struct head *h)
{
    const ProtobufCMessageDescriptor *d = h->full;
    unsigned n = 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            h->case_offset = f->quantifier_offset;
            continue;
        }
        if (n == HEAD_MAX)
            return; /* not the shape this file knows: ok stays 0, protobuf-c does the work */
        h->fields[n] = *f;
        n++;
    }
    /* fields[] keep the descriptor's order (by number); sorted by name for protobuf-c */
    for (unsigned i = 0; i < n; i++)
        h->sorted[i] = i;
    for (unsigned i = 1; i < n; i++)
        for (unsigned k = i;
             k > 0 && strcmp(h->fields[h->sorted[k - 1]].name, h->fields[h->sorted[k]].name) > 0;
             k--) {
            unsigned t = h->sorted[k];
            h->sorted[k] = h->sorted[k - 1];
            h->sorted[k - 1] = t;
        }
    /* one range per run of consecutive numbers, then the sentinel holding the field count */
    unsigned nr = 0;
    for (unsigned i = 0; i < n; i++)
        if (i == 0 || h->fields[i].id != h->fields[i - 1].id + 1)
            h->ranges[nr++] = (ProtobufCIntRange){(int)h->fields[i].id, (int)i};
    h->ranges[nr] = (ProtobufCIntRange){0, (int)n};
    h->desc = *d;
    h->desc.n_fields = n;
    h->desc.fields = h->fields;
    h->desc.fields_sorted_by_name = h->sorted;
    h->desc.n_field_ranges = nr;
    h->desc.field_ranges = h->ranges;
    h->ok = n > 0 && h->case_offset != 0;
}

static void init_once(void)
{
    head_init(&g_call);
    head_init(&g_reply);
}

static const struct head *head_of(const ProtobufCMessage *m)
{
    pthread_once(&g_once, init_once);
    const struct head *h = m->descriptor == g_call.full    ? &g_call
                           : m->descriptor == g_reply.full ? &g_reply
                                                           : NULL;
    return h && h->ok ? h : NULL;
}

/* The member that is set (its descriptor and message), or NULL. */
static const ProtobufCFieldDescriptor *member(const struct head *h, const ProtobufCMessage *m,
                                              ProtobufCMessage ***slot)
{
    uint32_t which = *(const uint32_t *)((const char *)m + h->case_offset);
    if (!which)
        return NULL;
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(h->full, (unsigned)which);
    if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE)
        return NULL;
    *slot = (ProtobufCMessage **)((char *)m + f->offset);
    return *slot && **slot ? f : NULL;
}

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* The message seen through its head descriptor: a shallow copy (only the descriptor differs). */
union view {
    ProtobufCMessage base;
    Sluice__Wire__Call call;
    Sluice__Wire__Reply reply;
};

static const ProtobufCMessage *as_head(const struct head *h, const ProtobufCMessage *m,
                                       union view *v)
{
    memcpy(v, m, h->full->sizeof_message);
    v->base.descriptor = &h->desc;
    return &v->base;
}

static size_t fast_size(const ProtobufCMessage *m)
{
    const struct head *h = head_of(m);
    if (!h)
        return protobuf_c_message_get_packed_size(m);
    union view v;
    size_t n = protobuf_c_message_get_packed_size(as_head(h, m, &v));
    ProtobufCMessage **slot;
    const ProtobufCFieldDescriptor *f = member(h, m, &slot);
    if (f) {
        size_t len = protobuf_c_message_get_packed_size(*slot);
        n += varint_size((uint64_t)f->id << 3) + varint_size(len) + len;
    }
    return n;
}

static size_t fast_pack(const ProtobufCMessage *m, uint8_t *out)
{
    const struct head *h = head_of(m);
    if (!h)
        return protobuf_c_message_pack(m, out);
    union view v;
    size_t n = protobuf_c_message_pack(as_head(h, m, &v), out);
    ProtobufCMessage **slot;
    const ProtobufCFieldDescriptor *f = member(h, m, &slot);
    if (f) {
        n += put_varint(out + n, (uint64_t)f->id << 3 | 2u); /* length-delimited */
        n += put_varint(out + n, protobuf_c_message_get_packed_size(*slot));
        n += protobuf_c_message_pack(*slot, out + n);
    }
    return n;
}

static void fast_free(ProtobufCMessage *m)
{
    if (!m)
        return;
    const struct head *h = head_of(m);
    if (!h) {
        protobuf_c_message_free_unpacked(m, NULL);
        return;
    }
    ProtobufCMessage **slot;
    if (member(h, m, &slot)) {
        protobuf_c_message_free_unpacked(*slot, NULL);
        *slot = NULL;
    }
    m->descriptor = &h->desc; /* frees the plain fields (strings, repeated) and m itself */
    protobuf_c_message_free_unpacked(m, NULL);
}

size_t sl_wire_call_packed_size(const Sluice__Wire__Call *c)
{
    return fast_size(&c->base);
}

size_t sl_wire_call_pack(const Sluice__Wire__Call *c, uint8_t *out)
{
    return fast_pack(&c->base, out);
}

size_t sl_wire_reply_packed_size(const Sluice__Wire__Reply *r)
{
    return fast_size(&r->base);
}

size_t sl_wire_reply_pack(const Sluice__Wire__Reply *r, uint8_t *out)
{
    return fast_pack(&r->base, out);
}

void sl_wire_call_free(Sluice__Wire__Call *c)
{
    fast_free(c ? &c->base : NULL);
}

void sl_wire_reply_free(Sluice__Wire__Reply *r)
{
    fast_free(r ? &r->base : NULL);
}

/* ---- ClientMessage{calls} and ServerMessage{replies}: the frame (member 2) repeats its element
 * as field 1. Other kinds go to protobuf-c as they are. */
static int frame_of(const ProtobufCMessage *m, ProtobufCMessage ***el, size_t *n)
{
    if (m->descriptor == &sluice__wire__client_message__descriptor) {
        const Sluice__Wire__ClientMessage *c = (const Sluice__Wire__ClientMessage *)m;
        if (c->kind_case != SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS || !c->calls)
            return 0;
        *el = (ProtobufCMessage **)c->calls->calls;
        *n = c->calls->n_calls;
        return 1;
    }
    if (m->descriptor == &sluice__wire__server_message__descriptor) {
        const Sluice__Wire__ServerMessage *s = (const Sluice__Wire__ServerMessage *)m;
        if (s->kind_case != SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES || !s->replies)
            return 0;
        *el = (ProtobufCMessage **)s->replies->replies;
        *n = s->replies->n_replies;
        return 1;
    }
    return 0;
}

static size_t frame_inner(ProtobufCMessage *const *el, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = el[i] ? fast_size(el[i]) : 0;
        k += 1 + varint_size(len) + len;
    }
    return k;
}

size_t sl_wire_message_packed_size(const ProtobufCMessage *m)
{
    ProtobufCMessage **el;
    size_t n;
    if (!frame_of(m, &el, &n))
        return protobuf_c_message_get_packed_size(m);
    size_t inner = frame_inner(el, n);
    return 1 + varint_size(inner) + inner;
}

size_t sl_wire_message_pack(const ProtobufCMessage *m, uint8_t *out)
{
    ProtobufCMessage **el;
    size_t n;
    if (!frame_of(m, &el, &n))
        return protobuf_c_message_pack(m, out);
    size_t k = 0;
    out[k++] = 2u << 3 | 2u; /* the frame: member 2, length-delimited */
    k += put_varint(out + k, frame_inner(el, n));
    for (size_t i = 0; i < n; i++) {
        out[k++] = 1u << 3 | 2u; /* one element: field 1, length-delimited */
        if (!el[i]) {
            out[k++] = 0;
            continue;
        }
        k += put_varint(out + k, fast_size(el[i]));
        k += fast_pack(el[i], out + k);
    }
    return k;
}

void sl_wire_message_free(ProtobufCMessage *m)
{
    if (!m)
        return;
    ProtobufCMessage **el;
    size_t n;
    if (frame_of(m, &el, &n))
        for (size_t i = 0; i < n; i++) {
            fast_free(el[i]);
            el[i] = NULL;
        }
    protobuf_c_message_free_unpacked(m, NULL);
}

/* ---- Unpacking. protobuf-c reads the plain fields through the head descriptor; the member
 * arrives as an unknown field and is unpacked on its own with its descriptor. A member whose
 * wire type is wrong, or that does not unpack, fails the whole message, as protobuf-c would;
 * other unknown fields stay unknown fields, as protobuf-c keeps them. */
/* A length-prefixed unknown field keeps its length varint in front of the bytes. */
static int get_varint(const uint8_t *p, size_t len, size_t *at, size_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; *at < len && shift < 64; shift += 7) {
        uint8_t b = p[(*at)++];
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = (size_t)x;
            return 1;
        }
    }
    return 0;
}

static int take_members(const struct head *h, ProtobufCMessage *m)
{
    size_t keep = 0;
    int ok = 1;
    for (size_t i = 0; i < m->n_unknown_fields; i++) {
        ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
        const ProtobufCFieldDescriptor *f =
            ok ? protobuf_c_message_descriptor_get_field(h->full, u->tag) : NULL;
        if (!f || !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) || f->type != PROTOBUF_C_TYPE_MESSAGE) {
            m->unknown_fields[keep++] = *u;
            continue;
        }
        ProtobufCMessage *sub = NULL;
        size_t at = 0, body;
        if (u->wire_type == PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED &&
            get_varint(u->data, u->len, &at, &body) && body == u->len - at)
            sub = protobuf_c_message_unpack(f->descriptor, NULL, body, u->data + at);
        free(u->data);
        if (!sub) {
            ok = 0;
            continue;
        }
        ProtobufCMessage **slot = (ProtobufCMessage **)((char *)m + f->offset);
        uint32_t *which = (uint32_t *)((char *)m + f->quantifier_offset);
        if (*which && *slot) /* a later member replaces an earlier one */
            protobuf_c_message_free_unpacked(*slot, NULL);
        *slot = sub;
        *which = f->id;
    }
    m->n_unknown_fields = keep;
    if (!keep) {
        free(m->unknown_fields);
        m->unknown_fields = NULL;
    }
    return ok;
}

static ProtobufCMessage *fast_unpack(const struct head *h, size_t len, const uint8_t *data)
{
    if (!h->ok)
        return protobuf_c_message_unpack(h->full, NULL, len, data);
    ProtobufCMessage *m = protobuf_c_message_unpack(&h->desc, NULL, len, data);
    if (m && !take_members(h, m)) {
        fast_free(m);
        m = NULL;
    }
    return m;
}

Sluice__Wire__Call *sl_wire_call_unpack(size_t len, const uint8_t *data)
{
    pthread_once(&g_once, init_once);
    return (Sluice__Wire__Call *)fast_unpack(&g_call, len, data);
}

Sluice__Wire__Reply *sl_wire_reply_unpack(size_t len, const uint8_t *data)
{
    pthread_once(&g_once, init_once);
    return (Sluice__Wire__Reply *)fast_unpack(&g_reply, len, data);
}

/* ClientMessage and ServerMessage seen through copies of their descriptors (and of their
 * frames') whose element field names the head descriptor: protobuf-c then unpacks each call
 * or reply the fast way, and take_members finishes them. */
struct outer {
    const ProtobufCMessageDescriptor *full_top, *full_frame;
    struct head *el;
    ProtobufCMessageDescriptor top, frame;
    ProtobufCFieldDescriptor top_f[HEAD_MAX], frame_f[HEAD_MAX];
    int ok;
};

static struct outer g_client = {.full_top = &sluice__wire__client_message__descriptor,
                                .full_frame = &sluice__wire__call_frame__descriptor,
                                .el = &g_call};
static struct outer g_server = {.full_top = &sluice__wire__server_message__descriptor,
                                .full_frame = &sluice__wire__reply_frame__descriptor,
                                .el = &g_reply};

/* d's fields copied into f, with every field of descriptor `from` pointing at `to`. */
static int redirect(ProtobufCMessageDescriptor *out, ProtobufCFieldDescriptor *f,
                    const ProtobufCMessageDescriptor *d, const void *from, const void *to)
{
    if (d->n_fields > HEAD_MAX)
        return 0;
    int hit = 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        f[i] = d->fields[i];
        if (f[i].descriptor == from) {
            f[i].descriptor = to;
            hit = 1;
        }
    }
    *out = *d;
    out->fields = f;
    return hit;
}

static void outer_init(struct outer *o)
{
    o->ok = o->el->ok &&
            redirect(&o->frame, o->frame_f, o->full_frame, o->el->full, &o->el->desc) &&
            redirect(&o->top, o->top_f, o->full_top, o->full_frame, &o->frame);
}

static void init_outer_once(void)
{
    pthread_once(&g_once, init_once);
    outer_init(&g_client);
    outer_init(&g_server);
}

static pthread_once_t g_outer_once = PTHREAD_ONCE_INIT;

ProtobufCMessage *sl_wire_message_unpack(const ProtobufCMessageDescriptor *d, size_t len,
                                         const uint8_t *data)
{
    pthread_once(&g_outer_once, init_outer_once);
    struct outer *o = d == g_client.full_top   ? &g_client
                      : d == g_server.full_top ? &g_server
                                               : NULL;
    if (!o || !o->ok)
        return protobuf_c_message_unpack(d, NULL, len, data);
    ProtobufCMessage *m = protobuf_c_message_unpack(&o->top, NULL, len, data);
    ProtobufCMessage **el;
    size_t n;
    if (!m || !frame_of(m, &el, &n))
        return m;
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        if (el[i] && !take_members(o->el, el[i]))
            ok = 0;
    if (!ok) {
        sl_wire_message_free(m);
        return NULL;
    }
    return m;
}
