/* sluice-channel-demo: the channel, end to end, on one machine.
 *
 * A backend-like server (a thread) with an allow-list of granted instances, and guest-like
 * clients on the main thread, all over loopback TCP with real TLS 1.3 and real certificates
 * (made by scripts/make-demo-pki). It shows: a granted session carrying a real CUDA call
 * envelope (cuMemcpyHtoD_v2) with a 64 MiB bulk payload checked by SHA-256 on arrival; a client
 * of another CA refused; a valid but ungranted client refused; a live session revoked.
 * No GPU is touched: the server only checks the bytes. Exit status 0 when every step behaved. */
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/channel.h"
#include "sluice/wire.h"

#define BULK_BYTES ((size_t)64 << 20)
#define GRANTED    "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60" /* guest-a; guest-b is not granted */

struct demo {
    const char *dir;
    char endpoint[128];
    atomic_int ready, stop;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

static void path(char *out, size_t n, const char *dir, const char *file)
{
    snprintf(out, n, "%s/%s", dir, file);
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int mdlen = 0;
    EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static int accept_granted(void *user, const sl_peer_identity *id, sl_error *why)
{
    (void)user;
    if (strcmp(id->instance_id, GRANTED) == 0)
        return 0;
    sl_fail(why, SL_ERR_REFUSED, "instance %s has no grant on this backend", id->instance_id);
    return 1;
}

static int send_server(sl_server *s, sl_peer peer, Sluice__Wire__ServerMessage *m)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_error e;
    if (sl_wire_encode_server(m, NULL, &buf, &len, &e) == SL_OK &&
        sl_server_send(s, peer, buf, len, NULL, 0, &e) == SL_OK) {
        free(buf);
        return 0;
    }
    fprintf(stderr, "server: send failed: %s\n", e.msg);
    free(buf);
    return -1;
}

/* Answers one CallFrame: takes each call's bulk into a buffer, hashes it, replies. */
static void serve_calls(sl_server *s, sl_peer peer, const Sluice__Wire__CallFrame *f, uint8_t *buf)
{
    Sluice__Wire__Reply *replies[SL_WIRE_MAX_FRAME_CALLS];
    Sluice__Wire__Reply store[8];
    char hex[8][80];
    size_t n = f->n_calls < 8 ? f->n_calls : 8;
    for (size_t i = 0; i < n; i++) {
        const Sluice__Wire__Call *c = f->calls[i];
        sl_error e;
        sluice__wire__reply__init(&store[i]);
        store[i].seq = c->seq;
        store[i].call_id = c->call_id;
        if (c->bulk_length > BULK_BYTES ||
            sl_server_recv_bulk(s, peer, buf, c->bulk_length, &e) != SL_OK) {
            store[i].result = 1; /* CUDA_ERROR_INVALID_VALUE */
            snprintf(hex[i], sizeof hex[i], "bulk refused");
        } else {
            char digest[65];
            sha256_hex(buf, c->bulk_length, digest);
            snprintf(hex[i], sizeof hex[i], "sha256=%s", digest);
        }
        store[i].detail = hex[i];
        replies[i] = &store[i];
        printf("  server: call seq=%llu %s, %llu bulk bytes received, %s\n",
               (unsigned long long)c->seq, sl_call_lookup(c->call_id)->name,
               (unsigned long long)c->bulk_length, hex[i]);
    }
    Sluice__Wire__ReplyFrame rf = SLUICE__WIRE__REPLY_FRAME__INIT;
    rf.n_replies = n;
    rf.replies = replies;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES;
    m.replies = &rf;
    send_server(s, peer, &m);
    size_t revoked = sl_server_revoke_instance(s, GRANTED, "demo: instance stopped");
    printf("  server: revoked instance %s (%zu live session%s)\n", GRANTED, revoked,
           revoked == 1 ? "" : "s");
}

static void handle_message(sl_server *s, const sl_server_event *ev, uint8_t *buf)
{
    Sluice__Wire__ClientMessage *m = NULL;
    sl_error e;
    if (sl_wire_decode_client(ev->msg, ev->len, NULL, &m, &e) != SL_OK) {
        sl_server_disconnect(s, ev->peer, e.code, e.msg, NULL);
        return;
    }
    if (m->kind_case == SLUICE__WIRE__CLIENT_MESSAGE__KIND_OPEN) {
        printf("  server: session open from \"%s\"\n", m->open->client);
        Sluice__Wire__SessionAccept acc = SLUICE__WIRE__SESSION_ACCEPT__INIT;
        acc.protocol_version = 1;
        acc.session_id = ev->peer;
        Sluice__Wire__ServerMessage out = SLUICE__WIRE__SERVER_MESSAGE__INIT;
        out.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_ACCEPT;
        out.accept = &acc;
        send_server(s, ev->peer, &out);
    } else if (m->kind_case == SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS) {
        serve_calls(s, ev->peer, m->calls, buf);
    }
    sl_wire_free_client(m);
}

static void *server_main(void *arg)
{
    struct demo *d = arg;
    char ca[512], cert[512], key[512];
    path(ca, sizeof ca, d->dir, "ca.pem");
    path(cert, sizeof cert, d->dir, "server.pem");
    path(key, sizeof key, d->dir, "server.key");
    sl_tls_config cfg = {.mode = SL_TLS_MUTUAL, .ca_file = ca, .cert_file = cert, .key_file = key};
    sl_server_hooks hooks = {.accept = accept_granted};
    sl_server *s = NULL;
    sl_error e;
    uint8_t *buf = malloc(BULK_BYTES);
    if (!buf || sl_server_bind("tcp://127.0.0.1:*", &cfg, NULL, &hooks, &s, &e) != SL_OK) {
        fprintf(stderr, "server: %s\n", buf ? e.msg : "out of memory");
        atomic_store(&d->ready, -1);
    } else {
        snprintf(d->endpoint, sizeof d->endpoint, "%s", sl_server_endpoint(s));
        atomic_store(&d->ready, 1);
    }
    pthread_mutex_lock(&d->lock);
    pthread_cond_signal(&d->cond);
    pthread_mutex_unlock(&d->lock);
    while (s && !atomic_load(&d->stop)) {
        sl_server_event ev;
        if (sl_server_poll(s, 100, &ev, &e) != SL_OK)
            continue;
        if (ev.kind == SL_EV_ACCEPTED)
            printf("  server: accepted instance %s of project %s (cert serial %s)\n",
                   ev.identity->instance_id, ev.identity->project_id, ev.identity->serial);
        else if (ev.kind == SL_EV_MESSAGE)
            handle_message(s, &ev, buf);
        else if (ev.kind == SL_EV_CLOSED)
            printf("  server: session %llu closed: %s (%s)\n", (unsigned long long)ev.peer,
                   ev.reason.msg, sl_code_name(ev.reason.code));
    }
    sl_server_close(s);
    free(buf);
    return NULL;
}

static sl_code connect_as(struct demo *d, const char *ca_name, const char *who, sl_client **c,
                          sl_error *e)
{
    char ca[512], cert[512], key[512], file[64];
    path(ca, sizeof ca, d->dir, ca_name);
    snprintf(file, sizeof file, "%s.pem", who);
    path(cert, sizeof cert, d->dir, file);
    snprintf(file, sizeof file, "%s.key", who);
    path(key, sizeof key, d->dir, file);
    sl_tls_config cfg = {.mode = SL_TLS_MUTUAL, .ca_file = ca, .cert_file = cert, .key_file = key};
    sl_channel_opts o;
    sl_channel_opts_default(&o);
    o.connect_attempts = 1;
    o.handshake_timeout_ms = 5000;
    return sl_client_connect(d->endpoint, &cfg, &o, c, e);
}

static int send_client(sl_client *c, Sluice__Wire__ClientMessage *m, const struct iovec *bulk,
                       size_t n)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_error e;
    int rc = -1;
    if (sl_wire_encode_client(m, NULL, &buf, &len, &e) == SL_OK &&
        sl_client_send(c, buf, len, bulk, n, &e) == SL_OK)
        rc = 0;
    else
        fprintf(stderr, "client: send failed: %s\n", e.msg);
    free(buf);
    return rc;
}

static Sluice__Wire__ServerMessage *recv_server(sl_client *c, sl_error *e)
{
    const void *msg;
    size_t len;
    uint64_t bulk;
    Sluice__Wire__ServerMessage *m = NULL;
    if (sl_client_recv(c, &msg, &len, &bulk, 10000, e) != SL_OK)
        return NULL;
    if (sl_wire_decode_server(msg, len, NULL, &m, e) != SL_OK)
        return NULL;
    return m;
}

/* Step 1: the granted guest opens a session, sends cuMemcpyHtoD_v2 with 64 MiB, is revoked. */
static int granted_session(struct demo *d)
{
    sl_client *c = NULL;
    sl_error e;
    printf("\n[1] guest-a (granted) connects with its client certificate\n");
    if (connect_as(d, "ca.pem", "guest-a", &c, &e) != SL_OK) {
        printf("  FAILED: %s\n", e.msg);
        return 1;
    }
    printf("  client: mutual TLS established, cipher %s\n", sl_client_cipher(c));

    Sluice__Wire__SessionOpen open = SLUICE__WIRE__SESSION_OPEN__INIT;
    open.protocol_version = 1;
    open.cuda_version = 13000;
    open.client = "sluice-channel-demo";
    Sluice__Wire__ClientMessage m = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_OPEN;
    m.open = &open;
    Sluice__Wire__ServerMessage *r = NULL;
    if (send_client(c, &m, NULL, 0) || !(r = recv_server(c, &e))) {
        printf("  FAILED: session open: %s\n", e.msg);
        sl_client_close(c);
        return 1;
    }
    printf("  client: session %llu accepted\n", (unsigned long long)r->accept->session_id);
    sl_wire_free_server(r);

    uint8_t *data = malloc(BULK_BYTES);
    if (!data) {
        sl_client_close(c);
        return 1;
    }
    for (size_t i = 0; i < BULK_BYTES; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 13);
    char digest[65];
    sha256_hex(data, BULK_BYTES, digest);

    Sluice__Cuda__CuMemcpyHtoDV2Request req = SLUICE__CUDA__CU_MEMCPY_HTO_DV2_REQUEST__INIT;
    req.dst_device = 0x7f0000000000ull;
    req.src_host = BULK_BYTES;
    req.byte_count = BULK_BYTES;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.seq = 1;
    call.call_id = SL_CALL_cuMemcpyHtoD_v2;
    call.bulk_length = BULK_BYTES;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEMCPY_HTO_D_V2;
    call.cu_memcpy_hto_d_v2 = &req;
    Sluice__Wire__Call *calls[] = {&call};
    Sluice__Wire__CallFrame frame = SLUICE__WIRE__CALL_FRAME__INIT;
    frame.n_calls = 1;
    frame.calls = calls;
    m.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS;
    m.calls = &frame;
    struct iovec iov = {.iov_base = data, .iov_len = BULK_BYTES};
    printf("  client: cuMemcpyHtoD_v2 envelope + %zu MiB bulk, sha256=%.16s...\n", BULK_BYTES >> 20,
           digest);
    int bad = 1;
    if (send_client(c, &m, &iov, 1) == 0 && (r = recv_server(c, &e))) {
        const char *got = r->replies->replies[0]->detail;
        bad = strncmp(got, "sha256=", 7) != 0 || strcmp(got + 7, digest) != 0;
        printf("  client: reply result=%d, %s\n", r->replies->replies[0]->result,
               bad ? "DIGEST MISMATCH" : "server's digest matches");
        sl_wire_free_server(r);
    } else {
        printf("  FAILED: call: %s\n", e.msg);
    }
    free(data);

    printf("  client: waiting on the session after revocation...\n");
    const void *msg;
    size_t len;
    sl_code rc = sl_client_recv(c, &msg, &len, NULL, 10000, &e);
    printf("  client: session ended: %s (%s)\n", e.msg, sl_code_name(rc));
    bad |= rc != SL_ERR_REVOKED;
    sl_client_close(c);
    return bad;
}

/* Steps 2 and 3: clients that must be refused, and why. */
static int refused(struct demo *d, const char *title, const char *ca, const char *who,
                   sl_code expect)
{
    sl_client *c = NULL;
    sl_error e;
    printf("\n%s\n", title);
    sl_code rc = connect_as(d, ca, who, &c, &e);
    sl_client_close(c);
    if (rc == SL_OK) {
        printf("  FAILED: it was let in\n");
        return 1;
    }
    printf("  client: refused: %s (%s)\n", e.msg, sl_code_name(rc));
    return rc != expect;
}

int main(int argc, char **argv)
{
    if (argc != 2 || strcmp(argv[1], "--help") == 0) {
        fprintf(stderr, "usage: %s PKI_DIR   (certificates made by scripts/make-demo-pki)\n",
                argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct demo d = {.dir = argv[1]};
    pthread_mutex_init(&d.lock, NULL);
    pthread_cond_init(&d.cond, NULL);
    pthread_t th;
    pthread_create(&th, NULL, server_main, &d);
    pthread_mutex_lock(&d.lock);
    while (atomic_load(&d.ready) == 0)
        pthread_cond_wait(&d.cond, &d.lock);
    pthread_mutex_unlock(&d.lock);
    if (atomic_load(&d.ready) < 0) {
        pthread_join(th, NULL);
        return 1;
    }
    printf("Sluice channel demo: TLS 1.3 inside ZeroMQ, mutual X.509\n");
    printf("  server: listening on %s, granted instance %s\n", d.endpoint, GRANTED);

    int failures = granted_session(&d);
    failures += refused(&d, "[2] a client whose certificate comes from another CA", "ca.pem",
                        "rogue", SL_ERR_UNKNOWN_CA);
    failures += refused(&d, "[3] guest-b: a valid certificate, but no grant", "ca.pem", "guest-b",
                        SL_ERR_REFUSED);

    atomic_store(&d.stop, 1);
    pthread_join(th, NULL);
    printf("\n%s\n", failures ? "channel demo: FAILED" : "channel demo: every step behaved");
    return failures ? 1 : 0;
}
