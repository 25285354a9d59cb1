/* Kept answers of `memo` calls (memo.c). Everything runs with the rpc lock held. */
#ifndef SLUICE_FRONTEND_CALL_MEMO_H
#define SLUICE_FRONTEND_CALL_MEMO_H

#include "sluice_session.pb-c.h"

/* 1 and a copy of the answer if a memo call was answered before; put keeps a clean answer;
 * clear forgets every answer (an unmemo call, a new session). */
int sl_fe_memo_get(const Sluice__Wire__Call *call, Sluice__Wire__Reply **reply);
void sl_fe_memo_put(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *reply);
void sl_fe_memo_clear(void);
/* Forgets the capture-status answers (after a call flagged uncapture). */
void sl_fe_memo_uncapture(void);

#endif
