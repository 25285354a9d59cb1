/* sluice-novahook's configuration file: "key = value" lines, '#' comments, no sections.
 * Every key and value is checked; errors name the file, the line and the key. The reference is
 * docs/nova-hook.md and nova-hook/novahook.conf.example. */
#ifndef NH_CONFIG_H
#define NH_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/error.h"

#define NH_PATH_MAX 512

typedef struct nh_config {
    char listen_addr[64]; /* IPv4 or IPv6 literal */
    int listen_port;      /* 0: an ephemeral port (tests) */
    char path[128];       /* the vendordata URL path */
    char tls_cert[NH_PATH_MAX];
    char tls_key[NH_PATH_MAX];
    char client_ca[NH_PATH_MAX];
    char client_cn[256];         /* comma-separated allowed client certificate CNs; empty: any */
    char token_key[NH_PATH_MAX]; /* one signing key, or: */
    char token_key_repository[NH_PATH_MAX]; /* a key repository (keyrepo.h) */
    int64_t token_ttl;
    char token_issuer[128];
    char agent_ca[NH_PATH_MAX];
    char database[1024];      /* a SQLite path or a database URL (sluice/db_url.h) */
    int usage_retention_days; /* 0: keep usage and placement history forever */
    char node_name[64];       /* recorded with each token issued; "": the host name */
    size_t max_body;
    int threads;
    /* the registry channel (agents); registry_port < 0: not bound */
    char registry_addr[64]; /* IPv4 literal */
    int registry_port;      /* 0: an ephemeral port (tests) */
    char registry_ca[NH_PATH_MAX];
    char registry_cert[NH_PATH_MAX];
    char registry_key[NH_PATH_MAX];
    char registry_hosts[1024]; /* comma-separated allowed agent host names (CNs); empty: any */
} nh_config;

void nh_config_defaults(nh_config *c);
/* Parses a file over the defaults, then checks the required keys. */
sl_code nh_config_load(const char *path, nh_config *c, sl_error *e);
/* Same, from text (tests); name is used in messages. */
sl_code nh_config_parse(const char *name, const char *text, nh_config *c, sl_error *e);

#endif
