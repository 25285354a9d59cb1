/* Disjoint address ranges in one array sorted by base (ranges.h): a lookup is a binary search
 * for the last range starting at or below the address; adding and removing move the entries
 * after the place (the cache it serves holds at most SL_FE_ALLOC_CACHE_ENTRIES_MAX). */
#include <stdlib.h>
#include <string.h>

#include "call/ranges.h"

struct range {
    uint64_t base, size;
};

struct sl_fe_ranges {
    size_t n, cap;
    struct range a[];
};

struct sl_fe_ranges *sl_fe_ranges_new(size_t cap)
{
    if (cap > (SIZE_MAX - sizeof(struct sl_fe_ranges)) / sizeof(struct range))
        return NULL;
    struct sl_fe_ranges *r = malloc(sizeof *r + cap * sizeof(struct range));
    if (r) {
        r->n = 0;
        r->cap = cap;
    }
    return r;
}

void sl_fe_ranges_free(struct sl_fe_ranges *r)
{
    free(r);
}

/* How many ranges start at or below p: the index after the last such range. */
static size_t upper(const struct sl_fe_ranges *r, uint64_t p)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->a[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int sl_fe_ranges_add(struct sl_fe_ranges *r, uint64_t base, uint64_t size)
{
    if (r->n == r->cap || !size || size - 1 > UINT64_MAX - base)
        return -1;
    size_t i = upper(r, base);
    if (i > 0 && base - r->a[i - 1].base < r->a[i - 1].size)
        return -1; /* inside the range before */
    if (i < r->n && r->a[i].base - base < size)
        return -1; /* reaches into the range after */
    memmove(&r->a[i + 1], &r->a[i], (r->n - i) * sizeof r->a[0]);
    r->a[i] = (struct range){base, size};
    r->n++;
    return 0;
}

int sl_fe_ranges_remove(struct sl_fe_ranges *r, uint64_t base)
{
    size_t i = upper(r, base);
    if (i == 0 || r->a[i - 1].base != base)
        return 0;
    memmove(&r->a[i - 1], &r->a[i], (r->n - i) * sizeof r->a[0]);
    r->n--;
    return 1;
}

int sl_fe_ranges_find(const struct sl_fe_ranges *r, uint64_t p, uint64_t *base)
{
    size_t i = upper(r, p);
    if (i == 0 || p - r->a[i - 1].base >= r->a[i - 1].size)
        return 0;
    if (base)
        *base = r->a[i - 1].base;
    return 1;
}

size_t sl_fe_ranges_count(const struct sl_fe_ranges *r)
{
    return r->n;
}

void sl_fe_ranges_clear(struct sl_fe_ranges *r)
{
    r->n = 0;
}
