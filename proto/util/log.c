#include "sluice/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int threshold(void)
{
    static const struct {
        const char *name;
        int level;
    } levels[] = {{"err", SL_LOG_ERR},      {"error", SL_LOG_ERR},     {"warning", SL_LOG_WARNING},
                  {"warn", SL_LOG_WARNING}, {"notice", SL_LOG_NOTICE}, {"info", SL_LOG_INFO},
                  {"debug", SL_LOG_DEBUG}};
    const char *v = getenv("SLUICE_LOG_LEVEL");
    if (v)
        for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
            if (strcmp(v, levels[i].name) == 0)
                return levels[i].level;
    return SL_LOG_INFO;
}

int sl_log_enabled(enum sl_log_level level)
{
    return (int)level <= threshold();
}

void sl_log(enum sl_log_level level, const char *component, const char *fmt, ...)
{
    if (!sl_log_enabled(level))
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* one fprintf per line keeps lines whole when threads log at once */
    fprintf(stderr, "<%d>%s: %s\n", (int)level, component ? component : "sluice", line);
}
