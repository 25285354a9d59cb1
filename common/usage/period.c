/* Periods: parsing UTC times, this month so far, overlap of intervals, formatting. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sluice/usage_report.h"

static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 1;
}

sl_code sl_usage_parse_time(const char *s, int64_t *ns, sl_error *e)
{
    int y, mo, d, h = 0, mi = 0, sec = 0;
    size_t n = s ? strlen(s) : 0;
    if (n && s[n - 1] == 'Z')
        n--;
    int ok = (n == 10 || n == 19) && digits(s, 4, &y) && s[4] == '-' && digits(s + 5, 2, &mo) &&
             s[7] == '-' && digits(s + 8, 2, &d);
    if (ok && n == 19)
        ok = (s[10] == 'T' || s[10] == ' ') && digits(s + 11, 2, &h) && s[13] == ':' &&
             digits(s + 14, 2, &mi) && s[16] == ':' && digits(s + 17, 2, &sec);
    if (!ok)
        return sl_fail(e, SL_ERR_INVALID, "'%.40s': expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS",
                       s ? s : "");
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
        sec > 59)
        return sl_fail(e, SL_ERR_INVALID, "'%.40s': a field is out of range", s);
    struct tm tm = {0};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    time_t t = timegm(&tm);
    struct tm back;
    if (t == (time_t)-1 || !gmtime_r(&t, &back) || back.tm_mday != d || back.tm_mon != mo - 1)
        return sl_fail(e, SL_ERR_INVALID, "'%.40s': no such date", s);
    *ns = (int64_t)t * SL_USAGE_NS_PER_S;
    return SL_OK;
}

void sl_usage_this_month(int64_t now_ns, int64_t *from_ns, int64_t *to_ns)
{
    time_t t = (time_t)(now_ns / SL_USAGE_NS_PER_S);
    struct tm tm;
    gmtime_r(&t, &tm);
    tm.tm_mday = 1;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    *from_ns = (int64_t)timegm(&tm) * SL_USAGE_NS_PER_S;
    *to_ns = now_ns;
}

int64_t sl_usage_overlap(int64_t a, int64_t b, int64_t from, int64_t to)
{
    int64_t lo = a > from ? a : from, hi = b < to ? b : to;
    return hi > lo ? hi - lo : 0;
}

void sl_usage_format_time(int64_t ns, int frac, char *out, size_t cap)
{
    int64_t s = ns / SL_USAGE_NS_PER_S, rem = ns % SL_USAGE_NS_PER_S;
    if (rem < 0) {
        s--;
        rem += SL_USAGE_NS_PER_S;
    }
    time_t t = (time_t)s;
    struct tm tm;
    char base[32];
    if (!gmtime_r(&t, &tm) || !strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm)) {
        snprintf(out, cap, "-");
        return;
    }
    if (frac)
        snprintf(out, cap, "%s.%06lld", base, (long long)(rem / 1000));
    else
        snprintf(out, cap, "%sZ", base);
}
