/* The call layer's calls (rpc.c): synchronous calls, batches, async calls and fences. The
 * generated stubs reach it through sluice/stub_runtime.h; the session attaches the transport
 * (rpc_session.h). */
#ifndef SLUICE_FRONTEND_CALL_RPC_H
#define SLUICE_FRONTEND_CALL_RPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <cuda.h>

#include "sluice_session.pb-c.h"

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
/* Takes the reply's result (and frees the reply) when there is one, else rc. Call it in a
 * statement of its own after the call that fills rep: written as
 * sl_fe_reply_result(sl_fe_call(.., &rep), rep), the argument rep may be read before the call
 * stores the reply (unspecified evaluation order; GCC reads it first), which once dropped every
 * error of the synchronous HtoD and DtoD copies. */
CUresult sl_fe_reply_result(CUresult rc, Sluice__Wire__Reply *rep);
/* A call's out-parameter that travels as a struct's bytes: pod is the reply's bytes field, NULL
 * when the reply carries another member. When rc is success, copies exactly size bytes into
 * dst, or answers CUDA_ERROR_UNKNOWN for a reply of the wrong shape; else returns rc. */
CUresult sl_fe_pod_out(CUresult rc, const ProtobufCBinaryData *pod, void *dst, size_t size);
/* An async call with bulk in (copied or sent before returning: the caller may reuse it). */
CUresult sl_fe_enqueue_async_bulk(Sluice__Wire__Call *call, const struct iovec *in, size_t n);
/* 1: the calls this thread makes next are the later parts of one API call whose first part went
 * already: the call filters' sync_out (the program's changes to mapped and managed memory, the
 * allocations given up) has nothing new for them and is skipped (a compare of every mapped
 * range each). 0: back to every call. */
void sl_fe_rest_of_call(int on);
/* Keeps reply as the answer to call, a `memo` call, as if call had been asked now (in the
 * current context): an answer the backend gave ahead of the question (a library's kernels with
 * its load, api/image_kernels.c). The memo may forget it as any other answer. */
void sl_fe_memo_seed(Sluice__Wire__Call *call, const Sluice__Wire__Reply *reply);
/* Sends slFence and waits: every earlier call executed. Returns the deferred error if any. */
CUresult sl_fe_fence(void);

#endif
