/* The agent's Prometheus metrics: usage counters per (project_id, instance_id, domain,
 * gpu_uuid) fed by every newly stored usage record (and seeded from the usage store at start,
 * so totals survive a restart), open sessions per instance from the backends' SessionEvents,
 * and the agent's own health. Rendered in the text exposition format 0.0.4 and served at
 * GET /metrics (config key metrics_listen). Thread-safe (one mutex). The list of metrics is in
 * docs/usage.md. */
#ifndef AG_METRICS_H
#define AG_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/error.h"
#include "sluice/usage_report.h"

typedef struct ag_metrics ag_metrics;

ag_metrics *ag_metrics_new(void); /* NULL when out of memory */
void ag_metrics_free(ag_metrics *m);

/* A usage record stored for the first time (domain, gpu_uuid: "" when unknown). */
void ag_metrics_record(ag_metrics *m, const sl_usage_rec *r);
/* The sums of records records of one series (the store's totals, at start). */
void ag_metrics_seed(ag_metrics *m, const sl_usage_rec *sum, uint64_t records);

enum { AG_SESSION_OPENED = 1, AG_SESSION_CLOSED = 2, AG_SESSION_REFUSED = 3 };
void ag_metrics_session(ag_metrics *m, const char *project, const char *instance,
                        const char *domain, int kind);
/* The project's backend (re)started or exited: its sessions are gone. */
void ag_metrics_sessions_reset(ag_metrics *m, const char *project);

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
