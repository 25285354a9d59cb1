/* Inside the registry store: what store.c, store_usage.c and store_schema.c share. Other files
 * use store.h. */
#ifndef NH_STORE_INTERNAL_H
#define NH_STORE_INTERNAL_H

#include <pthread.h>

#include "sluice/db.h"
#include "sluice/db_schema.h"
#include "store.h"

#define WHO "registry store"

struct nh_store {
    sl_db *db;
    pthread_mutex_t mu;
    int version; /* found at open */
};

extern const sl_db_schema nh_registry_schema;

/* Runs fn in a transaction (sl_db_transaction) under the store's mutex. */
sl_code nh_store_txn(nh_store *s, int flags, sl_db_txn_fn fn, void *ud, sl_error *e);
/* Prepares sql, lets bind fill the parameters (may be NULL), runs it expecting no row;
 * *changes (may be NULL): the rows it changed. */
typedef void (*nh_binder)(sl_db_stmt *st, const void *ud);
sl_code nh_store_run(sl_db *db, const char *sql, nh_binder bind, const void *ud, const char *what,
                     int64_t *changes, sl_error *e);

#endif
