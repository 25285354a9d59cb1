/* The session worker process's main (worker.c). */
#ifndef SLUICE_BE_DAEMON_WORKER_H
#define SLUICE_BE_DAEMON_WORKER_H

#include <stdint.h>

#include "daemon/direct.h"

/* What a worker gets besides its socket (workers.c, be_workers_spawn): the accounting page (fd, its
 * slot and instance entry; fd -1: none), the usage record period, its direct endpoint. */
struct be_worker_opts {
    int acct_fd, acct_slot, acct_inst;
    unsigned usage_interval_s;
    int no_gpu_timing;     /* --measure none */
    const char *image_dir; /* --image-dir: the tenant's image store; NULL: none */
    unsigned spin_us;      /* --spin-us (spin.c) */
    /* --direct tcp://ADDR:* --cert --key --ca --peer-sha256 HEX: the worker's own endpoint
     * (direct.c); listen NULL: none (the guest's calls take the backend's channel) */
    struct be_direct_cfg direct;
    unsigned lanes;         /* --lanes N: the bulk lanes the guest asked for (lanes.c); < 2: none */
    unsigned staging_slots; /* --staging-slots N: the session's page-locked slots (bulk_pool.c) */
};
int be_worker_main(int fd, const char *driver, uint64_t sid, const char *instance,
                   const char *project, const struct be_worker_opts *o);

#endif
