/* sluice/diffspan.h */
#include "sluice/diffspan.h"

#include <string.h>

/* The block holding byte at is [at - at % SL_DIFF_BLOCK, ...): blocks are aligned to the buffer's
 * start, so that both sides of the mapped memory agree on them. */
static size_t block_end(size_t at, size_t len)
{
    size_t end = at - at % SL_DIFF_BLOCK + SL_DIFF_BLOCK;
    return end < len ? end : len;
}

int sl_diff_next(const uint8_t *a, const uint8_t *b, size_t len, size_t from, size_t *lo,
                 size_t *hi)
{
    size_t at = from;
    while (at < len) { /* the first block that differs */
        size_t end = block_end(at, len);
        if (memcmp(a + at, b + at, end - at))
            break;
        at = end;
    }
    if (at >= len)
        return 0;
    while (a[at] == b[at])
        at++;
    size_t end = block_end(at, len);
    while (end < len) { /* the run of differing blocks after it */
        size_t next = block_end(end, len);
        if (!memcmp(a + end, b + end, next - end))
            break;
        end = next;
    }
    while (a[end - 1] == b[end - 1])
        end--;
    *lo = at;
    *hi = end;
    return 1;
}
