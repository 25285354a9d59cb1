/* Mapped host memory in the guest (cuMemHostAlloc / cuMemHostRegister with DEVICEMAP).
 *
 * The GPU cannot see guest memory, so each mapped range has a twin in the backend: page-locked
 * memory of the session, mapped for the device (backend/mapped.c). The twins are kept coherent
 * at call boundaries: before any call leaves, the bytes the program changed since the last
 * exchange go out as slMappedWrite (found by comparing with a shadow copy); every synchronous
 * reply brings back, in Reply.mapped, the bytes device work changed. A program that polls
 * mapped memory while a kernel runs, without a synchronizing call, does not see the kernel's
 * writes: that is the one difference from local mapped memory (docs/remoting.md).
 *
 * The backend places its twin at the guest's address when it can, and an allocation the
 * frontend made itself moves to the twin's address when that is free here, so that the device
 * address equals the host pointer as under unified addressing. Mapped memory is meant for
 * flags and small buffers (cuDNN keeps a 4-byte one per handle): at most SL_FE_MAPPED_MAX bytes
 * per process, since every call compares it. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fe.h"
#include "sluice/fe_calls.h"
#include "sluice/log.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define SL_FE_MAPPED_MAX ((size_t)16 << 20) /* as the backend's bound per session */

struct fe_map {
    struct fe_map *next;
    uint8_t *guest;
    size_t len;
    uint64_t dptr; /* device address of guest[0] */
    uint8_t *shadow;
};

static struct fe_map *g_maps;
static size_t g_map_bytes;
static atomic_int g_nmaps;
static pthread_mutex_t g_map_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult rpc_alloc(uint64_t address, uint64_t len, uint64_t *dptr)
{
    Sluice__Cuda__SlMappedAllocRequest req = SLUICE__CUDA__SL_MAPPED_ALLOC_REQUEST__INIT;
    req.address = address;
    req.bytesize = len;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(slMappedAlloc, &call, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS && SL_FE_REPLY(slMappedAlloc, rep))
            *dptr = rep->sl_mapped_alloc->dptr;
        else if (rc == CUDA_SUCCESS)
            rc = CUDA_ERROR_UNKNOWN;
        sl_fe_reply_free(rep);
    }
    return rc;
}

static void rpc_free(uint64_t dptr)
{
    Sluice__Cuda__SlMappedFreeRequest req = SLUICE__CUDA__SL_MAPPED_FREE_REQUEST__INIT;
    req.dptr = dptr;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(slMappedFree, &call, &req);
    sl_fe_enqueue_async(&call);
}

int sl_fe_mapped_room(size_t len)
{
    pthread_mutex_lock(&g_map_lock);
    int room = g_map_bytes + len <= SL_FE_MAPPED_MAX;
    pthread_mutex_unlock(&g_map_lock);
    return room;
}

CUresult sl_fe_mapped_add(void **pp, size_t len, int movable, uint64_t *dptr)
{
    pthread_mutex_lock(&g_map_lock);
    int full = g_map_bytes + len > SL_FE_MAPPED_MAX;
    pthread_mutex_unlock(&g_map_lock);
    if (full)
        return sl_fe_unsupported("mapped host memory beyond 16 MiB per process");
    struct fe_map *m = calloc(1, sizeof *m);
    uint8_t *shadow = calloc(1, len);
    if (!m || !shadow) {
        free(m);
        free(shadow);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uint64_t d = 0;
    CUresult rc = rpc_alloc((uintptr_t)*pp, len, &d);
    if (rc != CUDA_SUCCESS) {
        free(m);
        free(shadow);
        return rc;
    }
    uint8_t *guest = *pp;
    if (movable && d != (uintptr_t)guest) { /* follow the twin to keep pointer == device address */
        void *at = mmap((void *)(uintptr_t)d, len, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (at == (void *)(uintptr_t)d) {
            munmap(guest, len);
            guest = at;
        } else if (at != MAP_FAILED) {
            munmap(at, len);
        }
    }
    *m = (struct fe_map){.guest = guest, .len = len, .dptr = d, .shadow = shadow};
    pthread_mutex_lock(&g_map_lock);
    m->next = g_maps;
    g_maps = m;
    g_map_bytes += len;
    atomic_fetch_add(&g_nmaps, 1);
    pthread_mutex_unlock(&g_map_lock);
    *pp = guest;
    *dptr = d;
    return CUDA_SUCCESS;
}

void sl_fe_mapped_remove(void *p)
{
    struct fe_map *m = NULL;
    pthread_mutex_lock(&g_map_lock);
    for (struct fe_map **pp = &g_maps; *pp; pp = &(*pp)->next)
        if ((*pp)->guest == p) {
            m = *pp;
            *pp = m->next;
            g_map_bytes -= m->len;
            atomic_fetch_sub(&g_nmaps, 1);
            break;
        }
    pthread_mutex_unlock(&g_map_lock);
    if (!m)
        return;
    rpc_free(m->dptr);
    free(m->shadow);
    free(m);
}

int sl_fe_mapped_dptr(const void *p, uint64_t *dptr)
{
    if (!atomic_load(&g_nmaps))
        return 0;
    int found = 0;
    pthread_mutex_lock(&g_map_lock);
    for (struct fe_map *m = g_maps; m; m = m->next)
        if ((const uint8_t *)p >= m->guest && (size_t)((const uint8_t *)p - m->guest) < m->len) {
            *dptr = m->dptr + (uint64_t)((const uint8_t *)p - m->guest);
            found = 1;
            break;
        }
    pthread_mutex_unlock(&g_map_lock);
    return found;
}

CUresult sl_fe_mapped_sync_out(sl_fe_mapped_emit emit)
{
    if (!atomic_load(&g_nmaps))
        return CUDA_SUCCESS;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&g_map_lock);
    for (struct fe_map *m = g_maps; m && rc == CUDA_SUCCESS; m = m->next) {
        if (!memcmp(m->guest, m->shadow, m->len))
            continue;
        size_t lo = 0, hi = m->len;
        while (m->guest[lo] == m->shadow[lo])
            lo++;
        while (m->guest[hi - 1] == m->shadow[hi - 1])
            hi--;
        memcpy(m->shadow + lo, m->guest + lo, hi - lo);
        rc = emit(m->dptr, lo, m->shadow + lo, hi - lo);
    }
    pthread_mutex_unlock(&g_map_lock);
    return rc;
}

void sl_fe_mapped_apply(uint64_t dptr, uint64_t offset, const void *data, size_t len)
{
    pthread_mutex_lock(&g_map_lock);
    struct fe_map *m = g_maps;
    while (m && m->dptr != dptr)
        m = m->next;
    if (m && offset <= m->len && len <= m->len - offset) {
        memcpy(m->guest + offset, data, len);
        memcpy(m->shadow + offset, data, len);
    } else {
        sl_log(SL_LOG_WARNING, SL_FE_COMPONENT,
               "backend sent %zu bytes for mapped memory 0x%llx+%llu that is not ours: ignored",
               len, (unsigned long long)dptr, (unsigned long long)offset);
    }
    pthread_mutex_unlock(&g_map_lock);
}
