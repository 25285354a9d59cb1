/* --version and one-line usage errors (sluice/cli.h). */
#include "sluice/cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sluice/log.h"

#ifndef SLUICE_VERSION_STR
#error "SLUICE_VERSION_STR is set by proto/CMakeLists.txt"
#endif

const char *sl_version(void)
{
    return SLUICE_VERSION_STR;
}

int sl_cli_version(const char *prog)
{
    printf("%s %s\n", prog, sl_version());
    return 0;
}

int sl_cli_usage_error(const char *prog, const char *fmt, ...)
{
    char what[512], shown[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s; try '%s --help'\n", prog, sl_log_escape(what, shown, sizeof shown),
            prog);
    return 2;
}

int sl_cli_bad_option(const char *prog, int c, char **argv)
{
    const char *arg = optind > 0 ? argv[optind - 1] : "?";
    char opt[64];
    if (optopt && !(arg[0] == '-' && arg[1] == '-'))
        snprintf(opt, sizeof opt, "-%c", optopt);
    else
        snprintf(opt, sizeof opt, "%.*s", (int)strcspn(arg, "="), arg);
    if (c == ':')
        return sl_cli_usage_error(prog, "option %s needs a value", opt);
    return sl_cli_usage_error(prog, "unknown option %s", opt);
}
