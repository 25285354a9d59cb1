/* wire.envelope: the envelope codec accepts good messages and refuses bad ones cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/wire.h"

/* A frame of two cuInit calls, built on the stack. */
struct two_calls {
    Sluice__Cuda__CuInitRequest req[2];
    Sluice__Wire__Call call[2];
    Sluice__Wire__Call *calls[2];
    Sluice__Wire__CallFrame frame;
    Sluice__Wire__ClientMessage msg;
};

static void make_two_calls(struct two_calls *t)
{
    for (int i = 0; i < 2; i++) {
        sluice__cuda__cu_init_request__init(&t->req[i]);
        sluice__wire__call__init(&t->call[i]);
        t->call[i].seq = 10 + (uint64_t)i;
        t->call[i].call_id = SL_CALL_cuInit;
        t->call[i].args_case = SLUICE__WIRE__CALL__ARGS_CU_INIT;
        t->call[i].cu_init = &t->req[i];
        t->calls[i] = &t->call[i];
    }
    sluice__wire__call_frame__init(&t->frame);
    t->frame.n_calls = 2;
    t->frame.calls = t->calls;
    sluice__wire__client_message__init(&t->msg);
    t->msg.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS;
    t->msg.calls = &t->frame;
}

/* Packs without validation (what a hostile peer could send) and decodes with validation. */
static sl_code decode_raw(const Sluice__Wire__ClientMessage *m, sl_error *e)
{
    size_t n = sluice__wire__client_message__get_packed_size(m);
    uint8_t *b = malloc(n + 1);
    sluice__wire__client_message__pack(m, b);
    Sluice__Wire__ClientMessage *out = NULL;
    sl_code rc = sl_wire_decode_client(b, n, NULL, &out, e);
    sl_wire_free_client(out);
    free(b);
    return rc;
}

static void good_frame_round_trips(void **state)
{
    (void)state;
    struct two_calls t;
    make_two_calls(&t);
    sl_error e;
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(sl_wire_encode_client(&t.msg, NULL, &buf, &len, &e), SL_OK);
    Sluice__Wire__ClientMessage *m = NULL;
    assert_int_equal(sl_wire_decode_client(buf, len, NULL, &m, &e), SL_OK);
    assert_int_equal(m->calls->n_calls, 2);
    assert_int_equal(m->calls->calls[1]->seq, 11);
    sl_wire_free_client(m);
    free(buf);
}

static void mismatched_oneof_is_refused(void **state)
{
    (void)state;
    struct two_calls t;
    make_two_calls(&t);
    t.call[1].call_id = SL_CALL_cuDriverGetVersion;
    sl_error e;
    uint8_t *buf = NULL;
    size_t len;
    assert_int_equal(sl_wire_encode_client(&t.msg, NULL, &buf, &len, &e), SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "cuDriverGetVersion"));
    assert_non_null(strstr(e.msg, "cuInit"));
    assert_null(buf);
    assert_int_equal(decode_raw(&t.msg, &e), SL_ERR_PROTOCOL);
}

static void unknown_call_id_is_refused(void **state)
{
    (void)state;
    struct two_calls t;
    make_two_calls(&t);
    t.call[0].call_id = SL_CALL_ID_MAX + 7;
    sl_error e;
    assert_int_equal(decode_raw(&t.msg, &e), SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "unknown call id"));
    t.call[0].call_id = 0;
    assert_int_equal(decode_raw(&t.msg, &e), SL_ERR_PROTOCOL);
}

static void missing_arguments_are_refused(void **state)
{
    (void)state;
    struct two_calls t;
    make_two_calls(&t);
    t.call[0].args_case = SLUICE__WIRE__CALL__ARGS__NOT_SET;
    sl_error e;
    assert_int_equal(decode_raw(&t.msg, &e), SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "no arguments"));
}

static void non_increasing_seq_is_refused(void **state)
{
    (void)state;
    struct two_calls t;
    make_two_calls(&t);
    t.call[1].seq = t.call[0].seq;
    sl_error e;
    assert_int_equal(decode_raw(&t.msg, &e), SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "not above"));
    t.call[0].seq = 0;
    assert_int_equal(decode_raw(&t.msg, &e), SL_ERR_PROTOCOL);
}

static void oversized_bulk_is_refused(void **state)
{
    (void)state;
    struct two_calls t;
    make_two_calls(&t);
    t.call[0].bulk_length = SL_WIRE_MAX_BULK + 1;
    sl_error e;
    assert_int_equal(decode_raw(&t.msg, &e), SL_ERR_TOO_LARGE);
    t.call[0].bulk_length = 4096;
    struct sl_wire_limits lim = {.max_bulk = 1024};
    uint8_t *buf = NULL;
    size_t len;
    assert_int_equal(sl_wire_encode_client(&t.msg, &lim, &buf, &len, &e), SL_ERR_TOO_LARGE);
    assert_non_null(strstr(e.msg, "bulk"));
}

static void per_thread_flag_needs_a_variant(void **state)
{
    (void)state;
    struct two_calls t;
    make_two_calls(&t);
    t.call[0].per_thread_stream = 1;
    sl_error e;
    assert_int_equal(decode_raw(&t.msg, &e), SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "per-thread"));
}

static void empty_and_kindless_messages_are_refused(void **state)
{
    (void)state;
    struct two_calls t;
    make_two_calls(&t);
    t.frame.n_calls = 0;
    sl_error e;
    assert_int_equal(decode_raw(&t.msg, &e), SL_ERR_PROTOCOL);
    Sluice__Wire__ClientMessage none = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    assert_int_equal(decode_raw(&none, &e), SL_ERR_PROTOCOL);
    Sluice__Wire__ServerMessage *s = NULL;
    assert_int_equal(sl_wire_decode_server((const uint8_t *)"", 0, NULL, &s, &e), SL_ERR_PROTOCOL);
    assert_null(s);
}

static void truncated_and_garbage_bytes_are_refused(void **state)
{
    (void)state;
    struct two_calls t;
    make_two_calls(&t);
    t.req[0].flags = 0xffffffffu;
    sl_error e;
    uint8_t *buf = NULL;
    size_t len;
    assert_int_equal(sl_wire_encode_client(&t.msg, NULL, &buf, &len, &e), SL_OK);
    for (size_t cut = 1; cut < len; cut++) {
        Sluice__Wire__ClientMessage *m = NULL;
        sl_code rc = sl_wire_decode_client(buf, cut, NULL, &m, &e);
        assert_int_not_equal(rc, SL_OK); /* any prefix is either malformed or fails a check */
        assert_null(m);
    }
    free(buf);
    static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0x80, 0x80, 0x80};
    Sluice__Wire__ClientMessage *m = NULL;
    assert_int_equal(sl_wire_decode_client(garbage, sizeof garbage, NULL, &m, &e), SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "not a valid ClientMessage"));
    struct sl_wire_limits lim = {.max_message = 4};
    assert_int_equal(sl_wire_decode_client(garbage, sizeof garbage, &lim, &m, &e),
                     SL_ERR_TOO_LARGE);
}

static void replies_are_checked(void **state)
{
    (void)state;
    Sluice__Cuda__CuDriverGetVersionReply out = SLUICE__CUDA__CU_DRIVER_GET_VERSION_REPLY__INIT;
    Sluice__Wire__Reply r = SLUICE__WIRE__REPLY__INIT;
    Sluice__Wire__Reply *rs[1] = {&r};
    Sluice__Wire__ReplyFrame f = SLUICE__WIRE__REPLY_FRAME__INIT;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    r.seq = 5;
    r.call_id = SL_CALL_cuDriverGetVersion;
    r.out_case = SLUICE__WIRE__REPLY__OUT_CU_DRIVER_GET_VERSION;
    r.cu_driver_get_version = &out;
    f.n_replies = 1;
    f.replies = rs;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES;
    m.replies = &f;
    sl_error e;
    uint8_t *buf = NULL;
    size_t len;
    assert_int_equal(sl_wire_encode_server(&m, NULL, &buf, &len, &e), SL_OK);
    Sluice__Wire__ServerMessage *d = NULL;
    assert_int_equal(sl_wire_decode_server(buf, len, NULL, &d, &e), SL_OK);
    sl_wire_free_server(d);
    free(buf);
    r.failed_seq = 9; /* a failed call after this one cannot be reported here */
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_PROTOCOL);
    r.failed_seq = 0;
    r.call_id = SL_CALL_cuInit;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_PROTOCOL);
    r.out_case = SLUICE__WIRE__REPLY__OUT__NOT_SET; /* a failed call may carry no outputs */
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(good_frame_round_trips),
        cmocka_unit_test(mismatched_oneof_is_refused),
        cmocka_unit_test(unknown_call_id_is_refused),
        cmocka_unit_test(missing_arguments_are_refused),
        cmocka_unit_test(non_increasing_seq_is_refused),
        cmocka_unit_test(oversized_bulk_is_refused),
        cmocka_unit_test(per_thread_flag_needs_a_variant),
        cmocka_unit_test(empty_and_kindless_messages_are_refused),
        cmocka_unit_test(truncated_and_garbage_bytes_are_refused),
        cmocka_unit_test(replies_are_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
