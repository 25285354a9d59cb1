/* The agent's Prometheus metrics: usage counters per (project_id, instance_id, domain,
 * gpu_uuid) fed by every newly stored usage record (and seeded from the usage store at start,
 * so totals survive a restart), sessions per instance from the backends' SessionEvents, each
 * running GPU instance's SLA (share, memory quota), enrollments, backend restarts and the
 * agent's own health. The series of an instance that left the host (its domain undefined, or
 * never seen since the agent started) are removed AG_METRICS_DEPART_GRACE_S after it left.
 * Rendered in the text exposition format 0.0.4 and served at GET /metrics (config key
 * metrics_listen). Thread-safe (one mutex). The list of metrics is in docs/usage.md. */
#ifndef AG_METRICS_H
#define AG_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/error.h"
#include "sluice/usage_report.h"

/* Late usage records of a departed instance (final records, resends) still count within it. */
#define AG_METRICS_DEPART_GRACE_S 600

typedef struct ag_metrics ag_metrics;

ag_metrics *ag_metrics_new(const char *version); /* NULL when out of memory */
void ag_metrics_free(ag_metrics *m);

/* A usage record stored for the first time (domain, gpu_uuid: "" when unknown). */
void ag_metrics_record(ag_metrics *m, const sl_usage_rec *r);
/* The sums of records records of one series (the store's totals, at start). */
void ag_metrics_seed(ag_metrics *m, const sl_usage_rec *sum, uint64_t records);
/* A series' shared GPU time as the store's totals hold it now (after apportioning). */
void ag_metrics_shared(ag_metrics *m, const sl_usage_rec *sum);

enum {
    AG_SESSION_OPENED = 1,
    AG_SESSION_CLOSED = 2,
    AG_SESSION_REFUSED = 3,
    AG_SESSION_WORKER_KILLED = 4 /* its worker outlived the grace period (backend) */
};
/* reason (REFUSED only): "certificate", "grant", "limit"; anything else counts as "other".
 * instance "" for a refusal before the instance was known (certificate). */
void ag_metrics_session(ag_metrics *m, const char *project, const char *instance,
                        const char *domain, int kind, const char *reason);
/* The project's backend (re)started or exited: its sessions are gone. */
void ag_metrics_sessions_reset(ag_metrics *m, const char *project);
/* The project's backend died and is being restarted. */
void ag_metrics_backend_restarted(ag_metrics *m, const char *project);

/* One GPU instance the host knows (its domain is defined). */
typedef struct ag_metrics_instance {
    const char *project, *instance, *domain, *flavor, *tier;
    int running;
    double gpu_share;      /* 0 < share <= 1 */
    uint64_t memory_quota; /* bytes, 0 = none */
} ag_metrics_instance;
/* The host's GPU instances now (the SLA gauges of the running ones); series of instances absent
 * for longer than AG_METRICS_DEPART_GRACE_S are removed. now_ms: a monotonic clock. */
void ag_metrics_instances(ag_metrics *m, const ag_metrics_instance *v, size_t n, int64_t now_ms);

/* Enrollments answered with result ("OK", "BAD_TOKEN", ...): count is the running total. */
void ag_metrics_enrollments(ag_metrics *m, const char *result, uint64_t count);

void ag_metrics_rejected(ag_metrics *m, unsigned n); /* malformed records */
void ag_metrics_store_failed(ag_metrics *m);         /* a commit failed */
void ag_metrics_health(ag_metrics *m, int libvirt_connected, unsigned backends_running);
void ag_metrics_pending(ag_metrics *m, uint64_t pending);    /* records not forwarded yet */
void ag_metrics_forwarded(ag_metrics *m, int64_t unix_time); /* last successful forward */

/* The exposition (malloc'd, *len bytes, NUL-terminated); NULL when out of memory. */
char *ag_metrics_render(ag_metrics *m, size_t *len);

/* ---- the HTTP endpoint (libmicrohttpd, a thread of its own) */
typedef struct ag_metrics_http ag_metrics_http;

/* Listens on addr (an IP literal) and port (0: any free port, see ag_metrics_http_port). */
sl_code ag_metrics_http_start(ag_metrics *m, const char *addr, int port, ag_metrics_http **out,
                              sl_error *e);
int ag_metrics_http_port(const ag_metrics_http *h);
void ag_metrics_http_stop(ag_metrics_http *h); /* NULL is fine */

#endif
