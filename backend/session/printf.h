/* Device printf capture (printf.c): fd 1 becomes a pipe drained into the session's pending
 * output, which travels in the next reply. */
#ifndef SLUICE_BE_SESSION_PRINTF_H
#define SLUICE_BE_SESSION_PRINTF_H

#include <stddef.h>
#include <stdint.h>

#include "session/state.h"
#include "sluice/error.h"

sl_code be_printf_init(sl_error *e); /* fd 1 -> pipe */
void be_printf_lock(void);
/* Drains the pipe into the session's pending output, then unlocks. */
void be_printf_unlock_drain(sl_be_session *s);
int be_printf_active(void);
/* Takes the session's pending output (*out: free() it; NULL/0 when none). */
void be_printf_take(sl_be_session *s, uint8_t **out, size_t *len);
/* Worker processes: a thread drains the pipe into s between synchronizing calls; unwatch
 * before s is freed. */
sl_code be_printf_watch(sl_be_session *s, sl_error *e);
void be_printf_unwatch(void);

#endif
