/* The parent <-> session worker IPC (ipc.c): records on a SOCK_SEQPACKET socketpair, the shared
 * memory rings, reading and writing messages. */
#ifndef SLUICE_BE_DAEMON_IPC_H
#define SLUICE_BE_DAEMON_IPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum { BE_IPC_MSG = 1, BE_IPC_SEND = 2, BE_IPC_CLOSE = 3 };
/* Shared memory (one memfd per session, BE_IPC_SHM):
 * a page of counters, then the down ring (parent -> worker bulk), then the up ring (reply bulk).
 * BE_IPC_MSG_SHM / BE_IPC_SEND_SHM: as MSG / SEND, but the "bulk" is a be_ipc_shm saying where
 * the bulk lies in the ring. Each ring is FIFO: the producer owns head, the consumer stores the
 * `end` of what it has finished with in the counter page. */
enum { BE_IPC_MSG_SHM = 4, BE_IPC_SEND_SHM = 5, BE_IPC_SHM = 6 };
/* Worker -> parent: an encoded UsageRecord (accounting.c), also after the session ended. */
enum { BE_IPC_USAGE = 7 };
/* Worker -> parent: a be_ipc_token_req (ipc_tokens.h: register, resolve or drop an IPC token);
 * parent -> worker: its be_ipc_token_ans. A shareable handle's file descriptor travels with it
 * (SCM_RIGHTS on the record that holds the whole message, be_ipc_send_fd): the exporter's to
 * the parent, the parent's copy to the importer. A descriptor on any other message is closed
 * unread (be_ipc_rx_next). */
enum { BE_IPC_TOKEN = 8 };
#define BE_SHM_PAGE ((uint64_t)4096)
#define BE_SHM_DOWN ((uint64_t)160 << 20) /* two 64 MiB chunks and the small ones between */
#define BE_SHM_UP   ((uint64_t)80 << 20)
#define BE_SHM_SIZE (BE_SHM_PAGE + BE_SHM_DOWN + BE_SHM_UP)
struct be_shm_ctl {
    _Atomic uint64_t down_tail; /* the worker is done with the down ring up to here */
    uint8_t pad[56];
    _Atomic uint64_t up_tail; /* the parent is done with the up ring up to here */
};
struct be_ipc_shm {
    uint64_t off, len, end; /* ring offset, bytes, head after this slot */
};
/* A slot of len bytes (64-aligned) in a ring of cap bytes, producer at head, consumer at tail;
 * 0 and *off, *end on success, -1 when it does not fit now. */
static inline int be_ring_alloc(uint64_t head, uint64_t tail, uint64_t cap, uint64_t len,
                                uint64_t *off, uint64_t *end)
{
    if (tail > head || head - tail > cap || len == 0 || len > cap)
        return -1;
    uint64_t start = (head + 63) & ~(uint64_t)63;
    if (head == tail && start % cap) /* empty: start over at the front, whose pages are warm */
        start += cap - start % cap;
    if (start % cap + len > cap)
        start += cap - start % cap;
    if (start + len - tail > cap)
        return -1;
    *off = start % cap;
    *end = start + len;
    return 0;
}
#define BE_IPC_RECORD   ((size_t)65536)              /* largest SOCK_SEQPACKET record */
#define BE_READ_TURN    ((size_t)1 << 20)            /* read from one worker per loop turn */
#define BE_READ_TURN_NS 1000000u                     /* or for this long, whichever is less */
#define BE_IPC_ALIGN(x) (((x) + 15) & ~(uint64_t)15) /* each call's bulk starts aligned */
struct be_ipc_hdr {
    uint32_t type;
    int32_t code; /* BE_IPC_CLOSE: the sl_code */
    uint64_t msg_len, bulk_len;
};
struct be_ipc_rx {
    struct be_ipc_hdr hdr;
    size_t hdr_got;
    uint64_t got;
    uint8_t *msg, *bulk; /* the message being received (msg is NUL terminated) */
    uint8_t *spare;      /* the last record read */
    size_t spare_off, spare_len;
    size_t budget;     /* nonblocking reads: bytes this turn may still take from the socket, 0
                        * = no limit; spent: be_ipc_read answers 2 (the channel thread's other
                        * work comes first, the rest at its next turn) */
    uint64_t until_ns; /* the same, in time (CLOCK_MONOTONIC); 0 = no limit */
    int spent;
    int has_fd, fd; /* a descriptor that came with the message's records (SCM_RIGHTS) */
};
/* 1: a message is in rx (then be_ipc_rx_next); 2: nothing more now (nonblock, or the budget is
 * spent); -1: malformed; -2: EOF or error. */
int be_ipc_read(int fd, struct be_ipc_rx *rx, int nonblock);
void be_ipc_rx_next(struct be_ipc_rx *rx);
/* The descriptor that came with the message in rx (the caller owns it), or -1. */
int be_ipc_rx_take_fd(struct be_ipc_rx *rx);
void be_ipc_rx_free(struct be_ipc_rx *rx);
/* Writes one message (header, msg, bulk) to fd, waiting while the socket is full; 0 or -1. */
int be_ipc_send_blocking(int fd, uint32_t type, int32_t code, const void *msg, size_t len,
                         const void *bulk, size_t blen);
/* Writes one message (header and msg of at most 4 KiB) as one record, with
 * pass_fd attached (SCM_RIGHTS) unless it is -1; waits while the socket is full; 0 or -1. The
 * caller keeps pass_fd (the receiver gets its own). */
int be_ipc_send_fd(int fd, uint32_t type, const void *msg, size_t len, int pass_fd);
/* One sendmsg of buf[len] with pass_fd attached unless -1 (EINTR retried): what sendmsg answers. */
ssize_t be_ipc_sendmsg_fd(int fd, const void *buf, size_t len, int pass_fd, int nonblock);

#endif
