/* Times for people: "2026-12-03 10:00:00 UTC" instead of seconds since the epoch. */
#ifndef SLUICE_TIMEFMT_H
#define SLUICE_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

/* unix_s as "YYYY-MM-DD HH:MM:SS UTC" ("?" when it cannot be shown); returns out. */
char *sl_time_utc(int64_t unix_s, char *out, size_t cap);

/* A span of seconds as "3 days 4 h", "5 h 12 min", "12 min", "40 s" (negative: "0 s"). */
char *sl_time_span(int64_t seconds, char *out, size_t cap);

#endif
