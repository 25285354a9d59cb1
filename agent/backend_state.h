/* What the agent keeps about its backends across its own restarts (a crash, an upgrade), in
 * STATE_DIR/backends.state: one line per project that had a backend on this host,
 *
 *   PROJECT PORT PID START USED
 *
 * PORT: the project's backend port, kept for it (its guests' backend.conf names it); PID and
 * START (the process's start time, clock ticks after boot: /proc/PID/stat field 22): the
 * backend running now, "0 0" when none; USED: the unix time the project last had a backend
 * (when the port range is full, the port unused the longest goes to a new project).
 * Written atomically (temporary file, fsync, rename). Reference: docs/agent.md, "When the
 * agent restarts". */
#ifndef AG_BACKEND_STATE_H
#define AG_BACKEND_STATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sluice/error.h"

typedef struct ag_bstate {
    char project[64];
    int port;
    int pid;
    unsigned long long start;
    int64_t used;
} ag_bstate;

/* Reads path into *rows (malloc'd; free()). A missing file is no rows; a malformed line is
 * skipped and named in a warning. */
sl_code ag_bstate_load(const char *path, ag_bstate **rows, size_t *n, sl_error *e);
sl_code ag_bstate_save(const char *path, const ag_bstate *rows, size_t n, sl_error *e);

/* The start time of process pid (clock ticks after boot); 0 when there is no such process or
 * it is a zombie (it ended and waits to be reaped). */
unsigned long long ag_proc_start(pid_t pid);

#endif
