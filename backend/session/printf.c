/* Device printf and device-side assert messages: the driver (and the test double) writes kernel
 * printf output to fd 1 and the messages of failed device-side asserts to fd 2. At the start of a
 * session's worker process (worker.c) each becomes the write end of a pipe (the worker's own log
 * goes on to a copy of its stderr). The synchronizing calls, where CUDA promises the output
 * (session.c), run under the lock and the pipes are drained into the session's pending output
 * right after; between them a watcher thread drains them whenever they have data, so that a
 * launch (which may flush earlier kernels' output) never pays a read and the driver never blocks
 * on a full pipe. One session per process: the lock also keeps the unit tests' in-process
 * sessions apart. The output travels in the next reply's stdout_data / stderr_data (at most
 * 1 MiB each; beyond that it is dropped with a log line). */
#include "session/printf.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include "bounds.h"
#include "session/state.h"
#include "sluice/error.h"
#include "sluice/log.h"

enum { OUT, ERR, NSTREAMS };
static int pipe_rd[NSTREAMS] = {-1, -1};
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sl_be_session *watched; /* the watcher's session (lock); NULL: read and drop */

/* fd becomes the write end of a new pipe; *rd its non-blocking read end. */
static sl_code capture(int fd, int *rd, sl_error *e)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return sl_fail(e, SL_ERR_IO, "pipe: %s", strerror(errno));
    (void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
    if (dup2(p[1], fd) < 0) {
        int err = errno;
        close(p[0]);
        close(p[1]);
        return sl_fail(e, SL_ERR_IO, "dup2: %s", strerror(err));
    }
    close(p[1]);
    fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
    *rd = p[0];
    return SL_OK;
}

sl_code be_printf_init(sl_error *e)
{
    fflush(stdout);
    sl_code rc = capture(STDOUT_FILENO, &pipe_rd[OUT], e);
    if (rc != SL_OK)
        return rc;
    /* the log keeps the worker's stderr; fd 2 is the driver's (device-side asserts) */
    int keep = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    FILE *log = keep >= 0 ? fdopen(keep, "w") : NULL;
    if (!log) {
        if (keep >= 0)
            close(keep);
        return sl_fail(e, SL_ERR_IO, "a copy of stderr for the log: %s", strerror(errno));
    }
    setvbuf(log, NULL, _IONBF, 0);
    sl_log_set_stream(log); /* before fd 2 changes: the journal decision looks at it */
    fflush(stderr);
    rc = capture(STDERR_FILENO, &pipe_rd[ERR], e);
    if (rc != SL_OK) {
        sl_log_set_stream(NULL);
        fclose(log);
        return rc;
    }
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_set_report_fd((void *)(intptr_t)keep); /* reports stay in the backend's log */
#endif
    return SL_OK;
}

int be_printf_active(void)
{
    return pipe_rd[OUT] >= 0;
}

void be_printf_lock(void)
{
    pthread_mutex_lock(&lock);
}

/* Moves what pipe i holds into s's pending output (lock held). */
static void drain_one(sl_be_session *s, int i)
{
    static const char *const what[NSTREAMS] = {"device printf output", "device stderr output"};
    char buf[65536];
    for (;;) {
        ssize_t n = pipe_rd[i] >= 0 ? read(pipe_rd[i], buf, sizeof buf) : -1;
        if (n <= 0 || !s)
            break;
        uint8_t **dst = i == OUT ? &s->stdout_buf : &s->stderr_buf;
        size_t *len = i == OUT ? &s->stdout_len : &s->stderr_len;
        size_t room = BE_MAX_STDOUT - *len;
        size_t take = (size_t)n < room ? (size_t)n : room;
        if (take && !*dst)
            *dst = malloc(BE_MAX_STDOUT);
        if (take && *dst) {
            memcpy(*dst + *len, buf, take);
            *len += take;
        }
        if (take < (size_t)n)
            sl_log(SL_LOG_WARNING, BE_COMPONENT,
                   "session %llu: %zu bytes of %s dropped (over 1 MiB between two replies)",
                   (unsigned long long)s->id, (size_t)n - take, what[i]);
    }
}

static void drain(sl_be_session *s)
{
    drain_one(s, OUT);
    drain_one(s, ERR);
}

void be_printf_unlock_drain(sl_be_session *s)
{
    fflush(stdout);
    drain(s);
    pthread_mutex_unlock(&lock);
}

void be_printf_take(sl_be_session *s, struct be_output *out)
{
    pthread_mutex_lock(&lock);
    out->out = s->stdout_buf;
    out->out_len = s->stdout_len;
    out->err = s->stderr_buf;
    out->err_len = s->stderr_len;
    s->stdout_buf = s->stderr_buf = NULL;
    s->stdout_len = s->stderr_len = 0;
    pthread_mutex_unlock(&lock);
}

static void *watch_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "sl-printf");
    int open = pipe_rd[ERR] >= 0 ? NSTREAMS : 1;
    for (;;) {
        struct pollfd p[NSTREAMS] = {{pipe_rd[OUT], POLLIN, 0}, {pipe_rd[ERR], POLLIN, 0}};
        if (poll(p, (nfds_t)open, -1) < 0 && errno != EINTR)
            return NULL;
        pthread_mutex_lock(&lock);
        drain(watched); /* NULL once the session is gone: the bytes are dropped */
        pthread_mutex_unlock(&lock);
        for (int i = 0; i < open; i++)
            if (p[i].revents & (POLLHUP | POLLERR | POLLNVAL))
                return NULL; /* a capture closed: nothing more can come, poll would not wait */
    }
}

sl_code be_printf_watch(sl_be_session *s, sl_error *e)
{
    if (pipe_rd[OUT] < 0)
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
