/* The registry's persistent store on sluice_db (sluice/db.h): SQLite (a file, the default: one
 * controller) or MariaDB (a server several nova-hooks share: docs/nova-hook.md, "Several
 * controllers"), one schema definition for both (store_schema.c), prepared statements only,
 * every change one transaction (run again after a deadlock or a lost connection). Tables:
 * agents, placements, placement_history (when each instance ran where: the wall time of usage
 * reports), usage_records, tokens (every token issued: its id is unique in the database, so no
 * two nova-hooks hand out the same one). One nh_store may be shared by threads: every call
 * takes the store's mutex. The functions are in store.c (opening, agents, placements) and
 * store_usage.c (usage, tokens, retention). */
#ifndef NH_STORE_H
#define NH_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/error.h"
#include "sluice/usage_report.h"
#include "sluice_control.pb-c.h"

#define NH_STORE_SCHEMA_VERSION 5

typedef struct nh_store nh_store;

typedef enum nh_store_mode {
    NH_STORE_SERVE = 0, /* the daemon: a SQLite file is created or upgraded on the spot; a
                         * MariaDB schema must be current (sluice-registry db-sync) */
    NH_STORE_READ = 1,  /* the CLI's reports: never writes; the schema must be current */
    NH_STORE_SYNC = 2,  /* sluice-registry db-sync: creates or upgrades the schema */
} nh_store_mode;

/* Opens the database a URL names (a path, sqlite:////PATH, mysql+pymysql://...). */
sl_code nh_store_open(const char *url, nh_store_mode mode, nh_store **out, sl_error *e);
void nh_store_close(nh_store *s);
/* The schema version (NH_STORE_SYNC: the one found before the sync; else the current one). */
int nh_store_found_version(const nh_store *s);
/* The database for messages (no password). */
const char *nh_store_where(const nh_store *s);

/* ---- agents */
typedef struct nh_agent_in {
    const char *host;
    const char *endpoint;
    int64_t slots;
    const char *gpus_json; /* a JSON array */
    const char *version;
    const char *ca_pem; /* NULL or "" when none */
} nh_agent_in;

/* Inserts or replaces an agent (placements on it are kept); last_seen = now. */
sl_code nh_store_register(nh_store *s, const nh_agent_in *a, int64_t now, sl_error *e);
/* Deletes an agent and its placements. *existed tells whether it was there. */
sl_code nh_store_unregister(nh_store *s, const char *host, int *existed, sl_error *e);
/* last_seen = now. *known tells whether the host is registered. */
sl_code nh_store_touch(nh_store *s, const char *host, int64_t now, int *known, sl_error *e);

/* ---- placements */
/* Inserts or moves the instance to host (which must be registered: else SL_ERR_REFUSED). */
sl_code nh_store_place(nh_store *s, const char *instance, const char *project, const char *flavor,
                       const char *host, int64_t since, sl_error *e);
/* Removes the instance if it is placed on host. *removed: 1 if a row went. The instance's
 * placement history on host is closed now (place opens it; a move closes the old host's at the
 * new placement's since; unregistering closes every one of the host). */
sl_code nh_store_unplace(nh_store *s, const char *instance, const char *host, int *removed,
                         sl_error *e);

/* What the vendordata service needs about a placed instance. */
typedef struct nh_target {
    char host[256];
    char project[128];
    char endpoint[256];
    char *ca_pem; /* malloc'd, NULL when the agent registered none; free() */
} nh_target;

/* *found = 1 and *t filled when the instance is placed on a registered agent. */
sl_code nh_store_lookup(nh_store *s, const char *instance, nh_target *t, int *found, sl_error *e);

/* ---- usage */
/* Stores the records in one transaction (a record_id the database holds already is skipped:
 * its primary key, whichever nova-hook stored it), so SL_OK means every record is durably
 * stored, now or before. *inserted counts the new ones. */
sl_code nh_store_usage_insert(nh_store *s, const char *host,
                              Sluice__Control__UsageRecord *const *records, size_t n, int64_t now,
                              size_t *inserted, sl_error *e);
sl_code nh_store_usage_count(nh_store *s, int64_t *count, sl_error *e);

/* Usage records touching [from_ns, to_ns) (project NULL: all), as report rows valid during the
 * callback (shared_unknown: the record came without its shared time, from an older agent); a
 * non-zero return stops. */
typedef int (*nh_usage_cb)(const sl_usage_rec *r, void *ud);
sl_code nh_store_usage_records(nh_store *s, int64_t from_ns, int64_t to_ns, const char *project,
                               nh_usage_cb cb, void *ud, sl_error *e);
/* Placement history touching the period as lifetimes; an open one ends at now_ns. */
typedef int (*nh_life_cb)(const sl_usage_life *l, void *ud);
sl_code nh_store_lifetimes(nh_store *s, int64_t from_ns, int64_t to_ns, const char *project,
                           int64_t now_ns, nh_life_cb cb, void *ud, sl_error *e);

/* ---- tokens */
/* Records an issued token; *unique = 0 when the database holds that id already (then nothing
 * is written: stamp a new id). */
typedef struct nh_token_rec {
    const char *jti, *instance, *project, *issuer_node, *kid;
    int64_t issued, expires;
} nh_token_rec;
sl_code nh_store_token_issued(nh_store *s, const nh_token_rec *t, int *unique, sl_error *e);
sl_code nh_store_token_count(nh_store *s, int64_t *count, sl_error *e);

/* ---- retention */
typedef struct nh_pruned {
    int64_t usage, history, tokens;
} nh_pruned;
/* One transaction: usage records whose interval ended before usage_before_ns and placement
 * history closed before it (usage_before_ns 0: neither), and tokens that expired before
 * tokens_before (unix seconds). Idempotent: several nova-hooks may prune at once. */
sl_code nh_store_prune(nh_store *s, int64_t usage_before_ns, int64_t tokens_before, nh_pruned *out,
                       sl_error *e);

/* ---- queries (the CLI); rows are valid during the callback only; a non-zero return stops */
typedef struct nh_host_row {
    const char *host, *endpoint, *gpus_json, *version;
    int64_t slots, used, registered, last_seen;
} nh_host_row;
typedef int (*nh_host_cb)(const nh_host_row *row, void *ud);
/* Every host; seen_before > 0: only those whose last_seen < seen_before (stale ones). */
sl_code nh_store_hosts(nh_store *s, int64_t seen_before, nh_host_cb cb, void *ud, sl_error *e);

typedef struct nh_instance_row {
    const char *instance, *project, *flavor, *host;
    int64_t since;
} nh_instance_row;
typedef int (*nh_instance_cb)(const nh_instance_row *row, void *ud);
/* host / project: NULL for any. */
sl_code nh_store_instances(nh_store *s, const char *host, const char *project, nh_instance_cb cb,
                           void *ud, sl_error *e);

#endif
