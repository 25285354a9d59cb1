/* Page-locked slots for the bytes of large copies (bulk_pool.c; docs/remoting.md, "Lanes and
 * page-locked staging"). */
#ifndef SLUICE_BE_SESSION_BULK_POOL_H
#define SLUICE_BE_SESSION_BULK_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/driver_api.h"

#define BE_POOL_SLOT  ((size_t)16 << 20) /* one piece of a large copy, as the frontend cuts them */
#define BE_POOL_SLOTS 8u                 /* 128 MiB of page-locked memory per session at most */
/* The least bulk a slot takes; smaller stays in the frame's buffer, or for a device-to-host copy
 * goes through the context's 64 KiB staging buffer (staging.c). */
#define BE_POOL_MIN (((size_t)64 << 10) + 1)

typedef struct be_pool be_pool;

/* A pool of up to max_slots slots, made as they are first needed. NULL: out of memory. */
be_pool *be_pool_new(const struct sl_driver_api *api, unsigned max_slots);
/* Session thread, once no device work reads or writes a slot (the session's end): unregisters
 * and unmaps every slot. Slots still out (a reply not yet sent) are freed when they come back. */
void be_pool_free(be_pool *p);

/* The budget the pool's page-locked slots are taken from (the backend's, across its sessions:
 * --staging-budget): budget(u, bytes) before a slot is registered (1: granted; 0: the slot stays
 * pageable this time, asked again at its next use), budget(u, -bytes) for every registered slot
 * when the pool closes. Without one the pool registers every slot it makes. */
void be_pool_budget(be_pool *p, int (*budget)(void *u, int64_t bytes), void *u);

/* Any thread: a free slot for len bytes (BE_POOL_MIN <= len <= BE_POOL_SLOT), made when fewer
 * than the pool's maximum exist; NULL when there is none (the caller mallocs). */
void *be_pool_take(be_pool *p, size_t len);
/* Any thread: buf back to its pool when it is a slot (taken from any pool), else free(buf). */
void be_bulk_free(void *buf);
/* Any thread: 1 when buf is a slot (which the channel's send_take, freeing with free(), must
 * never get). */
int be_bulk_is_slot(const void *buf);

/* Session thread: 1 when buf (a slot) is page-locked, registering it with the driver at its
 * first use (with the context current on the session thread; portable to every context). 0
 * when buf is no slot or the driver refused: the slot is then used as pageable memory. */
int be_pool_pin(be_pool *p, void *buf);
/* Session thread: when ptr lies in a page-locked slot, that slot does not come back to the pool
 * before the work now queued on stream st (an async copy reading it) is done. Returns 0, or -1
 * when no event could be recorded: the caller synchronizes st instead. */
int be_pool_hold(be_pool *p, const void *ptr, CUstream st);
/* Session thread: slots whose held work is done become free. */
void be_pool_reap(be_pool *p);
/* Logs (info) what the pool served, if anything: session sid's line. */
void be_pool_log(be_pool *p, unsigned long long sid);

#endif
