/* sluice-backend internals shared by the files of backend/ (one concern per file).
 *
 * Processes: the server process (server.c) never loads the driver; each session runs in a
 * worker process of its own (worker.c: the same binary, `--session-worker FD`), because a
 * sticky CUDA error poisons a whole process. Inside a worker the session code below runs as
 * before; the unit tests run it on threads of the server process instead.
 *
 * Threads: the main thread runs the channel (server.c): it polls the sl_server, the workers'
 * sockets, the agent's control socket (control.c) and an eventfd in-process workers signal; it
 * decodes ClientMessages, takes their bulk and hands them to the session. Each session has one
 * worker thread (session.c) that owns the session's CUDA contexts, handle table and allocation
 * table: only the worker touches them, so they need no lock. Workers hand encoded replies back to
 * the channel thread through the outbox. */
#ifndef SLUICE_BACKEND_H
#define SLUICE_BACKEND_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/backend_dispatch.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"
#include "sluice/channel.h"
#include "sluice/driver_api.h"
#include "sluice/wire.h"

#define BE_COMPONENT "sluice-backend"

/* ---------------------------------------------------------------- limits */
#define BE_MAX_BULK_PER_CALL  ((uint64_t)64 << 20)  /* HtoD data, params, images, DtoH replies */
#define BE_MAX_BULK_PER_FRAME ((uint64_t)128 << 20) /* all calls of one CallFrame */
#define BE_MAX_REPLY_QUEUE    ((size_t)192 << 20)   /* replies waiting for one guest to read */
#define BE_MAX_QUEUED_CALLS   (16384u)              /* calls waiting in one session's queue */
#define BE_MAX_QUEUED_BYTES   ((size_t)320 << 20)   /* bulk waiting in one session's queue */
#define BE_MAX_HANDLES        (1u << 20)            /* live handles per session */
#define BE_MAX_ALLOCS         (1u << 20)            /* live device ranges per session */
#define BE_MAX_CONTEXTS       64u                   /* contexts per session */
#define BE_MAX_PARAMS         1024u                 /* kernel parameters per function */
#define BE_MAX_PARAM_BYTES    32768u                /* kernel parameter buffer */
#define BE_MAX_STDOUT         ((size_t)1 << 20)     /* printf bytes kept for one reply */
#define BE_IMAGE_CACHE_BYTES  ((size_t)512 << 20)   /* in-process image cache */
#define BE_IMAGE_CACHE_COUNT  1024u
#define BE_IMAGE_STORE_BYTES  ((uint64_t)1 << 30) /* images on disk (--state-dir), per tenant */

/* SLA accounting: measurement, quota, share, usage records (docs/accounting.md) */
#include "accounting.h"

/* ---------------------------------------------------------------- handles.c */
#define BE_ID_KIND_SHIFT   56
#define BE_ID_COUNTER_MASK ((UINT64_C(1) << BE_ID_KIND_SHIFT) - 1)

struct be_layout {
    uint32_t count;
    uint64_t end; /* bytes of the packed parameter buffer: max(offset + size) */
    uint64_t *offsets, *sizes;
};

struct be_handle {
    uint64_t id; /* 0 = empty slot, 1 = tombstone */
    void *native;
    uint64_t owner_ctx;       /* context id current when it was made (0: none / independent) */
    uint64_t parent;          /* module/library id a function/kernel came from, 0 = none */
    struct be_layout *layout; /* functions/kernels: cached parameter layout */
    struct be_image *image;   /* modules/libraries: the cached image they were loaded from */
};

struct be_handles {
    struct be_handle *slot;
    size_t cap, used, live; /* used counts tombstones too */
    size_t max_live;
};

void be_handles_init(struct be_handles *t, size_t max_live);
void be_handles_free(struct be_handles *t);
/* A new id of kind (process-wide counter: ids are never reused, not even across sessions). */
CUresult be_handles_put(struct be_handles *t, enum sl_handle_kind kind, void *native,
                        uint64_t owner_ctx, uint64_t parent, uint64_t *id);
/* The entry of id if it exists and has kind; NULL otherwise. */
struct be_handle *be_handles_find(struct be_handles *t, enum sl_handle_kind kind, uint64_t id);
void be_handles_del(struct be_handles *t, uint64_t id);
static inline enum sl_handle_kind be_id_kind(uint64_t id)
{
    return (enum sl_handle_kind)(id >> BE_ID_KIND_SHIFT);
}

/* ---------------------------------------------------------------- memory.c */
enum be_range_kind { BE_R_ALLOC = 1, BE_R_GLOBAL, BE_R_OTHER };

struct be_range {
    uint64_t base, size;
    uint64_t owner_ctx; /* context it lives in (0: unknown) */
    uint64_t parent;    /* module/library id for globals */
    enum be_range_kind kind;
    int counted; /* an allocation (cuMemAlloc*, pitch, async/pool): counts for the quota */
};

struct be_mem {
    struct be_range *r; /* sorted by base, non-overlapping */
    size_t n, cap, max;
    uint64_t counted;     /* bytes of the counted ranges: the session's device memory */
    uint64_t counted_vmm; /* bytes of the live cuMemCreate allocations (vmm.c): counted too */
    struct be_held {
        uint64_t id, bytes;
    } * held; /* CUDA arrays (handle id, bytes), counted until destroyed (quota.c) */
    size_t n_held, cap_held;
    uint64_t counted_held;
};

void be_mem_init(struct be_mem *m, size_t max);
void be_mem_free(struct be_mem *m);
/* [ptr, ptr + len) inside one range (len 0: ptr inside one range). Overflow-safe. */
int be_mem_contains(const struct be_mem *m, uint64_t ptr, uint64_t len);
/* Adds a range; an identical one is kept once; ranges it overlaps are replaced (the driver
 * says the memory is now this). CUDA_ERROR_INVALID_VALUE on size 0 or wrap. */
CUresult be_mem_add(struct be_mem *m, uint64_t base, uint64_t size, enum be_range_kind kind,
                    uint64_t owner_ctx, uint64_t parent);
/* Removes the range starting exactly at base; 0 if none. */
int be_mem_remove(struct be_mem *m, uint64_t base);
/* Removes every range of a context / of a module or library. */
void be_mem_remove_owner(struct be_mem *m, uint64_t owner_ctx);
void be_mem_remove_parent(struct be_mem *m, uint64_t parent);
/* The range at base was made by call_id: when that is an allocation, it counts in m->counted. */
void be_mem_count(struct be_mem *m, uint32_t call_id, uint64_t base);
const struct be_range *be_mem_find(const struct be_mem *m, uint64_t ptr);

/* ---------------------------------------------------------------- deferred.c */
struct be_deferred {
    uint64_t failed_seq; /* first failed async call not yet reported, 0 = none */
    CUresult failed_rc;
};

int be_is_sticky(CUresult rc);
/* An async call finished with rc. */
void be_deferred_async(struct be_deferred *d, uint64_t seq, CUresult rc);
/* Stamps a synchronous reply: failed_seq and, if the call itself succeeded, the deferred result
 * instead of its success. Clears the recorded failure. */
void be_deferred_stamp(struct be_deferred *d, uint64_t *failed_seq, int32_t *result);

/* ---------------------------------------------------------------- device.c */
struct be_device {
    CUdevice dev;
    char name[256];
    uint8_t uuid[16];
    int has_uuid;
    uint64_t total_mem;
    int32_t *attrs;
    size_t n_attrs;
    uint8_t luid[8];
    int has_luid;
    unsigned luid_mask;
};

struct be_devices {
    int driver_version;
    int count;
    struct be_device *dev;
};

/* cuInit + every immutable fact of every device. */
sl_code be_devices_load(const struct sl_driver_api *api, struct be_devices *d, sl_error *e);
void be_devices_free(struct be_devices *d);

/* ---------------------------------------------------------------- sessions */
struct be_ctx {
    uint64_t id;
    CUcontext ctx; /* NULL until created (primary contexts are made lazily) */
    int ordinal;
    unsigned flags;
    int primary;
    CUresult sticky;
};

struct be_job {
    struct be_job *next;
    Sluice__Wire__ClientMessage *msg; /* a CallFrame */
    uint8_t **bulk;                   /* per call, NULL when none */
    uint8_t *blob;                    /* when set, bulk[i] point into it (worker.c) */
    size_t bytes;
    void (*release)(struct be_job *j); /* worker.c: bulk in the shared ring, freed by this */
    uint64_t ring_end;
};

struct be_cb; /* callback.c */
struct be_server;

struct be_call_time {   /* calls of one id run by a session (session.c) */
    uint64_t n;         /* calls run */
    uint64_t timed, ns; /* calls timed, their time from dispatch to reply sent */
};

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
    uint64_t calls, errors;
    struct { /* the session thread's own figures, logged at the end (session.c) */
        uint64_t frames, busy_ns, runs_ns, backlog;
        uint64_t img_sent, img_sent_bytes, img_kept, img_asked; /* module.c: images */
        struct be_call_time *by_call; /* SL_CALL_ID_MAX + 1 entries; NULL: no memory for it */
    } st;
    struct be_acct *acct;  /* GPU-time measurement, quota, share (accounting.c); may be NULL */
    struct be_map *mapped; /* mapped host memory (mapped.c) */
    uint64_t mapped_bytes;
    struct be_gstate *graph; /* graphs on guest memory, graph allocations (graph*.c) */
    struct be_vmm *vmm;      /* address reservations and mappings (vmm.c) */

    /* shared with the channel thread (mu) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct be_job *qhead, *qtail;
    size_t q_calls, q_bytes;
    atomic_uint q_jobs;  /* jobs queued: what the idle session thread watches while it spins */
    uint64_t spin_ns;    /* --spin-us (spin.c); set before be_session_start */
    int closing;         /* no more jobs: clean up and exit */
    atomic_int finished; /* the worker is done; the channel thread may join and free */
    struct be_cb *cbs;   /* callbacks waiting for CallbackDone */
    uint64_t next_cb;
    pthread_t thread;
    int started;
};

/* A bare session (tables, primary context ids, no thread): tests use it directly. */
sl_be_session *be_session_new(uint64_t id, const struct sl_driver_api *api,
                              const struct be_devices *devs);
/* Starts the worker thread. */
sl_code be_session_start(sl_be_session *s, sl_error *e);
/* Queues a job; SL_ERR_TOO_LARGE when the queue bounds would be exceeded. */
sl_code be_session_enqueue(sl_be_session *s, struct be_job *job, sl_error *e);
/* Asks the worker to finish (releases waiting callbacks); non-blocking. */
void be_session_close(sl_be_session *s);
/* Joins the worker and frees everything. */
void be_session_free(sl_be_session *s);
void be_job_free(struct be_job *j);
/* Frees everything the session holds in the driver (contexts, libraries) and its tables;
 * called by the worker at its end (and by tests). */
void be_session_release_all(sl_be_session *s);

/* Context ids (session.c). */
struct be_ctx *be_ctx_find(sl_be_session *s, uint64_t id);
CUresult be_ctx_ensure(sl_be_session *s, struct be_ctx *c);
CUresult be_ctx_add(sl_be_session *s, CUcontext ctx, int ordinal, int primary, uint64_t *id);
void be_ctx_forget(sl_be_session *s, uint64_t id); /* drops its handles and ranges too */

/* Runs one call on the worker: context, sticky errors, printf, then be_layers_run. The caller
 * builds c (session, call, reply, bulk in) and owns the reply bulk the handler leaves in it. */
CUresult be_run_call(struct sl_be_call *c);
/* layers.c: accounting and the quota around the dispatch table's handler. */
CUresult be_layers_run(struct sl_be_call *c, const struct sl_call_info *ci);

/* ---------------------------------------------------------------- mapped.c */
/* Attaches to a synchronous reply the bytes device work changed in mapped host memory;
 * _done frees them once the reply is encoded. */
void be_mapped_collect(sl_be_session *s, Sluice__Wire__Reply *reply);
void be_mapped_collect_done(Sluice__Wire__Reply *reply);
void be_mapped_release_all(sl_be_session *s);
/* Session end, after its contexts are gone: frees the graph state (graph_life.c), which also
 * frees the VMM bookkeeping (be_vmm_release) and the link states (be_link_release). */
void be_graph_release(sl_be_session *s);
void be_vmm_release(sl_be_session *s);
void be_link_release(sl_be_session *s);

/* Helper for hand handlers: allocate a reply member message. */
#define BE_REPLY(reply, field, CASE, Type, init)                                                   \
    ({                                                                                             \
        Type *rp_ = malloc(sizeof *rp_);                                                           \
        if (rp_) {                                                                                 \
            init(rp_);                                                                             \
            (reply)->out_case = CASE;                                                              \
            (reply)->field = rp_;                                                                  \
        }                                                                                          \
        rp_;                                                                                       \
    })
/* Stream id -> native (0, legacy, per-thread pass through). */
CUresult be_stream(sl_be_session *s, uint64_t id, CUstream *out);
/* 1 when st (the _ptsz variant's when per_thread) is capturing into a graph. */
int be_stream_capturing(sl_be_session *s, CUstream st, int per_thread);
/* Work that reads or writes the session's transient buffers (a copy's bulk, a one-shot host
 * callback) must not be captured into a graph: the graph would use them after they are freed.
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED with a detail naming what when st is capturing. */
CUresult be_refuse_if_capturing(sl_be_session *s, Sluice__Wire__Reply *reply, CUstream st,
                                int per_thread, const char *what);

/* ---------------------------------------------------------------- module.c */
struct be_image;
void be_image_unref(struct be_image *img);
void be_images_clear(void);
/* Checks that an image of format (1 fatbin behind a rebuilt wrapper, 2 fatbin, 3 ELF, 4 PTX)
 * is entirely inside its len bytes, so the driver never reads past it. */
CUresult be_image_validate(const uint8_t *p, uint64_t len, uint32_t format);
/* The same bounds checks for a cuLinkAddData_v2 input of CUjitInputType type: cubin and
 * object ELF, PTX NUL-terminated, fatbin, ar archive of ELF objects; NVVM IR is refused
 * (CUDA_ERROR_NOT_SUPPORTED), an unknown type is CUDA_ERROR_INVALID_VALUE. */
CUresult be_link_input_validate(const uint8_t *p, uint64_t len, uint32_t type);

/* ---------------------------------------------------------------- image_store.c */
/* Images on disk across sessions, in dir (STATE_DIR/images; "" or NULL: none). get returns the
 * image (malloc'd) only when the file's size and SHA-256 are those asked for, else NULL; put
 * stores it (nothing when it is there, or on an error, which is logged) and evicts the least
 * recently used files beyond the limit (BE_IMAGE_STORE_BYTES). */
void be_image_store_set_dir(const char *dir);
void be_image_store_set_limit(uint64_t bytes);
uint8_t *be_image_store_get(const uint8_t sha[32], uint64_t size);
void be_image_store_put(const uint8_t sha[32], const uint8_t *bytes, uint64_t size);

/* ---------------------------------------------------------------- launch.c */
/* The parameter layout of a function or kernel id (cached in its handle). */
CUresult be_layout_get(sl_be_session *s, uint64_t fid, struct be_layout **out, void **native);
/* Builds kernelParams for buf against layout: params[i] = buf + offsets[i]. */
CUresult be_params_rebuild(const struct be_layout *l, const uint8_t *buf, uint64_t len,
                           void **params);
void be_layout_free(struct be_layout *l);

/* ---------------------------------------------------------------- callback.c */
/* The guest answered CallbackDone{id} (channel thread). */
void be_callback_done(sl_be_session *s, uint64_t id);
/* Session closing: every waiting callback returns. */
void be_callbacks_cancel(sl_be_session *s);

/* ---------------------------------------------------------------- printf.c */
sl_code be_printf_init(sl_error *e); /* fd 1 -> pipe */
void be_printf_lock(void);
/* Drains the pipe into the session's pending output, then unlocks. */
void be_printf_unlock_drain(sl_be_session *s);
int be_printf_active(void);
/* Takes the session's pending output (*out: free() it; NULL/0 when none). */
void be_printf_take(sl_be_session *s, uint8_t **out, size_t *len);
/* Worker processes: a thread drains the pipe into s between synchronizing calls; unwatch
 * before s is freed. */
sl_code be_printf_watch(sl_be_session *s, sl_error *e);
void be_printf_unwatch(void);

/* ---------------------------------------------------------------- spin.c */
uint64_t be_now_ns(void); /* CLOCK_MONOTONIC */
/* BE_DEFAULT_SPIN_US, or 0 on a machine of fewer than 4 CPUs (spinning threads would take the
 * CPU from the thread they wait for). */
unsigned be_default_spin_us(void);

/* ---------------------------------------------------------------- server.c */
struct be_config {
    const char *project, *listen, *cert, *key, *ca, *driver, *control, *allow, *state_dir;
    const char *control_key; /* --control-key FILE: the agent's key (control.c) */
    /* Set by main: each session runs in `worker_exe --session-worker FD ...` (worker.c) and
     * the server never loads the driver. NULL (unit tests): sessions run on threads of this
     * process with the api/devs given to be_server_run. */
    const char *worker_exe;
    unsigned max_sessions;     /* live sessions; 0 = BE_DEFAULT_MAX_SESSIONS */
    unsigned usage_interval_s; /* usage record period; 0 = BE_USAGE_INTERVAL_S */
    unsigned usage_resend_s;   /* unacknowledged records again after; 0 = BE_USAGE_RESEND_S */
    int no_gpu_timing;         /* --measure none: no timing events (overhead measurements) */
    const char *image_dir;     /* set by main: STATE_DIR/images when it could be made; NULL */
    unsigned spin_us;          /* --spin-us: idle threads poll this long before sleeping */
};
#define BE_DEFAULT_SPIN_US      200u
#define BE_MAX_SPIN_US          100000u
#define BE_DEFAULT_MAX_SESSIONS 64u
#define BE_WORKER_GRACE_MS      5000 /* after the socket is closed, then SIGKILL */

/* Outbox: what workers send through the channel thread. */
void be_outbox_push_reply(struct be_server *srv, sl_peer peer, uint8_t *msg, size_t len,
                          uint8_t *bulk, size_t bulk_len);
/* Ends a session from the worker side (protocol violation found late). */
void be_outbox_push_close(struct be_server *srv, sl_peer peer, sl_code code, const char *why);
/* In a session worker process (srv == NULL) the outbox goes to this sink instead. */
typedef void (*be_outbox_sink)(int close_it, sl_code code, const char *why, const uint8_t *msg,
                               size_t len, const uint8_t *bulk, size_t blen);
void be_outbox_set_sink(be_outbox_sink f);
/* The encoded ServerMessage{accept} for session s on devs. */
sl_code be_encode_accept(const struct be_devices *devs, const sl_be_session *s, uint8_t **buf,
                         size_t *len, sl_error *e);

/* ---------------------------------------------------------------- worker.c */
enum { BE_IPC_MSG = 1, BE_IPC_SEND = 2, BE_IPC_CLOSE = 3 };
/* Shared memory (one memfd per session, sent with SCM_RIGHTS in the first record, BE_IPC_SHM):
 * a page of counters, then the down ring (parent -> worker bulk), then the up ring (reply bulk).
 * BE_IPC_MSG_SHM / BE_IPC_SEND_SHM: as MSG / SEND, but the "bulk" is a be_ipc_shm saying where
 * the bulk lies in the ring. Each ring is FIFO: the producer owns head, the consumer stores the
 * `end` of what it has finished with in the counter page. */
enum { BE_IPC_MSG_SHM = 4, BE_IPC_SEND_SHM = 5, BE_IPC_SHM = 6 };
/* Worker -> parent: an encoded UsageRecord (accounting.c), also after the session ended. */
enum { BE_IPC_USAGE = 7 };
#define BE_SHM_PAGE ((uint64_t)4096)
#define BE_SHM_DOWN ((uint64_t)160 << 20) /* two 64 MiB chunks and the small ones between */
#define BE_SHM_UP   ((uint64_t)80 << 20)
#define BE_SHM_SIZE (BE_SHM_PAGE + BE_SHM_DOWN + BE_SHM_UP)
struct be_shm_ctl {
    _Atomic uint64_t down_tail; /* the worker is done with the down ring up to here */
    uint8_t pad[56];
    _Atomic uint64_t up_tail; /* the parent is done with the up ring up to here */
};
struct be_ipc_shm {
    uint64_t off, len, end; /* ring offset, bytes, head after this slot */
};
/* A slot of len bytes (64-aligned) in a ring of cap bytes, producer at head, consumer at tail;
 * 0 and *off, *end on success, -1 when it does not fit now. */
static inline int be_ring_alloc(uint64_t head, uint64_t tail, uint64_t cap, uint64_t len,
                                uint64_t *off, uint64_t *end)
{
    if (tail > head || head - tail > cap || len == 0 || len > cap)
        return -1;
    uint64_t start = (head + 63) & ~(uint64_t)63;
    if (head == tail && start % cap) /* empty: start over at the front, whose pages are warm */
        start += cap - start % cap;
    if (start % cap + len > cap)
        start += cap - start % cap;
    if (start + len - tail > cap)
        return -1;
    *off = start % cap;
    *end = start + len;
    return 0;
}
#define BE_IPC_RECORD   ((size_t)65536)              /* largest SOCK_SEQPACKET record */
#define BE_READ_TURN    ((size_t)1 << 20)            /* read from one worker per loop turn */
#define BE_READ_TURN_NS 1000000u                     /* or for this long, whichever is less */
#define BE_IPC_ALIGN(x) (((x) + 15) & ~(uint64_t)15) /* each call's bulk starts aligned */
struct be_ipc_hdr {
    uint32_t type;
    int32_t code; /* BE_IPC_CLOSE: the sl_code */
    uint64_t msg_len, bulk_len;
};
struct be_ipc_rx {
    struct be_ipc_hdr hdr;
    size_t hdr_got;
    uint64_t got;
    uint8_t *msg, *bulk; /* the message being received (msg is NUL terminated) */
    uint8_t *spare;      /* the last record read */
    size_t spare_off, spare_len;
    size_t budget;     /* nonblocking reads: bytes this turn may still take from the socket, 0
                        * = no limit; spent: be_ipc_read answers 2 (the channel thread's other
                        * work comes first, the rest at its next turn) */
    uint64_t until_ns; /* the same, in time (CLOCK_MONOTONIC); 0 = no limit */
    int spent;
};
/* 1: a message is in rx (then be_ipc_rx_next); 2: nothing more now (nonblock, or the budget is
 * spent); -1: malformed; -2: EOF or error. */
int be_ipc_read(int fd, struct be_ipc_rx *rx, int nonblock);
void be_ipc_rx_next(struct be_ipc_rx *rx);
void be_ipc_rx_free(struct be_ipc_rx *rx);
/* dlopen + checks (real driver, not our frontend) + cuInit + device facts. */
sl_code be_driver_open(const char *path, struct sl_driver_api *api, struct be_devices *devs,
                       void **dl, int *nbound, sl_error *e);
int be_probe_main(const char *driver, const char *project);
/* What a worker gets besides its socket (server.c spawn_worker): the accounting page (fd, its
 * slot and instance entry; fd -1: none) and the usage record period. */
struct be_worker_opts {
    int acct_fd, acct_slot, acct_inst;
    unsigned usage_interval_s;
    int no_gpu_timing;     /* --measure none */
    const char *image_dir; /* --image-dir: the tenant's image store; NULL: none */
    unsigned spin_us;      /* --spin-us (spin.c) */
};
int be_worker_main(int fd, const char *driver, uint64_t sid, const char *instance,
                   const char *project, const struct be_worker_opts *o);

/* Grants (control.c keeps them, server.c's accept hook asks). */
struct be_grants;
struct be_grants *be_grants_new(void);
void be_grants_free(struct be_grants *g);
sl_code be_grants_load_allow(struct be_grants *g, const char *path, sl_error *e);
/* cert_sha256 may be NULL/0 length: no fingerprint pinning. */
void be_grants_add(struct be_grants *g, const char *uuid, const uint8_t *sha, size_t sha_len,
                   int64_t not_after);
void be_grants_revoke(struct be_grants *g, const char *uuid);
/* 0 = granted; otherwise fills why. */
/* The SLA of a granted instance (sla NULL: none, e.g. allow-listed). be_grants_sla: 1 and *out
 * when the instance has one; otherwise 0 and the defaults (uncapped, no quota, no limit). */
void be_grants_set_sla(struct be_grants *g, const char *uuid, const struct be_sla *sla);
int be_grants_sla(const struct be_grants *g, const char *uuid, struct be_sla *out);
int be_grants_check(const struct be_grants *g, const char *project, const sl_peer_identity *id,
                    char *why, size_t n);

/* control.c: the agent channel client. */
struct be_control;
struct be_control_hooks {
    void (*revoke)(void *user, const char *uuid, const char *reason);
    void (*shutdown)(void *user, const char *reason);
    void *user;
    /* a Grant was applied (its SLA; defaults when it had none) */
    void (*grant)(void *user, const char *uuid, const struct be_sla *sla);
    /* the socket connected to an agent again (after the hello): report the live sessions */
    void (*reconnected)(void *user);
};
#define BE_CONTROL_KEY_LEN 32    /* bytes; the --control-key file holds them as hex */
#define BE_ORPHAN_GRACE_MS 15000 /* keyed: longest time without a word from the agent */
sl_code be_control_open(const char *endpoint, const char *project, const char *listen,
                        struct be_grants *grants, const struct be_control_hooks *hooks,
                        struct be_control **out, sl_error *e);
void *be_control_socket(struct be_control *c);
/* --control-key FILE: from now on only messages carrying this key count (see control.c). */
sl_code be_control_require_key(struct be_control *c, const char *path, sl_error *e);
/* Handles every waiting control message (non-blocking). */
void be_control_process(struct be_control *c);
/* One frame from the agent's socket: decoded, checked and applied (what be_control_process does
 * with each; the fuzz target tests/fuzz/fuzz_control.c calls it directly). */
void be_control_handle(struct be_control *c, const void *frame, size_t len);
void be_control_close(struct be_control *c);
/* Usage records: queued until the agent acknowledges them, sent again every ms (default
 * BE_USAGE_RESEND_S) and after a reconnection. rec: an encoded UsageRecord. */
void be_control_set_resend(struct be_control *c, int64_t ms);
/* Keyed: how long without a word from the agent before the backend ends (default
 * BE_ORPHAN_GRACE_MS; tests shorten it). */
void be_control_set_orphan_grace(struct be_control *c, int64_t ms);
void be_control_usage(struct be_control *c, const uint8_t *rec, size_t len);
size_t be_control_usage_waiting(const struct be_control *c);
/* BackendReport{session: SessionEvent{kind (SLUICE__CONTROL__SESSION_EVENT__KIND__*), ...}}. */
void be_control_session(struct be_control *c, int kind, const char *instance, const char *project,
                        uint64_t session_id, const char *detail);

/* server.c: runs until *stop. Returns 0 on a clean exit. */
/* Asks the running server to load its certificate, key and CA files again (SIGHUP: the agent
 * renewed the certificate). Async-signal-safe. */
void be_server_request_reload(void);
int be_server_run(const struct be_config *cfg, const struct sl_driver_api *api,
                  const struct be_devices *devs, volatile int *stop);

#endif
