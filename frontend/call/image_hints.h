/* The module images the backend said it holds (SessionAccept.image_hints) and those this
 * process sent it since (image_hints.c): an image with a hint goes without its bytes first, any
 * other with them, so that neither way costs a round trip the answer makes useless. */
#ifndef SLUICE_FRONTEND_CALL_IMAGE_HINTS_H
#define SLUICE_FRONTEND_CALL_IMAGE_HINTS_H

#include <stddef.h>
#include <stdint.h>

/* The session's hints (n of them: the first 8 bytes of each SHA-256, big-endian), replacing
 * any earlier session's. */
void sl_fe_image_hints_set(const uint64_t *hints, size_t n);
/* 1 when the backend holds (or was sent) the image whose SHA-256 is sha, as far as known. */
int sl_fe_image_hinted(const uint8_t sha[32]);
/* The backend has the image now (this process sent it). */
void sl_fe_image_hint_add(const uint8_t sha[32]);

#endif
