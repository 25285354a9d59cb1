/* What one session is: struct sl_be_session, the state every layer reads (header only; its life
 * is session.c).
 *
 * The session's worker thread (session.c) owns its CUDA contexts, handle table, allocation table
 * and the state the API families keep (api/): only the worker touches them, so they need no
 * lock. The queue is shared with the channel thread under mu. The structures a field points to
 * belong to the file named beside it; those it embeds are the session's tables (handles.h,
 * ranges.h, deferred.h). */
#ifndef SLUICE_BE_SESSION_STATE_H
#define SLUICE_BE_SESSION_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "bounds.h"
#include "session/deferred.h"
#include "session/handles.h"
#include "session/ranges.h"
#include "sluice/backend_hooks.h"
#include "sluice/channel.h"
#include "sluice/driver_api.h"

struct be_acct;      /* accounting/state.h */
struct be_broker;    /* daemon/broker.c */
struct be_call_time; /* session.c */
struct be_cb;        /* api/callback.c */
struct be_ctx;       /* session/contexts.h */
struct be_devices;   /* session/devices.h */
struct be_gstate;    /* api/graph.h */
struct be_job;       /* session/session.h */
struct be_lanes;     /* daemon/lanes.h */
struct be_map;       /* api/mapped.c */
struct be_settle;    /* api/mapped.c */
struct be_pool;      /* session/bulk_pool.c */
struct be_server;    /* the channel thread's server; NULL in a session worker process */
struct be_vmm;       /* api/vmm.c */
struct be_waits;     /* session/waits.c */

struct sl_be_session {
    uint64_t id;
    sl_peer peer;
    char instance[64], project[64];
    const struct sl_driver_api *api;
    const struct be_devices *devs;
    struct be_server *srv;

    /* worker-only state */
    struct be_handles h;
    struct be_mem mem;
    struct be_ctx *ctxs[BE_MAX_CONTEXTS];
    size_t n_ctxs;
    uint64_t cur_ctx; /* id of the context current on the worker, UINT64_MAX = unknown */
    struct be_deferred def;
    uint64_t *primary_ids; /* per device ordinal */
    uint8_t *stdout_buf;   /* printf output not yet delivered */
    size_t stdout_len;
    uint8_t *stderr_buf; /* device stderr output (failed asserts) not yet delivered */
    size_t stderr_len;
    uint64_t calls, errors;
    struct { /* the session thread's own figures, logged at the end (session.c) */
        uint64_t frames, busy_ns, runs_ns, backlog;
        uint64_t img_sent, img_sent_bytes, img_kept, img_asked; /* api/module.c: images */
        struct be_call_time *by_call; /* SL_CALL_ID_MAX + 1 entries; NULL: no memory for it */
    } st;
    struct be_acct *acct;  /* GPU-time measurement, quota, share (accounting/); may be NULL */
    struct be_map *mapped; /* mapped host memory (api/mapped.c) */
    uint64_t mapped_bytes;
    struct be_settle *settles; /* settles waiting for their stream (api/mapped.c) */
    unsigned n_settles;
    struct be_gstate *graph;  /* graphs on guest memory, graph allocations (api/graph*.c) */
    struct be_vmm *vmm;       /* address reservations and mappings (api/vmm.c) */
    struct be_waits *waits;   /* blocking waits off the call path (waits.c); NULL: inline */
    struct be_broker *broker; /* the IPC token broker (daemon/broker.c, api/ipc.c) of a session
                               * worker process; NULL: none (IPC calls are refused) */

    /* shared with the channel thread (mu) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct be_job *qhead, *qtail;
    size_t q_calls, q_bytes;
    atomic_uint q_jobs;     /* jobs queued: what the idle session thread watches while it spins */
    uint64_t spin_ns;       /* --spin-us (spin.c); set before be_session_start */
    struct be_lanes *lanes; /* a worker's bulk lanes (daemon/lanes.c): replies asked for on
                             * them leave there (reply.c); NULL: none */
    struct be_pool *pool;   /* page-locked slots for large copies' bytes (bulk_pool.c) */
    int closing;            /* no more jobs: clean up and exit */
    atomic_int abandon;     /* with closing: nothing more runs, is waited for or freed
                             * (be_session_abandon); read without mu between calls */
    atomic_int finished;    /* the worker is done; the channel thread may join and free */
    _Atomic(const char *) doing; /* what the session thread is in (a call's name, the
                                  * accounting), NULL between them: the teardown's warning */
    struct be_cb *cbs;           /* callbacks waiting for CallbackDone */
    uint64_t next_cb;
    pthread_t thread;
    int started;
};

#endif
