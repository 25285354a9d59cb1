/* Streams and events on the simulated device time (timing.c).
 * TEST DOUBLE: never a GPU result (README.md). */
#include "stream.h"

#include <stdlib.h>

#include "capture.h"
#include "context.h"
#include "copy.h"
#include "timing.h"

static unsigned long long next_stream_id = 1000;

static CUresult stream_create(CUstream *ph, unsigned flags, int priority)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_stream *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->hdr = (struct dbl_obj){K_STREAM, c};
    s->flags = flags;
    s->priority = priority > 0 ? 0 : (priority < -5 ? -5 : priority);
    s->id = next_stream_id++;
    obj_add(s);
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    LOCKED(stream_create(phStream, Flags, 0));
}

EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    LOCKED(stream_create(phStream, flags, priority));
}

static CUresult stream_destroy(CUstream h)
{
    struct dbl_stream *s = obj_get(h, K_STREAM);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    obj_del(s);
    free(s);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
    LOCKED(stream_destroy(hStream));
}

CUresult stream_sync(CUstream h)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    return rc ? rc : check_stream(h);
}

/* Synchronizing or querying a capturing stream, or any stream where a capture's mode prohibits
 * it: refused, and the capture invalidated. */
static CUresult not_capturing(CUstream h)
{
    unsigned long long id = capture_id_of(h);
    if (!id)
        id = capture_prohibiting();
    if (!id)
        return CUDA_SUCCESS;
    capture_invalidate(id);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

static CUresult stream_sync_checked(CUstream h)
{
    CUresult rc = not_capturing(h);
    return rc ? rc : stream_sync(h);
}

EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    LOCKED_THEN_SLEEP(stream_sync_checked(hStream), dbl_time_stream_end(cur(), hStream));
}

/* Not ready while the stream's simulated work runs (timing.c). */
static CUresult stream_query(CUstream h)
{
    CUresult rc = stream_sync_checked(h);
    if (rc == CUDA_SUCCESS && dbl_time_stream_end(cur(), h) > dbl_time_now_us())
        rc = CUDA_ERROR_NOT_READY;
    return rc;
}

EXPORT CUresult cuStreamQuery(CUstream hStream)
{
    LOCKED(stream_query(hStream));
}

static CUresult stream_wait_event(CUstream h, CUevent e, unsigned flags)
{
    int joined = 0;
    CUresult rc = capture_wait(h, e, &joined); /* an event of a capture (capture.c) */
    if (rc || joined)
        return rc;
    rc = stream_sync(h);
    if (rc)
        return rc;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_event *ev = obj_get(e, K_EVENT);
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    if (ev->recorded) /* later work on h starts after the event's time (timing.c) */
        dbl_time_wait_for(cur(), h, ev->t_us);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    LOCKED(stream_wait_event(hStream, hEvent, Flags));
}

static CUresult stream_get(CUstream h, int *prio, unsigned *flags)
{
    CUresult rc = stream_sync(h);
    if (rc)
        return rc;
    struct dbl_stream *s = obj_get(h, K_STREAM);
    if (prio)
        *prio = s ? s->priority : 0;
    if (flags)
        *flags = s ? s->flags : 0;
    return CUDA_SUCCESS;
}

/* A created stream's id is its own; the NULL/legacy and the per-thread stream have one per
 * context (the double does not tell threads apart). */
static CUresult stream_id(CUstream h, unsigned long long *id)
{
    CUresult rc = stream_sync(h);
    if (rc)
        return rc;
    struct dbl_stream *s = obj_get(h, K_STREAM);
    uintptr_t kind = (uintptr_t)h == (uintptr_t)CU_STREAM_PER_THREAD ? 2 : 1;
    *id = s ? s->id : (cur()->id << 8 | kind);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
    if (!streamId)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(stream_id(hStream, streamId));
}

EXPORT CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{
    if (!priority)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(stream_get(hStream, priority, NULL));
}

EXPORT CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(stream_get(hStream, NULL, flags));
}

static CUresult event_create(CUevent *ph, unsigned flags)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if (!ph || (flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                    CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_event *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->hdr = (struct dbl_obj){K_EVENT, c};
    e->flags = flags;
    obj_add(e);
    *ph = (CUevent)e;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    LOCKED(event_create(phEvent, Flags));
}

static CUresult event_record(CUevent h, CUstream s)
{
    struct dbl_event *e = obj_get(h, K_EVENT);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if (capture_record(h, s)) /* in a capture: a point of its graph (capture.c) */
        return CUDA_SUCCESS;
    CUresult rc = stream_sync(s);
    if (rc)
        return rc;
    e->recorded = true;
    e->t_us = dbl_time_mark(cur(), s); /* when the stream reaches it (timing.c) */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    LOCKED(event_record(hEvent, hStream));
}

EXPORT CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    (void)flags;
    LOCKED(event_record(hEvent, hStream));
}

/* *until: the simulated time the event completes (0 if never recorded). */
static CUresult event_sync(CUevent h, double *until)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    struct dbl_event *e = obj_get(h, K_EVENT);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    unsigned long long id = capture_id_of_event(h);
    if (!id) /* a capture's mode may prohibit the call (capture.c) */
        id = capture_prohibiting();
    if (id) { /* last recorded in a capture: it stands for no work that runs */
        capture_invalidate(id);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    *until = e->recorded ? e->t_us : 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
    double t = 0;
    LOCKED_THEN_SLEEP(event_sync(hEvent, &t), t);
}

static CUresult event_query(CUevent h)
{
    double t = 0;
    CUresult rc = event_sync(h, &t);
    return rc == CUDA_SUCCESS && t > dbl_time_now_us() ? CUDA_ERROR_NOT_READY : rc;
}

EXPORT CUresult cuEventQuery(CUevent hEvent)
{
    LOCKED(event_query(hEvent));
}

static CUresult event_elapsed(float *ms, CUevent start, CUevent end)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_event *a = obj_get(start, K_EVENT), *b = obj_get(end, K_EVENT);
    if (!a || !b)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING || !a->recorded || !b->recorded)
        return CUDA_ERROR_INVALID_HANDLE;
    double now = dbl_time_now_us();
    if (a->t_us > now || b->t_us > now)
        return CUDA_ERROR_NOT_READY; /* as the driver: not completed yet */
    *ms = (float)((b->t_us - a->t_us) / 1000.0);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    LOCKED(event_elapsed(pMilliseconds, hStart, hEnd));
}

EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    LOCKED(event_elapsed(pMilliseconds, hStart, hEnd));
}

static CUresult event_destroy(CUevent h)
{
    struct dbl_event *e = obj_get(h, K_EVENT);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    obj_del(e);
    free(e);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent hEvent)
{
    LOCKED(event_destroy(hEvent));
}

EXPORT CUresult cuStreamSynchronize_ptsz(CUstream h)
{
    return cuStreamSynchronize(h);
}

EXPORT CUresult cuStreamQuery_ptsz(CUstream h)
{
    return cuStreamQuery(h);
}

EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags)
{
    return cuStreamWaitEvent(h, e, flags);
}

EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream h)
{
    return cuEventRecord(e, h);
}
