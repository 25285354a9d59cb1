/* The session's allocation table: sorted, non-overlapping device ranges. Every device pointer,
 * size and offset from the wire is checked against it before the driver sees it (the devptr
 * hooks of sluice/backend_hooks.h, session/hooks.c). */
#include "session/ranges.h"

#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "sluice/log.h"
#include "sluice/wire.h"

void be_mem_init(struct be_mem *m, size_t max)
{
    memset(m, 0, sizeof *m);
    m->max = max ? max : BE_MAX_ALLOCS;
}

void be_mem_free(struct be_mem *m)
{
    free(m->r);
    free(m->held);
    memset(m, 0, sizeof *m);
}

/* Index of the last range with base <= ptr, or -1. */
static long floor_idx(const struct be_mem *m, uint64_t ptr)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->r[mid].base <= ptr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

const struct be_range *be_mem_find(const struct be_mem *m, uint64_t ptr)
{
    long i = floor_idx(m, ptr);
    if (i < 0)
        return NULL;
    const struct be_range *r = &m->r[i];
    return ptr - r->base < r->size ? r : NULL;
}

int be_rect_extent(uint64_t dev, uint64_t x, uint64_t y, uint64_t z, uint64_t pitch,
                   uint64_t height, uint64_t w, uint64_t h, uint64_t depth, uint64_t *start,
                   uint64_t *span)
{
    /* first byte: ((z * height + y) * pitch + x); extent: ((depth - 1) * height + h - 1) *
     * pitch + w */
    uint64_t rows;
    return !(__builtin_mul_overflow(z, height, &rows) || __builtin_add_overflow(rows, y, &rows) ||
             __builtin_mul_overflow(rows, pitch, start) ||
             __builtin_add_overflow(*start, x, start) ||
             __builtin_add_overflow(*start, dev, start) ||
             __builtin_mul_overflow(depth - 1, height, span) ||
             __builtin_add_overflow(*span, h - 1, span) ||
             __builtin_mul_overflow(*span, pitch, span) || __builtin_add_overflow(*span, w, span));
}

int be_mem_contains(const struct be_mem *m, uint64_t ptr, uint64_t len)
{
    const struct be_range *r = be_mem_find(m, ptr);
    if (!r)
        return 0;
    uint64_t off = ptr - r->base; /* < size */
    return len <= r->size - off;  /* no ptr + len: it could wrap */
}

CUresult be_mem_add(struct be_mem *m, uint64_t base, uint64_t size, enum be_range_kind kind,
                    uint64_t owner_ctx, uint64_t parent)
{
    if (size == 0 || base == 0 || base + size < base)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t end = base + size;
    /* identical range: keep one */
    long i = floor_idx(m, base);
    if (i >= 0 && m->r[i].base == base && m->r[i].size == size) {
        m->r[i].kind = kind;
        m->r[i].owner_ctx = owner_ctx;
        m->r[i].parent = parent;
        return CUDA_SUCCESS;
    }
    /* drop every range that overlaps [base, end) */
    size_t first = i >= 0 && m->r[i].base + m->r[i].size > base ? (size_t)i : (size_t)(i + 1);
    size_t last = first;
    while (last < m->n && m->r[last].base < end) {
        if (m->r[last].counted)
            m->counted -= m->r[last].size;
        last++;
    }
    if (last > first) {
        memmove(&m->r[first], &m->r[last], (m->n - last) * sizeof *m->r);
        m->n -= last - first;
    }
    if (m->n >= m->max)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        struct be_range *r = realloc(m->r, cap * sizeof *r);
        if (!r)
            return CUDA_ERROR_OUT_OF_MEMORY;
        m->r = r;
        m->cap = cap;
    }
    memmove(&m->r[first + 1], &m->r[first], (m->n - first) * sizeof *m->r);
    m->r[first] = (struct be_range){base, size, owner_ctx, parent, kind, 0};
    m->n++;
    return CUDA_SUCCESS;
}

int be_mem_remove(struct be_mem *m, uint64_t base)
{
    long i = floor_idx(m, base);
    if (i < 0 || m->r[i].base != base)
        return 0;
    if (m->r[i].counted)
        m->counted -= m->r[i].size;
    memmove(&m->r[i], &m->r[i + 1], (m->n - (size_t)i - 1) * sizeof *m->r);
    m->n--;
    return 1;
}

static void remove_if(struct be_mem *m, int by_parent, uint64_t v)
{
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++) {
        if ((by_parent ? m->r[i].parent : m->r[i].owner_ctx) != v)
            m->r[k++] = m->r[i];
        else if (m->r[i].counted)
            m->counted -= m->r[i].size;
    }
    m->n = k;
}

void be_mem_remove_owner(struct be_mem *m, uint64_t owner_ctx)
{
    if (owner_ctx)
        remove_if(m, 0, owner_ctx);
}

void be_mem_remove_parent(struct be_mem *m, uint64_t parent)
{
    if (parent)
        remove_if(m, 1, parent);
}

/* Device memory the session allocated (the quota and memory_high_water of
 * docs/accounting.md): the ranges of the calls the table marks quota=alloc or quota=counted
 * count; globals, mapped host memory and the like do not. */
void be_mem_count(struct be_mem *m, uint32_t call_id, uint64_t base)
{
    const struct sl_call_info *ci = sl_call_lookup(call_id);
    if (!ci || (ci->quota != SL_QUOTA_ALLOC && ci->quota != SL_QUOTA_COUNTED))
        return;
    long i = floor_idx(m, base);
    if (i >= 0 && m->r[i].base == base && !m->r[i].counted) {
        m->r[i].counted = 1;
        m->counted += m->r[i].size;
    }
}
