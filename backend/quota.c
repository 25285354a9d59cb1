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

#include "backend.h"
#include "sluice/log.h"

#define ACCT_MAGIC   0x534c4143u /* "SLAC" */
#define ACCT_VERSION 1u

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
    atomic_store(&m->slot[slot].bytes, 0);
    m->slot[slot].pid = 0;
    m->slot[slot].inst = 0;
    be_acct_unlock(m);
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
    uint64_t mem = s->mem.counted + s->mem.counted_vmm + s->mem.counted_held;
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

/* ---------------------------------------------------------------- handlers */

static sl_be_handler prev_alloc[SL_CALL_ID_MAX + 1];

/* The bytes an allocation call asks for (pitch: at least width x height). */
static uint64_t asked(const Sluice__Wire__Call *c)
{
    switch (c->call_id) {
    case SL_CALL_cuMemAlloc_v2:
        return c->cu_mem_alloc_v2 ? c->cu_mem_alloc_v2->bytesize : 0;
    case SL_CALL_cuMemAllocPitch_v2:
        return c->cu_mem_alloc_pitch_v2
                   ? c->cu_mem_alloc_pitch_v2->width_in_bytes * c->cu_mem_alloc_pitch_v2->height
                   : 0;
    case SL_CALL_cuMemAllocAsync:
        return c->cu_mem_alloc_async ? c->cu_mem_alloc_async->bytesize : 0;
    case SL_CALL_cuMemAllocFromPoolAsync:
        return c->cu_mem_alloc_from_pool_async ? c->cu_mem_alloc_from_pool_async->bytesize : 0;
    case SL_CALL_cuMemAllocManaged:
        return c->cu_mem_alloc_managed ? c->cu_mem_alloc_managed->bytesize : 0;
    default:
        return 0;
    }
}

static CUresult h_alloc(sl_be_session *s, const struct sl_driver_api *api,
                        const Sluice__Wire__Call *call, Sluice__Wire__Reply *reply)
{
    sl_be_handler next = prev_alloc[call->call_id];
    if (!next)
        return CUDA_ERROR_NOT_SUPPORTED;
    char why[200];
    if (be_acct_mem_admit(s, asked(call), why, sizeof why) != 0) {
        be_detail(reply, "%s", why);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = next(s, api, call, reply);
    be_acct_mem_publish(s); /* what the table holds now replaces the reservation */
    if (rc == CUDA_SUCCESS && s->acct && s->acct->cfg.shm) {
        /* a pitch allocation may have been padded past the quota: give it back */
        struct be_acct_shm *m = s->acct->cfg.shm;
        be_acct_lock(m);
        uint64_t quota = m->inst[s->acct->cfg.inst].sla.quota;
        uint64_t used = be_acct_inst_bytes(m, s->acct->cfg.inst);
        be_acct_unlock(m);
        if (quota && used > quota && call->call_id == SL_CALL_cuMemAllocPitch_v2 &&
            reply->cu_mem_alloc_pitch_v2 && api->cuMemFree_v2) {
            uint64_t p = reply->cu_mem_alloc_pitch_v2->dptr;
            if (api->cuMemFree_v2((CUdeviceptr)p) == CUDA_SUCCESS)
                sl_be_devptr_release(s, p);
            be_acct_mem_publish(s);
            s->acct->quota_refusals++;
            be_detail(reply, "the instance's memory quota of %llu MiB is used (pitch padding)",
                      (unsigned long long)(quota >> 20));
            reply->cu_mem_alloc_pitch_v2->dptr = 0;
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    return rc;
}

/* ---------------------------------------------------------------- CUDA arrays */

static uint64_t format_bytes(unsigned f)
{
    size_t b = be_format_bytes((CUarray_format)f);
    return b ? b : 4; /* the rarer formats: an estimate */
}

/* Bytes an array of these dimensions holds (UINT64_MAX when that does not fit in 64 bits). */
uint64_t be_array_bytes(uint64_t w, uint64_t h, uint64_t d, unsigned format, unsigned channels)
{
    uint64_t dims[] = {w, h ? h : 1, d ? d : 1, channels ? channels : 1, format_bytes(format)};
    uint64_t b = 1;
    for (size_t i = 0; i < sizeof dims / sizeof *dims; i++) {
        if (dims[i] && b > UINT64_MAX / dims[i])
            return UINT64_MAX;
        b *= dims[i];
    }
    return b;
}

static uint64_t array_asked(const Sluice__Wire__Call *c)
{
    if (c->call_id == SL_CALL_cuArrayCreate_v2 && c->cu_array_create_v2 &&
        c->cu_array_create_v2->p_allocate_array.len == sizeof(CUDA_ARRAY_DESCRIPTOR)) {
        CUDA_ARRAY_DESCRIPTOR a;
        memcpy(&a, c->cu_array_create_v2->p_allocate_array.data, sizeof a);
        return be_array_bytes(a.Width, a.Height, 1, a.Format, a.NumChannels);
    }
    if (c->call_id == SL_CALL_cuArray3DCreate_v2 && c->cu_array3_dcreate_v2 &&
        c->cu_array3_dcreate_v2->p_allocate_array.len == sizeof(CUDA_ARRAY3D_DESCRIPTOR)) {
        CUDA_ARRAY3D_DESCRIPTOR a;
        memcpy(&a, c->cu_array3_dcreate_v2->p_allocate_array.data, sizeof a);
        return be_array_bytes(a.Width, a.Height, a.Depth, a.Format, a.NumChannels);
    }
    return 0; /* a malformed descriptor: the generated handler refuses it */
}

/* Array creation asks the quota first; the array's bytes count until cuArrayDestroy. */
static CUresult h_array_create(sl_be_session *s, const struct sl_driver_api *api,
                               const Sluice__Wire__Call *call, Sluice__Wire__Reply *reply)
{
    sl_be_handler next = prev_alloc[call->call_id];
    if (!next)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct be_mem *m = &s->mem;
    if (m->n_held == m->cap_held) {
        size_t cap = m->cap_held ? m->cap_held * 2 : 16;
        struct be_held *h = realloc(m->held, cap * sizeof *h);
        if (!h)
            return CUDA_ERROR_OUT_OF_MEMORY;
        m->held = h;
        m->cap_held = cap;
    }
    uint64_t bytes = array_asked(call);
    char why[200];
    if (be_acct_mem_admit(s, bytes, why, sizeof why) != 0) {
        be_detail(reply, "%s", why);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = next(s, api, call, reply);
    uint64_t id = 0;
    if (rc == CUDA_SUCCESS && call->call_id == SL_CALL_cuArrayCreate_v2 &&
        reply->out_case == SLUICE__WIRE__REPLY__OUT_CU_ARRAY_CREATE_V2)
        id = reply->cu_array_create_v2->p_handle;
    if (rc == CUDA_SUCCESS && call->call_id == SL_CALL_cuArray3DCreate_v2 &&
        reply->out_case == SLUICE__WIRE__REPLY__OUT_CU_ARRAY3_DCREATE_V2)
        id = reply->cu_array3_dcreate_v2->p_handle;
    if (id) {
        m->held[m->n_held++] = (struct be_held){id, bytes};
        m->counted_held += bytes;
    }
    be_acct_mem_publish(s); /* what is held now replaces the reservation */
    return rc;
}

static CUresult h_array_destroy(sl_be_session *s, const struct sl_driver_api *api,
                                const Sluice__Wire__Call *call, Sluice__Wire__Reply *reply)
{
    sl_be_handler next = prev_alloc[call->call_id];
    if (!next)
        return CUDA_ERROR_NOT_SUPPORTED;
    uint64_t id = call->cu_array_destroy ? call->cu_array_destroy->h_array : 0;
    CUresult rc = next(s, api, call, reply);
    struct be_mem *m = &s->mem;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < m->n_held; i++)
        if (m->held[i].id == id) {
            m->counted_held -= m->held[i].bytes;
            m->held[i] = m->held[--m->n_held];
            be_acct_mem_publish(s);
            break;
        }
    return rc;
}

static CUresult h_mem_get_info(sl_be_session *s, const struct sl_driver_api *api,
                               const Sluice__Wire__Call *call, Sluice__Wire__Reply *reply)
{
    (void)call;
    if (!api->cuMemGetInfo_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    size_t f = 0, t = 0;
    CUresult rc = api->cuMemGetInfo_v2(&f, &t);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t free_ = f, total = t;
    be_acct_meminfo(s, &free_, &total);
    Sluice__Cuda__CuMemGetInfoV2Reply *rp =
        BE_REPLY(reply, cu_mem_get_info_v2, SLUICE__WIRE__REPLY__OUT_CU_MEM_GET_INFO_V2,
                 Sluice__Cuda__CuMemGetInfoV2Reply, sluice__cuda__cu_mem_get_info_v2_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->free = free_;
    rp->total = total;
    return CUDA_SUCCESS;
}

void be_register_quota(struct sl_be_dispatch_entry *t)
{
    static const uint32_t allocs[] = {SL_CALL_cuMemAlloc_v2, SL_CALL_cuMemAllocPitch_v2,
                                      SL_CALL_cuMemAllocAsync, SL_CALL_cuMemAllocFromPoolAsync,
                                      SL_CALL_cuMemAllocManaged};
    for (size_t i = 0; i < sizeof allocs / sizeof *allocs; i++) {
        if (t[allocs[i]].handler == h_alloc)
            continue; /* registered already */
        prev_alloc[allocs[i]] = t[allocs[i]].handler;
        t[allocs[i]].handler = h_alloc;
    }
    static const struct {
        uint32_t id;
        sl_be_handler h;
    } arrays[] = {{SL_CALL_cuArrayCreate_v2, h_array_create},
                  {SL_CALL_cuArray3DCreate_v2, h_array_create},
                  {SL_CALL_cuArrayDestroy, h_array_destroy}};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++) {
        if (t[arrays[i].id].handler == arrays[i].h)
            continue;
        prev_alloc[arrays[i].id] = t[arrays[i].id].handler;
        t[arrays[i].id].handler = arrays[i].h;
    }
    t[SL_CALL_cuMemGetInfo_v2].handler = h_mem_get_info;
}
