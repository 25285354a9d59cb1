/* sl_log: levels, fields, and where a line goes (sluice/log.h). */
#include "sluice/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "journal.h"

#define LINE_MAX_IN  1024              /* a formatted message, before escaping */
#define LINE_MAX_OUT (LINE_MAX_IN * 4) /* escaped: at most 4 bytes per input byte */
#define FIELD_MAX    200               /* an escaped field value */

typedef struct fields {
    char project[FIELD_MAX], instance[FIELD_MAX], session[FIELD_MAX];
} fields;

static fields g_process;
static _Thread_local fields t_thread;
static _Thread_local int t_has_thread;
static char g_ident[64];
static FILE *g_stream; /* NULL: stderr */

void sl_log_set_stream(FILE *f)
{
    (void)sl_journal_wanted(); /* decided now, while fd 2 is still the process's stderr */
    g_stream = f;
}

/* ---------------------------------------------------------------------------- threshold */

/* -1: garbage (the default is used and a warning says so once). */
static int parse_level(const char *v)
{
    static const struct {
        const char *name;
        int level;
    } levels[] = {{"err", SL_LOG_ERR},      {"error", SL_LOG_ERR},     {"warning", SL_LOG_WARNING},
                  {"warn", SL_LOG_WARNING}, {"notice", SL_LOG_NOTICE}, {"info", SL_LOG_INFO},
                  {"debug", SL_LOG_DEBUG}};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        if (strcasecmp(v, levels[i].name) == 0)
            return levels[i].level;
    if (v[0] >= '0' && v[0] <= '7' && !v[1])
        return v[0] - '0' < SL_LOG_ERR ? SL_LOG_ERR : v[0] - '0';
    return -1;
}

/* $SLUICE_LOG_LEVEL is read once: the hot paths ask sl_log_enabled on every call, and getenv
 * walks the whole environment. */
static atomic_int g_threshold = -1;

int sl_log_enabled(enum sl_log_level level)
{
    int t = atomic_load_explicit(&g_threshold, memory_order_relaxed);
    if (t < 0) {
        const char *v = getenv("SLUICE_LOG_LEVEL");
        int parsed = v && *v ? parse_level(v) : SL_LOG_INFO;
        t = parsed < 0 ? SL_LOG_INFO : parsed;
        int expected = -1;
        /* the thread that sets it warns, once per process */
        if (atomic_compare_exchange_strong(&g_threshold, &expected, t) && parsed < 0) {
            sl_log(SL_LOG_WARNING, "log",
                   "SLUICE_LOG_LEVEL=%.64s is not err, warning, notice, info, debug or 0..7; "
                   "using info",
                   v);
        }
    }
    return (int)level <= t;
}

/* ---------------------------------------------------------------------------- fields */

static void fill(fields *dst, const sl_log_fields *f)
{
    memset(dst, 0, sizeof *dst);
    if (!f)
        return;
    sl_log_escape(f->project, dst->project, sizeof dst->project);
    sl_log_escape(f->instance, dst->instance, sizeof dst->instance);
    sl_log_escape(f->session, dst->session, sizeof dst->session);
}

void sl_log_set_identifier(const char *identifier)
{
    sl_log_escape(identifier, g_ident, sizeof g_ident);
}

void sl_log_set_process_fields(const sl_log_fields *f)
{
    fill(&g_process, f);
}

void sl_log_set_thread_fields(const sl_log_fields *f)
{
    fill(&t_thread, f);
    t_has_thread = f != NULL;
}

char *sl_log_session_label(const char *project, unsigned long long session, char *out, size_t cap)
{
    snprintf(out, cap, "%.8s/%llu", project && *project ? project : "-", session);
    return out;
}

static const char *pick(const char *thread, const char *process)
{
    return t_has_thread && thread[0] ? thread : process;
}

/* ---------------------------------------------------------------------------- output */

/* " [project=P instance=I session=S]" for the fields the message does not name already. */
static void suffix(const char *msg, const char *const val[3], char *out, size_t cap)
{
    static const char *const name[3] = {"project", "instance", "session"};
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < 3; i++) {
        if (!val[i][0] || strstr(msg, val[i]))
            continue;
        int n = snprintf(out + o, cap - o, "%s%s=%s", o ? " " : " [", name[i], val[i]);
        if (n < 0 || (size_t)n >= cap - o)
            break;
        o += (size_t)n;
    }
    if (o && o + 1 < cap)
        memcpy(out + o, "]", 2);
}

static void default_identifier(void)
{
    if (!g_ident[0])
        sl_log_set_identifier(program_invocation_short_name);
}

static const char *identifier(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, default_identifier); /* threads may log first at the same time */
    return g_ident;
}

void sl_log(enum sl_log_level level, const char *component, const char *fmt, ...)
{
    if (!sl_log_enabled(level))
        return;
    int saved = errno; /* callers may log between a failure and their look at errno */
    char raw[LINE_MAX_IN], msg[LINE_MAX_OUT], comp[64], tail[3 * FIELD_MAX + 40];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    sl_log_escape(raw, msg, sizeof msg);
    sl_log_escape(component ? component : "sluice", comp, sizeof comp);
    const char *val[3] = {pick(t_thread.project, g_process.project),
                          pick(t_thread.instance, g_process.instance),
                          pick(t_thread.session, g_process.session)};
    suffix(msg, val, tail, sizeof tail);
    if (sl_journal_wanted()) {
        static const char *const key[3] = {
            "SLUICE_PROJECT=", "SLUICE_INSTANCE=", "SLUICE_SESSION="};
        char m[LINE_MAX_OUT + sizeof tail + 80], pri[16], id[96], cf[96], kv[3][FIELD_MAX + 20];
        const char *f[8];
        size_t n = 0;
        snprintf(m, sizeof m, "MESSAGE=%s: %s%s", comp, msg, tail);
        snprintf(pri, sizeof pri, "PRIORITY=%d", (int)level);
        snprintf(id, sizeof id, "SYSLOG_IDENTIFIER=%s", identifier());
        snprintf(cf, sizeof cf, "SLUICE_COMPONENT=%s", comp);
        f[n++] = m;
        f[n++] = pri;
        f[n++] = id;
        f[n++] = cf;
        for (int i = 0; i < 3; i++)
            if (val[i][0]) {
                snprintf(kv[i], sizeof kv[i], "%s%s", key[i], val[i]);
                f[n++] = kv[i];
            }
        if (sl_journal_send(f, n) == 0) {
            errno = saved;
            return;
        }
    }
    /* one fprintf per line keeps lines whole when threads log at once */
    fprintf(g_stream ? g_stream : stderr, "<%d>%s: %s%s\n", (int)level, comp, msg, tail);
    errno = saved;
}
