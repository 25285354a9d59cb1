/* The live device allocations (allocs.h): a hash set of base addresses under its own lock.
 * Forgetting is always safe (the free then goes synchronously, as before); only an address the
 * backend answered for a synchronous allocation of this session is ever added, and it is
 * removed before any call that releases it leaves, so a free sent without waiting names a live
 * allocation, and the session runs it before any later call (the address may come back from
 * the next allocation only after the free ran). */
#include <pthread.h>
#include <stdlib.h>

#include "call/allocs.h"
#include "sluice/call_facts.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define BUCKETS 1024u

struct node {
    struct node *next;
    uint64_t base;
};

static struct node *g_bucket[BUCKETS];
static size_t g_count;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned bucket_of(uint64_t base)
{
    uint64_t h = base * 0x9E3779B97F4A7C15ull;
    return (unsigned)(h >> 54) % BUCKETS;
}

/* Unlinks base; 1 when it was there. Lock held. */
static int remove_locked(uint64_t base)
{
    for (struct node **pp = &g_bucket[bucket_of(base)]; *pp; pp = &(*pp)->next) {
        if ((*pp)->base == base) {
            struct node *n = *pp;
            *pp = n->next;
            free(n);
            g_count--;
            return 1;
        }
    }
    return 0;
}

static void add(uint64_t base)
{
    struct node *n = malloc(sizeof *n);
    pthread_mutex_lock(&g_lock);
    remove_locked(base); /* never twice */
    if (n) {             /* without memory it stays unknown: its free goes synchronously */
        unsigned b = bucket_of(base);
        n->base = base;
        n->next = g_bucket[b];
        g_bucket[b] = n;
        g_count++;
    }
    pthread_mutex_unlock(&g_lock);
}

void sl_fe_allocs_answered(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *reply)
{
    const struct sl_call_info *ci = sl_call_lookup(call->call_id);
    uint64_t stream = 0;
    if (!ci || ci->quota != SL_QUOTA_ALLOC || reply->result != CUDA_SUCCESS ||
        call->call_id == SL_CALL_cuMemAllocManaged || sl_call_stream(call, &stream))
        return; /* stream-ordered allocations are freed in stream order, managed ones with their
                 * guest pages (api/managed.c): not tracked */
    const uint64_t *dptr = sl_reply_out_devptr((Sluice__Wire__Reply *)(uintptr_t)reply);
    if (dptr && *dptr)
        add(*dptr);
}

void sl_fe_allocs_before(const Sluice__Wire__Call *call, uint32_t flags, uint64_t seq_now)
{
    (void)flags;
    (void)seq_now;
    uint64_t released = sl_call_released_devptr(call);
    if (!released)
        return;
    pthread_mutex_lock(&g_lock);
    remove_locked(released);
    pthread_mutex_unlock(&g_lock);
}

int sl_fe_allocs_take(uint64_t base)
{
    if (!base)
        return 0;
    pthread_mutex_lock(&g_lock);
    int live = remove_locked(base);
    pthread_mutex_unlock(&g_lock);
    return live;
}

void sl_fe_allocs_clear(void)
{
    pthread_mutex_lock(&g_lock);
    for (unsigned b = 0; b < BUCKETS; b++) {
        while (g_bucket[b]) {
            struct node *n = g_bucket[b];
            g_bucket[b] = n->next;
            free(n);
        }
    }
    g_count = 0;
    pthread_mutex_unlock(&g_lock);
}

size_t sl_fe_allocs_count(void)
{
    pthread_mutex_lock(&g_lock);
    size_t n = g_count;
    pthread_mutex_unlock(&g_lock);
    return n;
}

int sl_fe_nowait_take(const Sluice__Wire__Call *call)
{
    const struct sl_call_info *ci = sl_call_lookup(call->call_id);
    if (!ci || !(ci->flags & SL_CALL_NOWAIT))
        return 0;
    return sl_fe_allocs_take(sl_call_released_devptr(call));
}
