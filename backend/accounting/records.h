/* A session's accounting over time (records.c): attached to the session, per frame (GPU-share
 * admission, measuring), per interval (usage records), finished. */
#ifndef SLUICE_BE_ACCOUNTING_RECORDS_H
#define SLUICE_BE_ACCOUNTING_RECORDS_H

#include <stdint.h>

#include "accounting/state.h"
#include "session/state.h"
#include "sluice/error.h"

#define BE_USAGE_INTERVAL_S 10       /* default --usage-interval */
#define BE_ACCT_MEASUREMENT "events" /* UsageRecord.measurement */

sl_code be_acct_attach(sl_be_session *s, const struct be_acct_cfg *cfg, sl_error *e);
/* The final record (after measuring everything still pending), then frees the state. Called by
 * the session's worker thread before it frees the session's contexts. */
void be_acct_finish(sl_be_session *s);
/* The final record of an abandoned session (its guest gone, the process exits next): what
 * completed, nothing waited for, nothing freed (the driver's objects may still be in use by the
 * session's wait threads; the process's end frees them). */
void be_acct_final_record(sl_be_session *s);
/* Around each frame (a job): the GPU-share admission (holds the frame back while the bucket is
 * in debt) and, after it, closing the runs and measuring what has finished; more: another
 * frame is queued already (then the runs stay open, up to BE_ACCT_FRAMES_OPEN_MAX frames). */
void be_acct_frame_begin(sl_be_session *s);
void be_acct_frame_end(sl_be_session *s, int more);
/* Milliseconds until the next record is due (the worker thread waits at most that), and the
 * record itself when it is. */
int64_t be_acct_ms_to_tick(sl_be_session *s);
void be_acct_tick(sl_be_session *s);

#endif
