/* Bulk lanes, the guest's side. After the direct channel opened (connection.c), the guest opens
 * the lanes the worker offered (SessionAccept.lane_ports/lane_tickets, as many as its
 * SessionOpen.lanes asked: $SLUICE_LANES), each a channel of its own presenting its own ticket,
 * each served by a thread of its own. A host-to-device copy of SL_FE_LANE_MIN_BULK or more
 * announces its bulk as k pieces (Call.lane_pieces) and the lane threads encrypt the pieces
 * straight from the program's memory, in parallel; a device-to-host copy asks for its reply's
 * bulk on the lanes (Call.reply_on_lanes) and the lane threads decrypt the pieces straight into
 * the destination while the thread that reads the reply waits for them (sl_fe_lanes_recv). A
 * lane that fails fails the session (the worker ends it with the lane's reason): the bytes of a
 * piece cannot be sent again on another lane. */
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "call/lanes.h"
#include "component.h"
#include "sluice/lanes.h"
#include "sluice/log.h"

#define LANE_CLAIM_WAIT_MS 10000 /* a reply's piece may come before the reply */
#define LANE_RECV_WAIT_MS  60000 /* a reply's pieces, at most */

struct send_group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned left;
    sl_error err; /* the first failure, code 0: none */
};

struct send_job {
    struct send_job *next;
    struct send_group *g;
    const struct iovec *in;
    size_t n;
    uint64_t seq, off, len;
    uint32_t piece;
};

struct fe_lane {
    unsigned idx;
    sl_client *c;
    pthread_t th;
    int started, efd;
    pthread_mutex_t mu;
    struct send_job *head, *tail;
};

static struct fe_lane g_lane[SL_LANE_MAX];
static unsigned g_n, g_opened; /* lanes open now; lanes the session had (SLUICE_STATS) */
static sl_lane_asm *g_out;     /* the pieces of replies */
static atomic_int g_stop, g_broken;
static atomic_ullong g_sent, g_sent_bytes, g_got, g_got_bytes; /* pieces (SLUICE_STATS) */

unsigned sl_fe_lanes_active(void)
{
    return atomic_load(&g_broken) ? 0 : g_n;
}

static void group_done(struct send_group *g, const sl_error *e)
{
    pthread_mutex_lock(&g->mu);
    if (e && !g->err.code)
        g->err = *e;
    if (--g->left == 0)
        pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* A lane failed: what waits for reply pieces wakes with the reason; later copies take the
 * direct channel's path no more (the session is ending: the worker ends it too). */
static void lane_broken(struct fe_lane *ln, const sl_error *e)
{
    char why[SL_ERROR_MSG_MAX + 32];
    snprintf(why, sizeof why, "bulk lane %u: %s", ln->idx, e->msg);
    if (!atomic_exchange(&g_broken, 1) && !atomic_load(&g_stop))
        sl_log(SL_LOG_ERR, SL_FE_COMPONENT, "%s", why);
    sl_lane_asm_fail(g_out, e->code ? e->code : SL_ERR_CLOSED, why);
}

/* The segments of [off, off + len) of the n segments in. */
static size_t cut(const struct iovec *in, size_t n, uint64_t off, uint64_t len, struct iovec *out,
                  size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < n && len && k < max; i++) {
        if (off >= in[i].iov_len) {
            off -= in[i].iov_len;
            continue;
        }
        size_t take = in[i].iov_len - (size_t)off;
        if (take > len)
            take = (size_t)len;
        out[k++] = (struct iovec){(uint8_t *)in[i].iov_base + off, take};
        len -= take;
        off = 0;
    }
    return len ? 0 : k;
}

static void lane_send(struct fe_lane *ln, struct send_job *j)
{
    sl_error e = {0};
    struct iovec iov[8];
    size_t niov = cut(j->in, j->n, j->off, j->len, iov, 8);
    Sluice__Wire__LaneBulk lb = SLUICE__WIRE__LANE_BULK__INIT;
    lb.seq = j->seq;
    lb.piece = j->piece;
    lb.offset = j->off;
    lb.length = j->len;
    Sluice__Wire__ClientMessage m = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_LANE;
    m.lane = &lb;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (atomic_load(&g_broken))
        sl_fail(&e, SL_ERR_CLOSED, "a bulk lane of the session failed");
    else if (!niov)
        sl_fail(&e, SL_ERR_INVALID, "piece %u of seq %llu is outside its bulk", j->piece,
                (unsigned long long)j->seq);
    else if (sl_wire_encode_client(&m, NULL, &buf, &len, &e) == SL_OK &&
             sl_client_send(ln->c, buf, len, iov, niov, &e) == SL_OK)
        e.code = SL_OK;
    free(buf);
    if (e.code && !atomic_load(&g_broken))
        lane_broken(ln, &e);
    if (!e.code) {
        atomic_fetch_add(&g_sent, 1);
        atomic_fetch_add(&g_sent_bytes, j->len);
    }
    group_done(j->g, e.code ? &e : NULL);
}

/* A message from the worker on this lane: a reply's piece, decrypted into its destination, or
 * the lane's end. */
static int lane_recv(struct fe_lane *ln)
{
    const void *msg;
    size_t len;
    uint64_t blen = 0;
    sl_error e;
    sl_code sc = sl_client_recv(ln->c, &msg, &len, &blen, 0, &e);
    if (sc == SL_ERR_TIMEOUT)
        return 0;
    Sluice__Wire__ServerMessage *m = NULL;
    if (sc == SL_OK && sl_wire_decode_server(msg, len, NULL, &m, &e) == SL_OK) {
        if (m->kind_case == SLUICE__WIRE__SERVER_MESSAGE__KIND_CLOSE)
            sl_fail(&e, m->close->reason ? (sl_code)m->close->reason : SL_ERR_CLOSED, "%s",
                    m->close->detail && *m->close->detail ? m->close->detail : "closed");
        else if (m->kind_case != SLUICE__WIRE__SERVER_MESSAGE__KIND_LANE || m->lane->length != blen)
            sl_fail(&e, SL_ERR_PROTOCOL, "a lane carries LaneBulk messages and their bytes only");
        else {
            uint8_t *dst = NULL;
            Sluice__Wire__LaneBulk lb = *m->lane;
            if (sl_lane_asm_claim(g_out, ln->idx, lb.seq, lb.piece, lb.offset, lb.length,
                                  LANE_CLAIM_WAIT_MS, &dst, &e) == SL_OK &&
                sl_client_recv_bulk(ln->c, dst, (size_t)lb.length, &e) == SL_OK) {
                sl_lane_asm_arrived(g_out, lb.seq, lb.piece);
                atomic_fetch_add(&g_got, 1);
                atomic_fetch_add(&g_got_bytes, lb.length);
                sl_wire_free_server(m);
                return 1;
            }
        }
    }
    if (m)
        sl_wire_free_server(m);
    lane_broken(ln, &e);
    return -1;
}

static void *lane_main(void *p)
{
    struct fe_lane *ln = p;
    char name[16];
    snprintf(name, sizeof name, "sluice-lane-%u", ln->idx);
    pthread_setname_np(pthread_self(), name);
    while (!atomic_load(&g_stop)) {
        uint64_t v;
        ssize_t r = read(ln->efd, &v, sizeof v);
        (void)r;
        pthread_mutex_lock(&ln->mu);
        struct send_job *j = ln->head;
        ln->head = ln->tail = NULL;
        pthread_mutex_unlock(&ln->mu);
        int busy = j != NULL;
        while (j) {
            struct send_job *next = j->next; /* j lives on the sender's stack until done */
            lane_send(ln, j);
            j = next;
        }
        if (atomic_load(&g_broken)) { /* the lane is done: sends fail at once */
            if (!busy) {
                struct pollfd pf = {.fd = ln->efd, .events = POLLIN};
                poll(&pf, 1, 100);
            }
            continue;
        }
        while (sl_client_has_input(ln->c)) {
            int got = lane_recv(ln);
            if (got <= 0)
                break;
            busy = 1;
        }
        if (busy || atomic_load(&g_broken))
            continue;
        struct pollfd pf[4];
        int fds[3];
        int nf = sl_client_fds(ln->c, fds, 3);
        for (int i = 0; i < nf; i++)
            pf[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        pf[nf] = (struct pollfd){.fd = ln->efd, .events = POLLIN};
        poll(pf, (nfds_t)nf + 1, 100);
    }
    return NULL;
}

/* The lanes end when the program exits, before what exit() runs after its handlers: OpenSSL's
 * own cleanup and LeakSanitizer's check come from handlers registered earlier (they run later),
 * the library's destructor (connection.c) only after all of them. A lane thread must not be
 * inside OpenSSL when OpenSSL is cleaned up, and its thread-local state goes with the thread. */
static void lanes_at_exit(void)
{
    sl_fe_lanes_close();
}

static void register_at_exit(void)
{
    atexit(lanes_at_exit); /* from a shared object: run at dlclose too (__cxa_atexit) */
}

sl_code sl_fe_lanes_start(sl_client **clients, unsigned n, sl_error *err)
{
    static pthread_once_t at_exit_once = PTHREAD_ONCE_INIT;
    sl_error e;
    if (n < 2 || n > SL_LANE_MAX) {
        for (unsigned i = 0; i < n; i++)
            sl_client_close(clients[i]);
        return sl_fail(err, SL_ERR_INVALID, "%u lanes (2 to %u)", n, SL_LANE_MAX);
    }
    for (unsigned i = 0; i < n; i++) {
        struct fe_lane *ln = &g_lane[i];
        ln->idx = i;
        ln->c = clients[i];
        ln->efd = -1;
        pthread_mutex_init(&ln->mu, NULL);
    }
    g_n = n;
    g_opened = n;
    if (sl_lane_asm_new(n, &g_out, &e) != SL_OK)
        goto fail;
    for (unsigned i = 0; i < n; i++) {
        g_lane[i].efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (g_lane[i].efd < 0) {
            sl_fail(&e, SL_ERR_IO, "no eventfd");
            goto fail;
        }
    }
    for (unsigned i = 0; i < n; i++) {
        if (pthread_create(&g_lane[i].th, NULL, lane_main, &g_lane[i]) != 0) {
            sl_fail(&e, SL_ERR_IO, "no thread for lane %u", i);
            goto fail;
        }
        g_lane[i].started = 1;
    }
    pthread_once(&at_exit_once, register_at_exit);
    /* ZeroMQ receives each frame of a lane (256 KiB) into memory of its own from malloc; with
     * glibc's dynamic thresholds a quarter of them landed in pages just given back to the
     * kernel (a fault per 4 KiB, 35,000 per lane and 256 MiB copy: docs/performance.md). A
     * program that opened lanes keeps up to 64 MiB of freed memory in each heap instead. */
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    sl_log(SL_LOG_DEBUG, SL_FE_COMPONENT, "%u bulk lanes open to the session's worker", n);
    return SL_OK;
fail:
    *err = e;
    g_opened = 0;
    sl_fe_lanes_close();
    return e.code;
}

CUresult sl_fe_lanes_send(uint64_t seq, const struct iovec *in, size_t n, uint64_t blen, uint32_t k)
{
    struct send_job jobs[SL_LANE_MAX_PIECES];
    struct send_group g = {.left = k};
    if (!g_n || k == 0 || k > SL_LANE_MAX_PIECES)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    for (uint32_t i = 0; i < k; i++) {
        struct send_job *j = &jobs[i];
        *j = (struct send_job){.g = &g, .in = in, .n = n, .seq = seq, .piece = i};
        sl_lane_piece(blen, k, i, &j->off, &j->len);
        struct fe_lane *ln = &g_lane[sl_lane_of(seq, i, g_n)];
        pthread_mutex_lock(&ln->mu);
        if (ln->tail)
            ln->tail->next = j;
        else
            ln->head = j;
        ln->tail = j;
        pthread_mutex_unlock(&ln->mu);
        uint64_t one = 1;
        ssize_t w = write(ln->efd, &one, sizeof one);
        (void)w;
    }
    pthread_mutex_lock(&g.mu);
    while (g.left)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
    if (!g.err.code)
        return CUDA_SUCCESS;
    sl_log(SL_LOG_ERR, SL_FE_COMPONENT, "call seq %llu: its bulk could not go on the lanes: %s",
           (unsigned long long)seq, g.err.msg);
    return CUDA_ERROR_DEVICE_UNAVAILABLE;
}

sl_code sl_fe_lanes_recv(uint64_t seq, void *dst, uint64_t blen, uint32_t k, sl_error *e)
{
    if (!g_out)
        return sl_fail(e, SL_ERR_PROTOCOL, "reply seq %llu on lanes the session has not",
                       (unsigned long long)seq);
    sl_code sc = sl_lane_asm_expect(g_out, seq, dst, blen, k, e);
    if (sc == SL_OK)
        sc = sl_lane_asm_wait(g_out, seq, LANE_RECV_WAIT_MS, e);
    sl_lane_asm_forget(g_out, seq);
    if (sc != SL_OK) /* what the lanes still hold cannot be read any more */
        sl_lane_asm_fail(g_out, sc, e->msg);
    return sc;
}

void sl_fe_lanes_stats(unsigned *lanes, uint64_t *sent, uint64_t *sent_bytes, uint64_t *got,
                       uint64_t *got_bytes)
{
    *lanes = g_opened; /* also after the lanes closed at exit */
    *sent = atomic_load(&g_sent);
    *sent_bytes = atomic_load(&g_sent_bytes);
    *got = atomic_load(&g_got);
    *got_bytes = atomic_load(&g_got_bytes);
}

void sl_fe_lanes_close(void)
{
    atomic_store(&g_stop, 1);
    if (g_out)
        sl_lane_asm_fail(g_out, SL_ERR_CLOSED, "the session is closing");
    for (unsigned i = 0; i < g_n; i++) {
        struct fe_lane *ln = &g_lane[i];
        if (ln->efd >= 0) {
            uint64_t one = 1;
            ssize_t w = write(ln->efd, &one, sizeof one);
            (void)w;
        }
        if (ln->started)
            pthread_join(ln->th, NULL);
        ln->started = 0;
    }
    for (unsigned i = 0; i < g_n; i++) {
        struct fe_lane *ln = &g_lane[i];
        sl_client_close(ln->c);
        ln->c = NULL;
        if (ln->efd >= 0)
            close(ln->efd);
        ln->efd = -1;
        pthread_mutex_destroy(&ln->mu);
    }
    g_n = 0;
    sl_lane_asm_free(g_out);
    g_out = NULL;
}
