/* The registry's schema: one definition of version 5 for SQLite and MariaDB (portable types:
 * VARCHAR(n) keys, BIGINT counters, DOUBLE, TEXT), and the upgrades SQLite files written by
 * earlier releases need (versions 1 to 3 existed only in SQLite; they named the usage table
 * `usage`, a reserved word in MariaDB). Upgrades from version 4 on must be portable: they run
 * on both engines (sluice-registry db-sync). Unsigned 64-bit counters are stored as their
 * two's-complement BIGINT. */
#include "store_internal.h"

static const char *const create_v5[] = {
    "CREATE TABLE agents ("
    " host VARCHAR(255) NOT NULL PRIMARY KEY,"
    " endpoint VARCHAR(255) NOT NULL,"
    " slots BIGINT NOT NULL,"
    " gpus TEXT NOT NULL,"
    " version VARCHAR(64) NOT NULL,"
    " ca_pem TEXT,"
    " registered BIGINT NOT NULL,"
    " last_seen BIGINT NOT NULL)",
    "CREATE TABLE placements ("
    " instance VARCHAR(64) NOT NULL PRIMARY KEY,"
    " project VARCHAR(64) NOT NULL,"
    " flavor VARCHAR(255) NOT NULL,"
    " host VARCHAR(255) NOT NULL,"
    " since BIGINT NOT NULL,"
    " CONSTRAINT placements_agent FOREIGN KEY (host) REFERENCES agents (host)"
    " ON DELETE CASCADE)",
    "CREATE INDEX placements_host ON placements (host)",
    "CREATE INDEX placements_project ON placements (project)",
    "CREATE TABLE usage_records ("
    " record_id VARCHAR(128) NOT NULL PRIMARY KEY,"
    " host VARCHAR(255) NOT NULL,"
    " instance VARCHAR(64) NOT NULL,"
    " project VARCHAR(64) NOT NULL,"
    " flavor VARCHAR(255) NOT NULL,"
    " gpu_uuid VARCHAR(64) NOT NULL,"
    " session_id BIGINT NOT NULL,"
    " interval_start_ns BIGINT NOT NULL,"
    " interval_end_ns BIGINT NOT NULL,"
    " gpu_busy_ns BIGINT NOT NULL,"
    " kernel_ns BIGINT NOT NULL,"
    " kernels BIGINT NOT NULL,"
    " bytes_htod BIGINT NOT NULL,"
    " bytes_dtoh BIGINT NOT NULL,"
    " memory_high_water BIGINT NOT NULL,"
    " calls BIGINT NOT NULL,"
    " errors BIGINT NOT NULL,"
    " throttled_ns BIGINT NOT NULL,"
    " quota_refusals BIGINT NOT NULL,"
    " measurement VARCHAR(16) NOT NULL,"
    " final BIGINT NOT NULL,"
    " received BIGINT NOT NULL,"
    " instance_name VARCHAR(255) NOT NULL DEFAULT '',"
    " domain_name VARCHAR(255) NOT NULL DEFAULT '',"
    " sla_tier VARCHAR(32) NOT NULL DEFAULT '',"
    " gpu_share DOUBLE NOT NULL DEFAULT 0,"
    " closed_by_agent BIGINT NOT NULL DEFAULT 0,"
    " gpu_shared_ns BIGINT)", /* NULL: not reported (an agent older than the field) */
    "CREATE INDEX usage_project ON usage_records (project, interval_start_ns)",
    "CREATE INDEX usage_end ON usage_records (interval_end_ns)",
    "CREATE TABLE placement_history ("
    " instance VARCHAR(64) NOT NULL,"
    " project VARCHAR(64) NOT NULL,"
    " flavor VARCHAR(255) NOT NULL,"
    " host VARCHAR(255) NOT NULL,"
    " since BIGINT NOT NULL,"
    " until BIGINT," /* NULL: still placed there */
    " PRIMARY KEY (instance, host, since))",
    "CREATE INDEX placement_history_project ON placement_history (project)",
    "CREATE TABLE tokens ("
    " jti VARCHAR(64) NOT NULL PRIMARY KEY,"
    " instance VARCHAR(64) NOT NULL,"
    " project VARCHAR(64) NOT NULL,"
    " issuer_node VARCHAR(255) NOT NULL,"
    " kid VARCHAR(32) NOT NULL,"
    " issued BIGINT NOT NULL,"
    " expires BIGINT NOT NULL)",
    "CREATE INDEX tokens_expires ON tokens (expires)",
    NULL,
};

/* ---- SQLite files of earlier releases */

static const char *const upgrade_1_to_2[] = {
    "ALTER TABLE usage ADD COLUMN instance_name TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE usage ADD COLUMN domain_name TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE usage ADD COLUMN sla_tier TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE usage ADD COLUMN gpu_share REAL NOT NULL DEFAULT 0",
    "CREATE INDEX usage_end ON usage(interval_end_ns)",
    "CREATE TABLE placement_history ("
    " instance TEXT NOT NULL,"
    " project TEXT NOT NULL,"
    " flavor TEXT NOT NULL,"
    " host TEXT NOT NULL,"
    " since INTEGER NOT NULL,"
    " until INTEGER,"
    " PRIMARY KEY (instance, host, since))",
    "CREATE INDEX placement_history_project ON placement_history(project)",
    "INSERT INTO placement_history SELECT instance, project, flavor, host, since, NULL "
    "FROM placements",
    NULL,
};

/* Records an agent wrote to close a session whose backend ended first. */
static const char *const upgrade_2_to_3[] = {
    "ALTER TABLE usage ADD COLUMN closed_by_agent INTEGER NOT NULL DEFAULT 0",
    NULL,
};

/* The name MariaDB can take, and the issued tokens (once-only across nova-hooks). */
static const char *const upgrade_3_to_4[] = {
    "ALTER TABLE usage RENAME TO usage_records",
    "CREATE TABLE tokens ("
    " jti VARCHAR(64) NOT NULL PRIMARY KEY,"
    " instance VARCHAR(64) NOT NULL,"
    " project VARCHAR(64) NOT NULL,"
    " issuer_node VARCHAR(255) NOT NULL,"
    " kid VARCHAR(32) NOT NULL,"
    " issued BIGINT NOT NULL,"
    " expires BIGINT NOT NULL)",
    "CREATE INDEX tokens_expires ON tokens (expires)",
    NULL,
};

/* ---- both engines (sluice-registry db-sync) */

/* Each record's shared GPU time as its agent apportioned it (docs/accounting.md); the records
 * stored before stay NULL: not reported. */
static const char *const upgrade_4_to_5[] = {
    "ALTER TABLE usage_records ADD COLUMN gpu_shared_ns BIGINT",
    NULL,
};

static const char *const *const upgrades[] = {upgrade_1_to_2, upgrade_2_to_3, upgrade_3_to_4,
                                              upgrade_4_to_5};

const sl_db_schema nh_registry_schema = {
    "registry",
    NH_STORE_SCHEMA_VERSION,
    create_v5,
    upgrades,
    1,
    4,
    "run sluice-registry --config NOVAHOOK_CONF db-sync (once, on one controller)",
};
