/* Host callbacks (callback.c): the guest's answers and the session's end. */
#ifndef SLUICE_BE_API_CALLBACK_H
#define SLUICE_BE_API_CALLBACK_H

#include <stdint.h>

#include "session/state.h"

/* The guest answered CallbackDone{id} (channel thread). */
void be_callback_done(sl_be_session *s, uint64_t id);
/* Session closing: every waiting callback returns. */
void be_callbacks_cancel(sl_be_session *s);

#endif
