/* Shared by the report builder and the renderers of common/usage/. */
#ifndef SL_USAGE_INTERNAL_H
#define SL_USAGE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "sluice/usage_report.h"

#define SL_USAGE_MAX_BUCKETS 62
#define SL_USAGE_DAY_NS      (86400LL * SL_USAGE_NS_PER_S)

/* "1.5 GiB", "512 B": binary units, one decimal. */
void sl_usage_human_bytes(uint64_t v, char *out, size_t cap);
/* Seconds as hours with 2 decimals ("12.50"): how long an instance existed. */
void sl_usage_hours(double s, char *out, size_t cap);
/* Seconds in the unit that suits them: "3.25 h", "12.5 min", "4.2 s", "1.5 ms", "850 us", "0".
 * Short GPU use shows as what it is, not as 0.0000 h. */
void sl_usage_duration(double s, char *out, size_t cap);
/* "37.5" or "-" when nothing was entitled. */
void sl_usage_percent(const sl_usage_server *s, char *out, size_t cap);

sl_code sl_usage_render_table(const sl_usage_view *v, FILE *f);
sl_code sl_usage_render_csv(const sl_usage_view *v, FILE *f);
sl_code sl_usage_render_json(const sl_usage_view *v, FILE *f);
sl_code sl_usage_render_svg(const sl_usage_view *v, FILE *f);

#endif
