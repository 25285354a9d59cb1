/* Sealed bulk (proto/channel/sealed.c, docs/channel.md "Sealed bulk"): bulk both ways after
 * both ends agreed, through each of the server's ways of taking and sending bulk; a sealed
 * frame flipped, duplicated or dropped on the way (to the server; to the client: what it opened
 * is wiped); a SEALED record the receiver never agreed to. */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static sl_client *connect_to(const char *endpoint)
{
    sl_tls_config cfg = cfg_client(&T.client, T.ca.pem);
    sl_channel_opts o = fast_opts();
    sl_client *c = NULL;
    sl_error err;
    assert_int_equal(sl_client_connect(endpoint, &cfg, &o, &c, &err), SL_OK);
    return c;
}

/* "seal", answered "sealed": both ends seal from here on. */
static void agree(sl_client *c)
{
    sl_error err;
    const void *m;
    size_t l;
    uint64_t bl = 1;
    assert_int_equal(sl_client_send(c, "seal", 4, NULL, 0, &err), SL_OK);
    assert_int_equal(sl_client_recv(c, &m, &l, &bl, 5000, &err), SL_OK);
    assert_int_equal(l, 6);
    assert_memory_equal(m, "sealed", 6);
    assert_int_equal(bl, 0);
    assert_int_equal(sl_client_seal_bulk(c, &err), SL_OK);
}

static void round_trips(sl_client *c)
{
    static uint8_t a[1], b[5000], big[(3u << 20) + 3], tail[70000];
    struct iovec one = {a, sizeof a}, mid = {b, sizeof b};
    struct iovec many[3] = {{big, sizeof big}, {b, sizeof b}, {tail, sizeof tail}};
    roundtrip(c, 10, NULL, 0, 1);
    roundtrip(c, 10, &one, 1, 1);
    roundtrip(c, 20000, &mid, 1, 1); /* a MESSAGE over one TLS record, then its bulk */
    /* sealed, in TLS records (under CH_SEAL_MIN), sealed: 256 KiB chunks, segments across */
    roundtrip(c, 10, many, 3, 1);
    roundtrip(c, 10, many, 3, 7); /* read back in pieces that cut the sealed frames */
}

static void test_sealed_round_trips(void **state)
{
    (void)state;
    for (int blocking = 0; blocking < 2; blocking++) {
        echo_srv e;
        echo_start(&e, SL_TLS_MUTUAL, NULL);
        e.blocking_bulk = blocking; /* sl_server_recv_bulk, else sl_server_take_bulk */
        sl_client *c = connect_to(sl_server_endpoint(e.srv));
        round_trips(c); /* before: TLS records */
        agree(c);
        round_trips(c);
        sl_channel_stats st;
        sl_client_stats(c, &st);
        assert_true(st.frames_in > 20);
        sl_client_close(c);
        echo_stop(&e);
        assert_int_equal(e.closed, 1);
        assert_int_equal(e.first_closed, SL_ERR_CLOSED);
    }
}

/* Asks the echo server for its lent reply and reads the message: returns a buffer for its
 * ECHO_LENT_BYTES of bulk, still to be read. */
static uint8_t *ask_lent(sl_client *c)
{
    sl_error err;
    const void *m;
    size_t l;
    uint64_t bl;
    assert_int_equal(sl_client_send(c, "lend", 4, NULL, 0, &err), SL_OK);
    assert_int_equal(sl_client_recv(c, &m, &l, &bl, 5000, &err), SL_OK);
    assert_int_equal(bl, ECHO_LENT_BYTES);
    uint8_t *got = malloc(ECHO_LENT_BYTES);
    assert_non_null(got);
    return got;
}

/* A lent reply (sl_server_send_lend, written a frame at a time) goes sealed too. */
static void test_sealed_lent(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_client *c = connect_to(sl_server_endpoint(e.srv));
    agree(c);
    sl_error err;
    uint8_t *got = ask_lent(c);
    assert_int_equal(sl_client_recv_bulk(c, got, 1000, &err), SL_OK);
    assert_int_equal(sl_client_recv_bulk(c, got + 1000, ECHO_LENT_BYTES - 1000, &err), SL_OK);
    assert_memory_equal(got, echo_lent_bytes(), ECHO_LENT_BYTES);
    free(got);
    roundtrip(c, 10, NULL, 0, 1);
    sl_client_close(c);
    echo_stop(&e);
}

/* One sealed frame from the guest tampered with on its way: the session ends as tampered (want:
 * in the reason), the client hears of it, other sessions go on. */
static void tamper(enum relay_mode mode, const char *want)
{
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    relay r;
    relay_start(&r, sl_server_endpoint(e.srv), mode);
    sl_client *c = connect_to(r.endpoint);
    agree(c);
    r.skip = 1; /* the frame with the MESSAGE and the SEALED record passes, the next is sealed */
    r.armed = 1;
    static uint8_t b[100000]; /* over CH_SEAL_MIN: sealed */
    struct iovec iov = {b, sizeof b};
    sl_error err;
    const void *m;
    size_t l;
    sl_code rc = sl_client_send(c, "hello", 5, &iov, 1, &err);
    for (int i = 0; i < 3 && rc == SL_OK; i++) {
        rc = sl_client_recv(c, &m, &l, NULL, mode == RELAY_DROP ? 300 : 3000, &err);
        if (rc == SL_OK)
            rc = sl_client_recv_bulk(c, b, sizeof b, &err);
        if (rc == SL_ERR_TIMEOUT) /* the dropped frame: the next one shows it */
            rc = sl_client_send(c, "hello", 5, &iov, 1, &err);
    }
    echo_wait_closed(&e, 1, 3000);
    pthread_mutex_lock(&e.mu); /* the first: what the relay sends after it is another peer */
    assert_int_equal(e.first_closed, SL_ERR_TAMPERED);
    assert_non_null(strstr(e.first_closed_msg, want));
    pthread_mutex_unlock(&e.mu);
    assert_int_not_equal(rc, SL_OK);
    sl_client_close(c);
    relay_stop(&r);
    assert_good_client(&e);
    echo_stop(&e);
}

static void test_sealed_flip(void **state)
{
    (void)state;
    tamper(RELAY_FLIP, "a sealed bulk frame failed authentication");
}

static void test_sealed_dup(void **state)
{
    (void)state;
    tamper(RELAY_DUP, "TLS record failed authentication"); /* the copy read as TLS */
}

static void test_sealed_drop(void **state)
{
    (void)state;
    tamper(RELAY_DROP, "a sealed bulk frame of 81 bytes where 100016 were announced");
}

/* A sealed frame of a reply tampered with on its way to the client: its bulk read fails as
 * tampered, and of what that frame's opening wrote into the destination nothing stays: every
 * byte there is the one the server sent (an earlier, authentic frame), zero (wiped) or untouched,
 * never one the relay forged. */
static void test_sealed_reply_wiped(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    relay r;
    relay_start(&r, sl_server_endpoint(e.srv), RELAY_FLIP);
    sl_client *c = connect_to(r.endpoint);
    agree(c);
    r.replies = 1;
    r.skip = 3; /* [MESSAGE, SEALED], chunk 1, [SEALED], chunk 2: the second chunk */
    r.armed = 1;
    sl_error err;
    uint8_t *got = ask_lent(c);
    memset(got, 0xaa, ECHO_LENT_BYTES);
    sl_code rc = sl_client_recv_bulk(c, got, 1000, &err); /* the first chunk, in two reads */
    if (rc == SL_OK)
        rc = sl_client_recv_bulk(c, got + 1000, ECHO_LENT_BYTES - 1000, &err);
    assert_int_equal(rc, SL_ERR_TAMPERED);
    const uint8_t *want = echo_lent_bytes();
    size_t authentic = 0, wiped = 0;
    for (size_t i = 0; i < ECHO_LENT_BYTES; i++) {
        if (got[i] != 0xaa && got[i] != 0 && got[i] != want[i])
            fail_msg("byte %zu of the destination is 0x%02x: neither sent nor wiped", i, got[i]);
        authentic += got[i] == want[i] && want[i] != 0;
        wiped += got[i] == 0 && want[i] != 0;
    }
    assert_true(authentic > 0); /* the first chunk held */
    assert_true(wiped > 0);     /* the second was opened, then wiped */
    free(got);
    sl_client_close(c);
    relay_stop(&r);
    echo_stop(&e);
}

/* A client that seals without the server's agreement: its first sealed bulk is a protocol
 * violation there; nothing of it is taken for bulk. */
static void test_sealed_unagreed(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_client *c = connect_to(sl_server_endpoint(e.srv));
    sl_error err;
    assert_int_equal(sl_client_seal_bulk(c, &err), SL_OK);
    static uint8_t b[100000];
    struct iovec iov = {b, sizeof b};
    assert_int_equal(sl_client_send(c, "hello", 5, &iov, 1, &err), SL_OK);
    assert_int_equal(echo_wait_closed(&e, 1, 3000), SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.last_closed_msg, "without sealed bulk"));
    sl_client_close(c);
    assert_good_client(&e);
    echo_stop(&e);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sealed_round_trips), cmocka_unit_test(test_sealed_lent),
        cmocka_unit_test(test_sealed_flip),        cmocka_unit_test(test_sealed_dup),
        cmocka_unit_test(test_sealed_drop),        cmocka_unit_test(test_sealed_unagreed),
        cmocka_unit_test(test_sealed_reply_wiped),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, pki_setup, pki_teardown);
}
