/* A synchronous call's reply (reply.c). */
#ifndef SLUICE_BE_SESSION_REPLY_H
#define SLUICE_BE_SESSION_REPLY_H

#include "session/state.h"
#include "sluice/backend_dispatch.h"

/* Sends a synchronous call's reply (deferred errors, printf output, mapped memory, its bulk);
 * frees c->out. */
void be_session_send_reply(sl_be_session *s, struct sl_be_call *c);
/* 1 when a reply of blen bytes to call leaves in pieces on the session's lanes (the call asked
 * for it, they are up, the bulk is large enough). */
int be_reply_on_lanes(const sl_be_session *s, const Sluice__Wire__Call *call, uint64_t blen);

#endif
