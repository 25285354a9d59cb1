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

/* Encodes m with validation, decodes it back with validation. */
static sl_code server_round_trip(const Sluice__Wire__ServerMessage *m, sl_error *e)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_code rc = sl_wire_encode_server(m, NULL, &buf, &len, e);
    if (rc != SL_OK)
        return rc;
    Sluice__Wire__ServerMessage *d = NULL;
    rc = sl_wire_decode_server(buf, len, NULL, &d, e);
    if (rc == SL_OK)
        assert_int_equal(d->kind_case, m->kind_case);
    sl_wire_free_server(d);
    free(buf);
    return rc;
}

static void reply_stdout_is_bounded(void **state)
{
    (void)state;
    Sluice__Wire__Reply r = SLUICE__WIRE__REPLY__INIT;
    Sluice__Wire__Reply *rs[1] = {&r};
    Sluice__Wire__ReplyFrame f = SLUICE__WIRE__REPLY_FRAME__INIT;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    uint8_t *text = calloc(1, SL_WIRE_MAX_STDOUT + 1);
    assert_non_null(text);
    r.seq = 3;
    r.call_id = SL_CALL_slFence;
    r.stdout_data.data = text;
    r.stdout_data.len = SL_WIRE_MAX_STDOUT;
    f.n_replies = 1;
    f.replies = rs;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES;
    m.replies = &f;
    sl_error e;
    assert_int_equal(server_round_trip(&m, &e), SL_OK);
    r.stdout_data.len = SL_WIRE_MAX_STDOUT + 1;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_TOO_LARGE);
    assert_non_null(strstr(e.msg, "stdout"));
    free(text);
}

static void accept_devices_are_checked(void **state)
{
    (void)state;
    static uint8_t uuid[17], luid[9];
    static int32_t attrs[SL_WIRE_MAX_DEVICE_ATTRIBUTES + 1];
    Sluice__Wire__DeviceInfo dev[SL_WIRE_MAX_DEVICES + 1];
    Sluice__Wire__DeviceInfo *devs[SL_WIRE_MAX_DEVICES + 1];
    for (size_t i = 0; i <= SL_WIRE_MAX_DEVICES; i++) {
        sluice__wire__device_info__init(&dev[i]);
        dev[i].ordinal = (int32_t)i;
        dev[i].name = "Sluice Test GPU";
        dev[i].uuid = (ProtobufCBinaryData){16, uuid};
        dev[i].luid = (ProtobufCBinaryData){8, luid};
        dev[i].n_attributes = 140;
        dev[i].attributes = attrs;
        dev[i].primary_context = 0x1000 + i;
        devs[i] = &dev[i];
    }
    Sluice__Wire__SessionAccept a = SLUICE__WIRE__SESSION_ACCEPT__INIT;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    a.n_devices = 2;
    a.devices = devs;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_ACCEPT;
    m.accept = &a;
    sl_error e;
    assert_int_equal(server_round_trip(&m, &e), SL_OK);
    a.n_devices = SL_WIRE_MAX_DEVICES;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_OK);
    a.n_devices = SL_WIRE_MAX_DEVICES + 1;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_TOO_LARGE);
    a.n_devices = 2;
    dev[1].uuid.len = 15;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "uuid"));
    dev[1].uuid.len = 0; /* no uuid is fine */
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_OK);
    dev[1].luid.len = 9;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_PROTOCOL);
    dev[1].luid.len = 0;
    dev[1].n_attributes = SL_WIRE_MAX_DEVICE_ATTRIBUTES + 1;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_TOO_LARGE);
    assert_non_null(strstr(e.msg, "attributes"));
    dev[1].n_attributes = SL_WIRE_MAX_DEVICE_ATTRIBUTES;
    assert_int_equal(server_round_trip(&m, &e), SL_OK);
    static uint64_t hints[SL_WIRE_MAX_IMAGE_HINTS + 1];
    a.image_hints = hints;
    a.n_image_hints = SL_WIRE_MAX_IMAGE_HINTS;
    assert_int_equal(server_round_trip(&m, &e), SL_OK);
    a.n_image_hints = SL_WIRE_MAX_IMAGE_HINTS + 1;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_TOO_LARGE);
    assert_non_null(strstr(e.msg, "image hints"));
    a.n_image_hints = 0;
    m.accept = NULL;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_PROTOCOL);
}

static void stream_done_is_checked(void **state)
{
    (void)state;
    Sluice__Wire__StreamDone sd = SLUICE__WIRE__STREAM_DONE__INIT;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    sd.seq = 42;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_STREAM_DONE;
    m.stream_done = &sd;
    sl_error e;
    assert_int_equal(server_round_trip(&m, &e), SL_OK);
    sd.seq = 0;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "StreamDone"));
    m.stream_done = NULL;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_PROTOCOL);
}

static void host_callbacks_are_checked(void **state)
{
    (void)state;
    Sluice__Wire__HostCallback cb = SLUICE__WIRE__HOST_CALLBACK__INIT;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    cb.id = 7;
    cb.fn = 0x401000;
    cb.user_data = 0xdead;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_CALLBACK;
    m.callback = &cb;
    sl_error e;
    assert_int_equal(server_round_trip(&m, &e), SL_OK);
    cb.id = 0;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_PROTOCOL);
    cb.id = 7;
    cb.fn = 0;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_PROTOCOL);
    m.callback = NULL;
    assert_int_equal(sl_wire_check_server(&m, NULL, &e), SL_ERR_PROTOCOL);

    Sluice__Wire__CallbackDone done = SLUICE__WIRE__CALLBACK_DONE__INIT;
    Sluice__Wire__ClientMessage c = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    done.id = 7;
    c.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLBACK_DONE;
    c.callback_done = &done;
    assert_int_equal(decode_raw(&c, &e), SL_OK);
    done.id = 0;
    assert_int_equal(decode_raw(&c, &e), SL_ERR_PROTOCOL);
    c.callback_done = NULL;
    assert_int_equal(sl_wire_check_client(&c, NULL, &e), SL_ERR_PROTOCOL);
}

static void internal_calls_travel_like_others(void **state)
{
    (void)state;
    struct two_calls t;
    make_two_calls(&t);
    Sluice__Cuda__SlFenceRequest fence = SLUICE__CUDA__SL_FENCE_REQUEST__INIT;
    Sluice__Cuda__SlLoadImageRequest load = SLUICE__CUDA__SL_LOAD_IMAGE_REQUEST__INIT;
    uint8_t sha[32] = {1};
    uint32_t opts[1] = {1}; /* CU_JIT_OPTIMIZATION_LEVEL */
    uint64_t vals[1] = {4};
    load.sha256 = (ProtobufCBinaryData){sizeof sha, sha};
    load.size = 4096;
    load.target = 1;
    load.format = 2;
    load.n_jit_options = load.n_jit_values = 1;
    load.jit_options = opts;
    load.jit_values = vals;
    t.call[0].call_id = SL_CALL_slLoadImage;
    t.call[0].args_case = SLUICE__WIRE__CALL__ARGS_SL_LOAD_IMAGE;
    t.call[0].sl_load_image = &load;
    t.call[0].bulk_length = 4096;
    t.call[0].context = 0x42;
    t.call[1].call_id = SL_CALL_slFence;
    t.call[1].args_case = SLUICE__WIRE__CALL__ARGS_SL_FENCE;
    t.call[1].sl_fence = &fence;
    sl_error e;
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(sl_wire_encode_client(&t.msg, NULL, &buf, &len, &e), SL_OK);
    Sluice__Wire__ClientMessage *m = NULL;
    assert_int_equal(sl_wire_decode_client(buf, len, NULL, &m, &e), SL_OK);
    assert_int_equal(m->calls->calls[0]->context, 0x42);
    assert_int_equal(m->calls->calls[0]->sl_load_image->jit_values[0], 4);
    assert_int_equal(m->calls->calls[1]->call_id, SL_CALL_slFence);
    sl_wire_free_client(m);
    free(buf);
    const struct sl_call_info *info = sl_call_lookup(SL_CALL_slParamLayout);
    assert_non_null(info);
    assert_true(info->flags & SL_CALL_INTERNAL);
    assert_int_equal(info->hand, SL_HAND_BOTH);
    assert_true(SL_CALL_slFence >= SL_CALL_INTERNAL_BASE);
    t.call[1].per_thread_stream = 1; /* internal calls have no per-thread variant */
    assert_int_equal(decode_raw(&t.msg, &e), SL_ERR_PROTOCOL);
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
        cmocka_unit_test(reply_stdout_is_bounded),
        cmocka_unit_test(accept_devices_are_checked),
        cmocka_unit_test(host_callbacks_are_checked),
        cmocka_unit_test(stream_done_is_checked),
        cmocka_unit_test(internal_calls_travel_like_others),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
