/* What a session gives the call layer (rpc_session.c): its transport and its limits. */
#ifndef SLUICE_FRONTEND_CALL_RPC_SESSION_H
#define SLUICE_FRONTEND_CALL_RPC_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "call/transport.h"
#include "sluice/error.h"

/* Installs the transport of a fresh session (seq restarts at 1). */
void sl_fe_rpc_attach(const struct sl_fe_transport *tr);
/* A session was attached once in this process: what cuInit does. Before it the driver answers
 * the context calls with CUDA_ERROR_NOT_INITIALIZED (api/context.c). */
int sl_fe_rpc_initialized(void);
/* Forgets the transport (the session is gone): every later call fails with
 * CUDA_ERROR_DEVICE_UNAVAILABLE. */
void sl_fe_rpc_detach(void);
/* Back to the initial state (tests). */
void sl_fe_rpc_reset(void);

struct sl_fe_rpc_limits {
    size_t frame_calls;      /* pending calls that force a flush (256) */
    size_t frame_bulk;       /* pending bulk that forces a flush (4 MiB) */
    size_t inflight_calls;   /* unanswered async calls before an slFence (4096) */
    uint64_t inflight_bulk;  /* unanswered async bulk before an slFence (256 MiB) */
    unsigned flush_us;       /* longest wait of a queued async call before it is sent; 0: none */
    unsigned start_us;       /* after a reply: the first async call goes at once, the next frames
                                wait start_us, twice that, ... up to flush_us; 0: flush_us always */
    int sender;              /* frames of async calls go out from a thread of their own */
    unsigned sender_spin_us; /* that thread polls this long after a send before it sleeps; a
                                thread waiting for a reply polls as long before it sleeps */
    unsigned hold_us;        /* with sender: a frame of one async call waits this long for a
                                synchronous call right behind it to take it along; 0: none */
};
#define SL_FE_FLUSH_US_DEFAULT 200u
#define SL_FE_FLUSH_US_MAX     1000000u
#define SL_FE_START_US_DEFAULT 100u
/* With the sender thread a frame costs the program only its hand-over: a constant 50 us window
 * (measured on an H200, docs/pytorch.md seventh session). */
#define SL_FE_FLUSH_US_SENDER 50u
#define SL_FE_START_US_SENDER 0u
/* With the sender thread, a lone async call (a launch after a synchronization) waits this long in
 * the outbox: a synchronous call right behind it (launch + cuStreamSynchronize, a kernel and its
 * result's copy) takes it along in its own frame instead of following it in a second one. */
#define SL_FE_HOLD_US_DEFAULT 5u
#define SL_FE_HOLD_US_MAX     1000u
/* A thread waiting for a reply polls without sleeping this long first ($SLUICE_SPIN_US; the
 * default is 0 on a machine of fewer than 4 CPUs). */
#define SL_FE_SPIN_US_DEFAULT 300u
#define SL_FE_SPIN_US_MAX     100000u
void sl_fe_rpc_set_limits(const struct sl_fe_rpc_limits *l);
/* The transport failed (what: the step; e NULL: closed): logged once, the session is dead,
 * every waiting thread wakes; returns CUDA_ERROR_DEVICE_UNAVAILABLE. With the lock held. */
CUresult sl_fe_rpc_lost(const char *what, const sl_error *e);

#endif
