/* A session's allocation table (ranges.c): sorted, non-overlapping device ranges, against which
 * every device pointer, size and offset from the wire is checked. Pure: it needs no session (the
 * devptr hooks that use it are hooks.c). */
#ifndef SLUICE_BE_SESSION_RANGES_H
#define SLUICE_BE_SESSION_RANGES_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

enum be_range_kind { BE_R_ALLOC = 1, BE_R_GLOBAL, BE_R_OTHER };

struct be_range {
    uint64_t base, size;
    uint64_t owner_ctx; /* context it lives in (0: unknown) */
    uint64_t parent;    /* module/library id for globals */
    enum be_range_kind kind;
    int counted; /* an allocation (cuMemAlloc*, pitch, async/pool): counts for the quota */
};

struct be_mem {
    struct be_range *r; /* sorted by base, non-overlapping */
    size_t n, cap, max;
    uint64_t counted;     /* bytes of the counted ranges: the session's device memory */
    uint64_t counted_vmm; /* bytes of the live cuMemCreate allocations (api/vmm.c): counted too */
    struct be_held {
        uint64_t id, bytes;
    } * held; /* CUDA arrays (handle id, bytes), counted until destroyed (accounting/quota.c) */
    size_t n_held, cap_held;
    uint64_t counted_held;
};

void be_mem_init(struct be_mem *m, size_t max);
void be_mem_free(struct be_mem *m);
/* [ptr, ptr + len) inside one range (len 0: ptr inside one range). Overflow-safe. */
int be_mem_contains(const struct be_mem *m, uint64_t ptr, uint64_t len);
/* The device bytes a rectangle copy touches on one side: w bytes of h rows (pitch apart) of
 * depth slices (height rows apart) from byte x of row y of slice z of dev, as
 * [*start, *start + *span). w, h and depth at least 1; 0 when a figure overflows. */
int be_rect_extent(uint64_t dev, uint64_t x, uint64_t y, uint64_t z, uint64_t pitch,
                   uint64_t height, uint64_t w, uint64_t h, uint64_t depth, uint64_t *start,
                   uint64_t *span);
/* Adds a range; an identical one is kept once; ranges it overlaps are replaced (the driver
 * says the memory is now this). CUDA_ERROR_INVALID_VALUE on size 0 or wrap. */
CUresult be_mem_add(struct be_mem *m, uint64_t base, uint64_t size, enum be_range_kind kind,
                    uint64_t owner_ctx, uint64_t parent);
/* Removes the range starting exactly at base; 0 if none. */
int be_mem_remove(struct be_mem *m, uint64_t base);
/* Removes every range of a context / of a module or library. */
void be_mem_remove_owner(struct be_mem *m, uint64_t owner_ctx);
void be_mem_remove_parent(struct be_mem *m, uint64_t parent);
/* The range at base was made by call_id: when that is an allocation, it counts in m->counted. */
void be_mem_count(struct be_mem *m, uint32_t call_id, uint64_t base);
const struct be_range *be_mem_find(const struct be_mem *m, uint64_t ptr);

#endif
