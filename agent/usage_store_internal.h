/* Inside the usage store: what its files share. Not for other files: they use usage_store.h.
 *   usage_store.c           opening and the schema, records, totals, forwarding marks
 *   usage_store_lifetimes.c instance lifetimes (the SLA entitlement's wall time), retention
 *   usage_store_sessions.c  the sessions a backend reported open and has not ended yet */
#ifndef AG_USAGE_STORE_INTERNAL_H
#define AG_USAGE_STORE_INTERNAL_H

#include <pthread.h>

#include "sluice/db.h"
#include "usage_store.h"

#define WHO "usage store"

struct ag_usage_store {
    sl_db *db;
    pthread_mutex_t mu;
};

/* Runs fn in a transaction (sl_db_transaction) under the store's mutex. */
sl_code ag_usage_store_txn(ag_usage_store *s, int flags, sl_db_txn_fn fn, void *ud, sl_error *e);
/* Binds v, "" for NULL (the store's columns are NOT NULL). */
void ag_usage_store_bind_text(sl_db_stmt *st, int i, const char *v);

/* The period a walk binds: ?1 from_ns, ?2 to_ns, ?3 project (NULL: every one). */
typedef struct ag_usage_period {
    int64_t from_ns, to_ns;
    const char *project;
} ag_usage_period;
/* Runs one SELECT, calling row for each row (a read transaction, never run twice). */
sl_code ag_usage_store_walk(ag_usage_store *s, const char *sql, const char *what,
                            const ag_usage_period *p, sl_db_row_fn row, void *ud, sl_error *e);

/* In a records transaction: a new record updates its session's open row (a final one ends
 * it). usage_store_sessions.c. */
sl_code ag_usage_store_session_record(sl_db *db, const Sluice__Control__UsageRecord *r,
                                      sl_error *e);

/* In a records transaction: a new record's busy intervals (usage_store_shared.c). */
sl_code ag_usage_store_busy_put(sl_db *db, const Sluice__Control__UsageRecord *r, sl_error *e);

#endif
