/* The tenant's accounting page and the memory quota (quota.c, docs/accounting.md). */
#ifndef SLUICE_BE_ACCOUNTING_QUOTA_H
#define SLUICE_BE_ACCOUNTING_QUOTA_H

#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "accounting/share.h"
#include "accounting/state.h"
#include "session/state.h"
#include "sluice/backend_dispatch.h"
#include "sluice/error.h"

#define BE_ACCT_MAX_INST  1024 /* instances in the tenant's accounting page */
#define BE_ACCT_MAX_SLOTS 4096 /* session workers in it (= the --max-sessions bound) */

struct be_acct_inst {
    char uuid[64]; /* "" = free entry */
    struct be_sla sla;
    struct be_bucket bucket; /* the instance's GPU share, under mu */
    int bucket_set;
};

struct be_acct_slot {
    uint32_t inst; /* instance entry + 1; 0 = free slot */
    int32_t pid;
    _Atomic uint64_t bytes; /* device memory the worker holds (and reserves) */
    uint64_t pinned;        /* page-locked staging the worker registered (under mu) */
};

/* One memfd per backend (tenant), made by the server before it starts workers and inherited by
 * them (like the socketpair): one slot per session worker, one entry per instance. The server
 * writes instance entries and takes/frees slots; workers write their slot's bytes and their
 * instance's bucket. Admission (quota check + reservation) and the buckets are under mu, a
 * process-shared robust mutex (a worker that dies holding it does not block the others). */
struct be_acct_shm {
    uint32_t magic, version;
    pthread_mutex_t mu;
    /* the backend's --staging-budget, and what its workers' staging slots hold of it (under
     * mu: the sum of the slots' pinned) */
    uint64_t pin_budget, pinned;
    struct be_acct_inst inst[BE_ACCT_MAX_INST];
    struct be_acct_slot slot[BE_ACCT_MAX_SLOTS];
};

sl_code be_acct_shm_create(struct be_acct_shm **out, int *fd, sl_error *e);
sl_code be_acct_shm_attach(int fd, struct be_acct_shm **out, sl_error *e);
void be_acct_shm_unmap(struct be_acct_shm *m);
void be_acct_lock(struct be_acct_shm *m);
void be_acct_unlock(struct be_acct_shm *m);
/* Server: the entry of instance uuid (made, or updated to sla); -1 when the page is full. */
int be_acct_inst_set(struct be_acct_shm *m, const char *uuid, const struct be_sla *sla);
/* Server: a slot for a new worker of instance entry inst; -1 when none is free. */
int be_acct_slot_take(struct be_acct_shm *m, int inst);
void be_acct_slot_set_pid(struct be_acct_shm *m, int slot, int pid);
/* Server: the worker is gone: its memory is free again. */
void be_acct_slot_release(struct be_acct_shm *m, int slot);
/* Device memory held by every worker of instance entry inst (under mu). */
uint64_t be_acct_inst_bytes(struct be_acct_shm *m, int inst);
/* Worker: delta > 0 asks for that many bytes of page-locked staging within the backend's budget
 * (1: granted, counted to slot; 0: the budget is spent); delta < 0 gives bytes back. A worker
 * that ends gives its slot's back with be_acct_slot_release. */
int be_acct_pin(struct be_acct_shm *m, int slot, int64_t delta);

/* Quota arithmetic: 1 if want more bytes fit (quota 0 = none). */
int be_quota_fits(uint64_t quota, uint64_t used, uint64_t want);
/* cuMemGetInfo under a quota: total = quota, free = min(device free, quota - used). */
void be_quota_meminfo(uint64_t quota, uint64_t used, uint64_t *free_, uint64_t *total);

/* The session's side: a new allocation of want bytes (0 on success; else fills why and counts a
 * refusal), the session's memory after a call, cuMemGetInfo's figures. */
int be_acct_mem_admit(sl_be_session *s, uint64_t want, char *why, size_t n);
void be_acct_mem_publish(sl_be_session *s);
void be_acct_meminfo(sl_be_session *s, uint64_t *free_, uint64_t *total);
/* Device memory the guest is told it has (SessionAccept: min(device, quota)). */
uint64_t be_acct_total_mem(const sl_be_session *s, uint64_t device_total);
/* The quota layer (layers.c) around a call the table marks quota=: before the handler admits
 * what an allocation asks (*asked: its bytes), after it publishes what the session holds,
 * takes back a padded allocation over the quota, holds or releases an array's bytes, or
 * answers cuMemGetInfo within the quota. Both return the call's result. */
CUresult be_quota_before(struct sl_be_call *c, const struct sl_call_info *ci, uint64_t *asked);
CUresult be_quota_after(struct sl_be_call *c, const struct sl_call_info *ci, uint64_t asked,
                        CUresult rc);

#endif
