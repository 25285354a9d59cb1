/* Stream ids for hand handlers: id -> native stream (0, legacy and per-thread pass through),
 * whether a stream is capturing into a graph (work on the session's transient buffers is
 * refused there), and the short poll before a wait leaves the call path. */
#include "session/streams.h"

#include <stdatomic.h>

#include "session/spin.h"
#include "session/state.h"
#include "sluice/backend_dispatch.h"
#include "sluice/backend_hooks.h"
#include "sluice/relax.h"

CUresult be_stream(sl_be_session *s, uint64_t id, CUstream *out)
{
    void *n = NULL;
    CUresult rc = sl_be_handle_get(s, SL_H_STREAM, id, &n);
    *out = (CUstream)n;
    return rc;
}

int be_stream_capturing(sl_be_session *s, CUstream st, int per_thread)
{
    CUresult (*fn)(CUstream, CUstreamCaptureStatus *) =
        per_thread && s->api->cuStreamIsCapturing_ptsz ? s->api->cuStreamIsCapturing_ptsz
                                                       : s->api->cuStreamIsCapturing;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!fn || fn(st, &cs) != CUDA_SUCCESS)
        return 0; /* the call itself will say what is wrong */
    return cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUstreamCaptureMode be_capture_relax(sl_be_session *s)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (s->api->cuThreadExchangeStreamCaptureMode)
        s->api->cuThreadExchangeStreamCaptureMode(&m);
    return m;
}

void be_capture_restore(sl_be_session *s, CUstreamCaptureMode m)
{
    if (s->api->cuThreadExchangeStreamCaptureMode)
        s->api->cuThreadExchangeStreamCaptureMode(&m);
}

CUresult be_refuse_if_capturing(sl_be_session *s, Sluice__Wire__Reply *reply, CUstream st,
                                int per_thread, const char *what)
{
    if (!be_stream_capturing(s, st, per_thread))
        return CUDA_SUCCESS;
    sl_be_detail(reply, "%s cannot be captured into a graph through Sluice yet", what);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

int be_poll_done(sl_be_session *s, CUstream st, CUevent ev)
{
    const struct sl_driver_api *api = s->api;
    if (ev ? !api->cuEventQuery : !api->cuStreamQuery)
        return 1;
    uint64_t end = be_now_ns() + s->spin_ns;
    for (;;) {
        if ((ev ? api->cuEventQuery(ev) : api->cuStreamQuery(st)) != CUDA_ERROR_NOT_READY)
            return 1;
        if (atomic_load_explicit(&s->q_jobs, memory_order_acquire) || be_now_ns() >= end)
            return 0;
        sl_cpu_relax();
    }
}

int be_event_on(sl_be_session *s, CUstream st, unsigned flags, CUevent *ev)
{
    const struct sl_driver_api *api = s->api;
    *ev = NULL;
    if (!api->cuEventCreate || !api->cuEventRecord || !api->cuEventDestroy_v2 ||
        api->cuEventCreate(ev, flags) != CUDA_SUCCESS)
        return 0;
    if (api->cuEventRecord(*ev, st) == CUDA_SUCCESS)
        return 1;
    api->cuEventDestroy_v2(*ev);
    *ev = NULL;
    return 0;
}
