/* sluice-agent's configuration file: "key = value" lines, '#' comments, then [tier NAME] and
 * [flavor NAME] sections for the flavor policy table. Every key and value is checked; errors
 * read "FILE:LINE: key: what is wrong". Reference: docs/agent.md, sluice-agent.conf.example. */
#ifndef AG_CONFIG_H
#define AG_CONFIG_H

#include <stddef.h>

#include "policy.h"
#include "sluice/error.h"

#define AG_PATH_MAX 512

typedef struct ag_config {
    char libvirt_uri[256];
    char enroll_addr[64]; /* enroll_listen: IP literal and port */
    int enroll_port;
    char advertise_address[64];           /* the address guests reach backends and enrollment on */
    char backend_bind[64];                /* address backends bind (default 0.0.0.0) */
    int port_min, port_max;               /* backend ports */
    int direct_port_min, direct_port_max; /* the session workers' ports (--direct-ports) */
    char run_dir[AG_PATH_MAX];            /* control socket, backend run dirs (certificates) */
    char state_dir[AG_PATH_MAX];
    char ca_dir[AG_PATH_MAX];                 /* the host CA (agent/ca.h) */
    char backend_user[64], backend_group[64]; /* "" = do not switch (only when not root) */
    char backend_path[AG_PATH_MAX];
    char driver_path[AG_PATH_MAX];
    char token_public_key[AG_PATH_MAX]; /* nova-hook's Ed25519 public key (PEM) */
    char registry_endpoint[1024];       /* tcp://HOST:PORT[, tcp://...]; "" = no reporting */
    char registry_ca[AG_PATH_MAX], registry_cert[AG_PATH_MAX], registry_key[AG_PATH_MAX];
    int registry_slots; /* AgentInfo.slots_total, 0..4096 */
    /* enrollment (agent/enroll.h) and the host CA (agent/ca.h) */
    char enroll_token_issuer[128]; /* required token iss; "" = any */
    int enroll_clock_skew_s;       /* 0..300 */
    int enroll_fail_per_minute;    /* rate limit: failures per minute per source, 1..600 */
    int enroll_fail_burst;         /* rate limit: bucket size, 1..100 */
    int client_cert_lifetime_s;    /* 1 h .. 30 d */
    int server_cert_lifetime_s;    /* 1 h .. 397 d */
    int reboot_debounce_s;         /* 0..10 */
    int restart_backoff_max_s;     /* 1..300 */
    int backend_stop_grace_s;      /* 1..60 */
    int backend_spin_us;           /* backends' --spin-us, 0..100000; -1 = the backend's default */
    int backend_staging_slots;     /* backends' --staging-slots, 0..8; -1 = the backend's default */
    int backend_staging_budget;    /* backends' --staging-budget MiB; -1 = the backend's default */
    /* usage accounting (docs/usage.md) */
    char usage_db[AG_PATH_MAX + 16]; /* "" in the file: STATE_DIR/usage.db (set by the parser) */
    int usage_retention_days;        /* 0: keep usage records and lifetimes forever */
    char metrics_addr[64];           /* metrics_listen: IP literal; "" = no /metrics endpoint */
    int metrics_port;
    ag_policy policy;
} ag_config;

void ag_config_defaults(ag_config *c);
sl_code ag_config_load(const char *path, ag_config *c, sl_error *e);
/* Same, from text (tests); name is used in messages. */
sl_code ag_config_parse(const char *name, const char *text, ag_config *c, sl_error *e);

#endif
