/* wire.roundtrip: every generated message survives pack -> unpack -> pack byte for byte.
 * Messages are filled by reflection over the protobuf-c field descriptors with pseudo-random
 * scalars, strings, bytes, repeated fields, one member of every oneof and sub-messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/wire.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void fill_message(ProtobufCMessage *m, int depth);

static size_t value_size(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    default:
        return 4;
    }
}

/* Writes one random value of field f at dst (malloc'd strings, bytes and sub-messages). */
static void fill_value(const ProtobufCFieldDescriptor *f, void *dst, int depth)
{
    uint64_t r = rnd();
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        size_t n = (size_t)(r % 24);
        char *s = malloc(n + 1);
        for (size_t i = 0; i < n; i++)
            s[i] = (char)('a' + rnd() % 26);
        s[n] = 0;
        *(char **)dst = s;
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        ProtobufCBinaryData *b = dst;
        b->len = (size_t)(r % 40);
        b->data = b->len ? malloc(b->len) : NULL;
        for (size_t i = 0; i < b->len; i++)
            b->data[i] = (uint8_t)rnd();
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessageDescriptor *d = f->descriptor;
        ProtobufCMessage *sub = malloc(d->sizeof_message);
        d->message_init(sub);
        if (depth < 3)
            fill_message(sub, depth + 1);
        *(ProtobufCMessage **)dst = sub;
        break;
    }
    case PROTOBUF_C_TYPE_BOOL:
        *(protobuf_c_boolean *)dst = (protobuf_c_boolean)(r & 1);
        break;
    case PROTOBUF_C_TYPE_ENUM:
        *(int32_t *)dst = 0; /* no enums in our schema; keep a valid value if one appears */
        break;
    default:
        memcpy(dst, &r, value_size(f));
    }
}

static void fill_message(ProtobufCMessage *m, int depth)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    char *base = (char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            /* members of one oneof are consecutive and share quantifier_offset: pick one */
            unsigned n = 1;
            while (i + n < d->n_fields &&
                   d->fields[i + n].quantifier_offset == f->quantifier_offset &&
                   (d->fields[i + n].flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
                n++;
            const ProtobufCFieldDescriptor *pick = &d->fields[i + rnd() % n];
            *(uint32_t *)(base + pick->quantifier_offset) = pick->id;
            fill_value(pick, base + pick->offset, depth);
            i += n - 1;
        } else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = (size_t)(rnd() % 4);
            size_t sz = value_size(f);
            char *arr = n ? calloc(n, sz) : NULL;
            for (size_t k = 0; k < n; k++)
                fill_value(f, arr + k * sz, depth);
            *(size_t *)(base + f->quantifier_offset) = n;
            *(void **)(base + f->offset) = arr;
        } else {
            fill_value(f, base + f->offset, depth);
        }
    }
}

static void every_message_round_trips(void **state)
{
    (void)state;
    assert_true(sl_wire_descriptor_count > 2 * SL_CALL_COUNT);
    for (size_t i = 0; i < sl_wire_descriptor_count; i++) {
        const ProtobufCMessageDescriptor *d = sl_wire_descriptors[i];
        for (int rep = 0; rep < 3; rep++) {
            ProtobufCMessage *m = malloc(d->sizeof_message);
            d->message_init(m);
            fill_message(m, 0);
            size_t n1 = protobuf_c_message_get_packed_size(m);
            uint8_t *b1 = malloc(n1 + 1);
            assert_int_equal(protobuf_c_message_pack(m, b1), n1);
            ProtobufCMessage *u = protobuf_c_message_unpack(d, NULL, n1, b1);
            if (!u)
                fail_msg("%s: unpack of its own packing failed", d->name);
            size_t n2 = protobuf_c_message_get_packed_size(u);
            uint8_t *b2 = malloc(n2 + 1);
            assert_int_equal(protobuf_c_message_pack(u, b2), n2);
            if (n1 != n2 || memcmp(b1, b2, n1) != 0)
                fail_msg("%s: repacked bytes differ", d->name);
            protobuf_c_message_free_unpacked(u, NULL);
            protobuf_c_message_free_unpacked(m, NULL);
            free(b1);
            free(b2);
        }
    }
}

static void call_table_is_consistent(void **state)
{
    (void)state;
    size_t n = 0;
    for (uint32_t id = 1; id <= SL_CALL_ID_MAX; id++) {
        if (!sl_call_table[id].id)
            continue;
        n++;
        assert_int_equal(sl_call_table[id].id, id);
        assert_non_null(sl_call_lookup(id));
        /* the oneof member numbers of Call and Reply are 100 + id and carry the call's name */
        const ProtobufCFieldDescriptor *fc = protobuf_c_message_descriptor_get_field(
            &sluice__wire__call__descriptor, SL_ONEOF_BASE + id);
        assert_non_null(fc);
        assert_non_null(protobuf_c_message_descriptor_get_field(&sluice__wire__reply__descriptor,
                                                                SL_ONEOF_BASE + id));
    }
    assert_int_equal(n, SL_CALL_COUNT);
    assert_null(sl_call_lookup(0));
    assert_null(sl_call_lookup(SL_CALL_ID_MAX + 1));
    assert_string_equal(sl_call_lookup(SL_CALL_cuMemAlloc_v2)->name, "cuMemAlloc_v2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_message_round_trips),
        cmocka_unit_test(call_table_is_consistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
