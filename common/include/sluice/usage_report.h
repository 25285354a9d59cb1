/* Usage reports (library sluice_usage, proto/usage/): GPU usage records and instance lifetimes
 * aggregated over a period, per project then per instance, and rendered as an aligned table,
 * CSV, JSON in the shape of Nova's os-simple-tenant-usage, or an SVG chart. Used by the agent's
 * sluice-usage (one host) and by sluice-registry usage (the cluster). Pure: no I/O but the
 * FILE the renderers write to. Reference: docs/usage.md.
 *
 * Attribution to the period [from, to) (times in ns since the epoch, UTC):
 *   - time figures (GPU busy, kernel, throttled time) of a record are pro-rated by the part of
 *     its interval inside the period (a zero-length interval counts where it lies);
 *   - counted figures (kernels, bytes, calls, errors, quota refusals, records, sessions closed
 *     by the agent) belong to the period holding the interval's end;
 *   - the memory high-water mark is the largest of the records touching the period.
 * Both rules are additive: adjacent periods add up to the whole.
 * Entitlement = gpu_share x the time the instance existed inside the period (its lifetimes;
 * without any, the span from its first record's start to its last record's end, "observed").
 * An unknown share (0) counts as 1 (uncapped, the policy default). */
#ifndef SLUICE_USAGE_REPORT_H
#define SLUICE_USAGE_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sluice/error.h"

#define SL_USAGE_NS_PER_S 1000000000LL

/* One usage record (sluice_control.proto UsageRecord). Strings may be NULL; they are copied. */
typedef struct sl_usage_rec {
    const char *record_id, *instance, *project, *flavor, *gpu_uuid;
    const char *name, *domain, *tier; /* agent-filled: Nova name, libvirt domain, SLA tier */
    double gpu_share;                 /* 0 = unknown */
    int64_t start_ns, end_ns;
    uint64_t gpu_busy_ns, kernel_ns, kernels, bytes_htod, bytes_dtoh, memory_high_water;
    uint64_t calls, errors, throttled_ns, quota_refusals;
    int closed_by_agent; /* the agent closed the session: its backend ended first (unmeasured) */
    /* the record's part of the GPU's busy time when sessions overlapping on the GPU share it
     * (docs/accounting.md, "Shared GPU time"); gpu_busy_ns is its own, raw figure */
    uint64_t gpu_shared_ns;
} sl_usage_rec;

/* One span of an instance's existence (running on a host). open: still running at end_ns. */
typedef struct sl_usage_life {
    const char *instance, *project, *name, *flavor, *tier, *domain;
    double gpu_share;
    int64_t start_ns, end_ns;
    int open;
} sl_usage_life;

/* One instance's (or, as a project total, one project's) figures over the period. */
typedef struct sl_usage_server {
    char *instance, *name, *flavor, *tier, *domain; /* "" when unknown */
    double gpu_share;                               /* 0 = unknown (counted as 1) */
    int64_t started_ns, ended_ns; /* first start, last end (ended_ns 0: still active) */
    const char *state;            /* "active", "terminated" or "unknown" (no lifetime) */
    int observed;                 /* 1: no lifetime known, existence from the records */
    double wall_s;                /* existence inside the period */
    double busy_s, kernel_s, throttled_s, entitled_s;
    double shared_s; /* its part of the GPUs' busy time (records' gpu_shared_ns) */
    uint64_t kernels, bytes_htod, bytes_dtoh, calls, errors, quota_refusals;
    uint64_t memory_high_water, records;
    uint64_t closed_by_agent; /* sessions the agent closed (records so marked) */
} sl_usage_server;

typedef struct sl_usage_tenant {
    char *project;
    sl_usage_server *servers; /* sorted by instance id */
    size_t n_servers;
    sl_usage_server total;     /* sums (high-water: the largest); strings empty */
    double *bucket_busy_s;     /* GPU busy seconds per chart bucket (n_buckets) */
    double *bucket_entitled_s; /* entitled GPU seconds (share x existence) per chart bucket */
} sl_usage_tenant;

typedef struct sl_usage_report sl_usage_report;

/* The finished report, read-only. Tenants sorted by project id. */
typedef struct sl_usage_view {
    int64_t from_ns, to_ns;
    const char *project; /* the report of this project only (JSON: Nova's one-tenant shape);
                          * NULL: every project */
    const sl_usage_tenant *tenants;
    size_t n_tenants;
    int64_t bucket_ns; /* chart bucket width: 1 day, or whole days so there are at most 62 */
    size_t n_buckets;
    int shared; /* the records carry shared GPU time: the renderers show it */
} sl_usage_view;

/* ---- periods */

/* "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM:SS", optional trailing 'Z', always UTC. */
sl_code sl_usage_parse_time(const char *s, int64_t *ns, sl_error *e);
/* The first instant of now's month (UTC) .. now. */
void sl_usage_this_month(int64_t now_ns, int64_t *from_ns, int64_t *to_ns);
/* Length of [a, b) inside [from, to), 0 if none. */
int64_t sl_usage_overlap(int64_t a, int64_t b, int64_t from, int64_t to);
/* "2026-11-22T10:00:00Z" (frac = 0) or Nova's "2026-11-22T10:00:00.000000" (frac = 1). */
void sl_usage_format_time(int64_t ns, int frac, char *out, size_t cap);

/* ---- building */

/* project: only this project (NULL: every one). */
sl_code sl_usage_report_new(int64_t from_ns, int64_t to_ns, const char *project,
                            sl_usage_report **out, sl_error *e);
/* The records' gpu_shared_ns is known (the agent's store): table, CSV and JSON show the
 * shared GPU time beside the raw one. Without it they leave it out. */
void sl_usage_report_with_shared(sl_usage_report *r);
/* Records and lifetimes outside the period (or of another project) are ignored. */
sl_code sl_usage_report_add(sl_usage_report *r, const sl_usage_rec *rec, sl_error *e);
sl_code sl_usage_report_add_life(sl_usage_report *r, const sl_usage_life *l, sl_error *e);
/* Computes existence and entitlement, sorts; call once, after the last add. */
sl_code sl_usage_report_finish(sl_usage_report *r, sl_error *e);
const sl_usage_view *sl_usage_report_view(const sl_usage_report *r);
void sl_usage_report_free(sl_usage_report *r);

/* ---- rendering */

typedef enum sl_usage_format {
    SL_USAGE_TABLE,
    SL_USAGE_CSV,
    SL_USAGE_JSON,
    SL_USAGE_SVG,
} sl_usage_format;

/* "table", "csv", "json", "svg"; -1 if none of them. */
int sl_usage_format_parse(const char *s);
/* SL_ERR_IO when writing to f failed. */
sl_code sl_usage_render(const sl_usage_view *v, sl_usage_format fmt, FILE *f, sl_error *e);

/* SLA use in percent of the entitlement; -1 when nothing was entitled. */
double sl_usage_sla_percent(const sl_usage_server *s);

/* ---- the command-line options both report tools share:
 *   [--from TIME] [--to TIME] [--project ID] [--format table|csv|json|svg] [--output FILE] */

typedef struct sl_usage_options {
    int64_t from_ns, to_ns;
    int have_from, have_to; /* given on the command line */
    char project[65];       /* "" = every project */
    sl_usage_format format;
    char output[1024]; /* "" = stdout */
} sl_usage_options;

/* The options' lines for a --help text. */
extern const char sl_usage_options_help[];

void sl_usage_options_init(sl_usage_options *o);
/* One option by its long name without dashes ("from", "to", "project", "format", "output"):
 * checked, with an error naming the option and what is wrong. */
sl_code sl_usage_option(sl_usage_options *o, const char *name, const char *value, sl_error *e);
/* Defaults (this month so far, UTC) and the check that the period ends after it starts. */
sl_code sl_usage_options_finish(sl_usage_options *o, int64_t now_ns, sl_error *e);
/* Renders v into --output (written to FILE.tmp, then renamed) or stdout. */
sl_code sl_usage_write(const sl_usage_view *v, const sl_usage_options *o, sl_error *e);

#endif
