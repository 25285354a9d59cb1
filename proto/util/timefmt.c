/* sluice/timefmt.h */
#include "sluice/timefmt.h"

#include <stdio.h>
#include <time.h>

char *sl_time_utc(int64_t unix_s, char *out, size_t cap)
{
    time_t t = (time_t)unix_s;
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(out, cap, "%Y-%m-%d %H:%M:%S UTC", &tm))
        snprintf(out, cap, "?");
    return out;
}

char *sl_time_span(int64_t s, char *out, size_t cap)
{
    if (s < 0)
        s = 0;
    if (s >= 86400)
        snprintf(out, cap, "%lld day%s %lld h", (long long)(s / 86400), s / 86400 == 1 ? "" : "s",
                 (long long)(s % 86400 / 3600));
    else if (s >= 3600)
        snprintf(out, cap, "%lld h %lld min", (long long)(s / 3600), (long long)(s % 3600 / 60));
    else if (s >= 60)
        snprintf(out, cap, "%lld min", (long long)(s / 60));
    else
        snprintf(out, cap, "%lld s", (long long)s);
    return out;
}
