/* The waiter threads of the waits off the call path (waiters.c), for waits.c alone (waits.h is
 * the waits' interface): a wait's record, the session's waits, the hand-off of a wait to a
 * waiter thread and the threads' end. */
#ifndef SLUICE_BE_SESSION_WAITERS_H
#define SLUICE_BE_SESSION_WAITERS_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "session/state.h"

struct be_wait {
    struct be_wait *next;     /* todo or done list (under mu) */
    struct be_wait *all_next; /* the session thread's list of outstanding waits */
    uint64_t event_id;        /* blocks=event: the guest's event handle */
    uint64_t seq, ctx_id;
    uint32_t call_id;
    uint8_t kind;  /* enum sl_call_blocks */
    CUcontext ctx; /* made current on the waiter (NULL: none needed) */
    CUevent ev;    /* blocks=stream|event, and a watch's */
    int own_ev;    /* the private event of a stream wait: the waiter destroys it */
    int pushed;    /* a watch: its StreamDone went already (be_waits_push_watched) */
    int adopted;   /* the guest destroyed the event: the last wait on it destroys it */
    void *out;     /* a copy's: its page-locked destination, the reply's bytes */
    uint64_t out_len;
    int stage;          /* out is the context's staging buffer, lent (session/staging.c) */
    int copy;           /* a device-to-host copy's wait (be_waits_defer_copy) */
    int reply_on_lanes; /* the copy's Call.reply_on_lanes */
    CUresult rc;
};

#define WATCH 0xffu /* kind: a busy stream watched for its query (no reply, a StreamDone) */

struct be_waits {
    sl_be_session *s;
    unsigned max;
    uint64_t spin_ns;
    pthread_mutex_t mu;
    pthread_cond_t cv;              /* idle waiter threads sleep on it */
    struct be_wait *todo, **todo_t; /* handed off, not taken by a waiter yet (FIFO) */
    atomic_uint n_todo;             /* their number: what a spinning waiter watches */
    struct be_wait *done;           /* completed, for the session thread */
    atomic_uint n_done;
    unsigned outstanding; /* session thread: handed off and not finished */
    unsigned watches;     /* session thread: the watches among them */
    unsigned stages;      /* session thread: the copies among them with a lent staging buffer */
    struct be_wait *all;  /* session thread: those waits */
    unsigned n_threads, idle;
    pthread_t *threads;
    int stop;
};

/* Session thread: x to a waiter thread (started when none is idle, up to the maximum) and into
 * the session thread's list of outstanding waits; 0 (x freed, its private event destroyed)
 * when no thread could be had: the caller runs the call inline. */
int be_waits_hand(struct be_waits *w, struct be_wait *x);
/* The waiter threads end (what they hold is done: be_waits_drain first) and are joined. */
void be_waiters_stop(struct be_waits *w);

#endif
