/* Backend dispatch: call id -> handler. The generated table holds one handler per
 * non-handwritten call and NULL for handwritten ones; the backend copies it into a mutable
 * table and registers its hand-written handlers there. */
#ifndef SLUICE_BACKEND_DISPATCH_H
#define SLUICE_BACKEND_DISPATCH_H

#include <cuda.h>
#include <stdint.h>

#include "sluice/backend_hooks.h"
#include "sluice/wire.h"

struct sl_driver_api;

/* A handler decodes call's request, runs it and attaches its reply message to reply->out. */
typedef CUresult (*sl_be_handler)(sl_be_session *s, const struct sl_driver_api *api,
                                  const Sluice__Wire__Call *call, Sluice__Wire__Reply *reply);

struct sl_be_dispatch_entry {
    uint32_t call_id; /* 0 for an unused slot */
    const char *name;
    uint32_t flags; /* enum sl_call_flag */
    sl_be_handler handler;
};

/* Generated; indexed by call id. */
extern const struct sl_be_dispatch_entry sl_be_generated_table[SL_CALL_ID_MAX + 1];

/* Copies the generated table into table (SL_CALL_ID_MAX + 1 entries). */
void sl_be_dispatch_init(struct sl_be_dispatch_entry *table);

/* Runs one call: checks the call id and its oneof member, finds the handler (none:
 * CUDA_ERROR_NOT_SUPPORTED) and fills reply's seq, call_id, result and out. reply must be
 * initialised (SLUICE__WIRE__REPLY__INIT); release its out member with sl_be_reply_clear. */
CUresult sl_be_dispatch(sl_be_session *s, const struct sl_driver_api *api,
                        const struct sl_be_dispatch_entry *table, const Sluice__Wire__Call *call,
                        Sluice__Wire__Reply *reply);

/* Frees what a handler attached to reply (its out member and detail) and resets them. */
void sl_be_reply_clear(Sluice__Wire__Reply *reply);

#endif
