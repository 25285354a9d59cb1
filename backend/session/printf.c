/* Device printf: the driver (and the test double) writes kernel printf output to fd 1. At the
 * start of a session's worker process (worker.c) fd 1 becomes the write end of a pipe. The
 * synchronizing calls, where CUDA promises the output (session.c), run under the lock and the
 * pipe is drained into the session's pending output right after; between them a watcher thread
 * drains it whenever it has data, so that a launch (which may flush earlier kernels' output)
 * never pays a read and the driver never blocks on a full pipe. One session per process: the
 * lock also keeps the unit tests' in-process sessions apart. The output travels in the next
 * reply's stdout_data (at most 1 MiB; beyond that it is dropped with a log line). */
#include "session/printf.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bounds.h"
#include "session/state.h"
#include "sluice/error.h"
#include "sluice/log.h"

static int pipe_rd = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sl_be_session *watched; /* the watcher's session (lock); NULL: read and drop */

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

/* Moves what the pipe holds into s's pending output (lock held). */
static void drain(sl_be_session *s)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(pipe_rd, buf, sizeof buf);
        if (n <= 0 || !s)
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
}

void be_printf_unlock_drain(sl_be_session *s)
{
    fflush(stdout);
    drain(s);
    pthread_mutex_unlock(&lock);
}

void be_printf_take(sl_be_session *s, uint8_t **out, size_t *len)
{
    pthread_mutex_lock(&lock);
    *out = s->stdout_buf;
    *len = s->stdout_len;
    s->stdout_buf = NULL;
    s->stdout_len = 0;
    pthread_mutex_unlock(&lock);
}

static void *watch_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "sl-printf");
    for (;;) {
        struct pollfd p = {pipe_rd, POLLIN, 0};
        if (poll(&p, 1, -1) < 0 && errno != EINTR)
            return NULL;
        pthread_mutex_lock(&lock);
        drain(watched); /* NULL once the session is gone: the bytes are dropped */
        pthread_mutex_unlock(&lock);
        if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
            return NULL; /* fd 1 closed: nothing more can come, and poll would not wait */
    }
}

sl_code be_printf_watch(sl_be_session *s, sl_error *e)
{
    if (pipe_rd < 0)
        return SL_OK;
    pthread_mutex_lock(&lock);
    watched = s;
    pthread_mutex_unlock(&lock);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int err = pthread_create(&t, &at, watch_main, NULL);
    pthread_attr_destroy(&at);
    if (err)
        return sl_fail(e, SL_ERR_NOMEM, "no device printf thread: %s", strerror(err));
    return SL_OK;
}

void be_printf_unwatch(void)
{
    pthread_mutex_lock(&lock);
    watched = NULL;
    pthread_mutex_unlock(&lock);
}
