#include "sluice/log.h"

#include <stdatomic.h>
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

/* $SLUICE_LOG_LEVEL is read once: the hot paths ask sl_log_enabled on every call, and getenv
 * walks the whole environment. */
static atomic_int g_threshold = -1;

int sl_log_enabled(enum sl_log_level level)
{
    int t = atomic_load_explicit(&g_threshold, memory_order_relaxed);
    if (t < 0) {
        t = threshold();
        atomic_store_explicit(&g_threshold, t, memory_order_relaxed);
    }
    return (int)level <= t;
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
