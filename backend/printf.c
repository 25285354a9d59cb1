/* Device printf: the driver (and the test double) writes kernel printf output to fd 1. At the
 * start of a session's worker process (worker.c) fd 1 becomes the write end of a pipe; the calls
 * that may produce output (launches and synchronizing calls, session.c) run under the lock and
 * the pipe is drained into the session's pending output right after. One session per process:
 * the lock only matters for the unit tests' in-process sessions. The output travels in the next
 * reply's stdout_data (at most 1 MiB; beyond that it is dropped with a log line). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "sluice/log.h"

static int pipe_rd = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

sl_code be_printf_init(sl_error *e)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return sl_fail(e, SL_ERR_IO, "pipe: %s", strerror(errno));
    (void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
    fflush(stdout);
    if (dup2(p[1], STDOUT_FILENO) < 0) {
        close(p[0]);
        close(p[1]);
        return sl_fail(e, SL_ERR_IO, "dup2: %s", strerror(errno));
    }
    close(p[1]);
    fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
    pipe_rd = p[0];
    return SL_OK;
}

int be_printf_active(void)
{
    return pipe_rd >= 0;
}

void be_printf_lock(void)
{
    pthread_mutex_lock(&lock);
}

void be_printf_unlock_drain(sl_be_session *s)
{
    fflush(stdout);
    char buf[65536];
    for (;;) {
        ssize_t n = read(pipe_rd, buf, sizeof buf);
        if (n <= 0)
            break;
        size_t room = BE_MAX_STDOUT - s->stdout_len;
        size_t take = (size_t)n < room ? (size_t)n : room;
        if (take && !s->stdout_buf)
            s->stdout_buf = malloc(BE_MAX_STDOUT);
        if (take && s->stdout_buf) {
            memcpy(s->stdout_buf + s->stdout_len, buf, take);
            s->stdout_len += take;
        }
        if (take < (size_t)n)
            sl_log(SL_LOG_WARNING, BE_COMPONENT,
                   "session %llu: %zu bytes of device printf output dropped (over 1 MiB "
                   "between two replies)",
                   (unsigned long long)s->id, (size_t)n - take);
    }
    pthread_mutex_unlock(&lock);
}
