/* The device allocations the guest saw made (allocs.h): a hash set of the live bases, the cache
 * of freed ones (a short list, newest first) and the list of those the cache gave up, whose
 * frees go ahead of the next call that leaves; all under one lock.
 *
 * Forgetting a live base is always safe (its free then goes synchronously). A cached allocation
 * is never forgotten without its free while the session lives: it holds device memory and
 * quota. Only an address the backend answered for a synchronous allocation of this session is
 * ever added, and it is removed before any call that releases it leaves, so a free sent
 * without waiting names a live allocation and the session runs it before any later call. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "call/allocs.h"
#include "sluice/call_facts.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define BUCKETS 1024u

struct node {
    struct node *next;
    uint64_t base, size, ctx;
    uint64_t touch; /* g_touch when it was made or reused */
    int cacheable;  /* a cuMemAlloc_v2 allocation: size is its bytesize */
};

static struct {
    pthread_mutex_t lock;
    struct node *bucket[BUCKETS];
    size_t live;
    struct node *cache; /* newest first */
    size_t cached;
    uint64_t cached_bytes;
    struct node *release; /* given up: freed ahead of the next call */
    size_t releasing;
    int on;
    uint64_t max_bytes;
    unsigned max_entries;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .on = 1,
       .max_bytes = (uint64_t)SL_FE_ALLOC_CACHE_MB_DEFAULT << 20,
       .max_entries = SL_FE_ALLOC_CACHE_ENTRIES_DEFAULT};

/* How many calls were appended that may leave device work using memory running after they
 * return (the call layer's lock; read without it) */
static atomic_uint_fast64_t g_touch;

/* Set while g.release holds frees to send: every synchronous call-out asks (sync_out), and
 * without the cache there never are any, so it asks without the lock. */
static atomic_bool g_release_pending;

static unsigned bucket_of(uint64_t base)
{
    uint64_t h = base * 0x9E3779B97F4A7C15ull;
    return (unsigned)(h >> 54) % BUCKETS;
}

/* Unlinks base from the live set: its node, or NULL. Lock held. */
static struct node *unlink_live(uint64_t base)
{
    for (struct node **pp = &g.bucket[bucket_of(base)]; *pp; pp = &(*pp)->next) {
        if ((*pp)->base == base) {
            struct node *n = *pp;
            *pp = n->next;
            g.live--;
            return n;
        }
    }
    return NULL;
}

static void link_live(struct node *n)
{
    unsigned b = bucket_of(n->base);
    n->next = g.bucket[b];
    g.bucket[b] = n;
    g.live++;
}

static void to_release(struct node *n)
{
    n->next = g.release;
    g.release = n;
    g.releasing++;
    atomic_store_explicit(&g_release_pending, true, memory_order_release);
}

/* Unlinks the cache entry at *pp. Lock held. */
static struct node *unlink_cached(struct node **pp)
{
    struct node *n = *pp;
    *pp = n->next;
    g.cached--;
    g.cached_bytes -= n->size;
    return n;
}

static size_t release_cached_locked(void)
{
    size_t k = 0;
    while (g.cache) {
        to_release(unlink_cached(&g.cache));
        k++;
    }
    return k;
}

/* 1 when p lies in a cached allocation. Lock held. */
static int in_cache(uint64_t p)
{
    for (const struct node *n = g.cache; n; n = n->next)
        if (p >= n->base && p - n->base < n->size)
            return 1;
    return 0;
}

void sl_fe_allocs_answered(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *reply)
{
    const struct sl_call_info *ci = sl_call_lookup(call->call_id);
    uint64_t stream = 0;
    if (!ci || ci->quota != SL_QUOTA_ALLOC || reply->result != CUDA_SUCCESS ||
        sl_call_stream(call, &stream))
        return; /* stream-ordered allocations are freed in stream order: not tracked (a managed
                 * base is, but its free is api/managed.c's, synchronous) */
    const uint64_t *dptr = sl_reply_out_devptr((Sluice__Wire__Reply *)(uintptr_t)reply);
    if (!dptr || !*dptr)
        return;
    struct node *n = malloc(sizeof *n);
    pthread_mutex_lock(&g.lock);
    free(unlink_live(*dptr)); /* never twice */
    if (n) {                  /* without memory it stays unknown: its free goes synchronously */
        n->base = *dptr;
        n->ctx = call->context;
        n->cacheable = 0; /* until api/alloc.c says what it is (sl_fe_allocs_cacheable) */
        n->size = 0;
        n->touch = atomic_load(&g_touch);
        link_live(n);
    }
    pthread_mutex_unlock(&g.lock);
}

void sl_fe_allocs_before(const Sluice__Wire__Call *call, uint32_t flags, uint64_t seq_now)
{
    (void)flags;
    (void)seq_now;
    const struct sl_call_info *ci = sl_call_lookup(call->call_id);
    int meminfo = ci && ci->quota == SL_QUOTA_MEMINFO;
    uint64_t released = sl_call_released_devptr(call);
    if (!meminfo && !released)
        return;
    pthread_mutex_lock(&g.lock);
    if (released)
        free(unlink_live(released));
    if (g.cache && (meminfo || in_cache(released)))
        release_cached_locked(); /* the driver's answer, as if the cache never held it */
    pthread_mutex_unlock(&g.lock);
}

/* 1 when call may leave device work that uses device memory running after it returned: the
 * idle streams' device work (idle.c) but for this file's own calls (allocations without a
 * stream, frees, cuMemGetInfo) and the memo's setters. */
static int may_touch(const Sluice__Wire__Call *call, const struct sl_call_info *ci)
{
    uint64_t stream = 0;
    if (!ci)
        return 1;
    if (ci->idle != SL_IDLE_WORK || (ci->flags & SL_CALL_MEMO))
        return 0;
    if (ci->quota == SL_QUOTA_ALLOC && !sl_call_stream(call, &stream))
        return 0;
    return !(ci->quota == SL_QUOTA_MEMINFO || sl_call_released_devptr(call));
}

void sl_fe_allocs_appended(const Sluice__Wire__Call *call, const struct sl_call_info *ci)
{
    if (may_touch(call, ci))
        atomic_fetch_add(&g_touch, 1);
}

CUresult sl_fe_allocs_sync_out(CUresult (*release)(uint64_t dptr, uint64_t ctx))
{
    if (!atomic_load_explicit(&g_release_pending, memory_order_acquire))
        return CUDA_SUCCESS;
    pthread_mutex_lock(&g.lock);
    atomic_store_explicit(&g_release_pending, false, memory_order_relaxed);
    struct node *list = g.release;
    g.release = NULL;
    g.releasing = 0;
    pthread_mutex_unlock(&g.lock);
    CUresult first = CUDA_SUCCESS;
    while (list) {
        struct node *n = list;
        list = n->next;
        CUresult rc = release(n->base, n->ctx);
        if (rc != CUDA_SUCCESS && first == CUDA_SUCCESS)
            first = rc;
        free(n);
    }
    return first;
}

enum sl_fe_free_way sl_fe_allocs_free(uint64_t base, uint64_t ctx)
{
    if (!base)
        return SL_FE_FREE_SYNC;
    pthread_mutex_lock(&g.lock);
    struct node *n = unlink_live(base);
    enum sl_fe_free_way way = n ? SL_FE_FREE_NOWAIT : SL_FE_FREE_SYNC;
    /* only memory no device work can have touched: work queued since may still use it, and a
     * native free (and the next allocation) would come after that work */
    if (n && g.on && n->cacheable && n->ctx == ctx && n->size <= g.max_bytes && g.max_entries &&
        n->touch == atomic_load(&g_touch)) {
        /* room first: the oldest entries are given up */
        while (g.cache && (g.cached >= g.max_entries || g.cached_bytes + n->size > g.max_bytes)) {
            struct node **pp = &g.cache;
            while ((*pp)->next)
                pp = &(*pp)->next;
            to_release(unlink_cached(pp));
        }
        n->next = g.cache;
        g.cache = n;
        g.cached++;
        g.cached_bytes += n->size;
        way = SL_FE_FREE_CACHED;
    } else {
        free(n);
    }
    pthread_mutex_unlock(&g.lock);
    return way;
}

int sl_fe_allocs_reuse(uint64_t ctx, uint64_t size, uint64_t *base)
{
    int got = 0;
    pthread_mutex_lock(&g.lock);
    for (struct node **pp = &g.cache; *pp; pp = &(*pp)->next) {
        if ((*pp)->ctx == ctx && (*pp)->size == size) {
            struct node *n = unlink_cached(pp);
            *base = n->base;
            n->touch = atomic_load(&g_touch);
            link_live(n);
            got = 1;
            break;
        }
    }
    pthread_mutex_unlock(&g.lock);
    return got;
}

void sl_fe_allocs_cacheable(uint64_t base, uint64_t size)
{
    pthread_mutex_lock(&g.lock);
    for (struct node *n = g.bucket[bucket_of(base)]; n; n = n->next) {
        if (n->base == base) {
            n->cacheable = 1;
            n->size = size;
            break;
        }
    }
    pthread_mutex_unlock(&g.lock);
}

void sl_fe_allocs_asking(uint64_t p)
{
    pthread_mutex_lock(&g.lock);
    if (g.cache && in_cache(p))
        release_cached_locked();
    pthread_mutex_unlock(&g.lock);
}

size_t sl_fe_allocs_release_cached(void)
{
    pthread_mutex_lock(&g.lock);
    size_t k = release_cached_locked();
    pthread_mutex_unlock(&g.lock);
    return k;
}

static void free_list(struct node *n)
{
    while (n) {
        struct node *next = n->next;
        free(n);
        n = next;
    }
}

/* Forgets the live set. Lock held. */
static void forget_live_locked(void)
{
    for (unsigned b = 0; b < BUCKETS; b++) {
        free_list(g.bucket[b]);
        g.bucket[b] = NULL;
    }
    g.live = 0;
}

void sl_fe_allocs_context_gone(void)
{
    pthread_mutex_lock(&g.lock);
    release_cached_locked();
    forget_live_locked();
    pthread_mutex_unlock(&g.lock);
}

void sl_fe_allocs_clear(void)
{
    pthread_mutex_lock(&g.lock);
    forget_live_locked();
    free_list(g.cache);
    free_list(g.release);
    g.cache = g.release = NULL;
    g.cached = g.releasing = 0;
    g.cached_bytes = 0;
    atomic_store_explicit(&g_release_pending, false, memory_order_relaxed);
    pthread_mutex_unlock(&g.lock);
}

int sl_fe_allocs_take(uint64_t base)
{
    if (!base)
        return 0;
    pthread_mutex_lock(&g.lock);
    struct node *n = unlink_live(base);
    pthread_mutex_unlock(&g.lock);
    int live = n != NULL;
    free(n);
    return live;
}

void sl_fe_allocs_configure(int on, uint64_t max_bytes, unsigned max_entries)
{
    pthread_mutex_lock(&g.lock);
    g.on = on;
    g.max_bytes = max_bytes;
    g.max_entries = max_entries;
    pthread_mutex_unlock(&g.lock);
}

struct sl_fe_allocs_counts sl_fe_allocs_counts(void)
{
    pthread_mutex_lock(&g.lock);
    struct sl_fe_allocs_counts c = {g.live, g.cached, g.releasing, g.cached_bytes};
    pthread_mutex_unlock(&g.lock);
    return c;
}

int sl_fe_nowait_take(const Sluice__Wire__Call *call)
{
    const struct sl_call_info *ci = sl_call_lookup(call->call_id);
    if (!ci || !(ci->flags & SL_CALL_NOWAIT))
        return 0;
    return sl_fe_allocs_take(sl_call_released_devptr(call));
}
