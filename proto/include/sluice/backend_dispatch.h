/* Backend dispatch: call id -> handler, one table built at compile time (the generated
 * backend_table.c, compiled into the backend): generated handlers (sl_be_gen_<name>) and the
 * backend's hand-written ones (be_h_<name>, declared in the generated sluice/backend_handlers.h)
 * are bound by name, so a missing handler fails the link. */
#ifndef SLUICE_BACKEND_DISPATCH_H
#define SLUICE_BACKEND_DISPATCH_H

#include <cuda.h>
#include <stdint.h>

#include "sluice/backend_hooks.h"
#include "sluice/wire.h"

struct sl_driver_api;

/* One call as its handler sees it. The caller owns everything; a handler reads the request and
 * the bulk that came with it, attaches its reply message to reply->out and may leave bulk for
 * the reply in out/out_len (malloc'd: the caller frees it after sending). */
struct sl_be_call {
    sl_be_session *s;
    const struct sl_driver_api *api;
    const Sluice__Wire__Call *call;
    Sluice__Wire__Reply *reply;
    const uint8_t *in; /* the call's bulk (NULL when none) */
    uint64_t in_len;
    uint8_t *out; /* the reply's bulk */
    uint64_t out_len;
    uint64_t parent; /* the module or library an object the call looked up came from */
    int deferred;    /* the reply follows later (backend/waits.c): send nothing now */
};

typedef CUresult (*sl_be_handler)(struct sl_be_call *c);

struct sl_be_dispatch_entry {
    uint32_t call_id;      /* 0 for an unused slot */
    sl_be_handler handler; /* NULL: the call does not arrive (refused, local, sent as others) */
};

/* The backend's table (generated backend_table.c), indexed by call id. */
extern const struct sl_be_dispatch_entry sl_be_table[SL_CALL_ID_MAX + 1];

/* Runs one call through table: checks the call id and its oneof member, finds the handler
 * (none: CUDA_ERROR_NOT_SUPPORTED with a detail saying why the call does not arrive) and fills
 * reply's seq, call_id and result. c->reply must be initialised (SLUICE__WIRE__REPLY__INIT);
 * release its out member with sl_be_reply_clear. */
CUresult sl_be_dispatch(const struct sl_be_dispatch_entry *table, struct sl_be_call *c);

/* Frees what a handler attached to reply (its out member and detail) and resets them. */
void sl_be_reply_clear(Sluice__Wire__Reply *reply);

/* Sets reply->detail (a Sluice-side refusal reason). */
void sl_be_detail(Sluice__Wire__Reply *reply, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
