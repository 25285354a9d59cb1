/* Replies (rpc_replies.c): the waiters of the threads that made calls, and the reader that
 * hands each reply to its waiter. Everything runs with the call layer's lock held. */
#ifndef SLUICE_FRONTEND_CALL_RPC_REPLIES_H
#define SLUICE_FRONTEND_CALL_RPC_REPLIES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "sluice_session.pb-c.h"

/* One call waiting for its reply (on the stack of the thread that made it). */
struct sl_fe_waiter {
    struct sl_fe_waiter *next;
    uint64_t seq;
    void *out;
    size_t out_cap;
    size_t out_len;
    int out_overflow;
    Sluice__Wire__Reply *reply;
    atomic_int done;
    pthread_cond_t *cv; /* its thread sleeps on it */
    int waiting;        /* its thread is in sl_fe_wait_replies (the lock held to read it) */
};

/* After this thread used the transport: a reader waiting on its descriptors looks again. */
void sl_fe_wake_reader(void);
/* Registers n waiters (their seq, out and out_cap set) whose thread sleeps on cv: before
 * the lock is let go after their calls were sent, else the reader finds no waiter for a reply
 * and drops it. */
void sl_fe_waiters_add(struct sl_fe_waiter *w, size_t n, pthread_cond_t *cv);
/* Takes back n waiters registered whose replies will not be waited for (their send failed). */
void sl_fe_waiters_remove(struct sl_fe_waiter *w, size_t n);
/* With the lock held: what the transport holds now is read and handed out (replies to their
 * waiters, StreamDone to the busy streams), unless another thread is the reader. */
void sl_fe_read_pending(void);
/* The transport failed: every waiter wakes and finds the session dead. */
void sl_fe_waiters_fail(void);
/* Until the replies to the n waiters (registered, their calls sent) are in; the lock is
 * released while this thread waits. */
CUresult sl_fe_wait_replies(struct sl_fe_waiter *w, size_t n, pthread_cond_t *cv);

#endif
