/* Usage records (usage.c): building one (record id, GPU UUID) and its log line. */
#ifndef SLUICE_BE_ACCOUNTING_USAGE_H
#define SLUICE_BE_ACCOUNTING_USAGE_H

#include <stddef.h>
#include <stdint.h>

#include "accounting/intervals.h"
#include "sluice/error.h"
#include "sluice_control.pb-c.h"

#define BE_USAGE_MAX_BUSY 256 /* UsageRecord.busy: at most this many intervals */

/* The figures of one record, as records.c gathers them. */
struct be_usage {
    const char *instance, *project, *flavor, *gpu_uuid, *measurement;
    uint64_t session_id;
    int64_t start_ns, end_ns; /* CLOCK_REALTIME */
    uint64_t busy_ns, kernel_ns, kernels, bytes_htod, bytes_dtoh, memory_high_water, calls, errors,
        throttled_ns;
    uint32_t quota_refusals;
    double gpu_share; /* the SLA's share, 0 = unknown */
    int final;
    const struct be_iv *busy; /* the busy intervals (sorted, disjoint, within the interval) */
    size_t nbusy;             /* at most BE_USAGE_MAX_BUSY */
    uint64_t busy_widened_ns; /* the gaps merged into them (be_iv_cap) */
};
/* A fresh record id (UUID version 4, lower case) into out[37]. */
sl_code be_usage_uuid(char out[37], sl_error *e);
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" as nvidia-smi prints a device UUID; out[41]. */
void be_usage_gpu_uuid(const uint8_t uuid[16], char out[41]);
/* An encoded UsageRecord with a fresh record id (malloc'd). */
sl_code be_usage_encode(const struct be_usage *u, uint8_t **buf, size_t *len, sl_error *e);
/* One log line for a record (the backend without --control logs its records at info). */
void be_usage_log(const Sluice__Control__UsageRecord *r);

#endif
