/* sluice-stall-probe: one attack on a running sluice-backend while a neighbour session of the
 * same project measures its round trips, for tests/e2e/stall.py. Test tool only.
 *
 *   neighbour  a session (--cert) that sends cuCtxSynchronize and waits for its reply, again
 *              and again, from before the attack until after it; every round trip is timed
 *   victim     (--victim-cert) a session that only waits: the test revokes its instance during
 *              the attack and the probe notes when the session ended (CLOCK_MONOTONIC)
 *   attacker   (--attacker-cert) one of:
 *     none      no attack: the neighbour's round trips on this machine as it is (the baseline)
 *     announce  a CallFrame whose MESSAGE announces 2^40 bytes of bulk, and nothing after it
 *     trickle   a CallFrame announcing 64 MiB of bulk, then one byte every 200 ms
 *     noread    16 cuMemcpyDtoH_v2 of 32 MiB each, none of whose replies it reads (until
 *               --window-ms is over or --until-file exists; then it reads what is left)
 *     flood     1,100 connections from --flood-source (127.0.0.2) without a certificate, each
 *               with half a TLS ClientHello and nothing more; meanwhile a new credentialed
 *               session (--attacker-cert) opens, from 127.0.0.1 and from the flood's own
 *               address, and makes round trips
 *
 * Prints one JSON object: the neighbour's round trips (count, worst, median), the longest a
 * thread sleeping 1 ms at a time woke late meanwhile (the machine's own pauses), how the attacker
 * was cut off (code, message, after how long), when the victim's session ended and why. */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <zmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rawpeer.h"
#include "sluice/channel.h"
#include "sluice/wire.h"

#define ROUNDS_MAX 100000

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const char *endpoint, *ca;

static sl_tls_config tls(const char *cert, const char *key)
{
    return (sl_tls_config){
        .mode = SL_TLS_MUTUAL, .ca_file = ca, .cert_file = cert, .key_file = key};
}

static sl_code encode_open(uint8_t **buf, size_t *len, sl_error *e)
{
    Sluice__Wire__SessionOpen open = SLUICE__WIRE__SESSION_OPEN__INIT;
    open.protocol_version = 1;
    open.cuda_version = 13000;
    open.client = "sluice-stall-probe";
    Sluice__Wire__ClientMessage cm = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    cm.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_OPEN;
    cm.open = &open;
    return sl_wire_encode_client(&cm, NULL, buf, len, e);
}

/* The primary context id of device 0 from a SessionAccept. */
static sl_code accepted(const void *msg, size_t len, uint64_t *ctx, sl_error *e)
{
    Sluice__Wire__ServerMessage *sm = NULL;
    sl_code rc = sl_wire_decode_server(msg, len, NULL, &sm, e);
    if (rc != SL_OK)
        return rc;
    if (sm->kind_case != SLUICE__WIRE__SERVER_MESSAGE__KIND_ACCEPT || !sm->accept->n_devices)
        rc = sl_fail(e, SL_ERR_PROTOCOL, "no SessionAccept with a device");
    else
        *ctx = sm->accept->devices[0]->primary_context;
    sl_wire_free_server(sm);
    return rc;
}

static sl_code open_session(sl_client *c, uint64_t *ctx, sl_error *e)
{
    uint8_t *buf;
    size_t len;
    sl_code rc = encode_open(&buf, &len, e);
    if (rc != SL_OK)
        return rc;
    rc = sl_client_send(c, buf, len, NULL, 0, e);
    free(buf);
    const void *msg;
    uint64_t blen;
    if (rc == SL_OK)
        rc = sl_client_recv(c, &msg, &len, &blen, 10000, e);
    return rc == SL_OK ? accepted(msg, len, ctx, e) : rc;
}

/* One CallFrame of one call; *buf from malloc. */
static sl_code encode_call(Sluice__Wire__Call *call, uint8_t **buf, size_t *len, sl_error *e)
{
    Sluice__Wire__Call *calls[1] = {call};
    Sluice__Wire__CallFrame f = SLUICE__WIRE__CALL_FRAME__INIT;
    f.calls = calls;
    f.n_calls = 1;
    Sluice__Wire__ClientMessage cm = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    cm.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS;
    cm.calls = &f;
    return sl_wire_encode_client(&cm, NULL, buf, len, e);
}

static sl_code send_call(sl_client *c, Sluice__Wire__Call *call, sl_error *e)
{
    uint8_t *buf;
    size_t len;
    sl_code rc = encode_call(call, &buf, &len, e);
    if (rc == SL_OK)
        rc = sl_client_send(c, buf, len, NULL, 0, e);
    free(buf);
    return rc;
}

/* The reply to a synchronous call: its result, and the reply itself when out is not NULL. */
static sl_code reply(sl_client *c, Sluice__Wire__ServerMessage **out, int *result, sl_error *e)
{
    const void *msg;
    size_t len;
    uint64_t blen;
    sl_code rc = sl_client_recv(c, &msg, &len, &blen, 10000, e);
    if (rc == SL_OK && blen)
        rc = sl_client_recv_bulk(c, NULL, blen, e);
    Sluice__Wire__ServerMessage *sm = NULL;
    if (rc == SL_OK)
        rc = sl_wire_decode_server(msg, len, NULL, &sm, e);
    if (rc == SL_OK && (sm->kind_case != SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES ||
                        sm->replies->n_replies != 1))
        rc = sl_fail(e, SL_ERR_PROTOCOL, "expected one reply");
    if (rc == SL_OK)
        *result = sm->replies->replies[0]->result;
    if (rc == SL_OK && out)
        *out = sm;
    else
        sl_wire_free_server(sm);
    return rc;
}

/* ---------------------------------------------------------------- the neighbour */

static struct {
    const char *cert, *key;
    pthread_t th;
    volatile int stop, ready;
    int rounds, failed;
    double rtt[ROUNDS_MAX];
    double worst, worst_at; /* the longest round trip and when it began (CLOCK_MONOTONIC ms) */
    char why[SL_ERROR_MSG_MAX + 32];
} nb;

static void *neighbour(void *arg)
{
    (void)arg;
    sl_tls_config t = tls(nb.cert, nb.key);
    sl_client *c = NULL;
    sl_error e = {0};
    uint64_t ctx = 0, seq = 0;
    sl_code rc = sl_client_connect(endpoint, &t, NULL, &c, &e);
    if (rc == SL_OK)
        rc = open_session(c, &ctx, &e);
    while (rc == SL_OK && !nb.stop) {
        Sluice__Cuda__CuCtxSynchronizeRequest rq = SLUICE__CUDA__CU_CTX_SYNCHRONIZE_REQUEST__INIT;
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        call.seq = ++seq;
        call.call_id = SL_CALL_cuCtxSynchronize;
        call.context = ctx;
        call.args_case = SLUICE__WIRE__CALL__ARGS_CU_CTX_SYNCHRONIZE;
        call.cu_ctx_synchronize = &rq;
        double t0 = mono_ms();
        int result = -1;
        rc = send_call(c, &call, &e);
        if (rc == SL_OK)
            rc = reply(c, NULL, &result, &e);
        if (rc == SL_OK && result != 0)
            rc = sl_fail(&e, SL_ERR_PROTOCOL, "cuCtxSynchronize answered %d", result);
        if (rc == SL_OK && nb.rounds < ROUNDS_MAX) {
            double rt = mono_ms() - t0;
            nb.rtt[nb.rounds++] = rt;
            if (rt > nb.worst) {
                nb.worst = rt;
                nb.worst_at = t0;
            }
        }
        nb.ready = 1;
        usleep(2000);
    }
    if (rc != SL_OK) {
        nb.failed = 1;
        snprintf(nb.why, sizeof nb.why, "%s: %s", sl_code_name(rc), e.msg);
    }
    nb.ready = 1;
    sl_client_close(c);
    return NULL;
}

/* ---------------------------------------------------------------- the machine */

/* A thread that sleeps 1 ms again and again and notes how late it woke: what this machine's
 * scheduler (other work, a container's CPU quota) took from every process in the same window,
 * so that the test can tell the machine's pauses from the backend's. */
static struct {
    pthread_t th;
    double worst_late_ms;
} mc;

static void *machine(void *arg)
{
    (void)arg;
    const struct timespec ms1 = {0, 1000000};
    while (!nb.stop) {
        double t0 = mono_ms();
        nanosleep(&ms1, NULL);
        double late = mono_ms() - t0 - 1.0;
        if (late > mc.worst_late_ms)
            mc.worst_late_ms = late;
    }
    return NULL;
}

/* ---------------------------------------------------------------- the victim */

static struct {
    const char *cert, *key;
    pthread_t th;
    volatile int ready;
    double ended_ms;
    char why[SL_ERROR_MSG_MAX];
    sl_code code;
} vi;

static void *victim(void *arg)
{
    (void)arg;
    sl_tls_config t = tls(vi.cert, vi.key);
    sl_client *c = NULL;
    sl_error e = {0};
    uint64_t ctx;
    sl_code rc = sl_client_connect(endpoint, &t, NULL, &c, &e);
    if (rc == SL_OK)
        rc = open_session(c, &ctx, &e);
    vi.ready = 1;
    const void *msg;
    size_t len;
    uint64_t blen;
    if (rc == SL_OK)
        rc = sl_client_recv(c, &msg, &len, &blen, 60000, &e);
    vi.ended_ms = mono_ms();
    vi.code = rc;
    snprintf(vi.why, sizeof vi.why, "%s", e.msg);
    sl_client_close(c);
    return NULL;
}

/* ---------------------------------------------------------------- the attacks */

static struct {
    sl_code code;
    char why[SL_ERROR_MSG_MAX];
    double after_ms;
} cut;

static void cut_by(sl_code rc, const sl_error *e, double t0)
{
    cut.code = rc;
    snprintf(cut.why, sizeof cut.why, "%s", e->msg);
    cut.after_ms = mono_ms() - t0;
}

/* A session on the raw client: SessionOpen, SessionAccept. */
static sl_code raw_session(rawpeer **r, const char *cert, const char *key, uint64_t *ctx,
                           sl_error *e)
{
    sl_tls_config t = tls(cert, key);
    sl_code rc = raw_connect(endpoint, NULL, &t, 10000, r, e);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (rc == SL_OK)
        rc = encode_open(&buf, &len, e);
    if (rc == SL_OK)
        rc = raw_record(*r, RAW_MESSAGE, 0, buf, len, e);
    free(buf);
    const void *msg;
    if (rc == SL_OK)
        rc = raw_recv(*r, 10000, &msg, &len, e);
    return rc == SL_OK ? accepted(msg, len, ctx, e) : rc;
}

/* announce (bulk_announced = 2^40) or trickle (64 MiB, a byte every 200 ms) */
static int bulk_attack(const char *cert, const char *key, int trickle, double window_ms)
{
    rawpeer *r = NULL;
    sl_error e = {0};
    uint64_t ctx = 0;
    sl_code rc = raw_session(&r, cert, key, &ctx, &e);
    if (rc != SL_OK) {
        fprintf(stderr, "sluice-stall-probe: attacker: %s: %s\n", sl_code_name(rc), e.msg);
        raw_close(r);
        return -1;
    }
    uint64_t n = (uint64_t)64 << 20;
    Sluice__Cuda__CuMemcpyHtoDV2Request rq = SLUICE__CUDA__CU_MEMCPY_HTO_DV2_REQUEST__INIT;
    rq.dst_device = 0x1000;
    rq.byte_count = n;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.seq = 1;
    call.call_id = SL_CALL_cuMemcpyHtoD_v2;
    call.context = ctx;
    call.bulk_length = n;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEMCPY_HTO_D_V2;
    call.cu_memcpy_hto_d_v2 = &rq;
    uint8_t *buf;
    size_t len;
    if (encode_call(&call, &buf, &len, &e) != SL_OK) {
        raw_close(r);
        return -1;
    }
    double t0 = mono_ms();
    rc = raw_record(r, RAW_MESSAGE, trickle ? n : (uint64_t)1 << 40, buf, len, &e);
    free(buf);
    const void *msg;
    for (uint64_t off = 0; rc == SL_OK && mono_ms() - t0 < window_ms; off++) {
        rc = raw_recv(r, trickle ? 200 : 1000, &msg, &len, &e);
        if (rc == SL_ERR_TIMEOUT && !raw_peer_closed(r))
            rc = trickle ? raw_record(r, RAW_BULK, off, "x", 1, &e) : SL_OK;
        else if (rc == SL_OK)
            rc = sl_fail(&e, SL_ERR_PROTOCOL, "a reply to a call whose bulk never came");
    }
    cut_by(rc, &e, t0);
    raw_close(r);
    return 0;
}

static int noread_attack(const char *cert, const char *key, double window_ms, const char *until)
{
    sl_tls_config t = tls(cert, key);
    sl_channel_opts o;
    sl_channel_opts_default(&o);
    o.heartbeat_timeout_ms = 60000; /* its own heartbeats must not give up first: it is the
                                     * backend that must cut it off. (It reads again as soon
                                     * as the test saw the cut: libzmq 4.3.4 aborts a
                                     * heartbeating socket whose full receive queue meets a
                                     * lost connection, zeromq/libzmq#4364.) */
    sl_client *c = NULL;
    sl_error e = {0};
    uint64_t ctx = 0, dptr = 0, n = (uint64_t)32 << 20;
    sl_code rc = sl_client_connect(endpoint, &t, &o, &c, &e);
    if (rc == SL_OK)
        rc = open_session(c, &ctx, &e);
    Sluice__Cuda__CuMemAllocV2Request arq = SLUICE__CUDA__CU_MEM_ALLOC_V2_REQUEST__INIT;
    arq.bytesize = n;
    Sluice__Wire__Call alloc = SLUICE__WIRE__CALL__INIT;
    alloc.seq = 1;
    alloc.call_id = SL_CALL_cuMemAlloc_v2;
    alloc.context = ctx;
    alloc.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEM_ALLOC_V2;
    alloc.cu_mem_alloc_v2 = &arq;
    Sluice__Wire__ServerMessage *sm = NULL;
    int result = -1;
    if (rc == SL_OK)
        rc = send_call(c, &alloc, &e);
    if (rc == SL_OK)
        rc = reply(c, &sm, &result, &e);
    if (rc == SL_OK && result == 0 &&
        sm->replies->replies[0]->out_case == SLUICE__WIRE__REPLY__OUT_CU_MEM_ALLOC_V2)
        dptr = sm->replies->replies[0]->cu_mem_alloc_v2->dptr;
    sl_wire_free_server(sm);
    if (rc != SL_OK || !dptr) {
        fprintf(stderr, "sluice-stall-probe: attacker: no allocation: %s (result %d)\n", e.msg,
                result);
        sl_client_close(c);
        return -1;
    }
    double t0 = mono_ms();
    for (uint64_t i = 0; rc == SL_OK && i < 16; i++) {
        Sluice__Cuda__CuMemcpyDtoHV2Request rq = SLUICE__CUDA__CU_MEMCPY_DTO_HV2_REQUEST__INIT;
        rq.dst_host = 0x10000;
        rq.src_device = dptr;
        rq.byte_count = n;
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        call.seq = 2 + i;
        call.call_id = SL_CALL_cuMemcpyDtoH_v2;
        call.context = ctx;
        call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEMCPY_DTO_H_V2;
        call.cu_memcpy_dto_h_v2 = &rq;
        rc = send_call(c, &call, &e);
    }
    while (mono_ms() - t0 < window_ms && (!until || access(until, F_OK) != 0))
        usleep(10000); /* reads nothing meanwhile, until the test saw the backend cut it off */
    for (int i = 0; rc == SL_OK && i < 64; i++) /* then what the backend left it */
        rc = reply(c, NULL, &result, &e);
    cut_by(rc, &e, t0);
    sl_client_close(c);
    return 0;
}

/* A new credentialed session from src while the flood goes on: connect, open, 10 calls. */
static struct {
    int n;
    struct {
        char src[32];
        double ms;
        sl_code code;
        char why[SL_ERROR_MSG_MAX];
    } s[2];
} fresh;

static void fresh_session(const char *cert, const char *key, const char *src)
{
    sl_tls_config t = tls(cert, key);
    t.server_name = "127.0.0.1";
    char ep[300];
    snprintf(ep, sizeof ep, "tcp://%s:0;%s", src, endpoint + strlen("tcp://"));
    sl_client *c = NULL;
    sl_error e = {0};
    uint64_t ctx = 0;
    double t0 = mono_ms();
    sl_code rc = sl_client_connect(ep, &t, NULL, &c, &e);
    if (rc == SL_OK)
        rc = open_session(c, &ctx, &e);
    for (uint64_t i = 1; rc == SL_OK && i <= 10; i++) {
        Sluice__Cuda__CuCtxSynchronizeRequest rq = SLUICE__CUDA__CU_CTX_SYNCHRONIZE_REQUEST__INIT;
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        call.seq = i;
        call.call_id = SL_CALL_cuCtxSynchronize;
        call.context = ctx;
        call.args_case = SLUICE__WIRE__CALL__ARGS_CU_CTX_SYNCHRONIZE;
        call.cu_ctx_synchronize = &rq;
        int result;
        rc = send_call(c, &call, &e);
        if (rc == SL_OK)
            rc = reply(c, NULL, &result, &e);
    }
    int k = fresh.n++;
    snprintf(fresh.s[k].src, sizeof fresh.s[k].src, "%s", src);
    fresh.s[k].ms = mono_ms() - t0;
    fresh.s[k].code = rc;
    snprintf(fresh.s[k].why, sizeof fresh.s[k].why, "%s", rc ? e.msg : "");
    sl_client_close(c);
}

/* --flood-only: the flood itself, in a process of its own (so that its thousand sockets do not
 * take the neighbour's CPU in this one): n connections from src, each with half a ClientHello,
 * held for hold_ms. Exit status 0 when all n were opened. */
static int flood_only(const char *src, int n, double hold_ms)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    void *z = zmq_ctx_new();
    zmq_ctx_set(z, ZMQ_MAX_SOCKETS, n + 16);
    void **socks = calloc((size_t)n, sizeof *socks);
    char ep[300];
    snprintf(ep, sizeof ep, "tcp://%s:0;%s", src, endpoint + strlen("tcp://"));
    double t0 = mono_ms();
    int opened = 0;
    for (int i = 0; socks && i < n; i++) {
        void *d = zmq_socket(z, ZMQ_DEALER);
        if (!d)
            break;
        int zero = 0, never = -1;
        zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(d, ZMQ_RECONNECT_IVL, &never, sizeof never);
        if (zmq_connect(d, ep) != 0) {
            zmq_close(d);
            break;
        }
        zmq_send(d, "\x16\x03\x01\x02\x00", 5, 0); /* half a ClientHello, queued */
        socks[opened++] = d;
    }
    while (mono_ms() - t0 < hold_ms)
        usleep(10000);
    for (int i = 0; i < opened; i++)
        zmq_close(socks[i]);
    free(socks);
    zmq_ctx_term(z);
    return opened == n ? 0 : 1;
}

static int flood_attack(const char *self, const char *cert, const char *key, const char *src, int n,
                        double window_ms)
{
    char num[16], hold[32];
    snprintf(num, sizeof num, "%d", n);
    snprintf(hold, sizeof hold, "%.0f", window_ms);
    char *argv[] = {(char *)self,     "--flood-only", "--endpoint", (char *)endpoint,
                    "--flood-source", (char *)src,    "--flood",    num,
                    "--window-ms",    hold,           NULL};
    extern char **environ;
    pid_t pid;
    double t0 = mono_ms();
    if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0)
        return -1;
    usleep(1500000); /* the flood is in */
    fresh_session(cert, key, "127.0.0.1");
    fresh_session(cert, key, src);
    int st = 0;
    waitpid(pid, &st, 0);
    cut.code = SL_OK;
    snprintf(cut.why, sizeof cut.why, "%d connections %s", n,
             WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "opened" : "NOT all opened");
    cut.after_ms = mono_ms() - t0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- main */

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++)
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    putchar('"');
}

int main(int argc, char **argv)
{
    const char *attack = NULL, *acert = NULL, *akey = NULL, *flood_src = "127.0.0.2";
    const char *until = NULL;
    int only_flood = 0;
    int flood_n = 1100;
    double window_ms = 4000;
    static const struct option opts[] = {{"endpoint", required_argument, 0, 'e'},
                                         {"ca", required_argument, 0, 'a'},
                                         {"cert", required_argument, 0, 'c'},
                                         {"key", required_argument, 0, 'k'},
                                         {"attacker-cert", required_argument, 0, 'C'},
                                         {"attacker-key", required_argument, 0, 'K'},
                                         {"victim-cert", required_argument, 0, 'v'},
                                         {"victim-key", required_argument, 0, 'V'},
                                         {"attack", required_argument, 0, 't'},
                                         {"window-ms", required_argument, 0, 'w'},
                                         {"flood-source", required_argument, 0, 's'},
                                         {"flood", required_argument, 0, 'n'},
                                         {"until-file", required_argument, 0, 'u'},
                                         {"flood-only", no_argument, 0, 'F'},
                                         {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'e':
            endpoint = optarg;
            break;
        case 'a':
            ca = optarg;
            break;
        case 'c':
            nb.cert = optarg;
            break;
        case 'k':
            nb.key = optarg;
            break;
        case 'C':
            acert = optarg;
            break;
        case 'K':
            akey = optarg;
            break;
        case 'v':
            vi.cert = optarg;
            break;
        case 'V':
            vi.key = optarg;
            break;
        case 't':
            attack = optarg;
            break;
        case 'w':
            window_ms = atof(optarg);
            break;
        case 's':
            flood_src = optarg;
            break;
        case 'n':
            flood_n = atoi(optarg);
            break;
        case 'u':
            until = optarg;
            break;
        case 'F':
            only_flood = 1;
            break;
        default:
            fprintf(stderr, "usage: sluice-stall-probe --endpoint EP --ca CA --cert C --key K "
                            "--attacker-cert C --attacker-key K [--victim-cert C --victim-key K]"
                            " --attack none|announce|trickle|noread|flood [--window-ms MS]"
                            " [--flood-source IP] [--flood N] [--until-file PATH]\n");
            return 2;
        }
    }
    if (only_flood && endpoint)
        return flood_only(flood_src, flood_n, window_ms);
    if (!endpoint || !ca || !nb.cert || !nb.key || !acert || !akey || !attack)
        return fprintf(stderr, "sluice-stall-probe: missing arguments (--help)\n"), 2;
    pthread_create(&nb.th, NULL, neighbour, NULL);
    pthread_create(&mc.th, NULL, machine, NULL);
    if (vi.cert)
        pthread_create(&vi.th, NULL, victim, NULL);
    for (int i = 0; i < 1000 && (!nb.ready || (vi.cert && !vi.ready)); i++)
        usleep(10000);
    usleep(300000); /* the neighbour's normal round trips first */
    double attack_start = mono_ms();
    int rc;
    if (!strcmp(attack, "none")) {
        usleep((useconds_t)(window_ms * 1000));
        rc = 0;
    } else if (!strcmp(attack, "noread"))
        rc = noread_attack(acert, akey, window_ms, until);
    else if (!strcmp(attack, "flood"))
        rc = flood_attack("/proc/self/exe", acert, akey, flood_src, flood_n, window_ms);
    else
        rc = bulk_attack(acert, akey, !strcmp(attack, "trickle"), window_ms);
    double attack_end = mono_ms();
    usleep(300000);
    nb.stop = 1;
    pthread_join(nb.th, NULL);
    pthread_join(mc.th, NULL);
    if (vi.cert)
        pthread_join(vi.th, NULL);
    qsort(nb.rtt, (size_t)nb.rounds, sizeof nb.rtt[0], cmp);
    printf("{\"attack\":");
    json_str(attack);
    printf(",\"attack_start_ms\":%.3f,\"attack_end_ms\":%.3f", attack_start, attack_end);
    printf(",\"neighbour\":{\"rounds\":%d,\"worst_ms\":%.3f,\"median_ms\":%.3f,\"failed\":%s,"
           "\"why\":",
           nb.rounds, nb.rounds ? nb.rtt[nb.rounds - 1] : -1.0,
           nb.rounds ? nb.rtt[nb.rounds / 2] : -1.0, nb.failed ? "true" : "false");
    json_str(nb.why);
    printf(",\"worst_at_ms\":%.3f", nb.worst_at);
    printf("},\"machine\":{\"worst_late_ms\":%.3f}", mc.worst_late_ms);
    printf(",\"cut\":{\"code\":");
    json_str(sl_code_name(cut.code));
    printf(",\"why\":");
    json_str(cut.why);
    printf(",\"after_ms\":%.3f}", cut.after_ms);
    printf(",\"fresh\":[");
    for (int i = 0; i < fresh.n; i++) {
        printf("%s{\"source\":", i ? "," : "");
        json_str(fresh.s[i].src);
        printf(",\"ms\":%.3f,\"code\":", fresh.s[i].ms);
        json_str(sl_code_name(fresh.s[i].code));
        printf(",\"why\":");
        json_str(fresh.s[i].why);
        printf("}");
    }
    printf("]");
    if (vi.cert) {
        printf(",\"victim\":{\"ended_ms\":%.3f,\"code\":", vi.ended_ms);
        json_str(sl_code_name(vi.code));
        printf(",\"why\":");
        json_str(vi.why);
        printf("}");
    }
    printf("}\n");
    return rc == 0 ? 0 : 1;
}
