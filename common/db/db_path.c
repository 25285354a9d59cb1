/* Why a database file cannot be opened, said before SQLite says "unable to open database file"
 * (sluice/db.h). */
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sluice/db.h"

static const char *user_name(char *buf, size_t cap)
{
    struct passwd *pw = getpwuid(geteuid());
    snprintf(buf, cap, "%s (uid %u)", pw ? pw->pw_name : "?", (unsigned)geteuid());
    return buf;
}

sl_code sl_db_check_path(const char *path, int readonly, const char *who, sl_error *e)
{
    char dir[PATH_MAX], user[96];
    if (!path || !*path)
        return sl_fail(e, SL_ERR_CONFIG, "%s: no database path", who);
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    struct stat st;
    if (stat(dir, &st) != 0 && readonly)
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s %s: no such database: the directory %s %s; check the path (--db, or "
                       "the daemon's configuration)",
                       who, path, dir, errno == ENOENT ? "does not exist" : strerror(errno));
    if (stat(dir, &st) != 0)
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s %s: the directory %s %s; create it (writable by the user the daemon "
                       "runs as) or choose a path in an existing directory",
                       who, path, dir, errno == ENOENT ? "does not exist" : strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return sl_fail(e, SL_ERR_CONFIG, "%s %s: %s is not a directory", who, path, dir);
    int exists = access(path, F_OK) == 0;
    if (readonly) {
        if (!exists)
            return sl_fail(e, SL_ERR_CONFIG,
                           "%s %s: no such database (the daemon creates it at its first start; "
                           "check --db or the configuration)",
                           who, path);
        if (access(path, R_OK) != 0)
            return sl_fail(e, SL_ERR_CONFIG,
                           "%s %s: not readable by %s; run as a user who may read it (and its "
                           "-wal and -shm files)",
                           who, path, user_name(user, sizeof user));
        return SL_OK;
    }
    /* read-write: SQLite makes FILE-wal and FILE-shm next to it */
    if (access(dir, W_OK | X_OK) != 0)
        return sl_fail(e, SL_ERR_CONFIG,
                       "%s %s: the directory %s is not writable by %s (SQLite writes %s-wal and "
                       "-shm there); give that user write access to it",
                       who, path, dir, user_name(user, sizeof user), path);
    if (exists && access(path, R_OK | W_OK) != 0)
        return sl_fail(e, SL_ERR_CONFIG, "%s %s: not readable and writable by %s", who, path,
                       user_name(user, sizeof user));
    return SL_OK;
}
