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

test_pki T;

int pki_setup(void **state)
{
    (void)state;
    if (pki_ca_new(&T.ca, "Sluice Test CA") || pki_ca_new(&T.ca2, "Other CA") ||
        pki_issue(&T.ca, "localhost", NULL, 1, -60, 86400, &T.server) ||
        pki_issue(&T.ca2, "localhost", NULL, 1, -60, 86400, &T.server2) ||
        pki_issue(&T.ca, "6f1e0c2a-1b7d-4c55-9a0e-3f2b8d7c1e42", "3c9d2f7e8a1b4c6d9e0f1a2b3c4d5e6f",
                  0, -60, 86400, &T.client) ||
        pki_issue(&T.ca, "0b0b0b0b-dead-4bee-8f00-000000000001", "proj", 0, -2 * 86400, -86400,
                  &T.expired) ||
        pki_issue(&T.ca2, "0c0c0c0c-dead-4bee-8f00-000000000002", "proj", 0, -60, 86400,
                  &T.foreign))
        return -1;
    return 0;
}

int pki_teardown(void **state)
{
    (void)state;
    pki_cred_free(&T.server);
    pki_cred_free(&T.server2);
    pki_cred_free(&T.client);
    pki_cred_free(&T.expired);
    pki_cred_free(&T.foreign);
    pki_ca_free(&T.ca);
    pki_ca_free(&T.ca2);
    return 0;
}

sl_tls_config cfg_server(sl_tls_mode mode)
{
    return (sl_tls_config){.mode = mode,
                           .ca_pem = T.ca.pem,
                           .cert_pem = T.server.cert_pem,
                           .key_pem = T.server.key_pem};
}

sl_tls_config cfg_client(const pki_cred *cred, const char *ca_pem)
{
    sl_tls_config c = {.mode = cred ? SL_TLS_MUTUAL : SL_TLS_SERVER_ONLY, .ca_pem = ca_pem};
    if (cred) {
        c.cert_pem = cred->cert_pem;
        c.key_pem = cred->key_pem;
    }
    return c;
}

sl_channel_opts fast_opts(void)
{
    sl_channel_opts o;
    sl_channel_opts_default(&o);
    o.handshake_timeout_ms = 3000;
    o.io_timeout_ms = 5000;
    o.heartbeat_ivl_ms = 100;
    o.heartbeat_timeout_ms = 600;
    o.connect_attempts = 1;
    o.linger_ms = 200;
    return o;
}

static int accept_hook(void *user, const sl_peer_identity *id, sl_error *why)
{
    echo_srv *e = user;
    (void)id;
    if (e->refuse)
        return sl_fail(why, SL_ERR_REFUSED, "instance %s has no grant on this host",
                       id->instance_id);
    return 0;
}

/* A MESSAGE whose bulk is on its way (sl_server_take_bulk). */
typedef struct pending {
    sl_peer peer;
    uint8_t *msg, *bulk;
    size_t len, blen;
} pending;

static void echo(echo_srv *e, sl_peer peer, const void *msg, size_t len, uint8_t *bulk, size_t blen)
{
    sl_error err;
    if (len > 6 && memcmp(msg, "reply:", 6) == 0) { /* "reply:N": N bulk bytes back */
        char num[32] = {0};
        memcpy(num, (const char *)msg + 6, len - 6 < 31 ? len - 6 : 31);
        size_t n = strtoull(num, NULL, 10);
        free(bulk);
        bulk = calloc(1, n ? n : 1);
        blen = n;
    }
    sl_code rc = sl_server_send_take(e->srv, peer, msg, len, bulk, blen, &err);
    if (rc != SL_OK) {
        pthread_mutex_lock(&e->mu);
        e->send_failed++;
        pthread_mutex_unlock(&e->mu);
    }
}

static uint8_t g_lent[ECHO_LENT_BYTES];

const uint8_t *echo_lent_bytes(void)
{
    for (size_t i = 0; i < ECHO_LENT_BYTES && !g_lent[0]; i++)
        g_lent[ECHO_LENT_BYTES - 1 - i] = (uint8_t)((ECHO_LENT_BYTES - 1 - i) * 7 + 1);
    return g_lent;
}

static void lent_back(void *arg)
{
    echo_srv *e = arg;
    pthread_mutex_lock(&e->mu);
    e->lent_back++;
    pthread_mutex_unlock(&e->mu);
}

static void *echo_main(void *arg)
{
    echo_srv *e = arg;
    pending pend[64] = {{0}};
    while (!e->stop) {
        sl_server_event ev;
        sl_error err;
        if (sl_server_poll(e->srv, 20, &ev, &err) != SL_OK)
            break;
        pthread_mutex_lock(&e->mu);
        if (e->reload) {
            sl_error rerr;
            e->reload_rc = sl_server_reload_tls(e->srv, e->reload, &rerr);
            e->reload = NULL;
        }
        if (ev.kind == SL_EV_ACCEPTED) {
            e->accepted++;
            e->last_id = *ev.identity;
        } else if (ev.kind == SL_EV_CLOSED) {
            e->closed++;
            e->last_closed = ev.reason.code;
            strcpy(e->last_closed_msg, ev.reason.msg);
            if (e->closed == 1) {
                e->first_closed = ev.reason.code;
                strcpy(e->first_closed_msg, ev.reason.msg);
            }
        }
        pthread_mutex_unlock(&e->mu);
        pending *pd = NULL;
        for (int i = 0; i < 64; i++)
            if (pend[i].peer == ev.peer && pend[i].peer)
                pd = &pend[i];
        if (ev.kind == SL_EV_CLOSED && pd) {
            free(pd->msg);
            free(pd->bulk);
            memset(pd, 0, sizeof *pd);
        }
        if (ev.kind == SL_EV_BULK && pd) {
            echo(e, pd->peer, pd->msg, pd->len, pd->bulk, pd->blen);
            free(pd->msg);
            memset(pd, 0, sizeof *pd);
        }
        if (ev.kind != SL_EV_MESSAGE)
            continue;
        if (ev.len == 6 && memcmp(ev.msg, "revoke", 6) == 0) {
            sl_server_revoke_instance(e->srv, ev.identity->instance_id, "instance stopped");
            continue;
        }
        if (ev.len == 5 && memcmp(ev.msg, "flood", 5) == 0) { /* 32 MiB of replies */
            for (int i = 0; i < 128; i++) /* frames of chunk_size, as a copy's bulk goes */
                sl_server_send_take(e->srv, ev.peer, "flood", 5, calloc(1, 256 << 10), 256 << 10,
                                    &err);
            continue;
        }
        if ((ev.len == 4 && memcmp(ev.msg, "lend", 4) == 0) ||
            (ev.len == 7 && memcmp(ev.msg, "lendbad", 7) == 0)) {
            sl_code rc =
                sl_server_send_lend(e->srv, ev.len == 4 ? ev.peer : ev.peer + 1000, "lent", 4,
                                    echo_lent_bytes(), ECHO_LENT_BYTES, lent_back, e, &err);
            pthread_mutex_lock(&e->mu);
            e->lend_rc = rc;
            pthread_mutex_unlock(&e->mu);
            continue;
        }
        if (ev.len == 4 && memcmp(ev.msg, "seal", 4) == 0) { /* sealed from the answer on */
            if (sl_server_send(e->srv, ev.peer, "sealed", 6, NULL, 0, &err) == SL_OK)
                sl_server_seal_bulk(e->srv, ev.peer, &err);
            continue;
        }
        if (ev.len == 7 && memcmp(ev.msg, "tooslow", 7) == 0) { /* closed for a timeout */
            sl_server_disconnect(e->srv, ev.peer, SL_ERR_TIMEOUT, "bulk too slow", &err);
            continue;
        }
        uint8_t *bulk = ev.bulk_len ? malloc(ev.bulk_len) : NULL;
        if (ev.bulk_len && e->blocking_bulk) {
            if (sl_server_recv_bulk(e->srv, ev.peer, bulk, ev.bulk_len, &err)) {
                free(bulk);
                continue;
            }
        } else if (ev.bulk_len) {
            for (int i = 0; i < 64 && !pd; i++)
                if (!pend[i].peer)
                    pd = &pend[i];
            struct iovec iov = {bulk, ev.bulk_len};
            if (!pd || !bulk || sl_server_take_bulk(e->srv, ev.peer, &iov, 1, &err) != SL_OK) {
                free(bulk);
                continue;
            }
            *pd = (pending){ev.peer, malloc(ev.len), bulk, ev.len, ev.bulk_len};
            memcpy(pd->msg, ev.msg, ev.len);
            continue;
        }
        echo(e, ev.peer, ev.msg, ev.len, bulk, ev.bulk_len);
    }
    for (int i = 0; i < 64; i++) {
        free(pend[i].msg);
        free(pend[i].bulk);
    }
    return NULL;
}

void echo_start(echo_srv *e, sl_tls_mode mode, const sl_channel_opts *o)
{
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
    sl_tls_config cfg = cfg_server(mode);
    sl_server_hooks hooks = {accept_hook, e};
    sl_error err;
    sl_channel_opts def = fast_opts();
    assert_int_equal(sl_server_bind("tcp://127.0.0.1:*", &cfg, o ? o : &def, &hooks, &e->srv, &err),
                     SL_OK);
    pthread_create(&e->th, NULL, echo_main, e);
}

void echo_stop(echo_srv *e)
{
    e->stop = 1;
    pthread_join(e->th, NULL);
    sl_server_close(e->srv);
    pthread_mutex_destroy(&e->mu);
}

sl_code echo_wait_closed(echo_srv *e, int n, int ms)
{
    for (int t = 0; t < ms; t += 10) {
        pthread_mutex_lock(&e->mu);
        int c = e->closed;
        sl_code code = e->last_closed;
        pthread_mutex_unlock(&e->mu);
        if (c >= n)
            return code;
        usleep(10000);
    }
    return SL_OK;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

void roundtrip(sl_client *c, size_t msg_len, const struct iovec *iov, size_t n, size_t bulk_reads)
{
    sl_error err;
    uint8_t *msg = malloc(msg_len);
    fill(msg, msg_len, (unsigned)msg_len);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        fill(iov[i].iov_base, iov[i].iov_len, (unsigned)(i + 7));
        total += iov[i].iov_len;
    }
    assert_int_equal(sl_client_send(c, msg, msg_len, iov, n, &err), SL_OK);
    const void *rmsg;
    size_t rlen;
    uint64_t blen;
    assert_int_equal(sl_client_recv(c, &rmsg, &rlen, &blen, 10000, &err), SL_OK);
    assert_int_equal(rlen, msg_len);
    assert_memory_equal(rmsg, msg, msg_len);
    assert_int_equal(blen, total);
    uint8_t *back = malloc(total + 1);
    size_t step = bulk_reads > 1 ? total / bulk_reads + 1 : total, off = 0;
    while (off < total) {
        size_t k = total - off < step ? total - off : step;
        sl_code rc = sl_client_recv_bulk(c, back + off, k, &err);
        if (rc)
            print_error("recv_bulk: %s: %s\n", sl_code_name(rc), err.msg);
        assert_int_equal(rc, SL_OK);
        off += k;
    }
    off = 0;
    for (size_t i = 0; i < n; i++) {
        assert_memory_equal(back + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    free(back);
    free(msg);
}

sl_code echo_reload(echo_srv *e, const sl_tls_config *cfg)
{
    pthread_mutex_lock(&e->mu);
    e->reload = cfg;
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < 500; i++) {
        pthread_mutex_lock(&e->mu);
        int done = e->reload == NULL;
        sl_code rc = e->reload_rc;
        pthread_mutex_unlock(&e->mu);
        if (done)
            return rc;
        usleep(10000);
    }
    fail_msg("the server thread did not reload");
    return SL_ERR_TIMEOUT;
}

void assert_good_client(echo_srv *e)
{
    sl_tls_config cfg = cfg_client(&T.client, T.ca.pem);
    sl_channel_opts o = fast_opts();
    sl_client *c;
    sl_error err;
    sl_code rc = sl_client_connect(sl_server_endpoint(e->srv), &cfg, &o, &c, &err);
    if (rc)
        print_error("good client: %s: %s\n", sl_code_name(rc), err.msg);
    assert_int_equal(rc, SL_OK);
    uint8_t b[1000];
    struct iovec iov = {b, sizeof b};
    roundtrip(c, 64, &iov, 1, 1);
    sl_client_close(c);
}

/* Whether frame m of the direction the relay tampers with is the one: how often it goes on. */
static int relay_times(relay *r, zmq_msg_t *m, int *seen)
{
    if (!r->armed || zmq_msg_size(m) == 0 || (*seen)++ != r->skip)
        return 1;
    if (r->mode == RELAY_FLIP)
        ((uint8_t *)zmq_msg_data(m))[zmq_msg_size(m) - 20] ^= 0x40;
    return r->mode == RELAY_DUP ? 2 : r->mode == RELAY_DROP ? 0 : 1;
}

static void *relay_main(void *arg)
{
    relay *r = arg;
    int seen = 0;
    while (!r->stop) {
        zmq_pollitem_t it[2] = {{r->front, 0, ZMQ_POLLIN, 0}, {r->back, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(it, 2, 20) <= 0)
            continue;
        static uint8_t rid[256];
        static size_t rid_len;
        if (it[0].revents & ZMQ_POLLIN) {
            int n = zmq_recv(r->front, rid, sizeof rid, 0);
            rid_len = n > 0 ? (size_t)n : 0;
            zmq_msg_t m;
            zmq_msg_init(&m);
            zmq_msg_recv(&m, r->front, 0);
            int times = r->replies ? 1 : relay_times(r, &m, &seen);
            for (int i = 0; i < times; i++) {
                zmq_msg_t c;
                zmq_msg_init(&c);
                zmq_msg_copy(&c, &m);
                zmq_msg_send(&c, r->back, 0);
            }
            zmq_msg_close(&m);
        }
        if (it[1].revents & ZMQ_POLLIN) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            zmq_msg_recv(&m, r->back, 0);
            int times = r->replies ? relay_times(r, &m, &seen) : 1;
            for (int i = 0; i < times; i++) {
                zmq_msg_t c;
                zmq_msg_init(&c);
                zmq_msg_copy(&c, &m);
                zmq_send(r->front, rid, rid_len, ZMQ_SNDMORE);
                zmq_msg_send(&c, r->front, 0);
            }
            zmq_msg_close(&m);
        }
    }
    return NULL;
}

void relay_start(relay *r, const char *target, enum relay_mode mode)
{
    memset(r, 0, sizeof *r);
    r->mode = mode;
    r->zctx = zmq_ctx_new();
    r->front = zmq_socket(r->zctx, ZMQ_ROUTER);
    r->back = zmq_socket(r->zctx, ZMQ_DEALER);
    int z = 0;
    zmq_setsockopt(r->front, ZMQ_LINGER, &z, sizeof z);
    zmq_setsockopt(r->back, ZMQ_LINGER, &z, sizeof z);
    assert_int_equal(zmq_bind(r->front, "tcp://127.0.0.1:*"), 0);
    size_t l = sizeof r->endpoint;
    zmq_getsockopt(r->front, ZMQ_LAST_ENDPOINT, r->endpoint, &l);
    assert_int_equal(zmq_connect(r->back, target), 0);
    pthread_create(&r->th, NULL, relay_main, r);
}

void relay_stop(relay *r)
{
    r->stop = 1;
    pthread_join(r->th, NULL);
    zmq_close(r->front);
    zmq_close(r->back);
    zmq_ctx_term(r->zctx);
}
