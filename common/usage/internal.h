/* Shared by the report builder and the renderers of proto/usage/. */
#ifndef SL_USAGE_INTERNAL_H
#define SL_USAGE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "sluice/usage_report.h"

#define SL_USAGE_MAX_BUCKETS 62
#define SL_USAGE_DAY_NS      (86400LL * SL_USAGE_NS_PER_S)

/* "1.5 GiB", "512 B": binary units, one decimal. */
void sl_usage_human_bytes(uint64_t v, char *out, size_t cap);
/* Seconds as hours with 4 decimals ("12.5000"), the table's unit. */
void sl_usage_hours(double s, char *out, size_t cap);
/* "37.5" or "-" when nothing was entitled. */
void sl_usage_percent(const sl_usage_server *s, char *out, size_t cap);

sl_code sl_usage_render_table(const sl_usage_view *v, FILE *f);
sl_code sl_usage_render_csv(const sl_usage_view *v, FILE *f);
sl_code sl_usage_render_json(const sl_usage_view *v, FILE *f);
sl_code sl_usage_render_svg(const sl_usage_view *v, FILE *f);

#endif
