/* The parent <-> session worker IPC.
 *
 * Parent <-> worker: a SOCK_SEQPACKET socketpair carrying a byte stream of messages
 * (be_ipc_hdr, then msg_len bytes, then bulk_len bytes), cut into records of at most 64 KiB.
 * Parent -> worker: BE_IPC_MSG, the ClientMessage bytes the parent decoded and checked (CallFrame
 * or CallbackDone) and the calls' bulk, each call's at a 16-byte aligned offset; the worker
 * decodes and checks them again. Worker ->
 * parent: BE_IPC_SEND (an encoded ServerMessage and its bulk, for the guest), BE_IPC_CLOSE
 * (end the session: code, reason) and BE_IPC_USAGE (an encoded UsageRecord, accounting.c). EOF
 * on the socket ends the worker (the parent shut its side down: the worker sends its final
 * usage record, frees everything and exits) or tells the parent that the worker is gone. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/ipc.h"
#include "bounds.h"
#include "session/spin.h"
#include "sluice/wire.h"

static void rx_close_fd(struct be_ipc_rx *rx)
{
    if (rx->has_fd)
        close(rx->fd);
    rx->has_fd = 0;
    rx->fd = -1;
}

int be_ipc_rx_take_fd(struct be_ipc_rx *rx)
{
    int fd = rx->has_fd ? rx->fd : -1;
    rx->has_fd = 0;
    rx->fd = -1;
    return fd;
}

void be_ipc_rx_next(struct be_ipc_rx *rx)
{
    rx_close_fd(rx); /* one nobody took: it came with a message that carries none */
    free(rx->msg);
    free(rx->bulk);
    rx->msg = rx->bulk = NULL;
    rx->hdr_got = 0;
    rx->got = 0;
}

void be_ipc_rx_free(struct be_ipc_rx *rx)
{
    be_ipc_rx_next(rx);
    free(rx->spare);
    rx->spare = NULL;
    rx->spare_off = rx->spare_len = 0;
}

/* Feeds n bytes; returns 1 when a message is complete, -1 on a malformed header or no memory,
 * 0 when more is needed. *used: bytes consumed. */
static int rx_feed(struct be_ipc_rx *rx, const uint8_t *p, size_t n, size_t *used)
{
    size_t k = 0;
    if (rx->hdr_got < sizeof rx->hdr) {
        size_t t = sizeof rx->hdr - rx->hdr_got;
        if (t > n)
            t = n;
        memcpy((uint8_t *)&rx->hdr + rx->hdr_got, p, t);
        rx->hdr_got += t;
        k += t;
        *used = k;
        if (rx->hdr_got < sizeof rx->hdr)
            return 0;
        if (rx->hdr.msg_len > SL_WIRE_MAX_MESSAGE || rx->hdr.bulk_len > BE_MAX_QUEUED_BYTES)
            return -1;
        rx->msg = malloc(rx->hdr.msg_len + 1);
        rx->bulk = rx->hdr.bulk_len ? malloc(rx->hdr.bulk_len) : NULL;
        if (!rx->msg || (rx->hdr.bulk_len && !rx->bulk))
            return -1;
        rx->msg[rx->hdr.msg_len] = 0; /* BE_IPC_CLOSE's reason is a string */
    }
    uint64_t total = rx->hdr.msg_len + rx->hdr.bulk_len;
    while (k < n && rx->got < total) {
        uint64_t left = total - rx->got;
        size_t t = n - k < left ? n - k : (size_t)left;
        if (rx->got < rx->hdr.msg_len) {
            uint64_t m = rx->hdr.msg_len - rx->got;
            if (t > m)
                t = (size_t)m;
            memcpy(rx->msg + rx->got, p + k, t);
        } else {
            memcpy(rx->bulk + (rx->got - rx->hdr.msg_len), p + k, t);
        }
        rx->got += t;
        k += t;
    }
    *used = k;
    return rx->got == total ? 1 : 0;
}

/* One record into buf; a descriptor that came with it in *got_fd; *bad when more came than one
 * descriptor or anything else (every descriptor that came is closed then). */
static ssize_t recv_record(int fd, uint8_t *buf, int nonblock, int *got_fd, int *bad)
{
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int) * 4)];
    } ctl;
    struct iovec iov = {buf, BE_IPC_RECORD};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | (nonblock ? MSG_DONTWAIT : 0));
    if (n < 0)
        return n;
    *bad = (mh.msg_flags & MSG_CTRUNC) != 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            *bad = 1;
            continue;
        }
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int one;
            memcpy(&one, CMSG_DATA(c) + i * sizeof(int), sizeof one);
            if (*got_fd < 0) {
                *got_fd = one;
            } else {
                close(one);
                *bad = 1;
            }
        }
    }
    if (*bad && *got_fd >= 0) {
        close(*got_fd);
        *got_fd = -1;
    }
    return n;
}

int be_ipc_read(int fd, struct be_ipc_rx *rx, int nonblock)
{
    if (!rx->spare && !(rx->spare = malloc(BE_IPC_RECORD)))
        return -1;
    for (;;) {
        if (rx->spare_off < rx->spare_len) {
            size_t used = 0;
            int r = rx_feed(rx, rx->spare + rx->spare_off, rx->spare_len - rx->spare_off, &used);
            rx->spare_off += used;
            if (r != 0)
                return r;
            continue;
        }
        if (nonblock && rx->until_ns && be_now_ns() > rx->until_ns)
            rx->spent = 1;
        if (nonblock && rx->spent) {
            rx->spent = 0;
            return 2; /* the budget of this turn is spent */
        }
        int got_fd = -1, bad = 0;
        ssize_t n = recv_record(fd, rx->spare, nonblock, &got_fd, &bad);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 2; /* nothing more now */
        if (n <= 0)
            return -2;                            /* EOF or error */
        if (bad || (got_fd >= 0 && rx->has_fd)) { /* one descriptor per message at most */
            if (got_fd >= 0)
                close(got_fd);
            return -1;
        }
        if (got_fd >= 0) {
            rx->has_fd = 1;
            rx->fd = got_fd;
        }
        if (nonblock && rx->budget) {
            rx->spent = rx->budget <= (size_t)n;
            rx->budget -= rx->spent ? rx->budget : (size_t)n;
        }
        rx->spare_len = (size_t)n;
        rx->spare_off = 0;
    }
}

int be_ipc_send_fd(int fd, uint32_t type, const void *msg, size_t len, int pass_fd)
{
    struct be_ipc_hdr h = {type, 0, len, 0};
    uint8_t buf[sizeof h + 4096];
    if (len > sizeof buf - sizeof h)
        return -1;
    memcpy(buf, &h, sizeof h);
    if (len)
        memcpy(buf + sizeof h, msg, len);
    return be_ipc_sendmsg_fd(fd, buf, sizeof h + len, pass_fd, 0) == (ssize_t)(sizeof h + len) ? 0
                                                                                               : -1;
}

ssize_t be_ipc_sendmsg_fd(int fd, const void *buf, size_t len, int pass_fd, int nonblock)
{
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {(void *)buf, len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (pass_fd >= 0) {
        mh.msg_control = ctl.b;
        mh.msg_controllen = sizeof ctl.b;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof pass_fd);
    }
    for (;;) {
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | (nonblock ? MSG_DONTWAIT : 0));
        if (w < 0 && errno == EINTR)
            continue;
        return w;
    }
}

/* Blocking send of one message (worker side). */
int be_ipc_send_blocking(int fd, uint32_t type, int32_t code, const void *msg, size_t len,
                         const void *bulk, size_t blen)
{
    struct be_ipc_hdr h = {type, code, len, blen};
    const uint8_t *seg[3] = {(const uint8_t *)&h, msg, bulk};
    size_t segl[3] = {sizeof h, len, blen};
    for (int i = 0; i < 3; i++) {
        size_t off = 0;
        while (off < segl[i]) {
            size_t t = segl[i] - off < BE_IPC_RECORD ? segl[i] - off : BE_IPC_RECORD;
            ssize_t w = send(fd, seg[i] + off, t, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return -1;
            off += (size_t)w;
        }
    }
    return 0;
}
