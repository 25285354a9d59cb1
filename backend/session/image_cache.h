/* The process's cache of module images by SHA-256 (image_cache.c), in front of the tenant's
 * image store on disk: a module or library handle holds a reference to the image it was loaded
 * from. */
#ifndef SLUICE_BE_SESSION_IMAGE_CACHE_H
#define SLUICE_BE_SESSION_IMAGE_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* The wrapper cudart hands the driver: {magic, version, data, filename_or_fatbins}. */
struct fatbin_wrapper {
    uint32_t magic;
    uint32_t version;
    const void *data;
    const void *filename_or_fatbins;
};

struct be_image {
    struct fatbin_wrapper wrapper; /* rebuilt for format 1, lives as long as the image */
    struct be_image *prev, *next;  /* LRU list, most recent first */
    uint8_t sha[32];
    uint64_t size;
    uint8_t *bytes;
    int refs;   /* loaded modules/libraries + the cache's own reference */
    int cached; /* still in the cache */
};

/* A referenced image by hash, or NULL. */
struct be_image *be_image_cache_get(const uint8_t sha[32], uint64_t size);
/* Takes bytes (malloc'd) into the cache; returns a referenced image (NULL: out of memory, bytes
 * freed). */
struct be_image *be_image_cache_put(const uint8_t sha[32], uint8_t *bytes, uint64_t size);
void be_image_unref(struct be_image *img);
/* The cached images as SessionAccept's hints (the first 8 bytes of each SHA-256, big-endian),
 * most recently used first, at most max of them into out; returns how many. */
size_t be_image_cache_hints(uint64_t *out, size_t max);
void be_images_clear(void);

#endif
