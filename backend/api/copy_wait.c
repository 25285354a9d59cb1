/* Synchronous copies behind busy work wait off the call path (docs/backend.md, "Waits off the
 * call path"): the copy is queued as an asynchronous one (into or from page-locked memory, or
 * from pageable memory the driver stages at the call), its stream polled the way launch +
 * cuStreamSynchronize is, and when the stream is still busy the wait goes to a waiter thread
 * (session/waits.c) and the reply follows, so that the guest's other threads go on meanwhile.
 * Until the twenty-second session a copy behind a 300 ms kernel held every other thread's
 * calls for 300 ms. */
#include "api/copy_wait.h"

#include "api/copy_small.h"
#include "session/bulk_pool.h"
#include "session/state.h"
#include "session/streams.h"
#include "session/waits.h"
#include "sluice/driver_api.h"
#include "sluice/wire.h"

int be_copy_capturing(const struct sl_be_call *c, CUstream st)
{
    CUresult (*is)(CUstream, CUstreamCaptureStatus *) =
        BE_PTSZ(c->api, cuStreamIsCapturing, c->call);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    return !is || is(st, &cs) != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* The copy just queued on st: polled, then handed off or synchronized (*rc). */
static void wait_or_hand_off(struct sl_be_call *c, CUstream st, void *buf, size_t n, CUresult *rc)
{
    sl_be_session *s = c->s;
    CUstreamCaptureMode mode = be_capture_relax(s);
    if (be_copy_off_path(c, st, buf, n, 0) <= 0) {
        CUresult (*sync)(CUstream) = BE_PTSZ(c->api, cuStreamSynchronize, c->call);
        *rc = sync ? sync(st) : CUDA_ERROR_NOT_SUPPORTED;
    }
    be_capture_restore(s, mode);
}

int be_copy_off_path(struct sl_be_call *c, CUstream st, void *buf, size_t n, int stage)
{
    sl_be_session *s = c->s;
    /* a copy no reply is awaited for finishes here (a reply on the lanes may come after later
     * ones: the guest's lane assembly takes replies in any order) */
    if (!s->waits || sl_call_is_async(sl_call_lookup(c->call->call_id), c->call))
        return -1;
    /* the session thread's per-thread stream, where the _ptsz copy went */
    CUstream at = c->call->per_thread_stream && st == NULL ? CU_STREAM_PER_THREAD : st;
    if (be_poll_done(s, at, NULL))
        return 0; /* done within the poll (a short kernel before it): answered inline */
    return be_waits_defer_copy(s->waits, c, at, buf, n, stage) ? 1 : -1;
}

int be_dtoh_slot(struct sl_be_call *c, void *slot, size_t n, CUstream st, be_copy_queue queue,
                 void *u, CUresult *rc)
{
    sl_be_session *s = c->s;
    if (!s->waits || !be_bulk_is_slot(slot) || !be_pool_pin(s->pool, slot) ||
        be_copy_capturing(c, st))
        return 0; /* pageable: an async copy into it would wait inside the call all the same */
    *rc = queue(c, u, slot, st);
    if (*rc == CUDA_SUCCESS)
        wait_or_hand_off(c, st, slot, n, rc);
    return 1;
}

int be_htod_queued(struct sl_be_call *c, size_t n, be_copy_queue queue, void *u, CUresult *rc)
{
    sl_be_session *s = c->s;
    int pt = c->call->per_thread_stream;
    if (!s->waits || !n || be_copy_capturing(c, NULL))
        return 0;
    *rc = queue(c, u, (void *)c->in, NULL);
    if (*rc != CUDA_SUCCESS)
        return 1;
    /* a page-locked slot stays out until the copy read it; pageable bytes the driver staged */
    if (be_pool_hold(s->pool, c->in, pt ? CU_STREAM_PER_THREAD : NULL) != 0) {
        CUresult (*sync)(CUstream) = BE_PTSZ(c->api, cuStreamSynchronize, c->call);
        *rc = sync ? sync(NULL) : CUDA_ERROR_NOT_SUPPORTED;
        return 1;
    }
    wait_or_hand_off(c, NULL, NULL, 0, rc);
    return 1;
}

int be_dtoh_queued(struct sl_be_call *c, be_copy_queue queue, void *u, size_t n, uint8_t **out,
                   CUresult *rc)
{
    if (be_small_dtoh(c, *out, n, NULL, queue, u, rc))
        return 1;
    void *slot = be_pool_take(c->s->pool, n);
    if (!slot)
        return 0;
    if (!be_dtoh_slot(c, slot, n, NULL, queue, u, rc)) {
        be_bulk_free(slot);
        return 0;
    }
    be_bulk_free(*out);
    *out = slot;
    return 1;
}

CUresult be_dtoh_answer(struct sl_be_call *c, uint8_t *buf, uint64_t n, CUresult rc)
{
    if (c->deferred || rc != CUDA_SUCCESS) {
        if (!c->deferred || !be_bulk_is_slot(buf)) /* a waiting copy's slot is the wait's */
            be_bulk_free(buf);
        c->out_len = 0;
        return c->deferred ? CUDA_SUCCESS : rc;
    }
    c->out = buf;
    c->out_len = buf ? n : 0;
    return CUDA_SUCCESS;
}
