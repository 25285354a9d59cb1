/* journald-friendly logging: one line per event, "component: message", at a syslog priority.
 *
 * Where it goes: when stderr is connected to the journal (systemd sets $JOURNAL_STREAM to the
 * device and inode of that stream), each line is sent over journald's native protocol with its
 * fields: PRIORITY, SYSLOG_IDENTIFIER (the program, sl_log_set_identifier), SLUICE_COMPONENT and,
 * where known, SLUICE_PROJECT, SLUICE_INSTANCE and SLUICE_SESSION. Otherwise (a terminal, a pipe,
 * a test) the line goes to stderr prefixed with the priority in the "<N>" form journald reads.
 *
 * Nothing a guest or a peer sends can forge a line: every line is escaped (sl_log_escape) before
 * it is written, so a newline, a carriage return or an escape sequence inside a host name or a
 * version string shows as \n, \r or \x1b inside the one line it belongs to.
 *
 * The level threshold is $SLUICE_LOG_LEVEL: err, warning, notice, info (the default) or debug,
 * in any case, or a syslog priority 0..7; anything else is reported once, as a warning, and the
 * default is used. It is read once, at the first message or sl_log_enabled. */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include <stddef.h>
#include <stdio.h>

enum sl_log_level {
    SL_LOG_ERR = 3,
    SL_LOG_WARNING = 4,
    SL_LOG_NOTICE = 5,
    SL_LOG_INFO = 6,
    SL_LOG_DEBUG = 7,
};

void sl_log(enum sl_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Where lines that do not go to the journal are written: stderr (NULL) or f. A process that
 * hands its fd 2 to something else (the backend's session workers capture what the driver
 * writes there) keeps its log on a copy of it: call this before fd 2 changes, since it also
 * decides whether lines go to the journal (JOURNAL_STREAM names fd 2). Call at start, before
 * other threads log. */
void sl_log_set_stream(FILE *f);

/* 1 if a message of this level would be written (to skip costly formatting). */
int sl_log_enabled(enum sl_log_level level);

/* The program's name in the journal (SYSLOG_IDENTIFIER), e.g. "sluice-backend"; default: the
 * executable's name. Call at start, before other threads log. */
void sl_log_set_identifier(const char *identifier);

/* Who a line is about. NULL or "" members are unknown. */
typedef struct sl_log_fields {
    const char *project;  /* SLUICE_PROJECT */
    const char *instance; /* SLUICE_INSTANCE */
    const char *session;  /* SLUICE_SESSION: a label unique across tenants, e.g. "f241e906/7" */
} sl_log_fields;

/* Fields of every line of the process (a backend: its project; a session worker: its project,
 * instance and session). Call at start, before other threads log; NULL clears them. */
void sl_log_set_process_fields(const sl_log_fields *f);

/* Fields of the calling thread's lines until the next call (NULL: back to the process's), for
 * as long as it works for one instance or session. A member left NULL or "" falls back to the
 * process's value. */
void sl_log_set_thread_fields(const sl_log_fields *f);

/* A session label for SLUICE_SESSION: the first 8 characters of the project, '/', the number:
 * two tenants' "session 1" cannot be confused. out needs at least 32 bytes. */
char *sl_log_session_label(const char *project, unsigned long long session, char *out, size_t cap);

/* Copies s into out (cap bytes, always terminated, truncated at a character boundary): '\' as
 * "\\", line feed, carriage return and tab as "\n", "\r", "\t", other control bytes (below
 * 0x20, 0x7f, and the C1 controls U+0080..U+009F) and bytes that are not valid UTF-8 as "\xNN".
 * What it writes is printable UTF-8 on one line. Returns out. The one helper for anything a
 * guest or a peer sent that ends up in a log line or a message printed for a person. */
char *sl_log_escape(const char *s, char *out, size_t cap);

#endif
