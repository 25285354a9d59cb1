/* The sample usage of the report tests: two projects, three instances, records straddling the
 * period's ends, lifetimes open, closed and missing. Used by the golden files (test_report.c)
 * and by usage_seed (sluice-usage on a store holding the same data must print the same). */
#ifndef FIXTURE_H
#define FIXTURE_H

#include <stddef.h>

#include "sluice/usage_report.h"

#define FX_FROM "2026-11-01"
#define FX_TO   "2026-11-04"
#define FX_PA   "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define FX_PB   "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define FX_U1   "11111111-0000-4000-8000-000000000001"
#define FX_U2   "11111111-0000-4000-8000-000000000002"
#define FX_U3   "11111111-0000-4000-8000-000000000003"

/* Fills the tables (times resolved at the first call); returns the counts. */
size_t fx_records(const sl_usage_rec **out);
size_t fx_lives(const sl_usage_life **out);
int64_t fx_time(const char *iso); /* sl_usage_parse_time or abort */

#endif
