/* A session's handle table (handles.c): ids the guest holds for the driver's objects, kind << 56
 * | a process-wide counter (never reused), or an id the guest chose (SL_WIRE_GUEST_ID set:
 * slLoadImageAs), in an open addressing hash table. Pure: it needs no session (the hooks that
 * use it are hooks.c). */
#ifndef SLUICE_BE_SESSION_HANDLES_H
#define SLUICE_BE_SESSION_HANDLES_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/handle_kinds.h"

#define BE_ID_KIND_SHIFT   56
#define BE_ID_COUNTER_MASK ((UINT64_C(1) << BE_ID_KIND_SHIFT) - 1)
#define BE_HANDLE_TOMB     1u /* the id of a deleted slot (0: an empty one) */

/* A function's or kernel's parameter layout (api/launch.c asks the driver), cached in its handle
 * and freed with it. */
struct be_layout {
    uint32_t count;
    uint64_t end; /* bytes of the packed parameter buffer: max(offset + size) */
    uint64_t *offsets, *sizes;
};

struct be_image; /* session/image_cache.h */

struct be_handle {
    uint64_t id; /* 0 = empty slot, 1 = tombstone */
    void *native;
    uint64_t owner_ctx;       /* context id current when it was made (0: none / independent) */
    uint64_t parent;          /* module/library id a function/kernel came from, 0 = none */
    struct be_layout *layout; /* functions/kernels: cached parameter layout */
    struct be_image *image;   /* modules/libraries: the cached image they were loaded from */
};

struct be_handles {
    struct be_handle *slot;
    size_t cap, used, live; /* used counts tombstones too */
    size_t max_live;
};

void be_handles_init(struct be_handles *t, size_t max_live);
void be_handles_free(struct be_handles *t);
/* A new id of kind (process-wide counter: ids are never reused, not even across sessions). */
CUresult be_handles_put(struct be_handles *t, enum sl_handle_kind kind, void *native,
                        uint64_t owner_ctx, uint64_t parent, uint64_t *id);
/* Puts id, one the guest chose (slLoadImageAs): it must have kind in its top byte,
 * SL_WIRE_GUEST_ID set (the backend's counter never reaches it) and be new to the table;
 * CUDA_ERROR_INVALID_VALUE otherwise. */
CUresult be_handles_put_guest(struct be_handles *t, enum sl_handle_kind kind, void *native,
                              uint64_t owner_ctx, uint64_t parent, uint64_t id);
/* The entry of id if it exists and has kind; NULL otherwise. */
struct be_handle *be_handles_find(struct be_handles *t, enum sl_handle_kind kind, uint64_t id);
/* Deletes id's entry, its cached layout and its reference to its image. */
void be_handles_del(struct be_handles *t, uint64_t id);
void be_layout_free(struct be_layout *l);
static inline enum sl_handle_kind be_id_kind(uint64_t id)
{
    return (enum sl_handle_kind)(id >> BE_ID_KIND_SHIFT);
}

#endif
