/* The used-token store: one SQLite table, bound parameters only. */
#include "replay.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sluice/log.h"

#define PRUNE_EVERY_S 60

struct ag_replay {
    sqlite3 *db;
    sqlite3_stmt *ins, *del, *cnt;
    int skew;
    int64_t last_prune;
};

static sl_code dbfail(ag_replay *r, sl_error *e, const char *what)
{
    return sl_fail(e, SL_ERR_IO, "replay store: %s: %s", what,
                   r->db ? sqlite3_errmsg(r->db) : "not open");
}

static sl_code exec1(ag_replay *r, const char *sql, sl_error *e)
{
    char *msg = NULL;
    if (sqlite3_exec(r->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        sl_code rc = sl_fail(e, SL_ERR_IO, "replay store: %s: %s", sql, msg ? msg : "failed");
        sqlite3_free(msg);
        return rc;
    }
    return SL_OK;
}

sl_code ag_replay_open(const char *path, int skew_s, ag_replay **out, sl_error *e)
{
    sl_error_clear(e);
    if (!path || !out)
        return sl_fail(e, SL_ERR_INVALID, "ag_replay_open: NULL argument");
    if (skew_s < 0 || skew_s > 300)
        return sl_fail(e, SL_ERR_INVALID, "replay store: skew %d s outside 0..300", skew_s);
    *out = NULL;
    /* create it 0600 ourselves: SQLite would use the umask */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return sl_fail(e, SL_ERR_IO, "replay store: cannot open %s: %s", path, strerror(errno));
    close(fd);
    ag_replay *r = calloc(1, sizeof *r);
    if (!r)
        return sl_fail(e, SL_ERR_NOMEM, "no memory for the replay store");
    r->skew = skew_s;
    sl_code rc = SL_OK;
    if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, NULL) !=
        SQLITE_OK)
        rc = dbfail(r, e, path);
    if (rc == SL_OK) {
        sqlite3_busy_timeout(r->db, 5000);
        if ((rc = exec1(r, "PRAGMA journal_mode = WAL", e)) == SL_OK &&
            (rc = exec1(r, "PRAGMA synchronous = FULL", e)) == SL_OK)
            rc = exec1(r,
                       "CREATE TABLE IF NOT EXISTS used_tokens ("
                       " jti TEXT PRIMARY KEY NOT NULL,"
                       " exp INTEGER NOT NULL,"
                       " subject TEXT NOT NULL,"
                       " used_at INTEGER NOT NULL);"
                       "CREATE INDEX IF NOT EXISTS used_tokens_exp ON used_tokens(exp);",
                       e);
    }
    if (rc == SL_OK &&
        (sqlite3_prepare_v2(r->db,
                            "INSERT OR IGNORE INTO used_tokens(jti, exp, subject, used_at) "
                            "VALUES (?1, ?2, ?3, ?4)",
                            -1, &r->ins, NULL) != SQLITE_OK ||
         sqlite3_prepare_v2(r->db, "DELETE FROM used_tokens WHERE exp < ?1", -1, &r->del, NULL) !=
             SQLITE_OK ||
         sqlite3_prepare_v2(r->db, "SELECT count(*) FROM used_tokens", -1, &r->cnt, NULL) !=
             SQLITE_OK))
        rc = dbfail(r, e, "prepare");
    if (rc != SL_OK) {
        ag_replay_close(r);
        return rc;
    }
    *out = r;
    return SL_OK;
}

void ag_replay_close(ag_replay *r)
{
    if (!r)
        return;
    sqlite3_finalize(r->ins);
    sqlite3_finalize(r->del);
    sqlite3_finalize(r->cnt);
    sqlite3_close(r->db);
    free(r);
}

sl_code ag_replay_prune(ag_replay *r, int64_t now, int *removed, sl_error *e)
{
    if (removed)
        *removed = 0;
    if (!r)
        return sl_fail(e, SL_ERR_INVALID, "ag_replay_prune: NULL store");
    sqlite3_reset(r->del);
    sqlite3_bind_int64(r->del, 1, now - r->skew);
    int rc = sqlite3_step(r->del);
    sqlite3_reset(r->del);
    if (rc != SQLITE_DONE)
        return dbfail(r, e, "prune");
    int n = sqlite3_changes(r->db);
    if (removed)
        *removed = n;
    if (n)
        sl_log(SL_LOG_DEBUG, "enroll", "replay store: forgot %d expired token id(s)", n);
    r->last_prune = now;
    return SL_OK;
}

sl_code ag_replay_use(ag_replay *r, const char *jti, int64_t exp, const char *subject, int *fresh,
                      sl_error *e)
{
    sl_error_clear(e);
    if (!r || !jti || !*jti || !fresh)
        return sl_fail(e, SL_ERR_INVALID, "ag_replay_use: bad argument");
    *fresh = 0;
    int64_t now = (int64_t)time(NULL);
    if (now - r->last_prune >= PRUNE_EVERY_S) {
        sl_error pe;
        if (ag_replay_prune(r, now, NULL, &pe) != SL_OK)
            sl_log(SL_LOG_WARNING, "enroll", "%s", pe.msg);
    }
    sqlite3_reset(r->ins);
    sqlite3_bind_text(r->ins, 1, jti, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(r->ins, 2, exp);
    sqlite3_bind_text(r->ins, 3, subject ? subject : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(r->ins, 4, now);
    int rc = sqlite3_step(r->ins);
    sqlite3_reset(r->ins);
    sqlite3_clear_bindings(r->ins);
    if (rc != SQLITE_DONE)
        return dbfail(r, e, "insert");
    *fresh = sqlite3_changes(r->db) == 1;
    return SL_OK;
}

long ag_replay_count(ag_replay *r)
{
    if (!r)
        return -1;
    sqlite3_reset(r->cnt);
    long n = sqlite3_step(r->cnt) == SQLITE_ROW ? (long)sqlite3_column_int64(r->cnt, 0) : -1;
    sqlite3_reset(r->cnt);
    return n;
}
