/* The agent's main loop, as a library so tests run it in-process: the libvirt observations
 * turned into the instance table, backends started for a project's first running GPU instance
 * and stopped after its last, revocations after a stop (debounced for reboots), timers.
 * One thread runs ag_core_run_once; other threads may call ag_instances_get and the
 * ag_backend_* functions. ag_core_free stops the backends (Shutdown); a core that is never
 * freed (the agent crashed) leaves them running for the next agent to adopt. */
#ifndef AG_CORE_H
#define AG_CORE_H

#include "config.h"
#include "instances.h"
#include "supervisor.h"

typedef struct ag_core ag_core;

typedef struct ag_core_opts {
    const ag_config *cfg; /* must outlive the core */
    ag_issue_fn issue;    /* backend server certificates (NULL: none) */
    void *issue_user;
    /* A GPU instance runs here (placed = 1), or stopped for good, i.e. after the reboot
     * debounce, or was undefined or stopped being a GPU flavor (placed = 0). Called on the loop
     * thread; must not block (the registry reporter, agent/report.h, only queues). NULL: none. */
    void (*placement)(void *user, const ag_instance *in, int placed);
    void *placement_user;
} ag_core_opts;

sl_code ag_core_new(const ag_core_opts *o, ag_core **out, sl_error *e);

/* Extra descriptors for the loop (the enrollment server, signals): fn runs on the loop thread
 * after every wait of ag_core_run_once, which is when fd became readable and at least once a
 * second (so edge-triggered descriptors such as ZMQ_FD and timers behind them work). fn returns
 * the descriptor to watch from then on: its own fd again, or a new one when it changed (the
 * enrollment server re-binds when it renews its certificate). Up to 8. */
int ag_core_watch(ag_core *c, int fd, int (*fn)(void *user), void *user);

/* Waits up to timeout_ms for work, then does it. */
void ag_core_run_once(ag_core *c, int timeout_ms);

/* Usage records, session events, lifetimes and health gauges go to u (agent/usage_ingest.h);
 * NULL: none. Call before the loop runs; u must outlive the core. */
void ag_core_set_usage(ag_core *c, struct ag_usage *u);

ag_instances *ag_core_instances(ag_core *c);
ag_supervisor *ag_core_supervisor(ag_core *c);
int ag_core_libvirt_connected(ag_core *c);
void ag_core_force_reconnect(ag_core *c); /* tests */

/* Stops the backends gracefully, closes libvirt, frees everything. */
void ag_core_free(ag_core *c);

#endif
