/* journald-friendly logging: one line per event on stderr, prefixed with the syslog priority
 * in the "<N>" form that systemd's journal understands, then "component: message".
 * Level threshold from SLUICE_LOG_LEVEL (err, warning, notice, info, debug; default info), read
 * once, at the first message or sl_log_enabled. */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

enum sl_log_level {
    SL_LOG_ERR = 3,
    SL_LOG_WARNING = 4,
    SL_LOG_NOTICE = 5,
    SL_LOG_INFO = 6,
    SL_LOG_DEBUG = 7,
};

void sl_log(enum sl_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* 1 if a message of this level would be written (to skip costly formatting). */
int sl_log_enabled(enum sl_log_level level);

#endif
