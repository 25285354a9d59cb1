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

/* New intervals v[merged..k) (sorted), the first starting before the union's last one: only
 * the union's intervals that end at or after that start can change; those before it stay as
 * they are (they end before it, and before the next one starts). An interval that comes late
 * from another stream is usually recent: the tail is short, where merging everything again
 * cost a sort of the whole interval's union (13-18 times an interval in run 28, call L). */
static size_t union_tail(struct be_iv *v, size_t merged, size_t k, uint64_t *total)
{
    int64_t from = v[merged].a;
    size_t lo = 0, hi = merged;
    while (lo < hi) { /* the first union interval with b >= from */
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].b < from)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t keep = *total, tail = 0;
    for (size_t i = lo; i < merged; i++)
        keep -= (uint64_t)(v[i].b - v[i].a);
    size_t m = be_iv_union(v + lo, k - lo, INT64_MIN, INT64_MAX, &tail);
    *total = keep + tail;
    return lo + m;
}

size_t be_iv_union_more(struct be_iv *v, size_t merged, size_t n, uint64_t *total)
{
    size_t k = merged;
    for (size_t i = merged; i < n; i++) /* drop what is empty */
        if (v[i].b > v[i].a)
            v[k++] = v[i];
    if (k - merged > 1)
        qsort(v + merged, k - merged, sizeof *v, by_start);
    if (merged && k > merged && v[merged].a < v[merged - 1].a)
        return union_tail(v, merged, k, total);
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

struct gap {
    int64_t len;
    size_t at; /* the gap between v[at] and v[at + 1] */
};

static int by_len(const void *x, const void *y)
{
    const struct gap *a = x, *b = y;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    return a->at < b->at ? -1 : a->at > b->at;
}

size_t be_iv_cap(struct be_iv *v, size_t n, size_t max, uint64_t *widened)
{
    uint64_t grown = 0;
    if (max < 1)
        max = 1;
    if (n > max) {
        struct gap *g = malloc((n - 1) * sizeof *g);
        unsigned char *close = calloc(n, 1);
        if (!g || !close) { /* no memory: one interval covering all of them */
            for (size_t i = 0; i + 1 < n; i++)
                grown += (uint64_t)(v[i + 1].a - v[i].b);
            v[0].b = v[n - 1].b;
            free(g);
            free(close);
            *widened = grown;
            return 1;
        }
        for (size_t i = 0; i + 1 < n; i++)
            g[i] = (struct gap){v[i + 1].a - v[i].b, i};
        qsort(g, n - 1, sizeof *g, by_len);
        for (size_t i = 0; i < n - max; i++) {
            close[g[i].at] = 1;
            grown += (uint64_t)g[i].len;
        }
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (i && close[i - 1])
                v[m - 1].b = v[i].b;
            else
                v[m++] = v[i];
        }
        free(g);
        free(close);
        n = m;
    }
    *widened = grown;
    return n;
}
