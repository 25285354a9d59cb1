/* Reporting to the nova-hook registry (docs/nova-hook.md, "The registry"): the agent registers
 * its host (AgentInfo) and reports each running GPU instance (place) and each instance that
 * stopped for good (remove), over the registry channel (mutual TLS, nova-hook/registry_client.h).
 *
 * A thread of its own does the talking, so a slow or down registry never blocks the caller:
 * ag_report_place/remove only record the wanted state and return. The thread keeps the set of
 * placements it believes current and a "dirty" mark per instance; it connects (backoff 1 s
 * doubling to retry_max), sends register, then places every current instance again (requests are
 * idempotent on the registry side) and any removal not yet acknowledged, then whatever becomes
 * dirty later; a timeout or a channel error drops the session and starts over, with the next
 * endpoint when several are given (several nova-hooks on a shared database, docs/nova-hook.md:
 * any of them takes any request); a pause (backoff) only once all of them failed in a row.
 * Refusals are logged
 * and not retried (except "not registered", which re-registers). Log lines: one per change of
 * the connection state (connected / unreachable with the reason), not per attempt.
 *
 * Usage forwarding (docs/usage.md): with a usage store, whenever no placement is waiting the
 * thread pushes records the registry has not acknowledged yet (oldest first, in batches) and
 * marks those its reply acknowledges as forwarded: at least once, the registry stores each
 * record id once. ag_report_usage_kick wakes it after new records were stored; it also looks
 * at start and after every reconnect. A refused push is retried after a minute. */
#ifndef AG_REPORT_H
#define AG_REPORT_H

#include <stdint.h>

#include "gpus.h"
#include "metrics.h"
#include "sluice/error.h"
#include "usage_store.h"

typedef struct ag_report ag_report;

#define AG_REPORT_MAX_ENDPOINTS 8

typedef struct ag_report_opts {
    /* tcp://HOST:PORT of sluice-novahook's registry_listen, or several, comma-separated */
    const char *endpoint;
    const char *ca_file, *cert_file, *key_file; /* cert: CN = host name, OU = sluice-agent */
    const char *host;            /* NULL: the CN of cert_file (the registry insists on it) */
    const char *enroll_endpoint; /* AgentInfo.enrollment_endpoint, tcp://HOST:PORT */
    uint32_t slots;
    const char *version;
    const char *ca_pem; /* AgentInfo.ca_pem: ag_ca_cert_pem() (copied) */
    const ag_gpu *gpus; /* AgentInfo.gpus (copied); NULL or n_gpus 0: none known */
    size_t n_gpus;
    int retry_max_ms;      /* reconnect backoff cap; 0: 30000 */
    int call_timeout_ms;   /* one request; 0: 5000 */
    int ping_interval_ms;  /* heartbeat when idle; 0: 30000 */
    ag_usage_store *usage; /* records to forward; NULL: none */
    ag_metrics *metrics;   /* last forward and pending gauges; NULL: none */
    int usage_batch;       /* records per push; 0: 256 (the registry takes up to 1024) */
} ag_report_opts;

/* Checks the options, reads the host name from the certificate when o->host is NULL and starts
 * the thread; never waits for the registry. */
sl_code ag_report_start(const ag_report_opts *o, ag_report **out, sl_error *e);

/* The instance runs here (again): report it. Thread-safe, never blocks on the network. */
void ag_report_place(ag_report *r, const char *uuid, const char *project, const char *flavor);
/* The instance stopped for good: report its removal. */
void ag_report_remove(ag_report *r, const char *uuid);
/* New usage records were stored: forward them soon. NULL is fine. */
void ag_report_usage_kick(ag_report *r);

/* For tests and logs. */
typedef struct ag_report_stats {
    int connected;
    unsigned sessions; /* successful (re)connects + register */
    unsigned pending;  /* instances whose state the registry has not acknowledged yet */
    unsigned placed;   /* instances reported as running here */
    uint64_t sent, refused;
    uint64_t usage_forwarded; /* records the registry acknowledged */
    int64_t last_forward;     /* unix time of the last acknowledged push, 0 = none */
} ag_report_stats;
void ag_report_get_stats(ag_report *r, ag_report_stats *st);
const char *ag_report_host(const ag_report *r);

/* Stops the thread (waits at most one call timeout) and frees everything; NULL is fine. Does
 * not remove anything from the registry: guests keep running when the agent stops. */
void ag_report_stop(ag_report *r);

#endif
