/* A synchronous call's reply (reply.c). */
#ifndef SLUICE_BE_SESSION_REPLY_H
#define SLUICE_BE_SESSION_REPLY_H

#include "session/state.h"
#include "sluice/backend_dispatch.h"

/* Sends a synchronous call's reply (deferred errors, printf output, mapped memory, its bulk);
 * frees c->out. */
void be_session_send_reply(sl_be_session *s, struct sl_be_call *c);

#endif
