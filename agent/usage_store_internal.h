/* Private to usage_store*.c: the store's handle and the helpers its files share.
 *   usage_store.c           opening and migrations, records, totals, forwarding marks
 *   usage_store_lifetimes.c instance lifetimes (the SLA entitlement's wall time)
 *   usage_store_sessions.c  the sessions a backend reported open and has not ended yet */
#ifndef AG_USAGE_STORE_INTERNAL_H
#define AG_USAGE_STORE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <string.h>

#include "sluice/db.h"
#include "usage_store.h"

struct ag_usage_store {
    sqlite3 *db;
    pthread_mutex_t mu;
    int readonly;
};

static inline sl_code db_fail(ag_usage_store *s, sl_error *e, const char *what)
{
    return sl_fail(e, SL_ERR_IO, "usage store: %s: %s", what, sqlite3_errmsg(s->db));
}

static inline sl_code exec1(ag_usage_store *s, const char *sql, sl_error *e)
{
    return sl_db_exec(s->db, "usage store", sql, e);
}

/* ------------------------------------------------------------------------------ helpers */

static inline sl_code prep(ag_usage_store *s, const char *sql, sqlite3_stmt **st, sl_error *e)
{
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
        return db_fail(s, e, "preparing a statement");
    return SL_OK;
}

static inline void text(sqlite3_stmt *st, int i, const char *v)
{
    sqlite3_bind_text(st, i, v ? v : "", -1, SQLITE_STATIC);
}

static inline const char *col(sqlite3_stmt *st, int i)
{
    return sl_db_text(st, i);
}

static inline uint64_t u64(sqlite3_stmt *st, int i)
{
    return (uint64_t)sqlite3_column_int64(st, i);
}

static inline void copy(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* In a records transaction: a new record updates its session's open row (a final one ends
 * it). usage_store_sessions.c. */
sl_code ag_us_session_record(ag_usage_store *s, const Sluice__Control__UsageRecord *r, sl_error *e);

#endif
