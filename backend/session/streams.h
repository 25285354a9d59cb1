/* Stream ids for hand handlers (streams.c). */
#ifndef SLUICE_BE_SESSION_STREAMS_H
#define SLUICE_BE_SESSION_STREAMS_H

#include <cuda.h>
#include <stdint.h>

#include "session/state.h"
#include "sluice/wire.h"

/* Stream id -> native (0, legacy, per-thread pass through). */
CUresult be_stream(sl_be_session *s, uint64_t id, CUstream *out);
/* 1 when st (the _ptsz variant's when per_thread) is capturing into a graph. */
int be_stream_capturing(sl_be_session *s, CUstream st, int per_thread);
/* Work that reads or writes the session's transient buffers (a copy's bulk, a one-shot host
 * callback) must not be captured into a graph: the graph would use them after they are freed.
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED with a detail naming what when st is capturing. */
CUresult be_refuse_if_capturing(sl_be_session *s, Sluice__Wire__Reply *reply, CUstream st,
                                int per_thread, const char *what);
/* The backend's own driver calls behind a guest's call (the load of a library the frontend
 * ships at its first use, a kernel's first load into the context, timing events) are
 * "potentially unsafe" calls during a stream capture in global or thread-local mode: the
 * driver would refuse them and invalidate the guest's capture. They are made in relaxed mode,
 * then the guest's mode is given back (be_capture_restore with what be_capture_relax gave). */
CUstreamCaptureMode be_capture_relax(sl_be_session *s);
/* On the session thread: polls stream st (as the driver knows it: CU_STREAM_PER_THREAD for the
 * session thread's per-thread stream), or event ev when not NULL, while no other frame waits,
 * up to the session's spin time: 1 when its work is done, 0 when it is still busy. */
int be_poll_done(sl_be_session *s, CUstream st, CUevent ev);
/* A private event (flags: cuEventCreate's) recorded on st now: what is queued there so far.
 * 1 with *ev, 0 when none could be made or recorded. */
int be_event_on(sl_be_session *s, CUstream st, unsigned flags, CUevent *ev);
void be_capture_restore(sl_be_session *s, CUstreamCaptureMode m);

#endif
