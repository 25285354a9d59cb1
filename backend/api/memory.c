/* Pointer attributes of device memory (cuPointerGetAttribute). The frontend answers guest host
 * ranges itself; what reaches the backend must lie inside one of the session's device ranges.
 * Values that name driver objects are translated into the session's terms: the context into
 * its context id, the device ordinal into the guest's, a memory pool into its handle id (0 when
 * the session does not know the pool). The value travels back as bulk of the attribute's size. */
#include <stdlib.h>
#include <string.h>

#include "session/contexts.h"
#include "session/handles.h"
#include "session/ranges.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

static uint64_t attr_size(uint32_t a)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        return 4;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        return 8;
    default:
        return 0;
    }
}

static uint64_t ctx_id_of(const sl_be_session *s, CUcontext c)
{
    for (size_t i = 0; i < s->n_ctxs; i++)
        if (s->ctxs[i] && s->ctxs[i]->ctx == c)
            return s->ctxs[i]->id;
    return 0;
}

static uint64_t handle_id_of(const sl_be_session *s, enum sl_handle_kind kind, const void *native)
{
    for (size_t i = 0; native && i < s->h.cap; i++) {
        const struct be_handle *h = &s->h.slot[i];
        if (h->id > 1 && h->native == native && be_id_kind(h->id) == kind)
            return h->id;
    }
    return 0;
}

/* Whether ptr is managed memory (the guest maps it at the same address, frontend/api/managed.c). */
static int is_managed(const struct sl_driver_api *api, uint64_t ptr)
{
    unsigned int m = 0;
    return api->cuPointerGetAttribute(&m, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)ptr) ==
               CUDA_SUCCESS &&
           m;
}

/* Rewrites a driver value into the session's terms; CUDA_SUCCESS or why not. */
static CUresult translate(sl_be_session *s, const struct sl_driver_api *api, uint64_t ptr,
                          uint32_t a, uint64_t *v64, uint32_t *v32)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *v64 = ctx_id_of(s, (CUcontext)(uintptr_t)*v64);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: {
        int32_t ord = 0;
        CUresult rc = sl_be_device_put(s, (CUdevice)*v32, &ord);
        *v32 = (uint32_t)ord;
        return rc;
    }
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *v64 = handle_id_of(s, SL_H_MEMPOOL, (void *)(uintptr_t)*v64);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        /* The backend's host addresses are not the guest's; managed memory is mapped at the
         * same address in the guest, so its host pointer is the driver's answer. */
        return is_managed(api, ptr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_SUCCESS;
    }
}

CUresult be_h_cuPointerGetAttribute(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuPointerGetAttributeRequest *rq = call->cu_pointer_get_attribute;
    uint64_t n = attr_size(rq->attribute);
    if (!n || rq->data != n || c->in_len) {
        sl_be_detail(reply, "pointer attribute %u of %llu bytes", rq->attribute,
                     (unsigned long long)rq->data);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!be_mem_find(&s->mem, rq->ptr)) {
        sl_be_detail(reply, "0x%llx is not in the session's device memory",
                     (unsigned long long)rq->ptr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuPointerGetAttribute)
        return CUDA_ERROR_NOT_SUPPORTED;
    uint64_t v64 = 0;
    uint32_t v32 = 0;
    void *dst = n == 4 ? (void *)&v32 : (void *)&v64;
    CUresult rc =
        api->cuPointerGetAttribute(dst, (CUpointer_attribute)rq->attribute, (CUdeviceptr)rq->ptr);
    if (rc == CUDA_SUCCESS)
        rc = translate(s, api, rq->ptr, rq->attribute, &v64, &v32);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint8_t *buf = malloc(n);
    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(buf, dst, n);
    c->out = buf;
    c->out_len = n;
    return CUDA_SUCCESS;
}
