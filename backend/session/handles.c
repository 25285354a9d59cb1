/* Handle ids: kind << 56 | a process-wide counter (never reused), in a per-session open
 * addressing hash table. The handle hooks of sluice/backend_hooks.h are session/hooks.c. */
#include "session/handles.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "session/image_cache.h"
#include "sluice/wire.h"

static atomic_uint_fast64_t next_counter = 16; /* 0..15 never issued (0, 1, 2 are stream ids) */

void be_handles_init(struct be_handles *t, size_t max_live)
{
    memset(t, 0, sizeof *t);
    t->max_live = max_live ? max_live : BE_MAX_HANDLES;
}

void be_handles_free(struct be_handles *t)
{
    if (t->slot)
        for (size_t i = 0; i < t->cap; i++) {
            be_layout_free(t->slot[i].layout);
            be_image_unref(t->slot[i].image);
        }
    free(t->slot);
    memset(t, 0, sizeof *t);
}

static size_t hash(uint64_t id)
{
    id ^= id >> 33;
    id *= UINT64_C(0xff51afd7ed558ccd);
    id ^= id >> 33;
    return (size_t)id;
}

static int grow(struct be_handles *t)
{
    size_t cap = t->cap ? t->cap : 64;
    while (t->live * 2 + 2 > cap)
        cap *= 2;
    if (cap == t->cap && t->used * 4 < t->cap * 3)
        return 0;
    struct be_handle *n = calloc(cap, sizeof *n);
    if (!n)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (t->slot[i].id <= BE_HANDLE_TOMB)
            continue;
        size_t j = hash(t->slot[i].id) & (cap - 1);
        while (n[j].id)
            j = (j + 1) & (cap - 1);
        n[j] = t->slot[i];
    }
    free(t->slot);
    t->slot = n;
    t->cap = cap;
    t->used = t->live;
    return 0;
}

/* Puts v (new to the table) with its entry. */
static CUresult insert(struct be_handles *t, uint64_t v, void *native, uint64_t owner_ctx,
                       uint64_t parent)
{
    if (t->live >= t->max_live)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((t->used + 1) * 4 >= t->cap * 3 && grow(t) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t j = hash(v) & (t->cap - 1);
    while (t->slot[j].id > BE_HANDLE_TOMB)
        j = (j + 1) & (t->cap - 1);
    if (t->slot[j].id == 0)
        t->used++;
    t->slot[j] = (struct be_handle){v, native, owner_ctx, parent, NULL, NULL};
    t->live++;
    return CUDA_SUCCESS;
}

CUresult be_handles_put(struct be_handles *t, enum sl_handle_kind kind, void *native,
                        uint64_t owner_ctx, uint64_t parent, uint64_t *id)
{
    if ((unsigned)kind >= SL_H_KIND_COUNT || !id)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t n = atomic_fetch_add(&next_counter, 1) & BE_ID_COUNTER_MASK;
    uint64_t v = ((uint64_t)kind << BE_ID_KIND_SHIFT) | n;
    CUresult rc = insert(t, v, native, owner_ctx, parent);
    if (rc == CUDA_SUCCESS)
        *id = v;
    return rc;
}

static struct be_handle *lookup(struct be_handles *t, uint64_t id)
{
    if (!t->cap || id <= BE_HANDLE_TOMB)
        return NULL;
    size_t j = hash(id) & (t->cap - 1);
    for (size_t k = 0; k < t->cap && t->slot[j].id; k++, j = (j + 1) & (t->cap - 1))
        if (t->slot[j].id == id)
            return &t->slot[j];
    return NULL;
}

CUresult be_handles_put_guest(struct be_handles *t, enum sl_handle_kind kind, void *native,
                              uint64_t owner_ctx, uint64_t parent, uint64_t id)
{
    if ((unsigned)kind >= SL_H_KIND_COUNT || be_id_kind(id) != kind || !(id & SL_WIRE_GUEST_ID) ||
        !(id & (SL_WIRE_GUEST_ID - 1)) || lookup(t, id))
        return CUDA_ERROR_INVALID_VALUE;
    return insert(t, id, native, owner_ctx, parent);
}

struct be_handle *be_handles_find(struct be_handles *t, enum sl_handle_kind kind, uint64_t id)
{
    if (be_id_kind(id) != kind)
        return NULL;
    return lookup(t, id);
}

void be_handles_del(struct be_handles *t, uint64_t id)
{
    struct be_handle *h = lookup(t, id);
    if (!h)
        return;
    be_layout_free(h->layout);
    be_image_unref(h->image);
    memset(h, 0, sizeof *h);
    h->id = BE_HANDLE_TOMB;
    t->live--;
}

/* A function's or kernel's cached parameter layout (api/launch.c), freed with its handle. */
void be_layout_free(struct be_layout *l)
{
    if (!l)
        return;
    free(l->offsets);
    free(l->sizes);
    free(l);
}
