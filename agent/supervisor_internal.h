/* Private to supervisor*.c: the supervisor's state and what its files share.
 *   supervisor.c         the public functions, the tick, reports from the backends
 *   supervisor_spawn.c   ports, run directories, certificates and keys, fork/exec, signals,
 *                        liveness, adopting the backends of an earlier agent
 *   supervisor_grants.c  grants in memory and in STATE_DIR/grants/PROJECT, the control
 *                        messages (Grant, GrantSet, Revoke, Shutdown) and their retransmission
 * Everything here runs under the supervisor's mutex. */
#ifndef AG_SUPERVISOR_INTERNAL_H
#define AG_SUPERVISOR_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend_state.h"
#include "control.h"
#include "supervisor.h"

#define COMPONENT       "agent"
#define RETRANSMIT_MS   2000
#define PING_MS         5000  /* the backend ends itself after 15 s without word from us */
#define SILENCE_MS      30000 /* no report for this long: the backend is killed and restarted */
#define HELLO_MS        30000 /* no hello this long after the start (or adoption): same */
#define STABLE_MS       60000 /* a backend that ran this long restarts with the first backoff */
#define KILL_AFTER_TERM 2000

typedef struct grant {
    char uuid[40];
    char sha[65];
    int64_t not_after;
} grant;

typedef struct pending {
    uint64_t seq;
    void *buf;
    size_t len;
    int64_t sent_ms;
    int is_set; /* a GrantSet: rebuilt from the current grants when it is sent again */
} pending;

typedef struct backend {
    char project[64];
    int port;
    pid_t pid;
    unsigned long long start; /* the process's start time (/proc): its identity with the pid */
    int adopted;              /* started by an earlier agent: not our child, no waitpid */
    int wanted, stopping, termed;
    int64_t started_ms, next_start_ms, term_at_ms, kill_at_ms;
    int64_t cert_issued_ms; /* when its server certificate was issued (0: none issued) */
    int backoff_ms, restarts;
    int connected;
    int synced; /* its GrantSet went out since its hello */
    uint8_t key[AG_CONTROL_KEY_LEN];
    ag_ctl_peer peer;
    int64_t last_heard_ms, last_ping_ms;
    uint64_t seq;
    grant *grants;
    size_t n_grants, cap_grants;
    pending *pend;
    size_t n_pend, cap_pend;
} backend;

struct ag_usage;

struct ag_supervisor {
    pthread_mutex_t mu;
    const ag_config *cfg;
    ag_instances *inst;
    ag_issue_fn issue;
    void *issue_user;
    ag_control *ctl;
    char ctl_path[600];
    char state_path[600]; /* STATE_DIR/backends.state */
    uid_t uid;
    gid_t gid;
    int switch_user;
    backend **b;
    size_t n;
    ag_bstate *st; /* every project's port and running backend, as in the state file */
    size_t n_st;
    int resynced;           /* the instance table reflects libvirt (a resync ended) */
    struct ag_usage *usage; /* NULL: usage records are dropped unacknowledged */
};

/* supervisor.c */
backend *sv_find(ag_supervisor *s, const char *project);
backend *sv_find_or_add(ag_supervisor *s, const char *project);

/* supervisor_spawn.c */
void sv_state_load(ag_supervisor *s); /* and adopt the backends still running */
void sv_state_update(ag_supervisor *s, const backend *b);
void sv_spawn(ag_supervisor *s, backend *b, int64_t now);
void sv_kill(backend *b, int sig, const char *why);
/* 1 and why (exit status or "gone") when the backend's process ended (reaped if ours). */
int sv_ended(backend *b, char *why, size_t n);
void sv_renew_cert(ag_supervisor *s, backend *b, int64_t now);

/* supervisor_grants.c */
void sv_grants_load(const ag_supervisor *s, backend *b);
void sv_grants_save(const ag_supervisor *s, const backend *b);
void sv_grant_add(backend *b, const char *uuid, const char *sha, int64_t not_after);
int sv_hex64(const char *s);
void sv_send_ctl(ag_supervisor *s, backend *b, Sluice__Control__BackendControl *msg, int track);
void sv_send_grant(ag_supervisor *s, backend *b, const grant *g);
void sv_send_grant_set(ag_supervisor *s, backend *b, const char *reason);
void sv_send_revoke(ag_supervisor *s, backend *b, const char *uuid, const char *reason);
void sv_send_shutdown(ag_supervisor *s, backend *b, const char *reason);
void sv_retransmit(ag_supervisor *s, backend *b, int64_t now);
void sv_clear_pending(backend *b);

#endif
