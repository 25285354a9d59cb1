/* The process's cache of module images by SHA-256, bounded (BE_IMAGE_CACHE_BYTES and _COUNT,
 * least recently used out first), in front of the tenant's image store on disk (image_store.c):
 * a module or library handle holds a reference to the image it was loaded from (api/module.c). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "session/image_cache.h"
#include "bounds.h"
#include "sluice/wire.h"

#define FATBIN_WRAPPER_MAGIC 0x466243b1u

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct be_image *lru_head, *lru_tail;
static size_t cache_bytes, cache_count;

static void lru_unlink(struct be_image *img)
{
    if (img->prev)
        img->prev->next = img->next;
    else
        lru_head = img->next;
    if (img->next)
        img->next->prev = img->prev;
    else
        lru_tail = img->prev;
    img->prev = img->next = NULL;
}

static void lru_front(struct be_image *img)
{
    img->next = lru_head;
    img->prev = NULL;
    if (lru_head)
        lru_head->prev = img;
    lru_head = img;
    if (!lru_tail)
        lru_tail = img;
}

static void unref_locked(struct be_image *img)
{
    if (--img->refs == 0) {
        free(img->bytes);
        free(img);
    }
}

void be_image_unref(struct be_image *img)
{
    if (!img)
        return;
    pthread_mutex_lock(&cache_mu);
    unref_locked(img);
    pthread_mutex_unlock(&cache_mu);
}

static void evict_locked(void)
{
    while (lru_tail && (cache_bytes > BE_IMAGE_CACHE_BYTES || cache_count > BE_IMAGE_CACHE_COUNT)) {
        struct be_image *img = lru_tail;
        lru_unlink(img);
        img->cached = 0;
        cache_bytes -= img->size;
        cache_count--;
        unref_locked(img);
    }
}

void be_images_clear(void)
{
    pthread_mutex_lock(&cache_mu);
    while (lru_tail) {
        struct be_image *img = lru_tail;
        lru_unlink(img);
        img->cached = 0;
        cache_bytes -= img->size;
        cache_count--;
        unref_locked(img);
    }
    pthread_mutex_unlock(&cache_mu);
}

/* A referenced image by hash, or NULL. */
struct be_image *be_image_cache_get(const uint8_t sha[32], uint64_t size)
{
    pthread_mutex_lock(&cache_mu);
    struct be_image *img = lru_head;
    for (; img; img = img->next)
        if (img->size == size && !memcmp(img->sha, sha, 32))
            break;
    if (img) {
        lru_unlink(img);
        lru_front(img);
        img->refs++;
    }
    pthread_mutex_unlock(&cache_mu);
    return img;
}

/* Takes bytes (malloc'd) into the cache; returns a referenced image. */
struct be_image *be_image_cache_put(const uint8_t sha[32], uint8_t *bytes, uint64_t size)
{
    struct be_image *img = calloc(1, sizeof *img);
    if (!img) {
        free(bytes);
        return NULL;
    }
    memcpy(img->sha, sha, 32);
    img->size = size;
    img->bytes = bytes;
    img->wrapper = (struct fatbin_wrapper){FATBIN_WRAPPER_MAGIC, 1, bytes, NULL};
    img->refs = 2; /* the cache + the caller */
    img->cached = 1;
    pthread_mutex_lock(&cache_mu);
    lru_front(img);
    cache_bytes += size;
    cache_count++;
    evict_locked();
    pthread_mutex_unlock(&cache_mu);
    return img;
}

size_t be_image_cache_hints(uint64_t *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&cache_mu);
    for (const struct be_image *img = lru_head; img && n < max; img = img->next)
        out[n++] = sl_wire_image_hint(img->sha);
    pthread_mutex_unlock(&cache_mu);
    return n;
}
