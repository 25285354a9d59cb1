/* Small synchronous device-to-host copies (docs/remoting.md, "Small device-to-host copies"):
 * a 4-byte .item() used to be a cuMemcpyDtoH / cuMemcpyDtoHAsync into the reply's buffer,
 * pageable memory, which the driver stages through a page-locked buffer of its own and waits
 * for inside the call (behind the kernel queued before it). Up to BE_STAGE_BYTES the copy is
 * now a cuMemcpyDtoHAsync into the context's page-locked staging buffer (session/staging.c) on
 * the stream the synchronous copy is ordered on, then a wait the way launch + cuStreamSynchronize
 * waits (session/waits.c: cuStreamQuery polled up to --spin-us, then the driver's
 * cuStreamSynchronize, which returns at once when the poll saw the copy done), then the bytes
 * are copied into the reply.
 *
 * Ordering is the driver's: a synchronous cuMemcpyDtoH runs on the legacy default stream (after
 * the work of every blocking stream queued before it), cuMemcpyDtoH_ptds on the per-thread one;
 * an async copy on that same stream, waited for before the reply, is ordered the same way and
 * is as synchronous for the guest. The answer is cuStreamSynchronize's, a synchronizing call
 * like the copy itself: a sticky error (an illegal address, a failed launch or assert) comes
 * back as the copy would have returned it, and device printf output is flushed as the copy
 * would have flushed it. A capture on the stream, or a capture the legacy stream cannot be
 * queried under (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), leaves the copy to the driver's own call,
 * which answers what it answers there. While another stream captures in global mode, the poll
 * and the synchronization (potentially unsafe calls, which the copy itself is not) run in relaxed
 * capture mode: otherwise they invalidate that capture where the driver's own copy does not
 * (sluice-driver-facts, run 22). */
#include "api/copy_small.h"
#include "api/copy_wait.h"

#include <string.h>

#include "session/contexts.h"
#include "session/spin.h"
#include "session/staging.h"
#include "session/streams.h"
#include "session/state.h"
#include "sluice/driver_api.h"
#include "sluice/relax.h"

/* Polls st until its work is done or spin_ns passed, then synchronizes it (at once when done):
 * the result is the synchronization's. */
static CUresult wait_stream(CUresult (*query)(CUstream), CUresult (*sync)(CUstream), CUstream st,
                            uint64_t spin_ns)
{
    uint64_t end = be_now_ns() + spin_ns;
    while (query(st) == CUDA_ERROR_NOT_READY && be_now_ns() < end)
        sl_cpu_relax();
    return sync(st);
}

int be_small_dtoh(struct sl_be_call *c, void *dst, size_t n, CUstream st, be_copy_queue queue,
                  void *u, CUresult *rc)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    if (n == 0 || n > BE_STAGE_BYTES || !dst)
        return 0;
    CUresult (*query)(CUstream) = BE_PTSZ(api, cuStreamQuery, c->call);
    CUresult (*sync)(CUstream) = BE_PTSZ(api, cuStreamSynchronize, c->call);
    if (!query || !sync)
        return 0;
    struct be_ctx *cx = be_ctx_find(s, c->call->context);
    if (!cx || s->cur_ctx != cx->id || be_copy_capturing(c, st))
        return 0;
    void *stage = be_stage_get(s, cx);
    if (!stage)
        return 0;
    *rc = queue(c, u, stage, st);
    if (*rc != CUDA_SUCCESS)
        return 1; /* refused at the call: nothing was queued */
    CUstreamCaptureMode mode = be_capture_relax(s);
    int off = be_copy_off_path(c, st, stage, n, 1);
    if (off > 0) {
        cx->stage = NULL; /* lent to the wait; the context's next small copy makes another */
        be_capture_restore(s, mode);
        *rc = CUDA_SUCCESS;
        return 1;
    }
    *rc = off == 0 ? sync(st) : wait_stream(query, sync, st, s->spin_ns);
    be_capture_restore(s, mode);
    if (*rc == CUDA_SUCCESS)
        memcpy(dst, stage, n);
    else
        be_stage_free(s, cx); /* no later copy shares a buffer this one may still write */
    return 1;
}
