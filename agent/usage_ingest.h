/* Usage records from the backends into the store, and the metrics that follow them.
 *
 * The supervisor hands over each BackendReport.usage it reads (ag_usage_take: checked, or
 * rejected and logged), and after draining the control socket calls ag_usage_commit: the queued
 * records are completed from the instance table (instance name, libvirt domain, SLA tier and
 * share; from the store's lifetimes for instances that are gone) and written in one durable
 * transaction, then acknowledged to their backends (UsageAck, duplicates included). Nothing is
 * acknowledged when the commit fails: the backend sends the records again.
 *
 * ag_usage_tick keeps the instances' lifetimes (the SLA entitlement's wall time), the health
 * gauges and the retention (usage_retention_days, hourly). Used from the agent's loop thread only.
 * Reference: docs/usage.md. */
#ifndef AG_USAGE_INGEST_H
#define AG_USAGE_INGEST_H

#include <stddef.h>

#include "instances.h"
#include "metrics.h"
#include "sluice/error.h"
#include "sluice_control.pb-c.h"
#include "usage_store.h"

#define AG_USAGE_QUEUE_MAX 1024 /* records queued between two commits (a drain reads <= 1000) */
#define AG_USAGE_BEAT_S    30   /* lifetime heartbeat when nothing changes */
#define AG_USAGE_PRUNE_S   3600 /* retention, when usage_retention_days is set */
/* Shared GPU time (docs/accounting.md, "Shared GPU time"): each GPU's time is apportioned in
 * windows of AG_USAGE_SHARE_WINDOW_S, a window once AG_USAGE_SHARE_GRACE_S have passed since
 * its end and every open session has sent records past its end, or AG_USAGE_SHARE_MAX_DELAY_S
 * after its end whatever the sessions sent. */
#define AG_USAGE_SHARE_WINDOW_S    10
#define AG_USAGE_SHARE_GRACE_S     2
#define AG_USAGE_SHARE_MAX_DELAY_S 120
#define AG_USAGE_SHARE_EVERY_S     2

typedef struct ag_usage ag_usage;

typedef struct ag_usage_opts {
    ag_usage_store *store;      /* required */
    ag_metrics *metrics;        /* NULL: no metrics */
    ag_instances *instances;    /* required */
    void (*stored)(void *user); /* after new records were committed (wakes the forwarder) */
    void *stored_user;
    int retention_days;   /* > 0: records and closed lifetimes older than that are deleted */
    int keep_unforwarded; /* records the registry has not acknowledged stay whatever their age */
} ag_usage_opts;

/* Seeds the metrics from the store's totals (they survive a restart). */
sl_code ag_usage_new(const ag_usage_opts *o, ag_usage **out, sl_error *e);
void ag_usage_free(ag_usage *u); /* NULL is fine; queued records are dropped unacknowledged */

/* r (kind usage) from the backend of project: 1 = queued (u owns r now), 0 = rejected or the
 * queue is full (logged; the caller still owns r and frees it). */
int ag_usage_take(ag_usage *u, const char *project, Sluice__Control__BackendReport *r);

/* ack(user, project, ids, n): the records with these ids from the backend of project are
 * durable; tell it. Called once per project with queued records, after the commit. */
typedef void (*ag_usage_ack_fn)(void *user, const char *project, char *const *ids, size_t n);
/* Commits what ag_usage_take queued, acknowledges, frees the queued reports. */
void ag_usage_commit(ag_usage *u, ag_usage_ack_fn ack, void *user);

/* A SessionEvent from the backend of project: the open-session gauge, and for OPENED the
 * store's open sessions (what ag_usage_backend_ended closes). */
void ag_usage_session(ag_usage *u, const char *project, const Sluice__Control__SessionEvent *ev);
/* The project's backend said hello: its sessions are counted again from its reports. */
void ag_usage_backend_reset(ag_usage *u, const char *project);
/* The project's backend died unasked and is started again (a metric counts it). */
void ag_usage_backend_restarted(ag_usage *u, const char *project);
/* The project's backend ended (why: its exit): every session of it the store holds open (no
 * final record came) is closed with a final record marked closed_by_agent, from the end of its
 * last record (or its opening) to now, measuring nothing (docs/usage.md). */
void ag_usage_backend_ended(ag_usage *u, const char *project, const char *why);
/* At the agent's start: the open sessions of every project for which alive() says no backend
 * runs (it ended while no agent watched) are closed the same way, at their last known time. */
void ag_usage_close_orphans(ag_usage *u, int (*alive)(void *user, const char *project), void *user);

/* Apportions the GPU time that is settled now (ag_usage_tick calls it every
 * AG_USAGE_SHARE_EVERY_S; a test may, with its own options: NULL = the defaults above) and
 * updates the metrics. */
void ag_usage_settle(ag_usage *u, const ag_usage_settle_opts *o);

/* Lifetime heartbeat (when the set of running GPU instances changed, else every
 * AG_USAGE_BEAT_S), the instances' SLA gauges (series of departed instances end) and health
 * gauges; cheap to call often. */
void ag_usage_tick(ag_usage *u, int libvirt_connected, unsigned backends_running);

/* Counters for tests and logs. */
typedef struct ag_usage_stats {
    uint64_t stored, duplicates, rejected, commits, failed_commits;
    uint64_t shared_windows; /* windows of GPU time apportioned */
} ag_usage_stats;
void ag_usage_get_stats(const ag_usage *u, ag_usage_stats *st);

#endif
