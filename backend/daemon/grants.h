/* Grants (grants.c): the instances whose sessions the accept hook lets in. */
#ifndef SLUICE_BE_DAEMON_GRANTS_H
#define SLUICE_BE_DAEMON_GRANTS_H

#include <stddef.h>
#include <stdint.h>

#include "accounting/state.h"
#include "sluice/channel.h"
#include "sluice/error.h"
#include "sluice_control.pb-c.h"

/* Certificates granted to one instance at once: every enrollment adds one (another user of the
 * instance, a renewal), the one with the earliest end goes when the set is full. */
#define BE_GRANT_CERTS 8

struct be_grant {
    char uuid[64];
    uint8_t sha[BE_GRANT_CERTS][32];
    int64_t not_after[BE_GRANT_CERTS];
    int n_sha; /* 0: not pinned (allow-listed) */
    int revoked;
    int has_sla;
    struct be_sla sla; /* the agent's Grant.sla; an allow-listed instance has none */
};

struct be_grants {
    struct be_grant *g;
    size_t n, cap;
    int held; /* keyed control and no agent's GrantSet since start or disconnection */
};

struct be_grants *be_grants_new(void);
void be_grants_free(struct be_grants *g);
sl_code be_grants_load_allow(struct be_grants *g, const char *path, sl_error *e);
/* cert_sha256 may be NULL/0 length: no fingerprint pinning. */
void be_grants_add(struct be_grants *g, const char *uuid, const uint8_t *sha, size_t sha_len,
                   int64_t not_after);
void be_grants_revoke(struct be_grants *g, const char *uuid);
/* The SLA of a granted instance (sla NULL: none, e.g. allow-listed). be_grants_sla: 1 and *out
 * when the instance has one; otherwise 0 and the defaults (uncapped, no quota, no limit). */
void be_grants_set_sla(struct be_grants *g, const char *uuid, const struct be_sla *sla);
int be_grants_sla(const struct be_grants *g, const char *uuid, struct be_sla *out);
/* 0 = granted; otherwise fills why. */
int be_grants_check(const struct be_grants *g, const char *project, const sl_peer_identity *id,
                    char *why, size_t n);
/* 1 when u looks like an instance uuid (36 characters: hex digits and dashes). */
int be_grants_uuid_ok(const char *u);
/* The SLA of a Grant (in NULL: the defaults); 0, or -1 with why filled when it is out of range. */
int be_grants_sla_from(const Sluice__Control__Sla *in, struct be_sla *out, char *why, size_t n);

#endif
