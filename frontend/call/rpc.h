/* The call layer (rpc.c): seq numbers, the pending frame, the send window and the sender
 * thread, synchronous and asynchronous calls, replies, deferred errors, statistics. The
 * generated stubs reach it through sluice/stub_runtime.h. */
#ifndef SLUICE_FRONTEND_CALL_RPC_H
#define SLUICE_FRONTEND_CALL_RPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <cuda.h>

#include "call/transport.h"
#include "sluice_session.pb-c.h"

/* Installs the transport of a fresh session (seq restarts at 1). */
void sl_fe_rpc_attach(const struct sl_fe_transport *tr);
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
};
#define SL_FE_FLUSH_US_DEFAULT 200u
#define SL_FE_FLUSH_US_MAX     1000000u
#define SL_FE_START_US_DEFAULT 100u
/* With the sender thread a frame costs the program only its hand-over: a constant 50 us window
 * (measured on an H200, docs/pytorch.md seventh session). */
#define SL_FE_FLUSH_US_SENDER 50u
#define SL_FE_START_US_SENDER 0u
/* A thread waiting for a reply polls without sleeping this long first ($SLUICE_SPIN_US; the
 * default is 0 on a machine of fewer than 4 CPUs). */
#define SL_FE_SPIN_US_DEFAULT 300u
#define SL_FE_SPIN_US_MAX     100000u
void sl_fe_rpc_set_limits(const struct sl_fe_rpc_limits *l);
/* $SLUICE_SENDER (0 or 1; dflt when unset or bad). */
int sl_fe_rpc_sender_from_env(int dflt);
/* $SLUICE_FLUSH_US and $SLUICE_FLUSH_START_US checked (a bad value is logged and the default
 * used); the defaults depend on whether frames go out from the sender thread. */
unsigned sl_fe_rpc_flush_us_from_env(int sender);
unsigned sl_fe_rpc_start_us_from_env(int sender);

/* Statistics for tests. */
struct sl_fe_rpc_stats {
    uint64_t frames_sent, calls_sent, fences, callbacks_run, deferred_errors, memo_hits;
    uint64_t sync_calls, async_calls, wait_ns; /* wait_ns: time sync calls waited for replies */
    uint64_t frames_handed;                    /* frames sent by the sender thread */
};
void sl_fe_rpc_stats(struct sl_fe_rpc_stats *st);
/* The max call ids made most often as synchronous calls, with their counts, most first;
 * returns how many there are (at most max). */
size_t sl_fe_rpc_top_sync(uint32_t *ids, uint64_t *counts, size_t max);
/* The same for the calls that emptied the memo (unmemo calls, and answers with an error). */
size_t sl_fe_rpc_top_forget(uint32_t *ids, uint64_t *counts, size_t max);
/* The same for the calls that made the frontend forget that the context was idle (work whose
 * stream it cannot tell, in another context, on too many streams, or an error). */
size_t sl_fe_rpc_top_unclean(uint32_t *ids, uint64_t *counts, size_t max);

/* A synchronous call with bulk in (n segments, sent after the call) and bulk out (the reply's
 * bulk is decrypted into out, at most out_cap bytes; the rest is discarded and the call fails).
 * *out_len (may be NULL) receives the number of bytes written. */
CUresult sl_fe_call_bulk(Sluice__Wire__Call *call, const struct iovec *in, size_t n, void *out,
                         size_t out_cap, size_t *out_len, Sluice__Wire__Reply **reply);
/* n (at most SL_FE_BATCH_MAX) synchronous calls without bulk in, sent in one frame so that the
 * backend works on the next while the guest receives the reply before (the pieces of a large
 * copy). Reply i's bulk goes into out[i] (out_cap[i] bytes; out_len[i] says how many), replies[i]
 * gets the reply (NULL where the call was not made). A failure to make the calls is returned;
 * the calls' own results are in their replies. */
#define SL_FE_BATCH_MAX 8
CUresult sl_fe_call_batch(Sluice__Wire__Call *const *calls, size_t n, void *const *out,
                          const size_t *out_cap, size_t *out_len, Sluice__Wire__Reply **replies);
/* A call's out-parameter that travels as a struct's bytes: pod is the reply's bytes field, NULL
 * when the reply carries another member. When rc is success, copies exactly size bytes into
 * dst, or answers CUDA_ERROR_UNKNOWN for a reply of the wrong shape; else returns rc. */
CUresult sl_fe_pod_out(CUresult rc, const ProtobufCBinaryData *pod, void *dst, size_t size);
/* An async call with bulk in (copied or sent before returning: the caller may reuse it). */
CUresult sl_fe_enqueue_async_bulk(Sluice__Wire__Call *call, const struct iovec *in, size_t n);
/* Sends slFence and waits: every earlier call executed. Returns the deferred error if any. */
CUresult sl_fe_fence(void);
/* Non-zero while the calling thread runs a host callback. */
int sl_fe_in_callback(void);

#endif
