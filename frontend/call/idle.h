/* What the guest knows to be idle: streams and the context whose synchronizations are answered
 * here (idle.c). Everything runs with the call layer's lock held. */
#ifndef SLUICE_FRONTEND_CALL_IDLE_H
#define SLUICE_FRONTEND_CALL_IDLE_H

#include <stdint.h>

#include "sluice/wire.h"
#include "sluice_session.pb-c.h"

/* A call appended to the pending frame (its table entry; NULL: none). */
void sl_fe_idle_note(const Sluice__Wire__Call *c, const struct sl_call_info *ci);
/* 1 if c (a synchronization or a stream query) can be answered with success here. */
int sl_fe_idle_can_answer(const Sluice__Wire__Call *c);
/* c was answered with success (here or by the backend): what it synchronized is idle. */
void sl_fe_idle_answered(const Sluice__Wire__Call *c);
/* An answer with an error: nothing is known idle any more. */
void sl_fe_idle_after_error(uint32_t call_id);
/* The session is new or gone: nothing is known idle. */
void sl_fe_idle_forget(void);
/* Back to the initial state, counts included (tests). */
void sl_fe_idle_reset(void);
/* Per call id, how often a call made the frontend forget that the context was idle. */
const uint32_t *sl_fe_idle_unclean_counts(void);

#endif
