/* Device printf and device-side assert capture (printf.c): fds 1 and 2 become pipes drained
 * into the session's pending output, which travels in the next reply. */
#ifndef SLUICE_BE_SESSION_PRINTF_H
#define SLUICE_BE_SESSION_PRINTF_H

#include <stddef.h>
#include <stdint.h>

#include "session/state.h"
#include "sluice/error.h"

sl_code be_printf_init(sl_error *e); /* fds 1 and 2 -> pipes; the log keeps a copy of fd 2 */
void be_printf_lock(void);
/* Drains the pipes into the session's pending output, then unlocks. */
void be_printf_unlock_drain(sl_be_session *s);
int be_printf_active(void);
/* The session's pending output: what went to fd 1 and to fd 2 (free() both; NULL/0 when
 * none). */
struct be_output {
    uint8_t *out, *err;
    size_t out_len, err_len;
};
void be_printf_take(sl_be_session *s, struct be_output *out);
/* Worker processes: a thread drains the pipes into s between synchronizing calls; unwatch
 * before s is freed. */
sl_code be_printf_watch(sl_be_session *s, sl_error *e);
void be_printf_unwatch(void);

#endif
