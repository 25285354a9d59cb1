/* Streams and events known busy (busy.c, docs/remoting.md "Busy streams"): a stream or event
 * query the worker answered CUDA_ERROR_NOT_READY and watches, answered here again until its
 * StreamDone comes.
 * Everything runs with the call layer's lock held. */
#ifndef SLUICE_FRONTEND_CALL_BUSY_H
#define SLUICE_FRONTEND_CALL_BUSY_H

#include <stdint.h>

#include "sluice/wire.h"
#include "sluice_session.pb-c.h"

/* 1 if c, a query of a stream or event known busy, is answered CUDA_ERROR_NOT_READY here; else 0,
 * and a query that may be watched asks for it (Call.watch). */
int sl_fe_busy_answer(Sluice__Wire__Call *c);
/* c was answered (without an error that changed state): a watched NOT_READY makes its stream
 * known busy. */
void sl_fe_busy_answered(const Sluice__Wire__Call *c, const Sluice__Wire__Reply *r);
/* A call appended to the pending frame (its table entry; NULL: none): work on a stream makes it
 * no longer known busy (the watch covers the work queued before its query only). */
void sl_fe_busy_note(const Sluice__Wire__Call *c, const struct sl_call_info *ci);
/* StreamDone{seq} came: the stream of that query is no longer known busy. */
void sl_fe_busy_done(uint64_t seq);
/* An error, a new or lost session, the tests' reset: nothing is known busy. */
void sl_fe_busy_forget(void);
/* 1 while some stream is known busy (a query then first reads what the transport holds). */
int sl_fe_busy_known(void);
/* Queries answered here so far (SLUICE_STATS). */
uint64_t sl_fe_busy_answers(void);

#endif
