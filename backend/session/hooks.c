/* The hooks of sluice/backend_hooks.h, through which the generated handlers reach the session:
 * handle ids <-> native objects (the handle table, session/handles.c; contexts,
 * session/contexts.c), guest device ordinals <-> CUdevice (session/devices.c), and device
 * pointers checked against and entered in the allocation table (session/ranges.c). */
#include "bounds.h"
#include "session/contexts.h"
#include "session/devices.h"
#include "session/handles.h"
#include "session/ranges.h"
#include "session/state.h"
#include "sluice/backend_hooks.h"
#include "sluice/log.h"

/* ---------------------------------------------------------------- handles */

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

/* The context an object of kind made now belongs to (libraries and kernels: none). */
static uint64_t owner_now(const sl_be_session *s, enum sl_handle_kind kind)
{
    if (kind == SL_H_LIBRARY || kind == SL_H_KERNEL || s->cur_ctx == UINT64_MAX)
        return 0;
    return s->cur_ctx;
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
    return be_handles_put(&s->h, kind, native, owner_now(s, kind), parent, id);
}

CUresult sl_be_handle_put_guest(sl_be_session *s, enum sl_handle_kind kind, void *native,
                                uint64_t parent, uint64_t id)
{
    if (kind == SL_H_CONTEXT)
        return CUDA_ERROR_INVALID_VALUE; /* contexts keep the backend's ids */
    return be_handles_put_guest(&s->h, kind, native, owner_now(s, kind), parent, id);
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
            if (s->h.slot[i].id > BE_HANDLE_TOMB && s->h.slot[i].parent == id)
                be_handles_del(&s->h, s->h.slot[i].id);
        be_mem_remove_parent(&s->mem, id);
    }
}

/* ---------------------------------------------------------------- devices */

CUresult sl_be_device_get(sl_be_session *s, int32_t ordinal, CUdevice *dev)
{
    if (!s->devs || ordinal < 0 || ordinal >= s->devs->count)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = s->devs->dev[ordinal].dev;
    return CUDA_SUCCESS;
}

CUresult sl_be_device_put(sl_be_session *s, CUdevice dev, int32_t *ordinal)
{
    for (int i = 0; s->devs && i < s->devs->count; i++)
        if (s->devs->dev[i].dev == dev) {
            *ordinal = i;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_DEVICE;
}

/* ---------------------------------------------------------------- device pointers */

CUresult sl_be_devptr_check(sl_be_session *s, uint64_t ptr, uint64_t len)
{
    /* NULL reaches no memory at all: the driver gives its own answer (cuMemFree(0) succeeds, as
     * free(NULL) does, and cuBLAS relies on it; a copy from 0 fails in the driver). */
    if (ptr == 0)
        return CUDA_SUCCESS;
    if (be_mem_contains(&s->mem, ptr, len))
        return CUDA_SUCCESS;
    if (sl_log_enabled(SL_LOG_DEBUG))
        sl_log(SL_LOG_DEBUG, BE_COMPONENT,
               "session %llu: device range 0x%llx+%llu is not the session's memory",
               (unsigned long long)s->id, (unsigned long long)ptr, (unsigned long long)len);
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult sl_be_devptr_add(sl_be_session *s, uint32_t call_id, uint64_t ptr, uint64_t len)
{
    (void)call_id;
    if (ptr == 0)
        return CUDA_SUCCESS; /* e.g. a zero-byte allocation */
    if (len == 0) {
        if (be_mem_find(&s->mem, ptr))
            return CUDA_SUCCESS; /* a pointer into memory we know (cuMemGetAddressRange...) */
        CUdeviceptr base = 0;
        size_t size = 0;
        if (!s->api->cuMemGetAddressRange_v2 ||
            s->api->cuMemGetAddressRange_v2(&base, &size, (CUdeviceptr)ptr) != CUDA_SUCCESS ||
            base != ptr || size == 0)
            return CUDA_ERROR_NOT_SUPPORTED; /* we cannot bound it: do not hand it out */
        len = size;
    }
    CUresult rc =
        be_mem_add(&s->mem, ptr, len, BE_R_ALLOC, s->cur_ctx == UINT64_MAX ? 0 : s->cur_ctx, 0);
    if (rc == CUDA_SUCCESS)
        be_mem_count(&s->mem, call_id, ptr);
    return rc;
}

void sl_be_devptr_release(sl_be_session *s, uint64_t ptr)
{
    be_mem_remove(&s->mem, ptr);
}
