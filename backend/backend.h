/* TRANSITIONAL (issue 17): the declarations of the files that move last (server.c, worker.c,
 * control.c, main.c), and every header of the backend's folders for the files that still
 * include this one (those and module.c, link.c, quota.c). It disappears when they move to
 * daemon/, api/ and accounting/. */
#ifndef SLUICE_BACKEND_H
#define SLUICE_BACKEND_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "accounting/intervals.h"
#include "accounting/layers.h"
#include "accounting/quota.h"
#include "accounting/records.h"
#include "accounting/share.h"
#include "accounting/state.h"
#include "accounting/timing.h"
#include "accounting/usage.h"
#include "accounting/usage_queue.h"
#include "api/callback.h"
#include "api/graph_life.h"
#include "api/launch.h"
#include "api/link.h"
#include "api/mapped.h"
#include "api/module.h"
#include "api/reply.h"
#include "api/vmm.h"
#include "daemon/outbox.h"
#include "bounds.h"
#include "session/contexts.h"
#include "session/deferred.h"
#include "session/devices.h"
#include "session/handles.h"
#include "session/image_cache.h"
#include "session/image_store.h"
#include "session/printf.h"
#include "session/ranges.h"
#include "session/run.h"
#include "session/session.h"
#include "session/spin.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/backend_dispatch.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"
#include "sluice/channel.h"
#include "sluice/driver_api.h"
#include "sluice/wire.h"
#include "sluice_control.pb-c.h"

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
#define BE_DEFAULT_MAX_SESSIONS 64u
#define BE_WORKER_GRACE_MS      5000 /* after the socket is closed, then SIGKILL */

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
