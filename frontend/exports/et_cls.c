/* CONTEXT_LOCAL_STORAGE c693336e...: served locally, with the semantics measured on 580:
 *  - NULL ctx means the current context; with none, put/get/delete give 201.
 *  - put on an existing (ctx, key) gives 400 and keeps the old value.
 *  - get/delete of a missing key give 400; get leaves *value alone.
 *  - delete does not call the dtor; context destroy does (sl_fe_cls_on_ctx_destroy), a primary
 *    context reset drops entries silently (sl_fe_cls_on_ctx_reset).
 * Keyed by (ctx, key): several cudart copies per process each have their own key. The handle
 * is opaque: an inactive primary handle works, and (CUcontext)-1 is just another handle (it
 * crashes the real driver, so no real caller passes it). */
#include <pthread.h>
#include <stdlib.h>

#include "exports/et_cls.h"
#include "call/contexts.h"

typedef void (*cls_dtor)(CUcontext ctx, void *key, void *value);

struct cls_entry {
    CUcontext ctx;
    void *key;
    void *value;
    cls_dtor dtor;
};

/* A small vector: one entry per cudart copy per context, a handful in practice. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cls_entry *g_entries;
static size_t g_len, g_cap;

static CUresult resolve_ctx(CUcontext *ctx)
{
    if (!*ctx)
        *ctx = sl_fe_current_context();
    return *ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* With g_lock held. */
static struct cls_entry *find(CUcontext ctx, void *key)
{
    for (size_t i = 0; i < g_len; i++) {
        if (g_entries[i].ctx == ctx && g_entries[i].key == key)
            return &g_entries[i];
    }
    return NULL;
}

/* With g_lock held: removes *e by moving the last entry into its place. */
static void remove_entry(struct cls_entry *e)
{
    *e = g_entries[--g_len];
}

/* [0] put(ctx, key, value, dtor). */
static CUresult cls_put(CUcontext ctx, void *key, void *value, cls_dtor dtor)
{
    CUresult rc = resolve_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_lock);
    if (find(ctx, key)) {
        rc = CUDA_ERROR_INVALID_HANDLE;
    } else if (g_len == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 16;
        struct cls_entry *grown = realloc(g_entries, cap * sizeof *grown);
        if (!grown) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            g_entries = grown;
            g_cap = cap;
        }
    }
    if (rc == CUDA_SUCCESS)
        g_entries[g_len++] = (struct cls_entry){ctx, key, value, dtor};
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* [1] delete(ctx, key): no dtor call. */
static CUresult cls_delete(CUcontext ctx, void *key)
{
    CUresult rc = resolve_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_lock);
    struct cls_entry *e = find(ctx, key);
    if (e)
        remove_entry(e);
    else
        rc = CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* [2] get(void **value, ctx, key). */
static CUresult cls_get(void **value, CUcontext ctx, void *key)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = resolve_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_lock);
    struct cls_entry *e = find(ctx, key);
    if (e)
        *value = e->value;
    else
        rc = CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

void sl_fe_cls_on_ctx_destroy(CUcontext ctx)
{
    if (!ctx)
        return;
    for (;;) {
        struct cls_entry taken = {0};
        int found = 0;
        pthread_mutex_lock(&g_lock);
        for (size_t i = 0; i < g_len && !found; i++) {
            if (g_entries[i].ctx == ctx) {
                taken = g_entries[i];
                remove_entry(&g_entries[i]);
                found = 1;
            }
        }
        pthread_mutex_unlock(&g_lock);
        if (!found)
            return;
        /* Outside the lock: a dtor may use the table again. */
        if (taken.dtor)
            taken.dtor(taken.ctx, taken.key, taken.value);
    }
}

void sl_fe_cls_on_ctx_reset(CUcontext ctx)
{
    if (!ctx)
        return;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_len;) {
        if (g_entries[i].ctx == ctx)
            remove_entry(&g_entries[i]);
        else
            i++;
    }
    pthread_mutex_unlock(&g_lock);
}

void sl_fe_cls_clear_all(void)
{
    pthread_mutex_lock(&g_lock);
    free(g_entries);
    g_entries = NULL;
    g_len = g_cap = 0;
    pthread_mutex_unlock(&g_lock);
}

/* No size slot; [3] is NULL as on 580. */
static const sl_fe_slot TABLE[4] = {
    SL_FE_ET_FN(cls_put),
    SL_FE_ET_FN(cls_delete),
    SL_FE_ET_FN(cls_get),
    NULL,
};

const sl_fe_slot *sl_fe_et_context_local_storage(void)
{
    return TABLE;
}
