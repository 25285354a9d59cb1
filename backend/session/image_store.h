/* The tenant's module images on disk across sessions (image_store.c), in dir
 * (STATE_DIR/images; "" or NULL: none). get returns the image (malloc'd) only when the file's
 * size and SHA-256 are those asked for, else NULL; put stores it (nothing when it is there, or
 * on an error, which is logged) and evicts the least recently used files beyond the limit
 * (BE_IMAGE_STORE_BYTES). */
#ifndef SLUICE_BE_SESSION_IMAGE_STORE_H
#define SLUICE_BE_SESSION_IMAGE_STORE_H

#include <stddef.h>
#include <stdint.h>

void be_image_store_set_dir(const char *dir);
void be_image_store_set_limit(uint64_t bytes);
uint8_t *be_image_store_get(const uint8_t sha[32], uint64_t size);
void be_image_store_put(const uint8_t sha[32], const uint8_t *bytes, uint64_t size);
/* The images the store holds as SessionAccept's hints (the first 8 bytes of each SHA-256,
 * big-endian), at most max of them into out; returns how many. */
size_t be_image_store_hints(uint64_t *out, size_t max);

#endif
