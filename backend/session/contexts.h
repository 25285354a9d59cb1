/* A session's context ids (contexts.c): contexts made lazily on the session's worker, primary
 * contexts with pre-assigned ids (one per device). */
#ifndef SLUICE_BE_SESSION_CONTEXTS_H
#define SLUICE_BE_SESSION_CONTEXTS_H

#include <cuda.h>
#include <stdint.h>

#include "session/state.h"

struct be_ctx {
    uint64_t id;
    CUcontext ctx; /* NULL until created (primary contexts are made lazily) */
    int ordinal;
    unsigned flags;
    int primary;
    CUresult sticky;
    /* the seq of its last async call (work that may still run) and of its last successful
     * cuCtxSynchronize: with none after that sync, the context is idle (waits.c) */
    uint64_t async_seq, synced_seq;
    void *stage;       /* page-locked staging of small device-to-host copies (staging.c) */
    int stage_refused; /* the driver refused it: those copies go the pageable way */
};

struct be_ctx *be_ctx_find(sl_be_session *s, uint64_t id);
CUresult be_ctx_ensure(sl_be_session *s, struct be_ctx *c);
CUresult be_ctx_add(sl_be_session *s, CUcontext ctx, int ordinal, int primary, uint64_t *id);
void be_ctx_forget(sl_be_session *s, uint64_t id); /* drops its handles and ranges too */
/* Drops the handles made while context id was current and its ranges. */
void be_ctx_drop_objects(sl_be_session *s, uint64_t id);

#endif
