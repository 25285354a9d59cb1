/* sluice-vm-floors: the floors under a remoted call (../shared/research/floors.md) measured
 * between two machines, here a guest and its host: a 64-byte round trip over TCP (blocking
 * and busy-polled receive) and over ZeroMQ DEALER/ROUTER (blocking and polled), and the
 * bandwidth of a 256 MiB TCP stream. Run the server on the host, the client in the guest (or
 * on the host too, over loopback, for the figures beside them).
 *
 *   sluice-vm-floors server ADDR PORT       TCP on PORT (echo, or a stream sink: the client's
 *                                           first byte says which), ZeroMQ ROUTER echo on PORT+1;
 *                                           runs until killed
 *   sluice-vm-floors client ADDR PORT [N]   N round trips each (20000) after 100 of warm-up;
 *                                           prints a table and one JSON line "FLOORS {...}"
 *
 * Exit status 0, 1 on an error (the message says which), 2 on bad usage. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#define MSG        64
#define STREAM_MIB 256
#define CHUNK      (1 << 20)

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void die(const char *what)
{
    fprintf(stderr, "sluice-vm-floors: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int full(int fd, void *buf, size_t n, int send_, int poll_)
{
    char *p = buf;
    while (n) {
        ssize_t r = send_ ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, poll_ ? MSG_DONTWAIT : 0);
        if (r < 0 && (errno == EINTR || (poll_ && errno == EAGAIN)))
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int tcp_socket(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0)
        die("socket");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    return fd;
}

static struct sockaddr_in addr_of(const char *host, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "sluice-vm-floors: %s is not an IPv4 address\n", host);
        exit(2);
    }
    return a;
}

/* ------------------------------------------------------------------ server */

struct conn {
    int fd;
};

static void *serve_conn(void *arg)
{
    int fd = ((struct conn *)arg)->fd;
    free(arg);
    char mode;
    if (full(fd, &mode, 1, 0, 0) == 0) {
        if (mode == 'e') { /* echo */
            char b[MSG];
            while (full(fd, b, MSG, 0, 0) == 0 && full(fd, b, MSG, 1, 0) == 0) {
            }
        } else { /* sink: count bytes, answer one byte at the end */
            char *b = malloc(CHUNK);
            size_t left = (size_t)STREAM_MIB << 20;
            while (b && left) {
                ssize_t r = recv(fd, b, left < CHUNK ? left : CHUNK, 0);
                if (r <= 0)
                    break;
                left -= (size_t)r;
            }
            free(b);
            full(fd, &mode, 1, 1, 0);
        }
    }
    close(fd);
    return NULL;
}

static void *tcp_server(void *arg)
{
    struct sockaddr_in *a = arg;
    int l = tcp_socket();
    if (bind(l, (struct sockaddr *)a, sizeof *a) || listen(l, 16))
        die("bind/listen (TCP)");
    for (;;) {
        int fd = accept(l, NULL, NULL);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = malloc(sizeof *c);
        pthread_t t;
        c->fd = fd;
        if (pthread_create(&t, NULL, serve_conn, c) == 0)
            pthread_detach(t);
    }
    return NULL;
}

static int server(const char *host, int port)
{
    struct sockaddr_in a = addr_of(host, port);
    pthread_t t;
    pthread_create(&t, NULL, tcp_server, &a);
    void *ctx = zmq_ctx_new(), *r = zmq_socket(ctx, ZMQ_ROUTER);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://%s:%d", host, port + 1);
    if (zmq_bind(r, ep))
        die("zmq_bind");
    fprintf(stderr, "sluice-vm-floors: serving on %s:%d (TCP), :%d (ZeroMQ)\n", host, port,
            port + 1);
    for (;;) { /* echo: identity frame, then the message */
        zmq_msg_t id, m;
        zmq_msg_init(&id);
        zmq_msg_init(&m);
        if (zmq_msg_recv(&id, r, 0) < 0 || zmq_msg_recv(&m, r, 0) < 0)
            continue;
        zmq_msg_send(&id, r, ZMQ_SNDMORE);
        zmq_msg_send(&m, r, 0);
    }
    return 0;
}

/* ------------------------------------------------------------------ client */

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct stat2 {
    double p50, p99;
};

static struct stat2 stats(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return (struct stat2){v[n / 2], v[(int)(n * 0.99)]};
}

static struct stat2 tcp_rtt(struct sockaddr_in a, int n, int poll_)
{
    int fd = tcp_socket();
    if (connect(fd, (struct sockaddr *)&a, sizeof a))
        die("connect (TCP)");
    char b[MSG] = {0}, mode = 'e';
    double *v = malloc(sizeof *v * (size_t)n);
    if (!v || full(fd, &mode, 1, 1, 0))
        die("TCP");
    for (int i = -100; i < n; i++) {
        double t0 = now_us();
        if (full(fd, b, MSG, 1, 0) || full(fd, b, MSG, 0, poll_))
            die("TCP round trip");
        if (i >= 0)
            v[i] = now_us() - t0;
    }
    close(fd);
    struct stat2 s = stats(v, n);
    free(v);
    return s;
}

static struct stat2 zmq_rtt(const char *host, int port, int n, int poll_)
{
    void *ctx = zmq_ctx_new(), *d = zmq_socket(ctx, ZMQ_DEALER);
    char ep[64], b[MSG] = {0};
    snprintf(ep, sizeof ep, "tcp://%s:%d", host, port + 1);
    if (zmq_connect(d, ep))
        die("zmq_connect");
    double *v = malloc(sizeof *v * (size_t)n);
    for (int i = -100; i < n; i++) {
        double t0 = now_us();
        if (zmq_send(d, b, MSG, 0) != MSG)
            die("zmq_send");
        int r;
        while ((r = zmq_recv(d, b, MSG, poll_ ? ZMQ_DONTWAIT : 0)) < 0 && errno == EAGAIN) {
        }
        if (r != MSG)
            die("zmq_recv");
        if (i >= 0)
            v[i] = now_us() - t0;
    }
    zmq_close(d);
    zmq_ctx_term(ctx);
    struct stat2 s = stats(v, n);
    free(v);
    return s;
}

static double stream_gbs(struct sockaddr_in a)
{
    int fd = tcp_socket();
    if (connect(fd, (struct sockaddr *)&a, sizeof a))
        die("connect (stream)");
    char mode = 's', ack;
    char *b = calloc(1, CHUNK);
    if (!b || full(fd, &mode, 1, 1, 0))
        die("stream");
    double t0 = now_us();
    for (int i = 0; i < STREAM_MIB; i++)
        if (full(fd, b, CHUNK, 1, 0))
            die("stream send");
    if (full(fd, &ack, 1, 0, 0))
        die("stream ack");
    double s = (now_us() - t0) / 1e6;
    close(fd);
    free(b);
    return (double)STREAM_MIB * (1 << 20) / s / 1e9;
}

static int client(const char *host, int port, int n)
{
    struct sockaddr_in a = addr_of(host, port);
    struct stat2 tb = tcp_rtt(a, n, 0), tp = tcp_rtt(a, n, 1);
    struct stat2 zb = zmq_rtt(host, port, n, 0), zp = zmq_rtt(host, port, n, 1);
    double gbs = stream_gbs(a);
    printf("%-58s %9s %9s\n", "64 B round trip to the server", "p50 us", "p99 us");
    printf("%-58s %9.1f %9.1f\n", "TCP (TCP_NODELAY), blocking read", tb.p50, tb.p99);
    printf("%-58s %9.1f %9.1f\n", "TCP, receiver busy-polls", tp.p50, tp.p99);
    printf("%-58s %9.1f %9.1f\n", "ZeroMQ DEALER/ROUTER over tcp, blocking recv", zb.p50, zb.p99);
    printf("%-58s %9.1f %9.1f\n", "ZeroMQ DEALER/ROUTER over tcp, recv polled", zp.p50, zp.p99);
    printf("%-58s %9.2f GB/s\n", "TCP stream, 256 MiB to the server", gbs);
    printf("FLOORS {\"n\": %d, \"tcp_block_p50_us\": %.2f, \"tcp_block_p99_us\": %.2f, "
           "\"tcp_poll_p50_us\": %.2f, \"tcp_poll_p99_us\": %.2f, \"zmq_block_p50_us\": %.2f, "
           "\"zmq_block_p99_us\": %.2f, \"zmq_poll_p50_us\": %.2f, \"zmq_poll_p99_us\": %.2f, "
           "\"stream_gb_s\": %.3f}\n",
           n, tb.p50, tb.p99, tp.p50, tp.p99, zb.p50, zb.p99, zp.p50, zp.p99, gbs);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "server"))
        return server(argv[2], atoi(argv[3]));
    if (argc >= 4 && !strcmp(argv[1], "client")) {
        int n = argc > 4 ? atoi(argv[4]) : 20000;
        if (n < 100 || n > 10000000) {
            fprintf(stderr, "sluice-vm-floors: N: 100..10000000\n");
            return 2;
        }
        return client(argv[2], atoi(argv[3]), n);
    }
    fprintf(stderr, "usage: sluice-vm-floors server ADDR PORT | client ADDR PORT [N]\n");
    return 2;
}
