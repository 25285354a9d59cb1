/* The GPU listing (gpus.h). */
#include "gpus.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OUT_MAX (64 * 1024)

static int printable(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

sl_code ag_gpus_parse(const char *text, ag_gpu *out, size_t cap, size_t *n, sl_error *e)
{
    *n = 0;
    int line = 0;
    for (const char *p = text; *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        line++;
        const char *t1 = memchr(p, '\t', len);
        const char *t2 = t1 ? memchr(t1 + 1, '\t', len - (size_t)(t1 + 1 - p)) : NULL;
        if (!t2)
            return sl_fail(e, SL_ERR_PROTOCOL, "GPU list line %d: expected UUID, memory, name",
                           line);
        size_t ul = (size_t)(t1 - p), ml = (size_t)(t2 - t1 - 1), nl = len - (size_t)(t2 + 1 - p);
        char mem[24];
        char *mend;
        if (ul == 0 || ul >= sizeof out->uuid || !printable(p, ul) || ml == 0 || ml >= sizeof mem ||
            nl >= sizeof out->name || !printable(t2 + 1, nl))
            return sl_fail(e, SL_ERR_PROTOCOL,
                           "GPU list line %d: a field is empty, too long "
                           "or not printable",
                           line);
        memcpy(mem, t1 + 1, ml);
        mem[ml] = '\0';
        errno = 0;
        unsigned long long m = strtoull(mem, &mend, 10);
        if (*mend || errno || mem[0] == '-')
            return sl_fail(e, SL_ERR_PROTOCOL, "GPU list line %d: memory is not a number", line);
        if (*n == cap)
            return sl_fail(e, SL_ERR_TOO_LARGE, "more than %zu GPUs", cap);
        ag_gpu *g = &out[(*n)++];
        memcpy(g->uuid, p, ul);
        g->uuid[ul] = '\0';
        memcpy(g->name, t2 + 1, nl);
        g->name[nl] = '\0';
        g->memory_bytes = m;
        p = end ? end + 1 : p + len;
    }
    return SL_OK;
}

/* The child: as backend_user, stdout to the pipe, the backend's listing. */
static void child(const ag_config *c, int fd)
{
    if (geteuid() == 0 && c->backend_user[0]) {
        struct passwd *pw = getpwnam(c->backend_user);
        struct group *gr = c->backend_group[0] ? getgrnam(c->backend_group) : NULL;
        gid_t gid = gr ? gr->gr_gid : pw ? pw->pw_gid : 0;
        if (!pw || setgroups(1, &gid) != 0 || setgid(gid) != 0 || setuid(pw->pw_uid) != 0)
            _exit(126);
    }
    dup2(fd, STDOUT_FILENO);
    close(fd);
    char *argv[] = {(char *)c->backend_path, "--list-gpus", "--driver", (char *)c->driver_path,
                    NULL};
    execv(argv[0], argv);
    _exit(127);
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

sl_code ag_gpus_probe(const ag_config *c, ag_gpu *out, size_t cap, size_t *n, sl_error *e)
{
    *n = 0;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return sl_fail(e, SL_ERR_IO, "GPU list: pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return sl_fail(e, SL_ERR_IO, "GPU list: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(p[0]);
        child(c, p[1]);
    }
    close(p[1]);
    char *buf = malloc(OUT_MAX + 1);
    size_t len = 0;
    int64_t until = mono_ms() + AG_GPUS_TIMEOUT_S * 1000;
    int timed_out = 0;
    while (buf && len < OUT_MAX) {
        struct pollfd pf = {p[0], POLLIN, 0};
        int64_t left = until - mono_ms();
        if (left <= 0 || poll(&pf, 1, (int)left) == 0) {
            timed_out = 1;
            break;
        }
        ssize_t r = read(p[0], buf + len, OUT_MAX - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(p[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    sl_code rc;
    if (!buf)
        rc = sl_fail(e, SL_ERR_NOMEM, "GPU list: out of memory");
    else if (timed_out)
        rc = sl_fail(e, SL_ERR_TIMEOUT, "%s --list-gpus did not finish in %d s", c->backend_path,
                     AG_GPUS_TIMEOUT_S);
    else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        rc = sl_fail(e, SL_ERR_IO,
                     "%s --list-gpus --driver %s failed (exit status %d; its log says why)",
                     c->backend_path, c->driver_path, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    else {
        buf[len] = '\0';
        rc = ag_gpus_parse(buf, out, cap, n, e);
    }
    free(buf);
    return rc;
}
