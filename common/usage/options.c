/* The report tools' shared options and output. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sluice/usage_report.h"

const char sl_usage_options_help[] =
    "  --from TIME        start of the period, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS, UTC\n"
    "                     (default: the first day of this month, 00:00; 30 days before\n"
    "                     --to when --to is earlier than that)\n"
    "  --to TIME          end of the period, exclusive (default: now)\n"
    "  --project ID       only this project\n"
    "  --format FORMAT    table (default), csv, json (Nova os-simple-tenant-usage shape)\n"
    "                     or svg (GPU hours per project per day)\n"
    "  --output FILE      write there (replaced atomically) instead of stdout\n";

void sl_usage_options_init(sl_usage_options *o)
{
    memset(o, 0, sizeof *o);
    o->format = SL_USAGE_TABLE;
}

static int project_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789abcdefABCDEF-", s[i]))
            return 0;
    return 1;
}

sl_code sl_usage_option(sl_usage_options *o, const char *name, const char *value, sl_error *e)
{
    sl_error pe;
    if (!strcmp(name, "from") || !strcmp(name, "to")) {
        int from = name[0] == 'f';
        if (sl_usage_parse_time(value, from ? &o->from_ns : &o->to_ns, &pe) != SL_OK)
            return sl_fail(e, SL_ERR_INVALID, "--%s: %s", name, pe.msg);
        *(from ? &o->have_from : &o->have_to) = 1;
        return SL_OK;
    }
    if (!strcmp(name, "project")) {
        if (!project_ok(value))
            return sl_fail(e, SL_ERR_INVALID,
                           "--project: '%.70s' is not a project id (1..64 hex digits and '-')",
                           value);
        snprintf(o->project, sizeof o->project, "%s", value);
        return SL_OK;
    }
    if (!strcmp(name, "format")) {
        int f = sl_usage_format_parse(value);
        if (f < 0)
            return sl_fail(e, SL_ERR_INVALID, "--format: '%.40s': expected table, csv, json or svg",
                           value);
        o->format = (sl_usage_format)f;
        return SL_OK;
    }
    if (!strcmp(name, "output")) {
        if (!*value || strlen(value) >= sizeof o->output - 8)
            return sl_fail(e, SL_ERR_INVALID, "--output: empty or too long a path");
        snprintf(o->output, sizeof o->output, "%s", value);
        return SL_OK;
    }
    return sl_fail(e, SL_ERR_INVALID, "--%s: not a usage report option", name);
}

sl_code sl_usage_options_finish(sl_usage_options *o, int64_t now_ns, sl_error *e)
{
    int64_t from, to;
    sl_usage_this_month(now_ns, &from, &to);
    if (!o->have_from)
        o->from_ns =
            o->have_to && o->to_ns <= from ? o->to_ns - 30 * 86400LL * SL_USAGE_NS_PER_S : from;
    if (!o->have_to)
        o->to_ns = to;
    if (o->to_ns <= o->from_ns)
        return sl_fail(e, SL_ERR_INVALID, "--to: the period must end after it starts (--from)");
    return SL_OK;
}

sl_code sl_usage_write(const sl_usage_view *v, const sl_usage_options *o, sl_error *e)
{
    if (!o->output[0])
        return sl_usage_render(v, o->format, stdout, e);
    char tmp[sizeof o->output + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->output);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return sl_fail(e, SL_ERR_IO, "--output %s: %s", tmp, strerror(errno));
    sl_code rc = sl_usage_render(v, o->format, f, e);
    if (fclose(f) != 0 && rc == SL_OK)
        rc = sl_fail(e, SL_ERR_IO, "--output %s: %s", tmp, strerror(errno));
    if (rc == SL_OK && rename(tmp, o->output) != 0)
        rc = sl_fail(e, SL_ERR_IO, "--output %s: %s", o->output, strerror(errno));
    if (rc != SL_OK)
        unlink(tmp);
    return rc;
}
