/* The table of known Nova instances on this host: what libvirt and the Nova metadata say about
 * each domain, plus the agent's own bookkeeping (pending revocation after a stop). Keyed on the
 * domain uuid (= the Nova instance uuid). Every function is thread-safe (one mutex). */
#ifndef AG_INSTANCES_H
#define AG_INSTANCES_H

#include <stddef.h>
#include <stdint.h>

#define AG_MAX_IPS 16

typedef struct ag_sla {
    char tier[32];
    double gpu_share;      /* 0 < share <= 1; 1 = uncapped */
    uint64_t memory_quota; /* bytes, 0 = none */
    uint32_t max_sessions; /* 0 = unlimited */
    char gpus[256];        /* "" or "all" = any, else comma-separated GPU uuids */
} ag_sla;

typedef struct ag_instance {
    char uuid[40], name[256], domain[256], project_id[64], project_name[256], user_id[64],
        flavor[256];
    int running; /* the domain is running now */
    int gpu;     /* its flavor is a GPU flavor per the policy */
    ag_sla sla;
    char ips[AG_MAX_IPS][64];
    int n_ips; /* fixed and floating IPs from nova:ports */
    /* agent bookkeeping (added fields) */
    int ns_version;       /* 10 or 11: the Nova metadata namespace it came from */
    int64_t revoke_at_ms; /* CLOCK_MONOTONIC ms of the pending revocation, 0 = none */
    char stop_reason[32]; /* why the pending revocation (stopped, destroyed, crashed...) */
    int undefined;        /* the domain is gone: drop the entry after the revocation */
    unsigned resync_gen;  /* the last resync that saw it */
} ag_instance;

typedef struct ag_instances ag_instances;

ag_instances *ag_instances_new(void);
void ag_instances_free(ag_instances *t);

/* 1 and *out filled when known, else 0. Thread-safe. */
int ag_instances_get(ag_instances *t, const char *uuid, ag_instance *out);

/* Inserts or replaces the entry with in->uuid. Returns 0, or -1 when out of memory. */
int ag_instances_put(ag_instances *t, const ag_instance *in);

/* Removes the entry; 1 if it was there. */
int ag_instances_remove(ag_instances *t, const char *uuid);

/* Running GPU instances of the project, not counting a pending revocation. */
size_t ag_instances_running_gpu(ag_instances *t, const char *project_id);

/* A malloc'd copy of every entry (free() it); *n gets the count. NULL with *n = 0 if empty. */
ag_instance *ag_instances_snapshot(ag_instances *t, size_t *n);

#endif
