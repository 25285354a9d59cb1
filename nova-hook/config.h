/* sluice-novahook's configuration file: "key = value" lines, '#' comments, no sections.
 * Every key and value is checked; errors name the file, the line and the key. The reference is
 * docs/nova-hook.md and nova-hook/novahook.conf.example. */
#ifndef NH_CONFIG_H
#define NH_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/error.h"

#define NH_PATH_MAX 512

/* The largest vendordata body Nova sends, from Nova's own limits (nova/api/metadata/
 * vendordata_dynamic.py posts user-data, metadata, hostname, image-id, boot-roles as
 * json.dumps, which writes non-ASCII as \uXXXX): user-data 65535 base64 characters; metadata
 * at the default quota of 128 items, keys of 255 ASCII characters, values of 255 characters
 * each up to 12 bytes escaped (a surrogate pair): 128 x (255 + 3060 + 8) = 425344; the ids, the
 * hostname and the image reference 255 each; boot-roles and JSON syntax a few KiB. About
 * 490 KB in all: the default leaves room for many roles; raise max_body with metadata_items
 * (docs/nova-hook.md, "Request size"). */
#define NH_MAX_BODY_DEFAULT (1024 * 1024)
#define NH_MAX_BODY_MAX     (16 * 1024 * 1024)

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
