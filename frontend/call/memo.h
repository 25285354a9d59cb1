/* Kept answers of `memo` calls (memo.c). Everything runs with the call layer's lock held. */
#ifndef SLUICE_FRONTEND_CALL_MEMO_H
#define SLUICE_FRONTEND_CALL_MEMO_H

#include <stdint.h>

#include "sluice_session.pb-c.h"

/* 1 and a copy of the answer if a memo call was answered before; put keeps a clean answer;
 * clear forgets every answer (an unmemo call, a new session). */
int sl_fe_memo_get(const Sluice__Wire__Call *call, Sluice__Wire__Reply **reply);
void sl_fe_memo_put(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *reply);
void sl_fe_memo_clear(void);
/* Forgets the capture-status answers (after a call flagged uncapture). */
void sl_fe_memo_uncapture(void);
/* 1 once a stream capture was begun in this process (no stream captures before). */
int sl_fe_memo_capture_begun(void);

/* The memo forgets every answer because of call_id; seq_now: the last seq given out (an answer
 * to a call up to it is not kept). */
void sl_fe_memo_forget(uint32_t call_id, uint64_t seq_now);
/* Before call (its table flags) leaves: what an `unmemo` or `uncapture` call makes forget. */
void sl_fe_memo_before(const Sluice__Wire__Call *call, uint32_t flags, uint64_t seq_now);
/* A memo call's answer without an error: kept unless the memo was emptied after call left. */
void sl_fe_memo_answered(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *reply);
/* Per call id, how often a call emptied the memo. */
const uint32_t *sl_fe_memo_forget_counts(void);
/* Back to the initial state, counts included (tests). */
void sl_fe_memo_reset(void);

#endif
