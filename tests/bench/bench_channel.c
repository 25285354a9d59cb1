/* sluice-bench-channel: latency and throughput of the TLS channel against plain ZeroMQ
 * DEALER/ROUTER, in one process: each server runs on its own thread, clients on the main
 * thread (or one thread per lane). Loopback TCP. See docs/channel.md. */
#include "pki.h"
#include "sluice/channel.h"

#include <getopt.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

static pki_ca ca;
static pki_cred srv_cred, cli_cred;
static FILE *json;
static int quick, processes, latency_only;
static sl_channel_opts chopts;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, const sl_error *e)
{
    fprintf(stderr, "sluice-bench-channel: %s: %s: %s\n", what, sl_code_name(e->code), e->msg);
    exit(1);
}

/* ---------------------------------------------------------------- TLS server thread */
typedef struct tls_srv {
    sl_server *srv;
    pid_t pid; /* --processes: the server runs in this child */
    pthread_t th;
    atomic_int stop;
    uint8_t *dest;
    size_t dest_len;
} tls_srv;

static void *tls_srv_main(void *arg)
{
    tls_srv *t = arg;
    while (!atomic_load(&t->stop)) {
        sl_server_event ev;
        sl_error err;
        if (sl_server_poll(t->srv, 50, &ev, &err) != SL_OK)
            die("server poll", &err);
        if (ev.kind != SL_EV_MESSAGE)
            continue;
        if (ev.bulk_len) {
            if (ev.bulk_len > t->dest_len) {
                free(t->dest);
                t->dest = malloc(ev.bulk_len);
                t->dest_len = ev.bulk_len;
            }
            if (sl_server_recv_bulk(t->srv, ev.peer, t->dest, ev.bulk_len, &err))
                die("server recv_bulk", &err);
            sl_server_send(t->srv, ev.peer, "ok", 2, NULL, 0, &err);
        } else {
            uint8_t copy[256];
            size_t n = ev.len < sizeof copy ? ev.len : sizeof copy;
            memcpy(copy, ev.msg, n);
            sl_server_send(t->srv, ev.peer, copy, n, NULL, 0, &err);
        }
    }
    return NULL;
}

static sl_client *tls_pair(tls_srv *t)
{
    sl_tls_config scfg = {.mode = SL_TLS_MUTUAL,
                          .ca_pem = ca.pem,
                          .cert_pem = srv_cred.cert_pem,
                          .key_pem = srv_cred.key_pem};
    sl_tls_config ccfg = {.mode = SL_TLS_MUTUAL,
                          .ca_pem = ca.pem,
                          .cert_pem = cli_cred.cert_pem,
                          .key_pem = cli_cred.key_pem};
    sl_error err;
    memset(t, 0, sizeof *t);
    char endpoint[128] = "";
    int fds[2] = {-1, -1};
    if (processes && (pipe(fds) != 0 || (t->pid = fork()) < 0)) {
        perror("fork");
        exit(1);
    }
    if (!processes || t->pid == 0) { /* the server: a thread here, or the whole child */
        if (sl_server_bind("tcp://127.0.0.1:*", &scfg, &chopts, NULL, &t->srv, &err))
            die("bind", &err);
        snprintf(endpoint, sizeof endpoint, "%s", sl_server_endpoint(t->srv));
        if (processes) {
            if (write(fds[1], endpoint, sizeof endpoint) != (ssize_t)sizeof endpoint)
                _exit(1);
            tls_srv_main(t); /* until SIGTERM */
            _exit(0);
        }
        pthread_create(&t->th, NULL, tls_srv_main, t);
    } else if (read(fds[0], endpoint, sizeof endpoint) != (ssize_t)sizeof endpoint) {
        fprintf(stderr, "sluice-bench-channel: the server process did not start\n");
        exit(1);
    }
    if (processes) {
        close(fds[0]);
        close(fds[1]);
    }
    sl_client *c;
    if (sl_client_connect(endpoint, &ccfg, &chopts, &c, &err))
        die("connect", &err);
    return c;
}

static void tls_unpair(tls_srv *t, sl_client *c)
{
    sl_client_close(c);
    if (t->pid > 0) {
        kill(t->pid, SIGTERM);
        waitpid(t->pid, NULL, 0);
        return;
    }
    atomic_store(&t->stop, 1);
    pthread_join(t->th, NULL);
    sl_server_close(t->srv);
    free(t->dest);
}

/* ---------------------------------------------------------------- plain ZeroMQ server thread */
typedef struct zmq_srv {
    void *ctx, *sock;
    pid_t pid; /* --processes: the server runs in this child */
    pthread_t th;
    atomic_int stop;
    char endpoint[128];
    uint8_t *dest;
    size_t dest_len;
} zmq_srv;

/* protocol: [rid][header: 8-byte bulk length, rest small] then, if bulk, [rid][bulk]; the
 * bulk is copied into dest (the copy the TLS side's decryption does too); ack "ok". */
static void *zmq_srv_main(void *arg)
{
    zmq_srv *z = arg;
    int t = 50;
    zmq_setsockopt(z->sock, ZMQ_RCVTIMEO, &t, sizeof t);
    while (!atomic_load(&z->stop)) {
        uint8_t rid[64], hdr[256];
        int rl = zmq_recv(z->sock, rid, sizeof rid, 0);
        if (rl < 0)
            continue;
        int hl = zmq_recv(z->sock, hdr, sizeof hdr, 0);
        if (hl < 8)
            continue;
        uint64_t bulk;
        memcpy(&bulk, hdr, 8);
        if (bulk) {
            if (bulk > z->dest_len) {
                free(z->dest);
                z->dest = malloc(bulk);
                z->dest_len = bulk;
            }
            zmq_msg_t m;
            zmq_msg_init(&m);
            while (zmq_recv(z->sock, rid, sizeof rid, 0) < 0) /* RCVTIMEO: keep waiting */
                ;
            while (zmq_msg_recv(&m, z->sock, 0) < 0)
                ;
            memcpy(z->dest, zmq_msg_data(&m), zmq_msg_size(&m));
            zmq_msg_close(&m);
            zmq_send(z->sock, rid, (size_t)rl, ZMQ_SNDMORE);
            zmq_send(z->sock, "ok", 2, 0);
        } else { /* zmq_recv truncates: echo what was kept */
            zmq_send(z->sock, rid, (size_t)rl, ZMQ_SNDMORE);
            zmq_send(z->sock, hdr, (size_t)hl < sizeof hdr ? (size_t)hl : sizeof hdr, 0);
        }
    }
    return NULL;
}

static void *zmq_pair(zmq_srv *z, void **cctx)
{
    memset(z, 0, sizeof *z);
    int fds[2] = {-1, -1};
    if (processes && (pipe(fds) != 0 || (z->pid = fork()) < 0)) {
        perror("fork");
        exit(1);
    }
    if (!processes || z->pid == 0) { /* the server: a thread here, or the whole child */
        z->ctx = zmq_ctx_new();
        z->sock = zmq_socket(z->ctx, ZMQ_ROUTER);
        zmq_bind(z->sock, "tcp://127.0.0.1:*");
        size_t l = sizeof z->endpoint;
        zmq_getsockopt(z->sock, ZMQ_LAST_ENDPOINT, z->endpoint, &l);
        if (processes) {
            if (write(fds[1], z->endpoint, sizeof z->endpoint) != (ssize_t)sizeof z->endpoint)
                _exit(1);
            zmq_srv_main(z); /* until SIGTERM */
            _exit(0);
        }
        pthread_create(&z->th, NULL, zmq_srv_main, z);
    } else if (read(fds[0], z->endpoint, sizeof z->endpoint) != (ssize_t)sizeof z->endpoint) {
        fprintf(stderr, "sluice-bench-channel: the server process did not start\n");
        exit(1);
    }
    if (processes) {
        close(fds[0]);
        close(fds[1]);
    }
    *cctx = zmq_ctx_new();
    void *d = zmq_socket(*cctx, ZMQ_DEALER);
    zmq_connect(d, z->endpoint);
    return d;
}

static void zmq_unpair(zmq_srv *z, void *cctx, void *d)
{
    int zero = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(d);
    zmq_ctx_term(cctx);
    if (z->pid > 0) {
        kill(z->pid, SIGTERM);
        waitpid(z->pid, NULL, 0);
        return;
    }
    atomic_store(&z->stop, 1);
    pthread_join(z->th, NULL);
    zmq_setsockopt(z->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(z->sock);
    zmq_ctx_term(z->ctx);
    free(z->dest);
}

static void nofree(void *data, void *hint)
{
    (void)data;
    (void)hint;
}

/* One client of either transport with its server: the TLS channel (tls) or plain ZeroMQ. */
typedef struct pair {
    int tls;
    tls_srv ts;
    zmq_srv zs;
    void *cctx, *d; /* plain ZeroMQ: context and DEALER */
    sl_client *c;   /* TLS channel */
} pair;

static void pair_open(pair *p, int tls)
{
    memset(p, 0, sizeof *p);
    p->tls = tls;
    if (tls)
        p->c = tls_pair(&p->ts);
    else
        p->d = zmq_pair(&p->zs, &p->cctx);
}

static void pair_close(pair *p)
{
    if (p->tls)
        tls_unpair(&p->ts, p->c);
    else
        zmq_unpair(&p->zs, p->cctx, p->d);
}

/* one round: header (+bulk), wait for the answer */
static void zmq_round(void *d, const uint8_t *msg, size_t len, const uint8_t *bulk, uint64_t blen)
{
    uint8_t hdr[256];
    memcpy(hdr, &blen, 8);
    memcpy(hdr + 8, msg, len);
    zmq_send(d, hdr, 8 + len, 0);
    if (blen) {
        zmq_msg_t m;
        zmq_msg_init_data(&m, (void *)bulk, blen, nofree, NULL);
        zmq_msg_send(&m, d, 0);
    }
    uint8_t back[256];
    zmq_recv(d, back, sizeof back, 0);
}

static void tls_round(sl_client *c, const uint8_t *msg, size_t len, const uint8_t *bulk,
                      uint64_t blen)
{
    sl_error err;
    struct iovec iov = {(void *)bulk, blen};
    if (sl_client_send(c, msg, len, &iov, blen ? 1 : 0, &err))
        die("send", &err);
    const void *m;
    size_t l;
    if (sl_client_recv(c, &m, &l, NULL, 60000, &err))
        die("recv", &err);
}

/* ---------------------------------------------------------------- measurements */
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void latency(void)
{
    int n = quick ? 2000 : 20000;
    double *t = malloc(sizeof(double) * (size_t)n);
    uint8_t msg[64];
    memset(msg, 0x5a, sizeof msg);
    printf("\n%-28s %10s %10s %10s\n", "round trip, 64 B message", "p50 us", "p99 us", "mean us");
    double p50[2] = {0};
    for (int tls = 0; tls < 2; tls++) {
        pair pr;
        pair_open(&pr, tls);
        sl_client *c = pr.c;
        void *d = pr.d;
        for (int i = 0; i < n / 10; i++) /* warm up */
            tls ? tls_round(c, msg, sizeof msg, NULL, 0) : zmq_round(d, msg, sizeof msg, NULL, 0);
        double sum = 0;
        for (int i = 0; i < n; i++) {
            double t0 = now_s();
            tls ? tls_round(c, msg, sizeof msg, NULL, 0) : zmq_round(d, msg, sizeof msg, NULL, 0);
            t[i] = (now_s() - t0) * 1e6;
            sum += t[i];
        }
        qsort(t, (size_t)n, sizeof *t, cmp_d);
        p50[tls] = t[n / 2];
        const char *name = tls ? "TLS channel" : "plain ZeroMQ";
        printf("%-28s %10.1f %10.1f %10.1f\n", name, t[n / 2], t[n * 99 / 100], sum / n);
        if (json)
            fprintf(json,
                    "{\"bench\":\"latency\",\"transport\":\"%s\",\"size\":64,\"n\":%d,"
                    "\"p50_us\":%.2f,\"p99_us\":%.2f,\"mean_us\":%.2f}\n",
                    tls ? "tls" : "zmq", n, t[n / 2], t[n * 99 / 100], sum / n);
        pair_close(&pr);
    }
    printf("%-28s %9.1f%%\n", "TLS overhead on p50", (p50[1] / p50[0] - 1) * 100);
    free(t);
}

/* What a send costs the sending thread (the frontend sends its frames of queued calls on the
 * program's thread): batches of 32 messages of 1 KiB sent back to back, then their answers;
 * only the sends are timed. */
static void send_cost(void)
{
    int rounds = quick ? 200 : 2000;
    enum { BATCH = 32, LEN = 1024 };
    uint8_t msg[8 + LEN] = {0}; /* plain ZeroMQ: 8 bytes of bulk length (0), then the message */
    memset(msg + 8, 0x5a, LEN);
    printf("\n%-28s %10s\n", "send 1 KiB, no wait", "mean us");
    for (int tls = 0; tls < 2; tls++) {
        pair pr;
        pair_open(&pr, tls);
        sl_client *c = pr.c;
        void *d = pr.d;
        double sum = 0;
        sl_error err;
        for (int r = 0; r < rounds; r++) {
            double t0 = now_s();
            for (int i = 0; i < BATCH; i++) {
                if (!tls)
                    zmq_send(d, msg, sizeof msg, 0);
                else if (sl_client_send(c, msg + 8, LEN, NULL, 0, &err))
                    die("send", &err);
            }
            sum += now_s() - t0;
            for (int i = 0; i < BATCH; i++) {
                uint8_t back[256];
                const void *m;
                size_t l;
                if (!tls)
                    zmq_recv(d, back, sizeof back, 0);
                else if (sl_client_recv(c, &m, &l, NULL, 60000, &err))
                    die("recv", &err);
            }
        }
        double mean = sum / rounds / BATCH * 1e6;
        printf("%-28s %10.2f\n", tls ? "TLS channel" : "plain ZeroMQ", mean);
        if (json)
            fprintf(json,
                    "{\"bench\":\"send_cost\",\"transport\":\"%s\",\"size\":%d,"
                    "\"mean_us\":%.3f}\n",
                    tls ? "tls" : "zmq", LEN, mean);
        pair_close(&pr);
    }
}

static double bulk_rate(int tls, sl_client *c, void *d, const uint8_t *buf, size_t size)
{
    size_t target = quick ? (64u << 20) : (1u << 30);
    int reps = (int)(target / size);
    if (reps < 3)
        reps = 3;
    uint8_t msg[64] = {0};
    tls ? tls_round(c, msg, sizeof msg, buf, size) : zmq_round(d, msg, sizeof msg, buf, size);
    double t0 = now_s();
    for (int i = 0; i < reps; i++)
        tls ? tls_round(c, msg, sizeof msg, buf, size) : zmq_round(d, msg, sizeof msg, buf, size);
    return (double)size * reps / (now_s() - t0) / 1e9;
}

static void throughput(void)
{
    static const size_t sizes[] = {4u << 10, 64u << 10, 1u << 20, 16u << 20, 256u << 20};
    size_t max = quick ? (64u << 20) : (256u << 20);
    uint8_t *buf = malloc(max);
    memset(buf, 0xa5, max);
    printf("\n%-28s %10s %10s %10s\n", "bulk, message + bytes", "TLS GB/s", "ZMQ GB/s", "ratio");
    tls_srv ts;
    zmq_srv zs;
    void *cctx, *d = zmq_pair(&zs, &cctx);
    sl_client *c = tls_pair(&ts);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i] > max)
            continue;
        double g[2];
        for (int tls = 0; tls < 2; tls++)
            g[tls] = bulk_rate(tls, c, d, buf, sizes[i]);
        char label[32];
        snprintf(label, sizeof label, "%zu KiB", sizes[i] >> 10);
        printf("%-28s %10.2f %10.2f %10.2f\n", label, g[1], g[0], g[1] / g[0]);
        if (json)
            fprintf(json, "{\"bench\":\"bulk\",\"size\":%zu,\"tls_gbps\":%.3f,\"zmq_gbps\":%.3f}\n",
                    sizes[i], g[1], g[0]);
    }
    sl_channel_stats st;
    sl_client_stats(c, &st);
    printf("%-28s %10llu\n", "ciphertext buffer grows", (unsigned long long)st.buffer_grows);
    tls_unpair(&ts, c);
    zmq_unpair(&zs, cctx, d);
    free(buf);
}

typedef struct lane {
    size_t size;
    int reps;
    pthread_barrier_t *bar;
    sl_client *c;
    tls_srv ts;
    uint8_t *buf;
} lane;

static void *lane_main(void *arg)
{
    lane *l = arg;
    uint8_t msg[64] = {0};
    pthread_barrier_wait(l->bar);
    for (int i = 0; i < l->reps; i++)
        tls_round(l->c, msg, sizeof msg, l->buf, l->size);
    return NULL;
}

static void lanes(void)
{
    size_t size = quick ? (16u << 20) : (64u << 20);
    int reps = quick ? 4 : 16;
    printf("\n%-28s %10s %10s\n", "lanes (TLS, parallel bulk)", "GB/s", "per lane");
    static const int counts[] = {1, 2, 4};
    for (int k = 0; k < 3; k++) {
        int n = counts[k];
        lane *L = calloc((size_t)n, sizeof *L);
        pthread_t *th = calloc((size_t)n, sizeof *th);
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)n + 1);
        for (int i = 0; i < n; i++) {
            L[i] = (lane){.size = size, .reps = reps, .bar = &bar, .buf = malloc(size)};
            memset(L[i].buf, i, size);
            L[i].c = tls_pair(&L[i].ts);
            pthread_create(&th[i], NULL, lane_main, &L[i]);
        }
        pthread_barrier_wait(&bar);
        double t0 = now_s();
        for (int i = 0; i < n; i++)
            pthread_join(th[i], NULL);
        double g = (double)size * reps * n / (now_s() - t0) / 1e9;
        printf("%-28d %10.2f %10.2f\n", n, g, g / n);
        if (json)
            fprintf(json, "{\"bench\":\"lanes\",\"lanes\":%d,\"size\":%zu,\"gbps\":%.3f}\n", n,
                    size, g);
        for (int i = 0; i < n; i++) {
            tls_unpair(&L[i].ts, L[i].c);
            free(L[i].buf);
        }
        pthread_barrier_destroy(&bar);
        free(L);
        free(th);
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice-bench-channel [--quick] [--processes] [--latency] [--json FILE]\n"
               "  Loopback TCP, one process, server threads. Measures 64 B round trip (TLS\n"
               "  channel vs plain ZeroMQ DEALER/ROUTER), bulk throughput for 4 KiB..256 MiB,\n"
               "  and 1/2/4 parallel TLS lanes.\n"
               "  --quick      fewer iterations, bulk up to 64 MiB\n"
               "  --processes  each server in a process of its own (the floor between two\n"
               "               processes, as a guest and its backend)\n"
               "  --latency    the round trips only\n"
               "  --json FILE  also write one JSON object per result line to FILE\n"
               "  --chunk KIB  bulk chunk (plaintext per ZeroMQ frame), default 256\n"
               "  --hwm N      ZeroMQ high-water mark in frames, default 64\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"quick", no_argument, 0, 'q'},     {"json", required_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},      {"chunk", required_argument, 0, 'c'},
        {"hwm", required_argument, 0, 'w'}, {"processes", no_argument, 0, 'p'},
        {"latency", no_argument, 0, 'l'},   {0, 0, 0, 0}};
    int o;
    sl_channel_opts_default(&chopts);
    while ((o = getopt_long(argc, argv, "qj:hc:w:pl", opts, NULL)) != -1) {
        if (o == 'p') {
            processes = 1;
        } else if (o == 'l') {
            latency_only = 1;
        } else if (o == 'c') {
            chopts.chunk_size = (size_t)atol(optarg) << 10;
            if (chopts.max_frame < chopts.chunk_size + (128u << 10))
                chopts.max_frame = chopts.chunk_size + (128u << 10);
        } else if (o == 'w') {
            chopts.hwm = atoi(optarg);
        } else if (o == 'q') {
            quick = 1;
        } else if (o == 'j') {
            if (!(json = fopen(optarg, "w"))) {
                perror(optarg);
                return 2;
            }
        } else {
            usage(o == 'h' ? stdout : stderr);
            return o == 'h' ? 0 : 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pki_ca_new(&ca, "bench CA") ||
        pki_issue(&ca, "localhost", NULL, 1, -60, 86400, &srv_cred) ||
        pki_issue(&ca, "00000000-0000-4000-8000-000000000000", "bench", 0, -60, 86400, &cli_cred)) {
        fprintf(stderr, "sluice-bench-channel: cannot make the test PKI\n");
        return 1;
    }
    printf("sluice-bench-channel%s: loopback TCP, %s; TLS 1.3 "
           "TLS_AES_128_GCM_SHA256, chunk %zu KiB, hwm %d\n",
           quick ? " --quick" : "",
           processes ? "servers in processes of their own" : "one process, server threads",
           chopts.chunk_size >> 10, chopts.hwm);
    latency();
    if (!latency_only) {
        send_cost();
        throughput();
        lanes();
    }
    if (json)
        fclose(json);
    pki_cred_free(&srv_cred);
    pki_cred_free(&cli_cred);
    pki_ca_free(&ca);
    return 0;
}
