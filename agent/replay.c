/* The used-token store: one SQLite table through sluice_db, bound parameters only. */
#include "replay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sluice/db.h"
#include "sluice/log.h"

#define PRUNE_EVERY_S 60
#define WHO           "replay store"

struct ag_replay {
    sl_db *db;
    sl_db_stmt *ins, *del, *cnt;
    int skew;
    int64_t last_prune;
};

sl_code ag_replay_open(const char *path, int skew_s, ag_replay **out, sl_error *e)
{
    sl_error_clear(e);
    if (!path || !out)
        return sl_fail(e, SL_ERR_INVALID, "ag_replay_open: NULL argument");
    if (skew_s < 0 || skew_s > 300)
        return sl_fail(e, SL_ERR_INVALID, WHO ": skew %d s outside 0..300", skew_s);
    *out = NULL;
    /* create it 0600 ourselves: SQLite would use the umask */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return sl_fail(e, SL_ERR_IO, WHO ": cannot open %s: %s", path, strerror(errno));
    close(fd);
    ag_replay *r = calloc(1, sizeof *r);
    if (!r)
        return sl_fail(e, SL_ERR_NOMEM, "no memory for the replay store");
    r->skew = skew_s;
    sl_code rc = sl_db_open(path, 0, WHO, &r->db, e);
    if (rc == SL_OK)
        rc = sl_db_exec(r->db,
                        "CREATE TABLE IF NOT EXISTS used_tokens ("
                        " jti TEXT PRIMARY KEY NOT NULL,"
                        " exp INTEGER NOT NULL,"
                        " subject TEXT NOT NULL,"
                        " used_at INTEGER NOT NULL)",
                        e);
    if (rc == SL_OK)
        rc = sl_db_exec(r->db, "CREATE INDEX IF NOT EXISTS used_tokens_exp ON used_tokens(exp)", e);
    if (rc == SL_OK)
        rc = sl_db_prepare(r->db,
                           "INSERT OR IGNORE INTO used_tokens(jti, exp, subject, used_at) "
                           "VALUES (?1, ?2, ?3, ?4)",
                           &r->ins, e);
    if (rc == SL_OK)
        rc = sl_db_prepare(r->db, "DELETE FROM used_tokens WHERE exp < ?1", &r->del, e);
    if (rc == SL_OK)
        rc = sl_db_prepare(r->db, "SELECT count(*) FROM used_tokens", &r->cnt, e);
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
    sl_db_finalize(r->ins);
    sl_db_finalize(r->del);
    sl_db_finalize(r->cnt);
    sl_db_close(r->db);
    free(r);
}

sl_code ag_replay_prune(ag_replay *r, int64_t now, int *removed, sl_error *e)
{
    if (removed)
        *removed = 0;
    if (!r)
        return sl_fail(e, SL_ERR_INVALID, "ag_replay_prune: NULL store");
    sl_db_reset(r->del);
    sl_db_bind_i64(r->del, 1, now - r->skew);
    sl_code rc = sl_db_run(r->del, "pruning", e);
    int n = rc == SL_OK ? (int)sl_db_changes(r->del) : 0;
    sl_db_reset(r->del);
    if (rc != SL_OK)
        return rc;
    if (removed)
        *removed = n;
    if (n)
        sl_log(SL_LOG_DEBUG, "enroll", WHO ": forgot %d expired token id(s)", n);
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
    sl_db_reset(r->ins);
    sl_db_bind_text(r->ins, 1, jti);
    sl_db_bind_i64(r->ins, 2, exp);
    sl_db_bind_text(r->ins, 3, subject ? subject : "");
    sl_db_bind_i64(r->ins, 4, now);
    sl_code rc = sl_db_run(r->ins, "recording a token id", e);
    if (rc == SL_OK)
        *fresh = sl_db_changes(r->ins) == 1;
    sl_db_reset(r->ins);
    return rc;
}

long ag_replay_count(ag_replay *r)
{
    if (!r)
        return -1;
    sl_db_reset(r->cnt);
    int row = 0;
    sl_error e;
    long n = sl_db_step(r->cnt, "counting", &row, &e) == SL_OK && row
                 ? (long)sl_db_col_i64(r->cnt, 0)
                 : -1;
    sl_db_reset(r->cnt);
    return n;
}
