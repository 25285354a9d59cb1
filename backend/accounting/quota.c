/* The tenant's accounting page and the memory quota (docs/accounting.md).
 *
 * The server makes one memfd page per backend before it starts any session worker; each
 * worker inherits it (`--acct-fd FD --acct-slot N --acct-inst I`, like its socketpair). The page
 * holds one entry per instance (its SLA from the agent's Grant, and its GPU-share bucket,
 * share.c) and one slot per worker (the device memory that worker holds). The memory quota is
 * per instance, across that instance's workers: an allocation (cuMemAlloc, pitch, stream-ordered
 * and pool allocations, managed memory) is admitted under the page's process-shared robust mutex
 * when what every worker of the instance holds plus the request fits; the worker reserves the
 * request in its slot, runs the call, then publishes what its allocation table really holds
 * (be_mem.counted). A refused allocation is CUDA_ERROR_OUT_OF_MEMORY with a detail, counted in
 * quota_refusals. cuMemGetInfo answers total = quota, free = min(device free, quota - used). The
 * server zeroes a worker's slot when the worker is gone (the driver freed its memory with the
 * process). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accounting/quota.h"
#include "api/reply.h"
#include "bounds.h"
#include "session/handles.h"
#include "session/ranges.h"
#include "session/state.h"
#include "sluice/call_facts.h"
#include "sluice/log.h"

#define ACCT_MAGIC   0x534c4143u /* "SLAC" */
#define ACCT_VERSION 2u

/* ---------------------------------------------------------------- arithmetic */

int be_quota_fits(uint64_t quota, uint64_t used, uint64_t want)
{
    if (!quota)
        return 1;
    return used <= quota && want <= quota - used;
}

void be_quota_meminfo(uint64_t quota, uint64_t used, uint64_t *free_, uint64_t *total)
{
    if (!quota)
        return;
    if (*total > quota)
        *total = quota;
    uint64_t left = used < *total ? *total - used : 0;
    if (*free_ > left)
        *free_ = left;
}

/* ---------------------------------------------------------------- the page */

sl_code be_acct_shm_create(struct be_acct_shm **out, int *fd_out, sl_error *e)
{
    int fd = memfd_create("sluice-accounting", MFD_CLOEXEC);
    if (fd < 0)
        return sl_fail(e, SL_ERR_IO, "memfd_create: %s", strerror(errno));
    if (ftruncate(fd, sizeof(struct be_acct_shm)) != 0) {
        int err = errno;
        close(fd);
        return sl_fail(e, SL_ERR_IO, "accounting page: ftruncate: %s", strerror(err));
    }
    struct be_acct_shm *m =
        mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0); /* zero-filled */
    if (m == MAP_FAILED) {
        int err = errno;
        close(fd);
        return sl_fail(e, SL_ERR_IO, "accounting page: mmap: %s", strerror(err));
    }
    pthread_mutexattr_t at;
    pthread_mutexattr_init(&at);
    pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(&m->mu, &at);
    pthread_mutexattr_destroy(&at);
    if (rc != 0) {
        munmap(m, sizeof *m);
        close(fd);
        return sl_fail(e, SL_ERR_IO, "accounting page: mutex: %s", strerror(rc));
    }
    m->magic = ACCT_MAGIC;
    m->version = ACCT_VERSION;
    *out = m;
    *fd_out = fd;
    return SL_OK;
}

sl_code be_acct_shm_attach(int fd, struct be_acct_shm **out, sl_error *e)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != sizeof(struct be_acct_shm))
        return sl_fail(e, SL_ERR_CONFIG, "--acct-fd %d is not the accounting page", fd);
    struct be_acct_shm *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return sl_fail(e, SL_ERR_IO, "accounting page: mmap: %s", strerror(errno));
    if (m->magic != ACCT_MAGIC || m->version != ACCT_VERSION) {
        munmap(m, sizeof *m);
        return sl_fail(e, SL_ERR_CONFIG, "--acct-fd %d: not an accounting page of this version",
                       fd);
    }
    *out = m;
    return SL_OK;
}

void be_acct_shm_unmap(struct be_acct_shm *m)
{
    if (m)
        munmap(m, sizeof *m);
}

void be_acct_lock(struct be_acct_shm *m)
{
    if (pthread_mutex_lock(&m->mu) == EOWNERDEAD) /* a worker died holding it */
        pthread_mutex_consistent(&m->mu);
}

void be_acct_unlock(struct be_acct_shm *m)
{
    pthread_mutex_unlock(&m->mu);
}

static int inst_in_use(const struct be_acct_shm *m, int i)
{
    for (int k = 0; k < BE_ACCT_MAX_SLOTS; k++)
        if (m->slot[k].inst == (uint32_t)i + 1)
            return 1;
    return 0;
}

int be_acct_inst_set(struct be_acct_shm *m, const char *uuid, const struct be_sla *sla)
{
    be_acct_lock(m);
    int at = -1, free_at = -1, idle_at = -1;
    for (int i = 0; i < BE_ACCT_MAX_INST && at < 0; i++) {
        if (!strcmp(m->inst[i].uuid, uuid))
            at = i;
        else if (!m->inst[i].uuid[0] && free_at < 0)
            free_at = i;
    }
    if (at < 0 && free_at < 0) /* full: take an instance without live workers */
        for (int i = 0; i < BE_ACCT_MAX_INST && idle_at < 0; i++)
            if (!inst_in_use(m, i))
                idle_at = i;
    if (at < 0 && (at = free_at >= 0 ? free_at : idle_at) >= 0) {
        memset(&m->inst[at], 0, sizeof m->inst[at]);
        snprintf(m->inst[at].uuid, sizeof m->inst[at].uuid, "%s", uuid);
    }
    if (at >= 0) {
        if (m->inst[at].sla.share != sla->share)
            m->inst[at].bucket_set = 0; /* a new share: a new bucket */
        m->inst[at].sla = *sla;         /* workers see a new share or quota from their next frame */
    }
    be_acct_unlock(m);
    return at;
}

int be_acct_slot_take(struct be_acct_shm *m, int inst)
{
    if (inst < 0 || inst >= BE_ACCT_MAX_INST)
        return -1;
    be_acct_lock(m);
    int at = -1;
    for (int k = 0; k < BE_ACCT_MAX_SLOTS && at < 0; k++)
        if (!m->slot[k].inst)
            at = k;
    if (at >= 0) {
        m->slot[at].inst = (uint32_t)inst + 1;
        m->slot[at].pid = 0;
        atomic_store(&m->slot[at].bytes, 0);
    }
    be_acct_unlock(m);
    return at;
}

void be_acct_slot_set_pid(struct be_acct_shm *m, int slot, int pid)
{
    if (slot >= 0 && slot < BE_ACCT_MAX_SLOTS)
        m->slot[slot].pid = pid;
}

void be_acct_slot_release(struct be_acct_shm *m, int slot)
{
    if (slot < 0 || slot >= BE_ACCT_MAX_SLOTS)
        return;
    be_acct_lock(m);
    m->pinned -= m->slot[slot].pinned; /* a worker that died gave nothing back itself */
    m->slot[slot].pinned = 0;
    atomic_store(&m->slot[slot].bytes, 0);
    m->slot[slot].pid = 0;
    m->slot[slot].inst = 0;
    be_acct_unlock(m);
}

int be_acct_pin(struct be_acct_shm *m, int slot, int64_t delta)
{
    if (!m || slot < 0 || slot >= BE_ACCT_MAX_SLOTS)
        return 0;
    be_acct_lock(m);
    struct be_acct_slot *sl = &m->slot[slot];
    int ok = 1;
    if (delta > 0 && (m->pinned > m->pin_budget || m->pin_budget - m->pinned < (uint64_t)delta)) {
        ok = 0;
    } else if (delta > 0) {
        sl->pinned += (uint64_t)delta;
        m->pinned += (uint64_t)delta;
    } else {
        uint64_t back = (uint64_t)-delta < sl->pinned ? (uint64_t)-delta : sl->pinned;
        sl->pinned -= back;
        m->pinned -= back;
    }
    be_acct_unlock(m);
    return ok;
}

uint64_t be_acct_inst_bytes(struct be_acct_shm *m, int inst)
{
    uint64_t sum = 0;
    for (int k = 0; k < BE_ACCT_MAX_SLOTS; k++)
        if (m->slot[k].inst == (uint32_t)inst + 1)
            sum += atomic_load(&m->slot[k].bytes);
    return sum;
}

/* ---------------------------------------------------------------- the session's side */

int be_acct_mem_admit(sl_be_session *s, uint64_t want, char *why, size_t n)
{
    struct be_acct *a = s->acct;
    if (!a || !a->cfg.shm)
        return 0;
    struct be_acct_shm *m = a->cfg.shm;
    be_acct_lock(m);
    uint64_t quota = m->inst[a->cfg.inst].sla.quota;
    uint64_t used = be_acct_inst_bytes(m, a->cfg.inst);
    int ok = be_quota_fits(quota, used, want);
    if (ok)
        atomic_fetch_add(&m->slot[a->cfg.slot].bytes, want); /* reserved until published */
    be_acct_unlock(m);
    if (ok)
        return 0;
    a->quota_refusals++;
    uint64_t want_mib = (want >> 20) + ((want & ((1u << 20) - 1)) != 0); /* up, never over */
    snprintf(why, n,
             "the instance's memory quota of %llu MiB is used: its sessions hold %llu MiB, "
             "%llu MiB more asked",
             (unsigned long long)(quota >> 20), (unsigned long long)(used >> 20),
             (unsigned long long)want_mib);
    sl_log(SL_LOG_INFO, BE_COMPONENT, "session %llu instance %s: allocation refused: %s",
           (unsigned long long)s->id, s->instance, why);
    return -1;
}

void be_acct_mem_publish(sl_be_session *s)
{
    struct be_acct *a = s->acct;
    if (!a)
        return;
    /* device memory, and the page-locked twins of mapped guest memory (api/mapped.c) */
    uint64_t mem = s->mem.counted + s->mem.counted_vmm + s->mem.counted_held + s->mapped_bytes;
    if (mem > a->mem_high)
        a->mem_high = mem;
    if (a->cfg.shm && (mem != a->mem || atomic_load(&a->cfg.shm->slot[a->cfg.slot].bytes) != mem))
        atomic_store(&a->cfg.shm->slot[a->cfg.slot].bytes, mem);
    a->mem = mem;
}

void be_acct_meminfo(sl_be_session *s, uint64_t *free_, uint64_t *total)
{
    struct be_acct *a = s->acct;
    if (!a || !a->cfg.shm)
        return;
    be_acct_lock(a->cfg.shm);
    uint64_t quota = a->cfg.shm->inst[a->cfg.inst].sla.quota;
    uint64_t used = be_acct_inst_bytes(a->cfg.shm, a->cfg.inst);
    be_acct_unlock(a->cfg.shm);
    be_quota_meminfo(quota, used, free_, total);
}

uint64_t be_acct_total_mem(const sl_be_session *s, uint64_t device_total)
{
    const struct be_acct *a = s->acct;
    if (!a || !a->cfg.shm || !a->sla.quota)
        return device_total;
    return a->sla.quota < device_total ? a->sla.quota : device_total;
}

/* ---------------------------------------------------------------- the layer around calls */

/* Room for one more held array (before the call, so that a created array is never lost). */
static int held_room(struct be_mem *m)
{
    if (m->n_held < m->cap_held)
        return 1;
    size_t cap = m->cap_held ? m->cap_held * 2 : 16;
    struct be_held *h = realloc(m->held, cap * sizeof *h);
    if (!h)
        return 0;
    m->held = h;
    m->cap_held = cap;
    return 1;
}

CUresult be_quota_before(struct sl_be_call *c, const struct sl_call_info *ci, uint64_t *asked)
{
    *asked = 0;
    if (ci->quota != SL_QUOTA_ALLOC && ci->quota != SL_QUOTA_ARRAY)
        return CUDA_SUCCESS;
    if (ci->quota == SL_QUOTA_ARRAY && !held_room(&c->s->mem))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *asked = sl_call_quota_bytes(c->call); /* 0: malformed, the handler refuses it */
    char why[200];
    if (be_acct_mem_admit(c->s, *asked, why, sizeof why) != 0) {
        sl_be_detail(c->reply, "%s", why);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* An allocation the driver made larger than asked (pitch padding) that took the instance past
 * its quota is given back and refused. */
static CUresult padded_past_quota(struct sl_be_call *c, uint64_t asked)
{
    sl_be_session *s = c->s;
    uint64_t *dptr = sl_reply_out_devptr(c->reply);
    if (!s->acct || !s->acct->cfg.shm || !dptr || !c->api->cuMemFree_v2)
        return CUDA_SUCCESS;
    const struct be_range *r = be_mem_find(&s->mem, *dptr);
    if (!r || r->base != *dptr || r->size <= asked)
        return CUDA_SUCCESS;
    struct be_acct_shm *m = s->acct->cfg.shm;
    be_acct_lock(m);
    uint64_t quota = m->inst[s->acct->cfg.inst].sla.quota;
    uint64_t used = be_acct_inst_bytes(m, s->acct->cfg.inst);
    be_acct_unlock(m);
    if (!quota || used <= quota)
        return CUDA_SUCCESS;
    if (c->api->cuMemFree_v2((CUdeviceptr)*dptr) == CUDA_SUCCESS)
        sl_be_devptr_release(s, *dptr);
    be_acct_mem_publish(s);
    s->acct->quota_refusals++;
    sl_be_detail(c->reply, "the instance's memory quota of %llu MiB is used (pitch padding)",
                 (unsigned long long)(quota >> 20));
    *dptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult be_quota_after(struct sl_be_call *c, const struct sl_call_info *ci, uint64_t asked,
                        CUresult rc)
{
    sl_be_session *s = c->s;
    struct be_mem *m = &s->mem;
    switch (ci->quota) {
    case SL_QUOTA_ALLOC:
        be_acct_mem_publish(s); /* what the table holds now replaces the reservation */
        return rc == CUDA_SUCCESS ? padded_past_quota(c, asked) : rc;
    case SL_QUOTA_ARRAY: { /* the array's bytes count until it is destroyed */
        uint64_t *id = rc == CUDA_SUCCESS ? sl_reply_out_handle(c->reply) : NULL;
        if (id && *id) {
            m->held[m->n_held++] = (struct be_held){*id, asked};
            m->counted_held += asked;
        }
        be_acct_mem_publish(s); /* what is held now replaces the reservation */
        return rc;
    }
    case SL_QUOTA_FREE_ARRAY: {
        uint64_t id = sl_call_released(c->call);
        for (size_t i = 0; rc == CUDA_SUCCESS && i < m->n_held; i++)
            if (m->held[i].id == id) {
                m->counted_held -= m->held[i].bytes;
                m->held[i] = m->held[--m->n_held];
                be_acct_mem_publish(s);
                break;
            }
        return rc;
    }
    case SL_QUOTA_MEMINFO: /* total = quota, free = min(device free, quota - used) */
        if (rc == CUDA_SUCCESS && c->reply->out_case == SLUICE__WIRE__REPLY__OUT_CU_MEM_GET_INFO_V2)
            be_acct_meminfo(s, &c->reply->cu_mem_get_info_v2->free,
                            &c->reply->cu_mem_get_info_v2->total);
        return rc;
    default:
        return rc;
    }
}
