/* The channel thread's state (header only): the server, its session nodes (one per guest session:
 * the worker process or in-process session serving it), the outbox's entries and the messages
 * queued for a worker. The files of daemon/ that run on the channel thread share it: loop.c,
 * accept.c, sessions.c, workers.c, outbox.c. */
#ifndef SLUICE_BE_DAEMON_STATE_H
#define SLUICE_BE_DAEMON_STATE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/ipc.h"
#include "sluice/backend_hooks.h"
#include "sluice/channel.h"
#include "sluice/driver_api.h"

struct be_acct_shm;   /* accounting/quota.h */
struct be_config;     /* daemon/config.h */
struct be_control;    /* daemon/control.h */
struct be_devices;    /* session/devices.h */
struct be_grants;     /* daemon/grants.h */
struct be_ipc_tokens; /* daemon/ipc_tokens.h */
struct be_job;        /* session/session.h */

struct be_out {
    struct be_out *next;
    sl_peer peer;
    uint8_t *msg;
    size_t len;
    uint8_t *bulk;
    size_t bulk_len;
    int usage; /* msg is an encoded UsageRecord (an in-process session's) */
    int close;
    sl_code code;
    char why[160];
};

struct be_tx {
    struct be_tx *next;
    uint8_t *buf; /* be_ipc_hdr + message + bulk */
    size_t len, off;
    int has_fd, fd; /* a descriptor sent with the first record (SCM_RIGHTS), closed once sent */
};

struct be_sess_node {
    struct be_sess_node *next;
    sl_peer peer;
    uint64_t id;
    char instance[64], project[64];
    char fingerprint[65]; /* the admitted certificate's SHA-256: its worker's direct endpoint
                           * accepts only it (direct.c) */
    sl_code end_code;     /* why the session ended, for the worker (0: SL_ERR_CLOSED) */
    unsigned lanes;       /* the bulk lanes its SessionOpen asked for (its worker's --lanes) */
    sl_be_session *s;     /* thread mode */
    /* process mode */
    pid_t pid; /* 0 once reaped */
    int fd;    /* socket to the worker, -1 once closed */
    struct be_ipc_rx rx;
    struct be_tx *tx_head, *tx_tail;
    size_t tx_bytes;
    int64_t kill_at; /* ms (monotonic) after which the worker gets SIGKILL; 0 = not asked */
    int killed;
    int ended;         /* the channel session is gone; waiting for the worker */
    uint64_t last_seq; /* of the session's last call: seq must go up across frames too */
    /* a CallFrame whose bulk the channel is still receiving (sl_server_take_bulk): queued
     * for the worker (process mode) or the session thread at SL_EV_BULK */
    struct be_tx *tx_pend;
    struct be_job *job_pend;
    /* accounting: the slot and instance entry in the accounting page, what the last usage
     * record said (a worker that dies without its final record gets one from here) */
    int acct_slot, acct_inst;
    int got_final;
    int64_t last_end_ns;
    char gpu_uuid[48];
    char flavor[256];
};

struct be_server {
    const struct be_config *cfg;
    const struct sl_driver_api *api;
    const struct be_devices *devs;
    sl_server *srv;
    struct be_grants *grants;
    struct be_ipc_tokens *tokens; /* the IPC handles the sessions' workers exported */
    struct be_control *ctl;
    int efd;
    pthread_mutex_t out_mu;
    struct be_out *out_head, *out_tail;
    struct be_sess_node *sessions;
    volatile int *stop;
    unsigned live;
    struct be_acct_shm *acct; /* the tenant's accounting page (quota.c) */
    int acct_fd;
    int64_t trim_due; /* ms (monotonic) a session's node was last freed, 0: nothing to give back */
};

#endif
