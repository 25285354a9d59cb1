/* The state of the call layer (rpc_state.c), shared by its files (rpc.c the calls,
 * rpc_session.c the transport, rpc_sender.c the send window and the sender thread,
 * rpc_replies.c the replies, rpc_stats.c the statistics) and by nothing else. Everything in it
 * is under its lock `io` (docs/remoting.md "Synchronous and asynchronous calls"), except
 * ob_ready, which the sender thread polls without it. */
#ifndef SLUICE_FRONTEND_CALL_RPC_STATE_H
#define SLUICE_FRONTEND_CALL_RPC_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "call/frame.h"
#include "call/rpc_session.h"
#include "call/rpc_stats.h"
#include "call/transport.h"

/* The outbox: a frame older than the pending one, handed to the sender thread. */
enum sl_fe_outbox_state { OB_EMPTY, OB_READY, OB_SENDING };

struct sl_fe_rpc_state {
    pthread_mutex_t io; /* the pending frame, the outbox, the transport, all of this */
    struct sl_fe_transport tr;
    int attached, dead;
    atomic_int initialized; /* a session was attached once in this process (cuInit's work) */
    uint64_t seq;

    struct sl_fe_frame pf; /* the pending frame */

    struct sl_fe_frame ob; /* the outbox */
    enum sl_fe_outbox_state ob_state;
    atomic_int ob_ready;    /* OB_READY, for the sender thread while it polls without io */
    int pf_due;             /* the pending frame is due: it goes when the outbox's send ends */
    uint64_t ob_hold_ns;    /* the sender thread sends the outbox from then on (hold_us) */
    pthread_cond_t sent_cv; /* the outbox became empty */

    size_t inflight_calls; /* async calls sent or pending since the last reply */
    uint64_t inflight_bulk;
    uint64_t inflight_seq; /* the seq of the last of them */

    struct sl_fe_rpc_limits lim;
    struct sl_fe_rpc_stats stats;

    pthread_cond_t sender_cv; /* wakes the sender thread */
    int sender_started, sender_idle;
    uint64_t pend_t0_ns, last_send_ns;
    uint64_t win_ns; /* the current window (rpc_sender.c) */

    int reader_polling; /* the reader waits for input on the descriptors, without io */
};

/* The one state of the call layer. */
struct sl_fe_rpc_state *sl_fe_rpc_state(void);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t sl_fe_now_ns(void);

#endif
