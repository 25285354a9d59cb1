/* The page-locked staging buffer of a context (staging.c): where a small synchronous
 * device-to-host copy lands before its bytes join the reply (api/copy_small.c). */
#ifndef SLUICE_BE_SESSION_STAGING_H
#define SLUICE_BE_SESSION_STAGING_H

#include <stddef.h>

#include "session/state.h"

struct be_ctx;

#define BE_STAGE_BYTES ((size_t)64 << 10) /* per context: the largest copy it takes */

/* The staging buffer of context cx, which must be current on the calling (session) thread:
 * made with cuMemHostAlloc at the first use, then kept until the context goes. NULL when the
 * driver has no cuMemHostAlloc or refused it (then never asked again for this context: the
 * caller copies the way it did before). */
void *be_stage_get(sl_be_session *s, struct be_ctx *cx);
/* Frees cx's staging buffer (cuMemFreeHost with cx current), before cx is destroyed or reset;
 * the next use makes a new one. The context current on the session thread is unknown after. */
void be_stage_free(sl_be_session *s, struct be_ctx *cx);
/* A staging buffer lent to a copy's wait (session/waits.c) comes back: it is cx's again when
 * keep and cx has none now (a copy made another meanwhile), else it is freed (cuMemFreeHost
 * with cx current). The context current on the session thread is unknown after. */
void be_stage_give_back(sl_be_session *s, struct be_ctx *cx, void *p, int keep);

#endif
