/* Checks of what agent.conf names (check.h). */
#include "check.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sluice/db.h"

typedef struct ctx {
    ag_check_report report;
    void *user;
    int errors;
} ctx;

static void say(ctx *x, int is_error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(ctx *x, int is_error, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    x->errors += is_error;
    x->report(x->user, is_error, line);
}

static void parent_of(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        snprintf(out, cap, "/");
    else
        snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A directory the agent makes itself with one mkdir when it is missing. */
static void made_dir(ctx *x, const char *key, const char *dir)
{
    char parent[PATH_MAX];
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            say(x, 1, "%s %s: not a directory", key, dir);
        return;
    }
    parent_of(dir, parent, sizeof parent);
    if (!is_dir(parent))
        say(x, 1,
            "%s %s: neither it nor %s exists (the agent makes only the last directory); create "
            "%s",
            key, dir, parent, parent);
}

static void readable(ctx *x, const char *key, const char *path)
{
    if (path[0] && access(path, R_OK) != 0)
        say(x, 1, "%s %s: %s", key, path, strerror(errno));
}

static void users(ctx *x, const ag_config *c)
{
    if (c->backend_user[0] && !getpwnam(c->backend_user))
        say(x, 1,
            "backend_user %s: no such user on this host; create it (the packages make "
            "sluice-backend) or name an existing one",
            c->backend_user);
    if (c->backend_group[0] && !getgrnam(c->backend_group))
        say(x, 1, "backend_group %s: no such group on this host", c->backend_group);
}

int ag_check_config(const ag_config *c, ag_check_report report, void *user)
{
    ctx x = {report, user, 0};
    if (access(c->backend_path, X_OK) != 0)
        say(&x, 1, "backend_path %s: not executable: %s", c->backend_path, strerror(errno));
    readable(&x, "token_public_key", c->token_public_key);
    if (access(c->driver_path, R_OK) != 0)
        say(&x, 0, "driver_path %s: %s (backends cannot reach a GPU)", c->driver_path,
            strerror(errno));
    readable(&x, "registry_ca", c->registry_ca);
    readable(&x, "registry_cert", c->registry_cert);
    readable(&x, "registry_key", c->registry_key);
    users(&x, c);
    made_dir(&x, "state_dir", c->state_dir);
    made_dir(&x, "run_dir", c->run_dir);
    made_dir(&x, "ca_dir", c->ca_dir);
    /* usage_db: its directory must exist, unless it is state_dir (made at start) */
    char dir[PATH_MAX];
    parent_of(c->usage_db, dir, sizeof dir);
    if (strcmp(dir, c->state_dir) != 0 || is_dir(c->state_dir)) {
        sl_error e;
        if (sl_db_check_path(c->usage_db, 0, "usage_db", &e) != SL_OK)
            say(&x, 1, "%s", e.msg);
    }
    return x.errors;
}
