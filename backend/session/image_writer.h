/* Images stored for later sessions off the call path (image_writer.c): slLoadImage answers
 * without waiting for the disk. */
#ifndef SLUICE_BE_SESSION_IMAGE_WRITER_H
#define SLUICE_BE_SESSION_IMAGE_WRITER_H

#include <stdint.h>

/* Stores a copy of the image in the tenant's image store (image_store.c) from a thread of this
 * process; when the copy cannot be made or BE_IMAGE_WRITES_BYTES are already waiting, it is
 * stored here and now instead. */
void be_image_store_put_later(const uint8_t sha[32], const uint8_t *bytes, uint64_t size);
/* Starts the writer thread now (a worker at its start: not on the first image's call path);
 * put_later starts it otherwise. */
void be_image_writer_start(void);
/* Waits until every image handed over is stored, at most timeout_ms; 1 when none is left. */
int be_image_store_settle(unsigned timeout_ms);

#endif
