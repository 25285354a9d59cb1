/* The flavor policy table: which flavors are GPU flavors and their SLA.
 *   1. A flavor named in a [flavor NAME] section of the config is a GPU flavor with that SLA
 *      (its tier's values, overridden by the section's own keys).
 *   2. Else, where Nova wrote the flavor's extra specs (Nova >= 32), the flavor is a GPU flavor
 *      if they hold resources:CUSTOM_GPU_REMOTE_SLOT >= 1 or any sluice:* key; the SLA is the
 *      tier named by sluice:sla (default: tier "default"), overridden by sluice:gpu_share,
 *      sluice:memory_quota and sluice:max_sessions where those are valid.
 *   3. Else it is not a GPU flavor. */
#ifndef AG_POLICY_H
#define AG_POLICY_H

#include <stddef.h>

#include "instances.h"
#include "novameta.h"

#define AG_MAX_FLAVORS 128
#define AG_MAX_TIERS   16

typedef struct ag_policy_entry {
    char name[256]; /* flavor or tier name */
    char tier[32];  /* flavor: the tier it inherits from ("" = none) */
    unsigned set;   /* AG_SET_* bits: which SLA keys the section gave */
    ag_sla sla;
} ag_policy_entry;

enum { AG_SET_SHARE = 1, AG_SET_QUOTA = 2, AG_SET_SESSIONS = 4, AG_SET_GPUS = 8 };

typedef struct ag_policy {
    ag_policy_entry flavors[AG_MAX_FLAVORS];
    size_t n_flavors;
    ag_policy_entry tiers[AG_MAX_TIERS];
    size_t n_tiers;
} ag_policy;

/* 1 and *sla filled if the flavor is a GPU flavor, else 0. specs may be NULL. */
int ag_policy_resolve(const ag_policy *p, const char *flavor, const ag_extra_spec *specs,
                      size_t n_specs, ag_sla *sla);

/* Value parsers shared with the config file. 0 on success. */
int ag_parse_share(const char *v, double *out);          /* 0 < x <= 1 */
int ag_parse_size(const char *v, uint64_t *out);         /* 123, 8K, 512M, 8G, 1T (binary units) */
int ag_parse_gpus(const char *v, char *out, size_t cap); /* all | GPU-uuid[,GPU-uuid...] */

#endif
