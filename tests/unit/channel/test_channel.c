/* Channel tests: handshakes, identity, round trips, refusals, tampering, bad peers. */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include <cmocka.h>

static sl_code try_connect(echo_srv *e, const sl_tls_config *cfg, sl_error *err)
{
    sl_channel_opts o = fast_opts();
    sl_client *c = NULL;
    sl_code rc = sl_client_connect(sl_server_endpoint(e->srv), cfg, &o, &c, err);
    sl_client_close(c);
    return rc;
}

static void test_mutual_identity(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_tls_config cfg = cfg_client(&T.client, T.ca.pem);
    sl_channel_opts o = fast_opts();
    sl_client *c;
    sl_error err;
    assert_int_equal(sl_client_connect(sl_server_endpoint(e.srv), &cfg, &o, &c, &err), SL_OK);
    assert_string_equal(sl_client_cipher(c), "TLS_AES_128_GCM_SHA256");
    uint8_t b[10];
    struct iovec iov = {b, sizeof b};
    roundtrip(c, 100, &iov, 1, 1);
    pthread_mutex_lock(&e.mu);
    sl_peer_identity id = e.last_id;
    pthread_mutex_unlock(&e.mu);
    assert_int_equal(id.authenticated, 1);
    assert_string_equal(id.instance_id, "6f1e0c2a-1b7d-4c55-9a0e-3f2b8d7c1e42");
    assert_string_equal(id.project_id, "3c9d2f7e8a1b4c6d9e0f1a2b3c4d5e6f");
    assert_int_equal(strlen(id.fingerprint), 64);
    assert_true(strlen(id.serial) >= 16);
    int64_t now = (int64_t)time(NULL);
    assert_true(id.not_after > now + 86000 && id.not_after < now + 86500);
    assert_string_equal(id.address, "127.0.0.1"); /* the source of the connection */
    sl_client_close(c);
    assert_int_equal(echo_wait_closed(&e, 1, 3000), SL_ERR_CLOSED);
    echo_stop(&e);
}

static void test_server_only(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_SERVER_ONLY, NULL);
    sl_tls_config cfg = cfg_client(NULL, T.ca.pem);
    sl_channel_opts o = fast_opts();
    sl_client *c;
    sl_error err;
    assert_int_equal(sl_client_connect(sl_server_endpoint(e.srv), &cfg, &o, &c, &err), SL_OK);
    uint8_t b[4096];
    struct iovec iov = {b, sizeof b};
    roundtrip(c, 64, &iov, 1, 1);
    pthread_mutex_lock(&e.mu);
    assert_int_equal(e.last_id.authenticated, 0);
    assert_string_equal(e.last_id.instance_id, "");
    assert_string_equal(e.last_id.address, "127.0.0.1"); /* known without a certificate too */
    pthread_mutex_unlock(&e.mu);
    sl_client_close(c);
    /* a server-only client against a server of another CA fails */
    echo_stop(&e);
}

static void test_roundtrips(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_tls_config cfg = cfg_client(&T.client, T.ca.pem);
    sl_channel_opts o = fast_opts();
    o.chunk_size = 64 << 10; /* many chunks per bulk */
    sl_client *c;
    sl_error err;
    assert_int_equal(sl_client_connect(sl_server_endpoint(e.srv), &cfg, &o, &c, &err), SL_OK);
    /* a short MESSAGE with short bulk in several segments (a 64-byte copy, a 4-byte answer)
     * leaves as one TLS record in one frame: its MESSAGE record and one BULK record */
    uint8_t s1[1] = {1}, s7[7] = {2, 3, 4, 5, 6, 7, 8}, s64[64] = {9};
    struct iovec shortv[4] = {{s1, sizeof s1}, {NULL, 0}, {s7, sizeof s7}, {s64, sizeof s64}};
    sl_channel_stats before, after;
    sl_client_stats(c, &before);
    roundtrip(c, 80, shortv, 4, 2);
    sl_client_stats(c, &after);
    assert_int_equal(after.frames_out - before.frames_out, 1);
    /* two record headers of 16 bytes, the message, 72 bulk bytes, one TLS record's 22 */
    assert_int_equal(after.bytes_out - before.bytes_out, 2 * 16 + 80 + 72 + 22);
    static const size_t sizes[] = {0, 1, 64 << 10, 8 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *b = malloc(sizes[i] + 1);
        struct iovec iov = {b, sizes[i]};
        roundtrip(c, 80, &iov, 1, i == 3 ? 5 : 1);
        free(b);
    }
    /* a large MESSAGE (split over frames) and a bulk of odd segments over many chunks */
    size_t seg[] = {1, 100000, 0, 65536, 777777, 3};
    struct iovec iov[6];
    for (int i = 0; i < 6; i++)
        iov[i] = (struct iovec){malloc(seg[i] + 1), seg[i]};
    roundtrip(c, 3 << 20, iov, 6, 3);
    for (int i = 0; i < 6; i++)
        free(iov[i].iov_base);
    sl_channel_stats st;
    sl_client_stats(c, &st);
    assert_int_equal(st.buffer_grows, 0);
    assert_true(st.frames_out > 150);
    /* local misuse: no empty message, bulk not consumed before the next recv */
    assert_int_equal(sl_client_send(c, "x", 0, NULL, 0, &err), SL_ERR_INVALID);
    uint8_t big[1000];
    struct iovec bi = {big, sizeof big};
    assert_int_equal(sl_client_send(c, "x", 1, &bi, 1, &err), SL_OK);
    const void *m;
    size_t l;
    uint64_t bl;
    assert_int_equal(sl_client_recv(c, &m, &l, &bl, 5000, &err), SL_OK);
    assert_int_equal(bl, 1000);
    assert_int_equal(sl_client_recv_bulk(c, big, 1001, &err), SL_ERR_INVALID);
    assert_int_equal(sl_client_recv(c, &m, &l, &bl, 100, &err), SL_ERR_PROTOCOL);
    sl_client_close(c);
    echo_stop(&e);
}

/* A renewed certificate (the agent's SIGHUP to a backend): a broken one is refused and the old
 * one keeps serving; a good one is used by the handshakes that follow. */
static void test_reload_tls(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_tls_config bad = {.mode = SL_TLS_MUTUAL,
                         .ca_pem = T.ca.pem,
                         .cert_pem = T.server.cert_pem,
                         .key_pem = T.client.key_pem}; /* the key does not match */
    assert_int_equal(echo_reload(&e, &bad), SL_ERR_CONFIG);
    assert_good_client(&e);
    sl_tls_config renewed = {.mode = SL_TLS_MUTUAL,
                             .ca_pem = T.ca.pem, /* still trusts the clients' CA */
                             .cert_pem = T.server2.cert_pem,
                             .key_pem = T.server2.key_pem}; /* issued by ca2 */
    assert_int_equal(echo_reload(&e, &renewed), SL_OK);
    sl_tls_config old_trust = cfg_client(&T.client, T.ca.pem);
    sl_tls_config new_trust = cfg_client(&T.client, T.ca2.pem);
    sl_error err;
    assert_int_equal(try_connect(&e, &old_trust, &err), SL_ERR_UNKNOWN_CA);
    assert_int_equal(try_connect(&e, &new_trust, &err), SL_OK);
    echo_stop(&e);
}

static void test_wrong_ca_client(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_tls_config cfg = cfg_client(&T.foreign, T.ca.pem);
    sl_error err;
    assert_int_equal(try_connect(&e, &cfg, &err), SL_ERR_UNKNOWN_CA);
    assert_int_equal(echo_wait_closed(&e, 1, 3000), SL_ERR_UNKNOWN_CA);
    assert_non_null(strstr(e.last_closed_msg, "CA"));
    assert_good_client(&e);
    echo_stop(&e);
}

static void test_wrong_ca_server(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_tls_config cfg = cfg_client(&T.client, T.ca2.pem); /* trusts another CA */
    sl_error err;
    assert_int_equal(try_connect(&e, &cfg, &err), SL_ERR_UNKNOWN_CA);
    assert_non_null(strstr(err.msg, "CA"));
    assert_int_not_equal(echo_wait_closed(&e, 1, 3000), SL_OK);
    assert_good_client(&e);
    echo_stop(&e);
}

static void test_expired_client(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_tls_config cfg = cfg_client(&T.expired, T.ca.pem);
    sl_error err;
    assert_int_equal(try_connect(&e, &cfg, &err), SL_ERR_CERT_EXPIRED);
    assert_int_equal(echo_wait_closed(&e, 1, 3000), SL_ERR_CERT_EXPIRED);
    assert_non_null(strstr(e.last_closed_msg, "expired at"));
    assert_good_client(&e);
    echo_stop(&e);
}

static void test_no_client_cert(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_tls_config cfg = cfg_client(NULL, T.ca.pem);
    sl_error err;
    assert_int_equal(try_connect(&e, &cfg, &err), SL_ERR_NO_PEER_CERT);
    assert_int_equal(echo_wait_closed(&e, 1, 3000), SL_ERR_NO_PEER_CERT);
    assert_good_client(&e);
    echo_stop(&e);
}

static void test_accept_refused(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    e.refuse = 1;
    sl_tls_config cfg = cfg_client(&T.client, T.ca.pem);
    sl_error err;
    assert_int_equal(try_connect(&e, &cfg, &err), SL_ERR_REFUSED);
    assert_non_null(strstr(err.msg, "has no grant"));
    assert_int_equal(echo_wait_closed(&e, 1, 3000), SL_ERR_REFUSED);
    e.refuse = 0;
    assert_good_client(&e);
    echo_stop(&e);
}

/* A client of e with the test's certificate, connected. */
static sl_client *echo_client(echo_srv *e)
{
    sl_tls_config cfg = cfg_client(&T.client, T.ca.pem);
    sl_channel_opts o = fast_opts();
    sl_client *c = NULL;
    sl_error err;
    assert_int_equal(sl_client_connect(sl_server_endpoint(e->srv), &cfg, &o, &c, &err), SL_OK);
    return c;
}

static void test_revoked(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_client *c = echo_client(&e);
    sl_error err;
    assert_int_equal(sl_client_send(c, "revoke", 6, NULL, 0, &err), SL_OK);
    const void *m;
    size_t l;
    assert_int_equal(sl_client_recv(c, &m, &l, NULL, 5000, &err), SL_ERR_REVOKED);
    assert_non_null(strstr(err.msg, "instance stopped"));
    assert_int_equal(sl_client_send(c, "x", 1, NULL, 0, &err), SL_ERR_REVOKED);
    assert_int_equal(echo_wait_closed(&e, 1, 3000), SL_ERR_REVOKED);
    sl_client_close(c);
    assert_good_client(&e);
    echo_stop(&e);
}

/* The server revokes and exits at once (a backend stopping after its project's last instance
 * was revoked): the CLOSE record and the dropped connection both wait at the client, which
 * must report the session's reason, not a lost connection. */
static void test_revoked_then_gone(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_client *c = echo_client(&e);
    sl_error err;
    assert_int_equal(sl_client_send(c, "revoke", 6, NULL, 0, &err), SL_OK);
    assert_int_equal(echo_wait_closed(&e, 1, 3000), SL_ERR_REVOKED);
    echo_stop(&e);
    usleep(300 * 1000);
    const void *m;
    size_t l;
    assert_int_equal(sl_client_recv(c, &m, &l, NULL, 5000, &err), SL_ERR_REVOKED);
    assert_non_null(strstr(err.msg, "instance stopped"));
    sl_client_close(c);
}

/* The server ends the session for a timeout of the client's (its bulk too slow): the client's
 * later calls answer SL_ERR_CLOSED with that reason, never SL_ERR_TIMEOUT, which would say the
 * session is still usable (a reader polling it would wait forever). */
static void test_closed_for_timeout(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_client *c = echo_client(&e);
    sl_error err;
    assert_int_equal(sl_client_send(c, "tooslow", 7, NULL, 0, &err), SL_OK);
    const void *m;
    size_t l;
    assert_int_equal(sl_client_recv(c, &m, &l, NULL, 5000, &err), SL_ERR_CLOSED);
    assert_non_null(strstr(err.msg, "(timeout): bulk too slow"));
    assert_int_equal(sl_client_recv(c, &m, &l, NULL, 0, &err), SL_ERR_CLOSED);
    assert_int_equal(sl_client_recv(c, &m, &l, NULL, 20, &err), SL_ERR_CLOSED);
    assert_int_equal(sl_client_send(c, "x", 1, NULL, 0, &err), SL_ERR_CLOSED);
    assert_non_null(strstr(err.msg, "bulk too slow"));
    sl_client_close(c);
    echo_stop(&e);
}

/* A lent bulk (sl_server_send_lend: the backend's lanes send a reply's pieces from its buffer)
 * arrives intact and goes back to its lender once, when sent; to a peer that is not there it
 * goes back at once, with the error. */
static void test_lent_bulk(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_client *c = echo_client(&e);
    sl_error err;
    const uint8_t *want = echo_lent_bytes();
    assert_int_equal(sl_client_send(c, "lend", 4, NULL, 0, &err), SL_OK);
    const void *m;
    size_t l;
    uint64_t bl;
    assert_int_equal(sl_client_recv(c, &m, &l, &bl, 5000, &err), SL_OK);
    assert_int_equal(l, 4);
    assert_int_equal(bl, ECHO_LENT_BYTES);
    uint8_t *got = malloc(ECHO_LENT_BYTES);
    assert_int_equal(sl_client_recv_bulk(c, got, ECHO_LENT_BYTES, &err), SL_OK);
    assert_memory_equal(got, want, ECHO_LENT_BYTES);
    free(got);
    int back = 0;
    for (int i = 0; i < 200 && !back; i++) { /* the server frees a sent unit in its pump */
        pthread_mutex_lock(&e.mu);
        back = e.lent_back;
        pthread_mutex_unlock(&e.mu);
        if (!back)
            usleep(10000);
    }
    assert_int_equal(back, 1);
    assert_int_equal(e.lend_rc, SL_OK);
    assert_int_equal(sl_client_send(c, "lendbad", 7, NULL, 0, &err), SL_OK);
    sl_code rc = SL_OK;
    for (int i = 0; i < 200 && back == 1; i++) {
        pthread_mutex_lock(&e.mu);
        back = e.lent_back;
        rc = e.lend_rc;
        pthread_mutex_unlock(&e.mu);
        if (back == 1)
            usleep(10000);
    }
    assert_int_equal(back, 2);
    assert_int_not_equal(rc, SL_OK);
    sl_client_close(c);
    echo_stop(&e);
    assert_int_equal(e.lent_back, 2);
}

static void tamper(enum relay_mode mode)
{
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    relay r;
    relay_start(&r, sl_server_endpoint(e.srv), mode);
    sl_tls_config cfg = cfg_client(&T.client, T.ca.pem);
    sl_channel_opts o = fast_opts();
    sl_client *c;
    sl_error err;
    assert_int_equal(sl_client_connect(r.endpoint, &cfg, &o, &c, &err), SL_OK);
    r.armed = 1;
    uint8_t b[5000] = {0};
    struct iovec iov = {b, sizeof b};
    const void *m;
    size_t l;
    sl_code rc = SL_OK;
    for (int i = 0; i < 3 && rc == SL_OK; i++) {
        rc = sl_client_send(c, "hello", 5, &iov, 1, &err);
        if (rc == SL_OK)
            rc = sl_client_recv(c, &m, &l, NULL, mode == RELAY_DROP ? 300 : 3000, &err);
        if (rc == SL_OK)
            rc = sl_client_recv_bulk(c, b, sizeof b, &err);
        if (rc == SL_ERR_TIMEOUT)
            rc = SL_OK; /* the dropped one: nothing comes back */
    }
    assert_int_equal(echo_wait_closed(&e, 1, 3000), SL_ERR_TAMPERED);
    assert_non_null(strstr(e.last_closed_msg, "failed authentication"));
    assert_int_not_equal(rc, SL_OK); /* the client learned (the server's alert) */
    sl_client_close(c);
    relay_stop(&r);
    assert_good_client(&e);
    echo_stop(&e);
}

static void test_tampered_flip(void **state)
{
    (void)state;
    tamper(RELAY_FLIP);
}

static void test_tampered_dup(void **state)
{
    (void)state;
    tamper(RELAY_DUP);
}

static void test_tampered_drop(void **state)
{
    (void)state;
    tamper(RELAY_DROP);
}

/* A raw DEALER sends one frame, then the server must close that session with want. */
static void raw_peer(size_t len, const char *text, sl_code want, const sl_channel_opts *so)
{
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, so);
    void *z = zmq_ctx_new(), *d = zmq_socket(z, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_connect(d, sl_server_endpoint(e.srv)), 0);
    uint8_t *buf = malloc(len);
    for (size_t i = 0; i < len; i++)
        buf[i] = text ? (uint8_t)text[i % strlen(text)] : (uint8_t)(i * 7 + 0x41);
    zmq_send(d, buf, len, 0);
    free(buf);
    assert_int_equal(echo_wait_closed(&e, 1, 5000), want);
    assert_good_client(&e);
    zmq_close(d);
    zmq_ctx_term(z);
    echo_stop(&e);
}

static void test_plaintext_peer(void **state)
{
    (void)state;
    raw_peer(60, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", SL_ERR_PROTOCOL, NULL);
}

static void test_garbage_frame(void **state)
{
    (void)state;
    raw_peer(1000, NULL, SL_ERR_PROTOCOL, NULL);
}

static void test_oversized_frame(void **state)
{
    (void)state;
    sl_channel_opts o = fast_opts();
    o.max_frame = 1 << 20;
    o.chunk_size = 256 << 10;
    raw_peer((1 << 20) + 1, "\x16\x03\x01", SL_ERR_TOO_LARGE, &o);
}

static void test_handshake_timeout(void **state)
{
    (void)state;
    sl_channel_opts o = fast_opts();
    o.handshake_timeout_ms = 300;
    raw_peer(5, "\x16\x03\x01\x02\x00", SL_ERR_TIMEOUT, &o); /* a ClientHello that never ends */
}

static void test_dead_client_reaped(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    void *z = zmq_ctx_new(), *d = zmq_socket(z, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_connect(d, sl_server_endpoint(e.srv)), 0);
    zmq_send(d, "\x16\x03\x01\x02\x00", 5, 0);
    usleep(100000);
    zmq_close(d); /* vanishes mid-handshake */
    zmq_ctx_term(z);
    assert_int_equal(echo_wait_closed(&e, 1, 2000), SL_ERR_PEER_LOST);
    assert_int_equal(sl_server_peer_count(e.srv), 0);
    echo_stop(&e);
}

static void test_dead_server_detected(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_tls_config cfg = cfg_client(&T.client, T.ca.pem);
    sl_channel_opts o = fast_opts();
    sl_client *c;
    sl_error err;
    assert_int_equal(sl_client_connect(sl_server_endpoint(e.srv), &cfg, &o, &c, &err), SL_OK);
    /* the server vanishes without a word: stop its loop, drop its socket with no CLOSE */
    e.stop = 1;
    pthread_join(e.th, NULL);
    sl_server_close(e.srv); /* sends CLOSE: the client must report a closed/lost session */
    const void *m;
    size_t l;
    sl_code rc = sl_client_recv(c, &m, &l, NULL, 3000, &err);
    assert_true(rc == SL_ERR_CLOSED || rc == SL_ERR_PEER_LOST);
    sl_client_close(c);
    pthread_mutex_destroy(&e.mu);
}

/* A client that reads nothing for a long time (the guest's channel to the backend while its calls
 * go to the session worker directly) keeps its session: the server's liveness probes must not
 * fill the client's receive queue, where ZeroMQ stops reading the connection and then drops it
 * as if the heartbeats had timed out (issue 18). */
static void test_dead_not_idle_reader(void **state)
{
    (void)state;
    sl_channel_opts o = fast_opts();
    o.hwm = 4; /* a few frames fill the queues: the probes of 100 ms intervals, in seconds */
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, &o);
    sl_tls_config cfg = cfg_client(&T.client, T.ca.pem);
    sl_client *c;
    sl_error err;
    assert_int_equal(sl_client_connect(sl_server_endpoint(e.srv), &cfg, &o, &c, &err), SL_OK);
    uint8_t b[100];
    struct iovec iov = {b, sizeof b};
    roundtrip(c, 80, &iov, 1, 1);
    sleep(4); /* 40 heartbeat intervals, 6 heartbeat timeouts: nothing read */
    pthread_mutex_lock(&e.mu);
    int closed = e.closed;
    pthread_mutex_unlock(&e.mu);
    assert_int_equal(closed, 0);
    roundtrip(c, 80, &iov, 1, 1);
    sl_client_close(c);
    echo_stop(&e);
}

/* A client that polls before it sleeps (spin_us) gets the same answers, and a recv's timeout is
 * not stretched by the polling. */
static void test_spinning_client(void **state)
{
    (void)state;
    echo_srv e;
    echo_start(&e, SL_TLS_MUTUAL, NULL);
    sl_tls_config cfg = cfg_client(&T.client, T.ca.pem);
    sl_channel_opts o = fast_opts();
    o.spin_us = 2000000; /* far longer than the timeout below */
    sl_client *c;
    sl_error err;
    assert_int_equal(sl_client_connect(sl_server_endpoint(e.srv), &cfg, &o, &c, &err), SL_OK);
    uint8_t b[70000];
    struct iovec iov = {b, sizeof b};
    for (int i = 0; i < 3; i++)
        roundtrip(c, 80, &iov, 1, 2);
    const void *m;
    size_t l;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(sl_client_recv(c, &m, &l, NULL, 20, &err), SL_ERR_TIMEOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
    assert_true(ms >= 19 && ms < 1000);
    sl_client_close(c);
    echo_stop(&e);
}

static void test_connect_nowhere(void **state)
{
    (void)state;
    sl_tls_config cfg = cfg_client(&T.client, T.ca.pem);
    sl_channel_opts o = fast_opts();
    o.handshake_timeout_ms = 200;
    o.connect_attempts = 2;
    o.connect_backoff_ms = 50;
    sl_client *c = NULL;
    sl_error err;
    int64_t t0 = (int64_t)time(NULL);
    assert_int_equal(sl_client_connect("tcp://127.0.0.1:1", &cfg, &o, &c, &err), SL_ERR_TIMEOUT);
    assert_non_null(strstr(err.msg, "after 2 attempts"));
    assert_null(c);
    assert_true((int64_t)time(NULL) - t0 < 5);
    /* bad configuration is reported, not crashed on */
    sl_tls_config bad = {.mode = SL_TLS_MUTUAL,
                         .ca_file = "/nonexistent/ca.pem",
                         .cert_file = "/x",
                         .key_file = "/y"};
    assert_int_equal(sl_client_connect("tcp://127.0.0.1:1", &bad, &o, &c, &err), SL_ERR_CONFIG);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutual_identity),
        cmocka_unit_test(test_server_only),
        cmocka_unit_test(test_roundtrips),
        cmocka_unit_test(test_reload_tls),
        cmocka_unit_test(test_wrong_ca_client),
        cmocka_unit_test(test_wrong_ca_server),
        cmocka_unit_test(test_expired_client),
        cmocka_unit_test(test_no_client_cert),
        cmocka_unit_test(test_accept_refused),
        cmocka_unit_test(test_revoked),
        cmocka_unit_test(test_tampered_flip),
        cmocka_unit_test(test_tampered_dup),
        cmocka_unit_test(test_tampered_drop),
        cmocka_unit_test(test_plaintext_peer),
        cmocka_unit_test(test_garbage_frame),
        cmocka_unit_test(test_oversized_frame),
        cmocka_unit_test(test_handshake_timeout),
        cmocka_unit_test(test_dead_client_reaped),
        cmocka_unit_test(test_dead_server_detected),
        cmocka_unit_test(test_dead_not_idle_reader),
        cmocka_unit_test(test_connect_nowhere),
        cmocka_unit_test(test_spinning_client),
        cmocka_unit_test(test_revoked_then_gone),
        cmocka_unit_test(test_closed_for_timeout),
        cmocka_unit_test(test_lent_bulk),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, pki_setup, pki_teardown);
}
