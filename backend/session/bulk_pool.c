/* Page-locked slots for the bytes of large copies. The bytes of a host-to-device piece are
 * decrypted (by the direct channel's or the lanes' threads) into a slot instead of fresh malloc'd
 * memory, and a device-to-host piece is copied into one before its reply leaves: the driver
 * copies from and to page-locked memory by DMA at the bus's rate (55 GB/s on the GPU machine,
 * against 7-10 GB/s for pageable memory, where it stages through its own buffer on the calling
 * thread), and reused slots take no page faults.
 *
 * A slot is anonymous memory of BE_POOL_SLOT bytes, made by whichever thread first needs it and
 * registered with the driver (cuMemHostRegister, portable) by the session thread at its first
 * use there (the direct channel's thread has no context). A copy from a page-locked slot by
 * cuMemcpyHtoDAsync is truly asynchronous, so a slot given back while such a copy may still read
 * it is held until an event recorded after the copy completes (be_pool_hold, be_pool_reap).
 * Every pool is listed, so that the one function that frees bulk (be_bulk_free) gives a slot
 * back to its pool whatever thread sends the reply that carried it. */
#include "session/bulk_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "bounds.h"
#include "sluice/log.h"

struct slot {
    void *base;    /* NULL: unmapped (the pool closed) */
    int out;       /* taken, not given back */
    int pinned;    /* registered with the driver */
    int returned;  /* given back while held: free once its events are done */
    CUevent ev[4]; /* held until these are done (be_pool_hold) */
    unsigned nev;
};

struct be_pool {
    struct be_pool *next; /* every pool (g_pools) */
    const struct sl_driver_api *api;
    pthread_mutex_t mu;
    unsigned max, n, live; /* live: slots still mapped */
    int refused;           /* the driver refused to register a slot: the rest stay pageable */
    int (*budget)(void *u, int64_t bytes); /* be_pool_budget */
    void *budget_u;
    unsigned long long over; /* uses of an unregistered slot the budget refused to register */
    unsigned long long taken, missed; /* takes served; takes in range that found no slot */
    int closed;                       /* be_pool_free ran: slots coming back are unmapped */
    struct slot slot[BE_POOL_SLOTS];
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* g_pools, then a pool's mu */
static be_pool *g_pools;
/* Slots mapped in the process: while none is, no buffer is a slot, and freeing bulk (every
 * frame's and reply's) takes no lock. */
static atomic_uint g_live;

be_pool *be_pool_new(const struct sl_driver_api *api, unsigned max_slots)
{
    be_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->api = api;
    p->max = max_slots < BE_POOL_SLOTS ? max_slots : BE_POOL_SLOTS;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_lock(&g_lock);
    p->next = g_pools;
    g_pools = p;
    pthread_mutex_unlock(&g_lock);
    return p;
}

void be_pool_budget(be_pool *p, int (*budget)(void *u, int64_t bytes), void *u)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->budget = budget;
    p->budget_u = u;
    pthread_mutex_unlock(&p->mu);
}

void *be_pool_take(be_pool *p, size_t len)
{
    if (!p || len < BE_POOL_MIN || len > BE_POOL_SLOT)
        return NULL;
    void *got = NULL;
    pthread_mutex_lock(&p->mu);
    for (unsigned i = 0; i < p->n && !got && !p->closed; i++)
        if (!p->slot[i].out && !p->slot[i].returned && p->slot[i].base) {
            p->slot[i].out = 1;
            got = p->slot[i].base;
        }
    if (!got && !p->closed && p->n < p->max) {
        void *m =
            mmap(NULL, BE_POOL_SLOT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) {
            p->slot[p->n++] = (struct slot){.base = m, .out = 1};
            p->live++;
            atomic_fetch_add(&g_live, 1);
            got = m;
        }
    }
    if (got)
        p->taken++;
    else if (!p->closed)
        p->missed++;
    pthread_mutex_unlock(&p->mu);
    return got;
}

/* With p->mu held: the slot whose first byte is ptr, or (inside) that holds it. */
static struct slot *slot_of(be_pool *p, const void *ptr, int inside)
{
    uintptr_t at = (uintptr_t)ptr;
    for (unsigned i = 0; i < p->n; i++) {
        uintptr_t b = (uintptr_t)p->slot[i].base;
        if (b && (inside ? at >= b && at - b < BE_POOL_SLOT : at == b))
            return &p->slot[i];
    }
    return NULL;
}

/* With g_lock and p->mu held: unmaps a slot of a closed pool; 1 when p has none left. */
static int unmap_locked(be_pool *p, struct slot *s)
{
    munmap(s->base, BE_POOL_SLOT); /* still registered when it came back after the close: the
                                      process exits next */
    s->base = NULL;
    atomic_fetch_sub(&g_live, 1);
    return --p->live == 0;
}

/* With g_lock held: p (closed, no slot left) leaves the list and goes. */
static void destroy_locked(be_pool *p)
{
    for (be_pool **pp = &g_pools; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    pthread_mutex_destroy(&p->mu);
    free(p);
}

void be_bulk_free(void *buf)
{
    if (!buf)
        return;
    if (!atomic_load(&g_live)) {
        free(buf);
        return;
    }
    pthread_mutex_lock(&g_lock);
    for (be_pool *p = g_pools; p; p = p->next) {
        pthread_mutex_lock(&p->mu);
        struct slot *s = slot_of(p, buf, 0);
        int empty = 0;
        if (s) {
            s->out = 0;
            s->returned = s->nev != 0;
            if (p->closed)
                empty = unmap_locked(p, s);
        }
        pthread_mutex_unlock(&p->mu);
        if (empty)
            destroy_locked(p);
        if (s) {
            pthread_mutex_unlock(&g_lock);
            return;
        }
    }
    pthread_mutex_unlock(&g_lock);
    free(buf);
}

int be_bulk_is_slot(const void *buf)
{
    int found = 0;
    if (!buf || !atomic_load(&g_live))
        return 0;
    pthread_mutex_lock(&g_lock);
    for (be_pool *p = g_pools; p && !found; p = p->next) {
        pthread_mutex_lock(&p->mu);
        found = slot_of(p, buf, 0) != NULL;
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

int be_pool_pin(be_pool *p, void *buf)
{
    if (!p || !atomic_load(&g_live))
        return 0;
    pthread_mutex_lock(&p->mu);
    struct slot *s = slot_of(p, buf, 0);
    int pinned = s ? s->pinned : 0, refused = p->refused;
    int (*budget)(void *, int64_t) = p->budget;
    void *u = p->budget_u;
    pthread_mutex_unlock(&p->mu);
    if (!s || pinned || refused)
        return pinned;
    /* s stays mapped meanwhile: only the session thread pins, closes or reaps */
    if (budget && !budget(u, (int64_t)BE_POOL_SLOT)) {
        pthread_mutex_lock(&p->mu);
        if (p->over++ == 0)
            sl_log(SL_LOG_NOTICE, BE_COMPONENT,
                   "the backend's page-locked staging (--staging-budget) is all held by its "
                   "sessions: this one's large copies go through pageable memory until some is "
                   "given back");
        pthread_mutex_unlock(&p->mu);
        return 0;
    }
    CUresult rc = p->api->cuMemHostRegister_v2
                      ? p->api->cuMemHostRegister_v2(buf, BE_POOL_SLOT, CU_MEMHOSTREGISTER_PORTABLE)
                      : CUDA_ERROR_NOT_SUPPORTED;
    if (rc != CUDA_SUCCESS && budget)
        budget(u, -(int64_t)BE_POOL_SLOT);
    pthread_mutex_lock(&p->mu);
    if (rc == CUDA_SUCCESS)
        s->pinned = 1;
    else
        p->refused = 1;
    pthread_mutex_unlock(&p->mu);
    if (rc != CUDA_SUCCESS)
        sl_log(SL_LOG_INFO, BE_COMPONENT,
               "large copies go through pageable memory: cuMemHostRegister of a %zu MiB staging "
               "slot -> %d",
               BE_POOL_SLOT >> 20, (int)rc);
    return rc == CUDA_SUCCESS;
}

int be_pool_hold(be_pool *p, const void *ptr, CUstream st)
{
    if (!p || !atomic_load(&g_live))
        return 0;
    pthread_mutex_lock(&p->mu);
    struct slot *s = slot_of(p, ptr, 1);
    int need = s && s->pinned;
    int room = s && s->nev < sizeof s->ev / sizeof s->ev[0];
    pthread_mutex_unlock(&p->mu);
    if (!need)
        return 0;
    CUevent ev = NULL;
    if (!room || !p->api->cuEventCreate || !p->api->cuEventRecord || !p->api->cuEventQuery ||
        !p->api->cuEventDestroy_v2 ||
        p->api->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return -1;
    if (p->api->cuEventRecord(ev, st) != CUDA_SUCCESS) {
        p->api->cuEventDestroy_v2(ev);
        return -1;
    }
    pthread_mutex_lock(&p->mu);
    s->ev[s->nev++] = ev;
    pthread_mutex_unlock(&p->mu);
    return 0;
}

void be_pool_reap(be_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    for (unsigned i = 0; i < p->n; i++) {
        struct slot *s = &p->slot[i];
        while (s->nev && p->api->cuEventQuery(s->ev[s->nev - 1]) != CUDA_ERROR_NOT_READY)
            p->api->cuEventDestroy_v2(s->ev[--s->nev]); /* done, or failed: it reads no more */
        if (!s->nev && s->returned)
            s->returned = 0; /* free from now on */
    }
    pthread_mutex_unlock(&p->mu);
}

void be_pool_log(be_pool *p, unsigned long long sid)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    unsigned n = p->n, pinned = 0;
    for (unsigned i = 0; i < n; i++)
        pinned += p->slot[i].pinned;
    unsigned long long taken = p->taken, missed = p->missed, over = p->over;
    pthread_mutex_unlock(&p->mu);
    if (taken || missed)
        sl_log(SL_LOG_INFO, BE_COMPONENT,
               "session %llu: large copies: %llu pieces through %u staging slots of %zu MiB (%u "
               "page-locked; %llu uses left pageable by the backend's budget), %llu through "
               "malloc'd memory (no slot free)",
               sid, taken, n, BE_POOL_SLOT >> 20, pinned, over, missed);
}

void be_pool_free(be_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&g_lock);
    pthread_mutex_lock(&p->mu);
    p->closed = 1;
    int empty = p->live == 0;
    for (unsigned i = 0; i < p->n; i++) {
        struct slot *s = &p->slot[i];
        while (s->nev)
            p->api->cuEventDestroy_v2(s->ev[--s->nev]);
        if (s->pinned && p->budget) /* one still out is unregistered by the process's end */
            p->budget(p->budget_u, -(int64_t)BE_POOL_SLOT);
        if (!s->base || s->out)
            continue; /* unmapped when it comes back (a reply not yet sent) */
        if (s->pinned && p->api->cuMemHostUnregister)
            p->api->cuMemHostUnregister(s->base);
        empty = unmap_locked(p, s);
    }
    pthread_mutex_unlock(&p->mu);
    if (empty)
        destroy_locked(p);
    pthread_mutex_unlock(&g_lock);
}
