/* Usage records as the agent receives them from a backend (BackendReport.usage): the checks
 * every field must pass before the record is stored, and the conversion to the report
 * library's row (sluice/usage_report.h). Pure functions. Reference: docs/usage.md. */
#ifndef AG_USAGE_RECORD_H
#define AG_USAGE_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/usage_report.h"
#include "sluice_control.pb-c.h"

#define AG_USAGE_MIN_START_NS   1577836800000000000LL /* 2020-01-01: older is a broken clock */
#define AG_USAGE_MAX_INTERVAL_S 86400                 /* one record covers at most a day */
#define AG_USAGE_MAX_SKEW_S     600                   /* ends at most this far in the future */
#define AG_USAGE_MAX_BYTES      (1ULL << 50)          /* per record: bytes, memory */
#define AG_USAGE_MAX_COUNT      (1ULL << 40)          /* per record: kernels, calls, errors */
#define AG_USAGE_MAX_CONCURRENT 128 /* kernel time may exceed the interval this many times */
#define AG_USAGE_MAX_BUSY       256 /* busy intervals per record (UsageRecord.busy) */

/* 1 if s is a UUID in its 8-4-4-4-12 hexadecimal form (either case). */
int ag_usage_is_uuid(const char *s);
/* 1 if s is a project id: 1..64 hexadecimal digits and '-'. */
int ag_usage_is_project(const char *s);

/* 0 if the record is well-formed and comes from the backend of project (NULL: any project);
 * else -1 and why names the first field that is wrong. now_ns: CLOCK_REALTIME. */
int ag_usage_record_check(const Sluice__Control__UsageRecord *r, const char *project,
                          int64_t now_ns, char *why, size_t n);

/* The report library's view of a record (strings point into r). */
void ag_usage_record_row(const Sluice__Control__UsageRecord *r, sl_usage_rec *out);

#endif
