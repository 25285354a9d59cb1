/* wire.oneof: the Call/Reply codec that skips the oneof's unset members writes exactly the bytes
 * protobuf-c writes, and frees what protobuf-c's unpack made (ASan checks the frees). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/wire.h"

static void same_bytes(const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    assert_int_equal(sl_wire_message_packed_size(m), n);
    uint8_t *a = malloc(n + 1), *b = malloc(n + 1);
    assert_int_equal(protobuf_c_message_pack(m, a), n);
    assert_int_equal(sl_wire_message_pack(m, b), n);
    assert_memory_equal(a, b, n);
    free(a);
    free(b);
}

static void call_bytes_equal_protobuf_c(void **state)
{
    (void)state;
    Sluice__Cuda__CuLaunchKernelRequest rq = SLUICE__CUDA__CU_LAUNCH_KERNEL_REQUEST__INIT;
    rq.f = 0x0500000000001234u;
    rq.grid_dim_x = 1024;
    rq.block_dim_x = 256;
    rq.h_stream = 0x0600000000000044u;
    rq.kernel_params = 48;
    Sluice__Cuda__CuCtxSynchronizeRequest none = SLUICE__CUDA__CU_CTX_SYNCHRONIZE_REQUEST__INIT;
    Sluice__Wire__Call c[3];
    for (int i = 0; i < 3; i++)
        sluice__wire__call__init(&c[i]);
    c[0].seq = 300; /* every plain field set, a member with fields */
    c[0].call_id = SL_CALL_cuLaunchKernel;
    c[0].bulk_length = 48;
    c[0].per_thread_stream = 1;
    c[0].context = 16;
    c[0].args_case = SLUICE__WIRE__CALL__ARGS_CU_LAUNCH_KERNEL;
    c[0].cu_launch_kernel = &rq;
    c[1].seq = (uint64_t)1 << 40; /* an empty member */
    c[1].call_id = SL_CALL_cuCtxSynchronize;
    c[1].args_case = SLUICE__WIRE__CALL__ARGS_CU_CTX_SYNCHRONIZE;
    c[1].cu_ctx_synchronize = &none;
    c[2].seq = 7; /* no member at all */
    for (int i = 0; i < 3; i++) {
        same_bytes(&c[i].base);
        uint8_t buf[256];
        assert_int_equal(sl_wire_call_pack(&c[i], buf), sl_wire_call_packed_size(&c[i]));
    }
    Sluice__Wire__Call *cs[2] = {&c[0], &c[1]}; /* a valid frame: c[2] has no call id */
    Sluice__Wire__CallFrame f = SLUICE__WIRE__CALL_FRAME__INIT;
    f.n_calls = 2;
    f.calls = cs;
    Sluice__Wire__ClientMessage m = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS;
    m.calls = &f;
    same_bytes(&m.base);

    uint8_t *buf = NULL; /* and back, freed by the fast free */
    size_t len = 0;
    sl_error e;
    assert_int_equal(sl_wire_encode_client(&m, NULL, &buf, &len, &e), SL_OK);
    Sluice__Wire__ClientMessage *out = NULL;
    assert_int_equal(sl_wire_decode_client(buf, len, NULL, &out, &e), SL_OK);
    assert_int_equal(out->calls->n_calls, 2);
    assert_int_equal(out->calls->calls[0]->cu_launch_kernel->h_stream, rq.h_stream);
    assert_true(out->calls->calls[0]->per_thread_stream);
    sl_wire_free_client(out);
    free(buf);
}

static void reply_bytes_equal_protobuf_c(void **state)
{
    (void)state;
    Sluice__Cuda__CuDeviceGetAttributeReply a = SLUICE__CUDA__CU_DEVICE_GET_ATTRIBUTE_REPLY__INIT;
    a.pi = 132;
    Sluice__Wire__MappedData md = SLUICE__WIRE__MAPPED_DATA__INIT;
    uint8_t bytes[5] = {1, 2, 3, 4, 5};
    md.dptr = 0x7000;
    md.data.data = bytes;
    md.data.len = sizeof bytes;
    Sluice__Wire__MappedData *mds[1] = {&md};
    Sluice__Wire__Reply r[2];
    sluice__wire__reply__init(&r[0]);
    sluice__wire__reply__init(&r[1]);
    r[0].seq = 9;
    r[0].call_id = SL_CALL_cuDeviceGetAttribute;
    r[0].result = 0;
    r[0].out_case = SLUICE__WIRE__REPLY__OUT_CU_DEVICE_GET_ATTRIBUTE;
    r[0].cu_device_get_attribute = &a;
    r[0].stdout_data.data = bytes;
    r[0].stdout_data.len = 3;
    r[0].n_mapped = 1;
    r[0].mapped = mds;
    r[1].seq = 10; /* an error with a detail, no member */
    r[1].call_id = SL_CALL_cuInit;
    r[1].result = 1;
    r[1].failed_seq = 4;
    r[1].detail = "a reason";
    same_bytes(&r[0].base);
    same_bytes(&r[1].base);
    Sluice__Wire__Reply *rs[2] = {&r[0], &r[1]};
    Sluice__Wire__ReplyFrame f = SLUICE__WIRE__REPLY_FRAME__INIT;
    f.n_replies = 2;
    f.replies = rs;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES;
    m.replies = &f;
    same_bytes(&m.base);

    uint8_t *buf = NULL;
    size_t len = 0;
    sl_error e;
    assert_int_equal(sl_wire_encode_server(&m, NULL, &buf, &len, &e), SL_OK);
    Sluice__Wire__ServerMessage *out = NULL;
    assert_int_equal(sl_wire_decode_server(buf, len, NULL, &out, &e), SL_OK);
    Sluice__Wire__Reply *one = out->replies->replies[0];
    out->replies->replies[0] = NULL; /* detached, as the frontend does */
    assert_int_equal(one->cu_device_get_attribute->pi, 132);
    assert_string_equal(out->replies->replies[1]->detail, "a reason");
    sl_wire_reply_free(one);
    sl_wire_free_server(out);
    free(buf);
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

/* What protobuf-c does with odd input, the fast unpack does too: a member with the wrong wire
 * type fails, of two members the last wins, an unknown field stays an unknown field. */
static void odd_calls_unpack_like_protobuf_c(void **state)
{
    (void)state;
    Sluice__Wire__Call c = SLUICE__WIRE__CALL__INIT;
    c.seq = 5;
    c.call_id = SL_CALL_cuInit;
    uint8_t b[64];
    size_t n = sl_wire_call_pack(&c, b);
    size_t base = n;
    /* cuInit's member (101 + id) as a varint: wrong wire type */
    const uint32_t init_member = SLUICE__WIRE__CALL__ARGS_CU_INIT;
    n += put_varint(b + n, (uint64_t)init_member << 3);
    n += put_varint(b + n, 1);
    assert_null(sl_wire_call_unpack(n, b));
    assert_null(sluice__wire__call__unpack(NULL, n, b));
    /* two members, then a field of a reserved number */
    n = base;
    const uint32_t sync_member = SLUICE__WIRE__CALL__ARGS_CU_CTX_SYNCHRONIZE;
    n += put_varint(b + n, (uint64_t)sync_member << 3 | 2);
    b[n++] = 0;
    n += put_varint(b + n, (uint64_t)init_member << 3 | 2);
    b[n++] = 2;
    b[n++] = 0x08; /* flags = 3 */
    b[n++] = 3;
    n += put_varint(b + n, (uint64_t)50 << 3);
    b[n++] = 7;
    Sluice__Wire__Call *fast = sl_wire_call_unpack(n, b);
    Sluice__Wire__Call *slow = sluice__wire__call__unpack(NULL, n, b);
    assert_non_null(fast);
    assert_non_null(slow);
    assert_int_equal(fast->args_case, slow->args_case);
    assert_int_equal(fast->args_case, SLUICE__WIRE__CALL__ARGS_CU_INIT);
    assert_int_equal(fast->cu_init->flags, 3);
    assert_int_equal(fast->base.n_unknown_fields, slow->base.n_unknown_fields);
    assert_int_equal(fast->base.n_unknown_fields, 1);
    sl_wire_call_free(fast);
    sluice__wire__call__free_unpacked(slow, NULL);
    assert_null(sl_wire_call_unpack(3, (const uint8_t *)"\xff\xff\xff"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(call_bytes_equal_protobuf_c),
        cmocka_unit_test(reply_bytes_equal_protobuf_c),
        cmocka_unit_test(odd_calls_unpack_like_protobuf_c),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
