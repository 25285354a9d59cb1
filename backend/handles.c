/* Handle ids: kind << 56 | a process-wide counter (never reused), in a per-session open
 * addressing hash table. Implements the handle hooks of sluice/backend_hooks.h. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define TOMB 1u

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
        if (t->slot[i].id <= TOMB)
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

CUresult be_handles_put(struct be_handles *t, enum sl_handle_kind kind, void *native,
                        uint64_t owner_ctx, uint64_t parent, uint64_t *id)
{
    if ((unsigned)kind >= SL_H_KIND_COUNT || !id)
        return CUDA_ERROR_INVALID_VALUE;
    if (t->live >= t->max_live)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((t->used + 1) * 4 >= t->cap * 3 && grow(t) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t n = atomic_fetch_add(&next_counter, 1) & BE_ID_COUNTER_MASK;
    uint64_t v = ((uint64_t)kind << BE_ID_KIND_SHIFT) | n;
    size_t j = hash(v) & (t->cap - 1);
    while (t->slot[j].id > TOMB)
        j = (j + 1) & (t->cap - 1);
    if (t->slot[j].id == 0)
        t->used++;
    t->slot[j] = (struct be_handle){v, native, owner_ctx, parent, NULL, NULL};
    t->live++;
    *id = v;
    return CUDA_SUCCESS;
}

static struct be_handle *lookup(struct be_handles *t, uint64_t id)
{
    if (!t->cap || id <= TOMB)
        return NULL;
    size_t j = hash(id) & (t->cap - 1);
    for (size_t k = 0; k < t->cap && t->slot[j].id; k++, j = (j + 1) & (t->cap - 1))
        if (t->slot[j].id == id)
            return &t->slot[j];
    return NULL;
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
    h->id = TOMB;
    t->live--;
}

/* ---------------------------------------------------------------- hooks */

static CUresult bad(enum sl_handle_kind kind)
{
    return kind == SL_H_CONTEXT ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_HANDLE;
}

CUresult sl_be_handle_get(sl_be_session *s, enum sl_handle_kind kind, uint64_t id, void **native)
{
    if ((unsigned)kind >= SL_H_KIND_COUNT || !native)
        return CUDA_ERROR_INVALID_VALUE;
    if (id == 0 || (kind == SL_H_STREAM && id <= 2)) {
        /* NULL stream, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD; NULL for optional handles (the
         * driver decides whether NULL is acceptable where it appears). */
        *native = (void *)(uintptr_t)id;
        return CUDA_SUCCESS;
    }
    if (kind == SL_H_CONTEXT) {
        struct be_ctx *c = be_ctx_find(s, id);
        if (!c)
            return CUDA_ERROR_INVALID_CONTEXT;
        CUresult rc = be_ctx_ensure(s, c);
        if (rc != CUDA_SUCCESS)
            return rc;
        *native = c->ctx;
        return CUDA_SUCCESS;
    }
    struct be_handle *h = be_handles_find(&s->h, kind, id);
    if (!h && kind == SL_H_FUNCTION) /* a kernel id is accepted wherever a function is */
        h = be_handles_find(&s->h, SL_H_KERNEL, id);
    if (!h)
        return bad(kind);
    *native = h->native;
    return CUDA_SUCCESS;
}

CUresult sl_be_handle_put(sl_be_session *s, enum sl_handle_kind kind, void *native, uint64_t parent,
                          uint64_t *id)
{
    if (kind == SL_H_CONTEXT) {
        /* a context the driver handed out through a generated call (cuCtxCreate_v2...) */
        for (size_t i = 0; i < s->n_ctxs; i++)
            if (s->ctxs[i]->ctx == native && native) {
                *id = s->ctxs[i]->id;
                return CUDA_SUCCESS;
            }
        return be_ctx_add(s, (CUcontext)native, -1, 0, id);
    }
    uint64_t owner = 0;
    if (kind != SL_H_LIBRARY && kind != SL_H_KERNEL)
        owner = s->cur_ctx == UINT64_MAX ? 0 : s->cur_ctx;
    return be_handles_put(&s->h, kind, native, owner, parent, id);
}

void sl_be_handle_drop(sl_be_session *s, enum sl_handle_kind kind, uint64_t id)
{
    if (kind == SL_H_CONTEXT) {
        be_ctx_forget(s, id);
        return;
    }
    if (!be_handles_find(&s->h, kind, id))
        return;
    be_handles_del(&s->h, id);
    if (kind == SL_H_MODULE || kind == SL_H_LIBRARY) {
        /* its functions, kernels and globals are gone with it */
        for (size_t i = 0; i < s->h.cap; i++)
            if (s->h.slot[i].id > TOMB && s->h.slot[i].parent == id)
                be_handles_del(&s->h, s->h.slot[i].id);
        be_mem_remove_parent(&s->mem, id);
    }
}

CUresult be_stream(sl_be_session *s, uint64_t id, CUstream *out)
{
    void *n = NULL;
    CUresult rc = sl_be_handle_get(s, SL_H_STREAM, id, &n);
    *out = (CUstream)n;
    return rc;
}

int be_stream_capturing(sl_be_session *s, CUstream st, int per_thread)
{
    CUresult (*fn)(CUstream, CUstreamCaptureStatus *) =
        per_thread && s->api->cuStreamIsCapturing_ptsz ? s->api->cuStreamIsCapturing_ptsz
                                                       : s->api->cuStreamIsCapturing;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!fn || fn(st, &cs) != CUDA_SUCCESS)
        return 0; /* the call itself will say what is wrong */
    return cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUresult be_refuse_if_capturing(sl_be_session *s, Sluice__Wire__Reply *reply, CUstream st,
                                int per_thread, const char *what)
{
    if (!be_stream_capturing(s, st, per_thread))
        return CUDA_SUCCESS;
    sl_be_detail(reply, "%s cannot be captured into a graph through Sluice yet", what);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}
