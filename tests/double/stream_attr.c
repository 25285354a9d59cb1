/* Stream attributes, stored per stream and read back.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "core.h"

#include <stdlib.h>

#include "copy.h"

/* Stored per stream (the legacy and per-thread streams included) and answered back; the
 * priority attribute is the stream's priority. An access policy window must lie in device
 * memory. */
struct dbl_sattr {
    struct dbl_sattr *next;
    CUstream s;
    CUaccessPolicyWindow window;
    CUsynchronizationPolicy sync;
    CUlaunchMemSyncDomainMap map;
    CUlaunchMemSyncDomain domain;
};

static struct dbl_sattr *sattrs;

static struct dbl_sattr *sattr_of(CUstream s)
{
    struct dbl_sattr *a = sattrs;
    while (a && a->s != s)
        a = a->next;
    if (!a && (a = calloc(1, sizeof *a))) {
        a->s = s;
        a->sync = CU_SYNC_POLICY_AUTO;
        a->next = sattrs;
        sattrs = a;
    }
    return a;
}

static CUresult stream_attr(CUstream s, CUstreamAttrID id, CUstreamAttrValue *get,
                            const CUstreamAttrValue *set)
{
    CUresult rc = check_stream(s);
    if (rc)
        return rc;
    struct dbl_sattr *a = sattr_of(s);
    if (!a || (!get && !set))
        return a ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
    switch (id) {
    case CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW:
        if (set) {
            const CUaccessPolicyWindow *w = &set->accessPolicyWindow;
            if (w->num_bytes && !dev_range((CUdeviceptr)(uintptr_t)w->base_ptr, w->num_bytes))
                return CUDA_ERROR_INVALID_VALUE;
            if (w->hitRatio < 0.0f || w->hitRatio > 1.0f)
                return CUDA_ERROR_INVALID_VALUE;
            a->window = *w;
        } else {
            get->accessPolicyWindow = a->window;
        }
        return CUDA_SUCCESS;
    case CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        if (set)
            a->sync = set->syncPolicy;
        else
            get->syncPolicy = a->sync;
        return CUDA_SUCCESS;
    case CU_STREAM_ATTRIBUTE_PRIORITY: {
        struct dbl_stream *st = (uintptr_t)s > 2 ? obj_get(s, K_STREAM) : NULL;
        if (set) {
            if (st)
                st->priority = set->priority;
        } else {
            get->priority = st ? st->priority : 0;
        }
        return CUDA_SUCCESS;
    }
    case CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        if (set)
            a->map = set->memSyncDomainMap;
        else
            get->memSyncDomainMap = a->map;
        return CUDA_SUCCESS;
    case CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN:
        if (set)
            a->domain = set->memSyncDomain;
        else
            get->memSyncDomain = a->domain;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr,
                                     const CUstreamAttrValue *value)
{
    LOCKED(stream_attr(hStream, attr, NULL, value));
}

EXPORT CUresult cuStreamGetAttribute(CUstream hStream, CUstreamAttrID attr,
                                     CUstreamAttrValue *value_out)
{
    LOCKED(stream_attr(hStream, attr, value_out, NULL));
}
