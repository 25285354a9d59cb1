/* Interval union: the GPU busy time of a session is the union of its timed device intervals
 * (runs of kernels or copies on any of its streams), so overlapping work on several streams
 * counts once. Pure functions (tests/unit/backend). */
#include "accounting/intervals.h"

#include <stdlib.h>

static int by_start(const void *x, const void *y)
{
    const struct be_iv *a = x, *b = y;
    return a->a < b->a ? -1 : a->a > b->a ? 1 : (a->b < b->b ? -1 : a->b > b->b);
}

size_t be_iv_union(struct be_iv *v, size_t n, int64_t lo, int64_t hi, uint64_t *total)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) { /* clip; drop what is empty */
        int64_t a = v[i].a < lo ? lo : v[i].a, b = v[i].b > hi ? hi : v[i].b;
        if (b > a)
            v[k++] = (struct be_iv){a, b};
    }
    if (k > 1)
        qsort(v, k, sizeof *v, by_start);
    size_t m = 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && v[i].a <= v[m - 1].b) {
            if (v[i].b > v[m - 1].b)
                v[m - 1].b = v[i].b;
        } else {
            v[m++] = v[i];
        }
    }
    for (size_t i = 0; i < m; i++)
        sum += (uint64_t)(v[i].b - v[i].a);
    if (total)
        *total = sum;
    return m;
}

size_t be_iv_union_more(struct be_iv *v, size_t merged, size_t n, uint64_t *total)
{
    size_t k = merged;
    for (size_t i = merged; i < n; i++) /* drop what is empty */
        if (v[i].b > v[i].a)
            v[k++] = v[i];
    if (k - merged > 1)
        qsort(v + merged, k - merged, sizeof *v, by_start);
    if (merged && k > merged && v[merged].a < v[merged - 1].a) /* out of order: all again */
        return be_iv_union(v, k, INT64_MIN, INT64_MAX, total);
    size_t m = merged;
    uint64_t sum = *total;
    for (size_t i = merged; i < k; i++) {
        if (m && v[i].a <= v[m - 1].b) {
            if (v[i].b > v[m - 1].b) {
                sum += (uint64_t)(v[i].b - v[m - 1].b);
                v[m - 1].b = v[i].b;
            }
        } else {
            v[m++] = v[i];
            sum += (uint64_t)(v[i].b - v[i].a);
        }
    }
    *total = sum;
    return m;
}
