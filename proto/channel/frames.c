/* Ciphertext frame buffers, reused. Every buffer the session writes TLS records into carries a
 * small header naming its pool; ZeroMQ's free callback (run on its I/O thread once the frame is
 * on the wire) puts a full-size buffer back into the pool instead of freeing it. A fresh buffer
 * from malloc costs a page fault per 4 KiB the first time it is written: measured on a 256 MiB
 * copy, a quarter of the guest's frames landed in fresh pages (docs/remoting.md, "Where a bulk
 * copy's time goes"). */
#include "internal.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

typedef struct ch_bufhdr {
    alignas(64) ch_pool *pool; /* NULL: freed, never kept */
    struct ch_bufhdr *next;    /* in the pool's free list */
} ch_bufhdr;

#define HDR sizeof(ch_bufhdr)

struct ch_pool {
    pthread_mutex_t mu;
    size_t cap;          /* the size of every pooled buffer */
    unsigned keep, kept; /* at most keep buffers wait in the free list */
    unsigned refs;       /* the owner (until ch_pool_release) + every buffer out */
    int closed;
    ch_bufhdr *free;
    uint64_t reused, fresh;
};

ch_pool *ch_pool_new(size_t cap, unsigned keep)
{
    ch_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    p->cap = cap;
    p->keep = keep;
    p->refs = 1;
    return p;
}

static void pool_destroy(ch_pool *p)
{
    while (p->free) {
        ch_bufhdr *h = p->free;
        p->free = h->next;
        free(h);
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* Drops one reference (p->mu held); returns whether the pool must be destroyed. */
static int unref_locked(ch_pool *p)
{
    return --p->refs == 0;
}

void ch_pool_release(ch_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->closed = 1;
    while (p->free) { /* nothing more comes back into the list */
        ch_bufhdr *h = p->free;
        p->free = h->next;
        free(h);
    }
    p->kept = 0;
    int last = unref_locked(p);
    pthread_mutex_unlock(&p->mu);
    if (last)
        pool_destroy(p);
}

void ch_pool_counts(ch_pool *p, uint64_t *reused, uint64_t *fresh)
{
    pthread_mutex_lock(&p->mu);
    *reused = p->reused;
    *fresh = p->fresh;
    pthread_mutex_unlock(&p->mu);
}

/* A header and n bytes after it, as aligned as the header says (64: malloc's 16 would make the
 * header's own members misaligned, which UndefinedBehaviorSanitizer reports). NULL: none. */
static ch_bufhdr *hdr_alloc(size_t n)
{
    void *m = NULL;
    return posix_memalign(&m, alignof(ch_bufhdr), HDR + n) == 0 ? m : NULL;
}

uint8_t *ch_buf_alloc(ch_pool *p, size_t *cap)
{
    ch_bufhdr *h = NULL;
    if (p && *cap <= p->cap && *cap > p->cap / 2) {
        pthread_mutex_lock(&p->mu);
        if (p->free) {
            h = p->free;
            p->free = h->next;
            p->kept--;
            p->reused++;
        } else {
            h = hdr_alloc(p->cap);
            if (h)
                p->fresh++;
        }
        if (h) {
            h->pool = p;
            p->refs++;
            *cap = p->cap;
        }
        pthread_mutex_unlock(&p->mu);
    } else {
        h = hdr_alloc(*cap);
        if (h)
            h->pool = NULL;
    }
    return h ? (uint8_t *)h + HDR : NULL;
}

uint8_t *ch_buf_grow(uint8_t *buf, size_t len, size_t cap)
{
    uint8_t *nb = ch_buf_alloc(NULL, &cap);
    if (!nb)
        return NULL;
    if (buf) {
        memcpy(nb, buf, len);
        ch_buf_free(buf);
    }
    return nb;
}

void ch_buf_free(void *buf)
{
    if (!buf)
        return;
    ch_bufhdr *h = (ch_bufhdr *)((uint8_t *)buf - HDR);
    ch_pool *p = h->pool;
    if (!p) {
        free(h);
        return;
    }
    pthread_mutex_lock(&p->mu);
    if (!p->closed && p->kept < p->keep) {
        h->next = p->free;
        p->free = h;
        p->kept++;
        h = NULL;
    }
    int last = unref_locked(p);
    pthread_mutex_unlock(&p->mu);
    free(h);
    if (last)
        pool_destroy(p);
}
