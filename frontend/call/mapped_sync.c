/* Mapped host memory in the guest (cuMemHostAlloc / cuMemHostRegister with DEVICEMAP): the
 * mapped ranges and their call filter; api/mapped.c makes the calls that add and remove them.
 *
 * The twins are kept coherent at call boundaries: before any call leaves, the bytes the program
 * changed since the last exchange go out as slMappedWrite (found by comparing with a shadow
 * copy a page at a time: each run of changed pages is one span); every synchronous reply brings
 * back, in Reply.mapped, the bytes device work changed. A program that polls mapped memory while a
 * kernel runs, without a synchronizing call, does not see the kernel's writes: that is the one
 * difference from local mapped memory (docs/remoting.md). Mapped memory is meant for flags and
 * small buffers (cuDNN keeps a 4-byte one per handle), and counted against the instance's memory
 * quota in the backend; at most SL_FE_MAPPED_MAX bytes per process, the backend's bound. Every call
 * compares it: a program with a large mapped range pays for that comparison on each call. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "call/mapped_sync.h"
#include "component.h"
#include "sluice/diffspan.h"
#include "sluice/log.h"

#define SL_FE_MAPPED_MAX   ((size_t)1 << 30)  /* as the backend's bound per session */
#define SL_FE_MAPPED_PIECE ((size_t)16 << 20) /* bytes per slMappedWrite */

struct sl_fe_mapping {
    struct sl_fe_mapping *next;
    uint8_t *guest;
    size_t len;
    uint64_t dptr; /* device address of guest[0] */
    uint8_t *shadow;
};

static struct sl_fe_mapping *g_maps;
static size_t g_map_bytes;
static atomic_int g_nmaps;
static pthread_mutex_t g_map_lock = PTHREAD_MUTEX_INITIALIZER;

int sl_fe_mapped_room(size_t len)
{
    pthread_mutex_lock(&g_map_lock);
    int room = g_map_bytes + len <= SL_FE_MAPPED_MAX;
    pthread_mutex_unlock(&g_map_lock);
    return room;
}

struct sl_fe_mapping *sl_fe_mapping_new(size_t len)
{
    struct sl_fe_mapping *m = calloc(1, sizeof *m);
    uint8_t *shadow = calloc(1, len);
    if (!m || !shadow) {
        free(m);
        free(shadow);
        return NULL;
    }
    m->shadow = shadow;
    return m;
}

void sl_fe_mapping_free(struct sl_fe_mapping *m)
{
    if (!m)
        return;
    free(m->shadow);
    free(m);
}

void sl_fe_mapped_track(struct sl_fe_mapping *m, void *guest, size_t len, uint64_t dptr)
{
    m->guest = guest;
    m->len = len;
    m->dptr = dptr;
    pthread_mutex_lock(&g_map_lock);
    m->next = g_maps;
    g_maps = m;
    g_map_bytes += len;
    atomic_fetch_add(&g_nmaps, 1);
    pthread_mutex_unlock(&g_map_lock);
}

int sl_fe_mapped_untrack(void *p, uint64_t *dptr)
{
    struct sl_fe_mapping *m = NULL;
    pthread_mutex_lock(&g_map_lock);
    for (struct sl_fe_mapping **pp = &g_maps; *pp; pp = &(*pp)->next)
        if ((*pp)->guest == p) {
            m = *pp;
            *pp = m->next;
            g_map_bytes -= m->len;
            atomic_fetch_sub(&g_nmaps, 1);
            break;
        }
    pthread_mutex_unlock(&g_map_lock);
    if (!m)
        return 0;
    *dptr = m->dptr;
    sl_fe_mapping_free(m);
    return 1;
}

/* With g_map_lock held: the range holding the n bytes at p (n >= 1), and p's offset in it. */
static struct sl_fe_mapping *holding_locked(const void *p, size_t n, size_t *off)
{
    uintptr_t at = (uintptr_t)p;
    for (struct sl_fe_mapping *m = g_maps; m; m = m->next) {
        uintptr_t base = (uintptr_t)m->guest;
        if (at >= base && at - base < m->len && n <= m->len - (at - base)) {
            *off = at - base;
            return m;
        }
    }
    return NULL;
}

int sl_fe_mapped_dptr(const void *p, size_t n, uint64_t *dptr)
{
    if (!atomic_load(&g_nmaps) || !n)
        return 0;
    size_t off = 0;
    pthread_mutex_lock(&g_map_lock);
    struct sl_fe_mapping *m = holding_locked(p, n, &off);
    if (m)
        *dptr = m->dptr + off;
    pthread_mutex_unlock(&g_map_lock);
    return m != NULL;
}

void sl_fe_mapped_settled(const void *p, size_t n)
{
    size_t off = 0;
    pthread_mutex_lock(&g_map_lock);
    struct sl_fe_mapping *m = n ? holding_locked(p, n, &off) : NULL;
    if (m)
        memcpy(m->shadow + off, p, n);
    pthread_mutex_unlock(&g_map_lock);
}

CUresult sl_fe_mapped_sync_out(sl_fe_mapped_emit emit)
{
    if (!atomic_load(&g_nmaps))
        return CUDA_SUCCESS;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&g_map_lock);
    for (struct sl_fe_mapping *m = g_maps; m && rc == CUDA_SUCCESS; m = m->next) {
        size_t lo, hi = 0;
        while (rc == CUDA_SUCCESS && sl_diff_next(m->guest, m->shadow, m->len, hi, &lo, &hi)) {
            memcpy(m->shadow + lo, m->guest + lo, hi - lo);
            for (size_t at = lo; at < hi && rc == CUDA_SUCCESS; at += SL_FE_MAPPED_PIECE) {
                size_t len = hi - at < SL_FE_MAPPED_PIECE ? hi - at : SL_FE_MAPPED_PIECE;
                rc = emit(m->dptr, at, m->shadow + at, len); /* one message each */
            }
        }
    }
    pthread_mutex_unlock(&g_map_lock);
    return rc;
}

void sl_fe_mapped_apply(uint64_t dptr, uint64_t offset, const void *data, size_t len)
{
    pthread_mutex_lock(&g_map_lock);
    struct sl_fe_mapping *m = g_maps;
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

int sl_fe_mapped_any(void)
{
    return atomic_load(&g_nmaps) != 0;
}
