/* Where two copies of a buffer differ, found a page at a time (the mapped host memory's
 * coherence on both sides: frontend/call/mapped_sync.c, backend/api/mapped.c). */
#ifndef SLUICE_DIFFSPAN_H
#define SLUICE_DIFFSPAN_H

#include <stddef.h>
#include <stdint.h>

/* Blocks compared at once; a span never joins two changes separated by an equal block. */
#define SL_DIFF_BLOCK 4096

/* The first span at or after byte `from` of the len bytes where a and b differ: 1 with the span
 * as [*lo, *hi), which starts and ends at a differing byte and covers a run of blocks that each
 * differ; 0 when they are equal from `from` on. Compares block by block with memcmp, so an
 * unchanged range costs one pass at memory speed, whatever its size. */
int sl_diff_next(const uint8_t *a, const uint8_t *b, size_t len, size_t from, size_t *lo,
                 size_t *hi);

#endif
