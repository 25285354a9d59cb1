/* STATE_DIR/backends.state and process identities (see backend_state.h). */
#include "backend_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/log.h"

#define COMPONENT "agent"

static int project_ok(const char *p)
{
    size_t n = strlen(p);
    if (n == 0 || n > 63)
        return 0;
    for (; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.' || *p == ':'))
            return 0;
    return 1;
}

sl_code ag_bstate_load(const char *path, ag_bstate **rows, size_t *n, sl_error *e)
{
    *rows = NULL;
    *n = 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? SL_OK : sl_fail(e, SL_ERR_IO, "%s: %s", path, strerror(errno));
    char line[256];
    size_t cap = 0;
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        ag_bstate r;
        memset(&r, 0, sizeof r);
        long long used;
        char extra;
        if (sscanf(line, "%63s %d %d %llu %lld %c", r.project, &r.port, &r.pid, &r.start, &used,
                   &extra) != 5 ||
            !project_ok(r.project) || r.port < 1 || r.port > 65535 || r.pid < 0 ||
            (r.pid == 0) != (r.start == 0)) {
            sl_log(SL_LOG_WARNING, COMPONENT, "%s:%d: not PROJECT PORT PID START USED; skipped",
                   path, lineno);
            continue;
        }
        r.used = used;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            ag_bstate *v = realloc(*rows, cap * sizeof *v);
            if (!v) {
                fclose(f);
                free(*rows);
                *rows = NULL;
                *n = 0;
                return sl_fail(e, SL_ERR_NOMEM, "out of memory");
            }
            *rows = v;
        }
        (*rows)[(*n)++] = r;
    }
    fclose(f);
    return SL_OK;
}

sl_code ag_bstate_save(const char *path, const ag_bstate *rows, size_t n, sl_error *e)
{
    char tmp[1024];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return sl_fail(e, SL_ERR_INVALID, "%s: path too long", path);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return sl_fail(e, SL_ERR_IO, "%s: %s", tmp, strerror(errno));
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s %d %d %llu %lld\n", rows[i].project, rows[i].port, rows[i].pid,
                rows[i].start, (long long)rows[i].used);
    int ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return sl_fail(e, SL_ERR_IO, "%s: %s", path, strerror(err));
    }
    return SL_OK;
}

unsigned long long ag_proc_start(pid_t pid)
{
    if (pid <= 0)
        return 0;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "PID (COMM) STATE ..." where COMM may hold spaces and parentheses: after the last ')' */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    char state = 0;
    unsigned long long start = 0;
    /* fields 3..22: state, then 18 numbers, then starttime */
    if (sscanf(p + 1,
               " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
               &state, &start) != 2)
        return 0;
    return state == 'Z' || state == 'X' ? 0 : start;
}
