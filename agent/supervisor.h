/* Tenant backends, one per project with a running GPU instance on this host: a port kept per
 * project (STATE_DIR/backends.state), server certificate and control key, spawn as the backend
 * user, restart with exponential backoff (the reason logged), stop when the project's last GPU
 * instance is gone, and the grants each backend must hold (a GrantSet after each hello, once
 * the instance table reflects libvirt, and after every resync).
 * Grants are kept in memory and written to STATE_DIR/grants/PROJECT (one line per grant), so
 * a restarted agent re-grants certificates still valid for instances still running: the
 * guests keep their certificates across an agent restart. Backends outlive an agent that
 * crashed: the next one adopts those still running (docs/agent.md, "When the agent restarts").
 * Thread-safe (one mutex); the control socket is only touched under it. */
#ifndef AG_SUPERVISOR_H
#define AG_SUPERVISOR_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "instances.h"
#include "sluice/error.h"

typedef struct ag_supervisor ag_supervisor;

/* Issues a server certificate for a backend (the host CA, agent/ca.h): PEM strings, malloc'd.
 * cn is "sluice-backend PROJECT", sans the advertised address. */
typedef sl_code (*ag_issue_fn)(void *user, const char *cn, const char *const *sans, size_t nsans,
                               char **cert_pem, char **key_pem, char **ca_pem, sl_error *e);

typedef struct ag_supervisor_opts {
    const ag_config *cfg;
    ag_instances *instances;
    ag_issue_fn issue; /* NULL: backends get no certificate files (tests with a fake backend) */
    void *issue_user;
} ag_supervisor_opts;

sl_code ag_supervisor_new(const ag_supervisor_opts *o, ag_supervisor **out, sl_error *e);

/* The control socket's fd (ZMQ_FD, edge-triggered): call ag_supervisor_tick when readable. */
int ag_supervisor_fd(ag_supervisor *s);

/* Makes sure the project's backend runs (starts it if needed). */
void ag_supervisor_ensure(ag_supervisor *s, const char *project_id);

/* Forgets the instance's grant and sends Revoke to its backend (sessions end, refused
 * from then on). */
void ag_supervisor_revoke(ag_supervisor *s, const char *project_id, const char *uuid,
                          const char *reason);

/* Stops the project's backend if the instance table holds no running GPU instance of it. */
void ag_supervisor_release(ag_supervisor *s, const char *project_id);

/* Drops grants of instances that are not running nor waiting out the reboot debounce. */
void ag_supervisor_prune(ag_supervisor *s);
/* A resync with libvirt ended (the instance table is complete): prunes the grants, stops the
 * adopted backends no running GPU instance wants and sends every other backend its grant set. */
void ag_supervisor_resynced(ag_supervisor *s);

/* Reaps, restarts, stops, retransmits, pings, reads the control socket. Returns the ms until
 * it wants to run again (at most 1000). */
int ag_supervisor_tick(ag_supervisor *s);

/* Shuts every backend down (Shutdown, then SIGTERM, then SIGKILL) and waits for them. */
void ag_supervisor_stop_all(ag_supervisor *s);
void ag_supervisor_free(ag_supervisor *s);

/* 1 and "tcp://ADVERTISE:PORT" when the project's backend runs and said hello, else 0. */
int ag_backend_endpoint(ag_supervisor *s, const char *project_id, char *out, size_t n);
/* 1 and the instance uuid when a certificate of this SHA-256 (of its DER, 64 hex digits) is
 * granted and unexpired (enrollment's locate request). */
int ag_backend_granted(ag_supervisor *s, const char *cert_sha256_hex, char *instance, size_t n);

/* Records the grant (memory + state file) and sends a Grant to the instance's backend (or on
 * its next hello). cert_sha256_hex: 64 hex digits. */
void ag_backend_grant(ag_supervisor *s, const ag_instance *inst, const char *cert_sha256_hex,
                      int64_t not_after);

/* Usage records and session events go to u (agent/usage_ingest.h) from now on; NULL: usage
 * records are dropped unacknowledged. Set before the loop runs: the sessions the store holds
 * open for projects without a running backend are closed then (ag_usage_close_orphans). */
struct ag_usage;
void ag_supervisor_set_usage(ag_supervisor *s, struct ag_usage *u);
/* Backends running and connected (the backends_running health gauge). */
unsigned ag_supervisor_running(ag_supervisor *s);

/* For tests and logs: the backend's pid (0 if none), its restarts, its grants. */
int ag_backend_pid(ag_supervisor *s, const char *project_id);
int ag_backend_port(ag_supervisor *s, const char *project_id); /* 0 if none yet */
int ag_backend_restarts(ag_supervisor *s, const char *project_id);
size_t ag_backend_grants(ag_supervisor *s, const char *project_id);

/* Port allocation: the lowest port in [min, max] not in used[] that bind_addr can bind.
 * -1 if none. */
int ag_ports_pick(int min, int max, const int *used, size_t n_used, const char *bind_addr);

int64_t ag_now_ms(void); /* CLOCK_MONOTONIC */

#endif
