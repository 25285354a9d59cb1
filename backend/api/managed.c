/* Managed memory's range attributes (cuMemRangeGetAttribute; docs/remoting.md "Managed
 * memory"): the range must lie in the session's memory; the driver answers, and device ordinals
 * in the answer become the guest's (CU_DEVICE_CPU and CU_DEVICE_INVALID stay). The value travels
 * back as bulk of the size the guest gave (4 bytes, or 4 per device for ACCESSED_BY). */
#include <stdlib.h>
#include <string.h>

#include "session/ranges.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

#define MAX_ACCESSED_BY 64 /* devices listed by one ACCESSED_BY answer */

static int size_ok(uint32_t a, uint64_t n)
{
    if (a == CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY)
        return n && n % 4 == 0 && n <= 4 * MAX_ACCESSED_BY;
    return n == 4 && a >= CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY &&
           a <= CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID;
}

/* A device ordinal of the driver's into the guest's; the CPU and "none" stay. */
static CUresult ordinal_put(sl_be_session *s, int32_t *v)
{
    if (*v < 0)
        return CUDA_SUCCESS;
    return sl_be_device_put(s, (CUdevice)*v, v);
}

static CUresult translate(sl_be_session *s, uint32_t a, int32_t *v, size_t n, int32_t loc_type)
{
    switch (a) {
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
        return ordinal_put(s, v);
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY:
        for (size_t i = 0; i < n; i++) {
            CUresult rc = ordinal_put(s, &v[i]);
            if (rc != CUDA_SUCCESS)
                return rc;
        }
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
        return loc_type == CU_MEM_LOCATION_TYPE_DEVICE ? ordinal_put(s, v) : CUDA_SUCCESS;
    default:
        return CUDA_SUCCESS;
    }
}

CUresult be_h_cuMemRangeGetAttribute(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Cuda__CuMemRangeGetAttributeRequest *rq = c->call->cu_mem_range_get_attribute;
    Sluice__Wire__Reply *reply = c->reply;
    if (!size_ok(rq->attribute, rq->data_size) || rq->data != rq->data_size || c->in_len) {
        sl_be_detail(reply, "range attribute %u of %llu bytes", rq->attribute,
                     (unsigned long long)rq->data_size);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!rq->count || !be_mem_contains(&s->mem, rq->dev_ptr, rq->count)) {
        sl_be_detail(reply, "0x%llx + %llu is not in the session's memory",
                     (unsigned long long)rq->dev_ptr, (unsigned long long)rq->count);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuMemRangeGetAttribute)
        return CUDA_ERROR_NOT_SUPPORTED;
    size_t n = (size_t)rq->data_size;
    int32_t *v = calloc(1, n);
    if (!v)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = api->cuMemRangeGetAttribute(v, n, (CUmem_range_attribute)rq->attribute,
                                              (CUdeviceptr)rq->dev_ptr, (size_t)rq->count);
    int32_t type = CU_MEM_LOCATION_TYPE_INVALID;
    if (rc == CUDA_SUCCESS && (rq->attribute == CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID ||
                               rq->attribute == CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID))
        rc = api->cuMemRangeGetAttribute(&type, sizeof type,
                                         rq->attribute - 1 /* the matching _TYPE */,
                                         (CUdeviceptr)rq->dev_ptr, (size_t)rq->count);
    if (rc == CUDA_SUCCESS)
        rc = translate(s, rq->attribute, v, n / 4, type);
    if (rc != CUDA_SUCCESS) {
        free(v);
        return rc;
    }
    c->out = (uint8_t *)v;
    c->out_len = n;
    return CUDA_SUCCESS;
}
