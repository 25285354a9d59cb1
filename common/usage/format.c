/* Formats and the renderer dispatch. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

void sl_usage_human_bytes(uint64_t v, char *out, size_t cap)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (v < 1024) {
        snprintf(out, cap, "%llu B", (unsigned long long)v);
        return;
    }
    double d = (double)v;
    int u = 0;
    while (d >= 1024.0 && u < 6) {
        d /= 1024.0;
        u++;
    }
    snprintf(out, cap, "%.1f %s", d, unit[u]);
}

void sl_usage_hours(double s, char *out, size_t cap)
{
    snprintf(out, cap, "%.2f", s / 3600.0);
}

void sl_usage_duration(double s, char *out, size_t cap)
{
    if (!(s > 0))
        snprintf(out, cap, "0");
    else if (s >= 3600.0)
        snprintf(out, cap, "%.2f h", s / 3600.0);
    else if (s >= 60.0)
        snprintf(out, cap, "%.1f min", s / 60.0);
    else if (s >= 1.0)
        snprintf(out, cap, "%.1f s", s);
    else if (s >= 1e-3)
        snprintf(out, cap, "%.1f ms", s * 1e3);
    else
        snprintf(out, cap, "%.0f us", s * 1e6 < 1 ? 1.0 : s * 1e6);
}

void sl_usage_percent(const sl_usage_server *s, char *out, size_t cap)
{
    double p = sl_usage_sla_percent(s);
    if (p < 0)
        snprintf(out, cap, "-");
    else
        snprintf(out, cap, "%.1f", p);
}

int sl_usage_format_parse(const char *s)
{
    static const char *const names[] = {"table", "csv", "json", "svg"};
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

sl_code sl_usage_render(const sl_usage_view *v, sl_usage_format fmt, FILE *f, sl_error *e)
{
    sl_code rc;
    switch (fmt) {
    case SL_USAGE_TABLE:
        rc = sl_usage_render_table(v, f);
        break;
    case SL_USAGE_CSV:
        rc = sl_usage_render_csv(v, f);
        break;
    case SL_USAGE_JSON:
        rc = sl_usage_render_json(v, f);
        break;
    case SL_USAGE_SVG:
        rc = sl_usage_render_svg(v, f);
        break;
    default:
        return sl_fail(e, SL_ERR_INVALID, "usage report: unknown format %d", (int)fmt);
    }
    if (rc == SL_ERR_NOMEM)
        return sl_fail(e, rc, "usage report: out of memory");
    if (rc != SL_OK || fflush(f) != 0 || ferror(f))
        return sl_fail(e, SL_ERR_IO, "usage report: writing the output failed");
    return SL_OK;
}
