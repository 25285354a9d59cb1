/* Kernel parameters and launches. slParamLayout (call 10001) asks the driver for a function's
 * or kernel's parameter offsets and sizes (cuFuncGetParamInfo / cuKernelGetParamInfo) and caches
 * them in the handle. A launch's parameter buffer (bulk) must be exactly the layout's extent;
 * kernelParams is rebuilt as pointers into it (or passed as the `extra` buffer). Function or
 * kernel ids are both accepted; the native CUkernel goes to the driver as a CUfunction. */
#include "api/launch.h"

#include <stdlib.h>
#include <string.h>

#include "api/reply.h"
#include "bounds.h"
#include "session/handles.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

CUresult be_params_rebuild(const struct be_layout *l, const uint8_t *buf, uint64_t len,
                           void **params)
{
    if (len != l->end || (len && !buf))
        return CUDA_ERROR_INVALID_VALUE;
    for (uint32_t i = 0; i < l->count; i++) {
        if (l->offsets[i] > len || l->sizes[i] > len - l->offsets[i])
            return CUDA_ERROR_INVALID_VALUE;
        params[i] = (void *)(buf + l->offsets[i]);
    }
    return CUDA_SUCCESS;
}

CUresult be_layout_get(sl_be_session *s, uint64_t fid, struct be_layout **out, void **native)
{
    struct be_handle *h = be_handles_find(&s->h, SL_H_FUNCTION, fid);
    int kernel = 0;
    if (!h && (h = be_handles_find(&s->h, SL_H_KERNEL, fid)))
        kernel = 1;
    if (!h)
        return CUDA_ERROR_INVALID_HANDLE;
    *native = h->native;
    if (h->layout) {
        *out = h->layout;
        return CUDA_SUCCESS;
    }
    if (kernel && s->api->cuKernelGetFunction) {
        /* A kernel's first use here (its layout, before its first launch): loaded into the
         * context now, in relaxed capture mode. Left to the launch (lazy loading), the load
         * would happen inside the program's stream capture when the first launch is captured,
         * where the driver refuses it (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and invalidates
         * the capture; natively cudart loaded the library at its start. A failure here is the
         * launch's to report. */
        CUfunction f = NULL;
        CUstreamCaptureMode mode = be_capture_relax(s);
        s->api->cuKernelGetFunction(&f, (CUkernel)h->native);
        be_capture_restore(s, mode);
    }
    CUresult (*fn)(void *, size_t, size_t *, size_t *) =
        kernel ? (CUresult(*)(void *, size_t, size_t *, size_t *))s->api->cuKernelGetParamInfo
               : (CUresult(*)(void *, size_t, size_t *, size_t *))s->api->cuFuncGetParamInfo;
    if (!fn)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct be_layout *l = calloc(1, sizeof *l);
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t cap = 0;
    for (uint32_t i = 0; i < BE_MAX_PARAMS; i++) {
        size_t off = 0, size = 0;
        CUresult rc = fn(h->native, i, &off, &size);
        if (rc == CUDA_ERROR_INVALID_VALUE)
            break; /* past the last parameter */
        if (rc != CUDA_SUCCESS || off > BE_MAX_PARAM_BYTES || size > BE_MAX_PARAM_BYTES - off) {
            be_layout_free(l);
            return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_INVALID_VALUE;
        }
        if (l->count == cap) {
            cap = cap ? cap * 2 : 8;
            uint64_t *o = realloc(l->offsets, cap * sizeof *o);
            if (o)
                l->offsets = o;
            uint64_t *z = o ? realloc(l->sizes, cap * sizeof *z) : NULL;
            if (!o || !z) {
                be_layout_free(l);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            l->sizes = z;
        }
        l->offsets[l->count] = off;
        l->sizes[l->count] = size;
        l->count++;
        if (off + size > l->end)
            l->end = off + size;
    }
    h->layout = l;
    *out = l;
    return CUDA_SUCCESS;
}

/* The layout's offsets and sizes as a reply's repeated fields (malloc'd; NULL when empty). */
static CUresult layout_copy(const struct be_layout *l, size_t *n_offsets, uint64_t **offsets,
                            size_t *n_sizes, uint64_t **sizes)
{
    if (l->count) {
        *offsets = malloc(l->count * sizeof **offsets);
        *sizes = malloc(l->count * sizeof **sizes);
        if (!*offsets || !*sizes)
            return CUDA_ERROR_OUT_OF_MEMORY; /* the reply's free takes what was allocated */
        memcpy(*offsets, l->offsets, l->count * sizeof **offsets);
        memcpy(*sizes, l->sizes, l->count * sizeof **sizes);
    }
    *n_offsets = *n_sizes = l->count;
    return CUDA_SUCCESS;
}

CUresult be_h_slParamLayout(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    struct be_layout *l;
    void *native;
    CUresult rc = be_layout_get(s, call->sl_param_layout->f, &l, &native);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__SlParamLayoutReply *rp =
        BE_REPLY(reply, sl_param_layout, SLUICE__WIRE__REPLY__OUT_SL_PARAM_LAYOUT,
                 Sluice__Cuda__SlParamLayoutReply, sluice__cuda__sl_param_layout_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->count = l->count;
    return layout_copy(l, &rp->n_offsets, &rp->offsets, &rp->n_sizes, &rp->sizes);
}

void sl_be_layout_out(sl_be_session *s, uint64_t id, size_t *n_offsets, uint64_t **offsets,
                      size_t *n_sizes, uint64_t **sizes, protobuf_c_boolean *given)
{
    CUcontext ctx = NULL;
    /* a kernel's layout loads it into the current context (be_layout_get): without one, its
     * first launch asks slParamLayout in the launching context */
    if (be_id_kind(id) == SL_H_KERNEL &&
        (!s->api->cuCtxGetCurrent || s->api->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx))
        return;
    struct be_layout *l;
    void *native;
    if (be_layout_get(s, id, &l, &native) != CUDA_SUCCESS)
        return;
    *given = layout_copy(l, n_offsets, offsets, n_sizes, sizes) == CUDA_SUCCESS;
}

static CUresult param_info(sl_be_session *s, uint64_t fid, uint64_t index, uint64_t *off,
                           uint64_t *size)
{
    struct be_layout *l;
    void *native;
    CUresult rc = be_layout_get(s, fid, &l, &native);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (index >= l->count)
        return CUDA_ERROR_INVALID_VALUE;
    *off = l->offsets[index];
    *size = l->sizes[index];
    return CUDA_SUCCESS;
}

CUresult be_h_cuFuncGetParamInfo(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    Sluice__Cuda__CuFuncGetParamInfoReply *rp = BE_REPLY(
        reply, cu_func_get_param_info, SLUICE__WIRE__REPLY__OUT_CU_FUNC_GET_PARAM_INFO,
        Sluice__Cuda__CuFuncGetParamInfoReply, sluice__cuda__cu_func_get_param_info_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return param_info(s, call->cu_func_get_param_info->func,
                      call->cu_func_get_param_info->param_index, &rp->param_offset,
                      &rp->param_size);
}

CUresult be_h_cuKernelGetParamInfo(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    if (be_id_kind(call->cu_kernel_get_param_info->kernel) != SL_H_KERNEL)
        return CUDA_ERROR_INVALID_HANDLE;
    Sluice__Cuda__CuKernelGetParamInfoReply *rp =
        BE_REPLY(reply, cu_kernel_get_param_info, SLUICE__WIRE__REPLY__OUT_CU_KERNEL_GET_PARAM_INFO,
                 Sluice__Cuda__CuKernelGetParamInfoReply,
                 sluice__cuda__cu_kernel_get_param_info_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return param_info(s, call->cu_kernel_get_param_info->kernel,
                      call->cu_kernel_get_param_info->param_index, &rp->param_offset,
                      &rp->param_size);
}

/* The parameter buffer of a launch: kernelParams (plen > 0 or a layout with no parameters) or
 * the `extra` buffer (elen). Fills params or extra_arr. */
struct packed {
    void *params[BE_MAX_PARAMS];
    void *extra[5];
    size_t extra_size;
    void **kp, **ex;
};

static CUresult unpack(sl_be_session *s, Sluice__Wire__Reply *reply, const struct be_layout *l,
                       const uint8_t *buf, uint64_t plen, uint64_t elen, struct packed *p)
{
    p->kp = p->ex = NULL;
    if (plen && elen) {
        sl_be_detail(reply, "a launch with both kernelParams and extra");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (elen) {
        if (elen != l->end) {
            sl_be_detail(reply, "extra buffer of %llu bytes, the kernel takes %llu",
                         (unsigned long long)elen, (unsigned long long)l->end);
            return CUDA_ERROR_INVALID_VALUE;
        }
        p->extra_size = elen;
        p->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
        p->extra[1] = (void *)buf;
        p->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
        p->extra[3] = &p->extra_size;
        p->extra[4] = CU_LAUNCH_PARAM_END;
        p->ex = p->extra;
        return CUDA_SUCCESS;
    }
    (void)s;
    CUresult rc = be_params_rebuild(l, buf, plen, p->params);
    if (rc != CUDA_SUCCESS) {
        sl_be_detail(reply, "parameter buffer of %llu bytes, the kernel's layout needs %llu",
                     (unsigned long long)plen, (unsigned long long)l->end);
        return rc;
    }
    p->kp = p->params;
    return CUDA_SUCCESS;
}

static CUresult prepare(struct sl_be_call *c, uint64_t f, uint64_t stream, uint64_t plen,
                        uint64_t elen, uint64_t total_bulk, struct packed *p, void **native,
                        CUstream *hs)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    if (c->in_len != total_bulk) {
        sl_be_detail(reply, "launch with %llu bulk bytes, %llu announced",
                     (unsigned long long)c->in_len, (unsigned long long)total_bulk);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct be_layout *l;
    CUresult rc = be_layout_get(s, f, &l, native);
    if (rc == CUDA_SUCCESS)
        rc = be_stream(s, stream, hs);
    if (rc == CUDA_SUCCESS)
        rc = unpack(s, reply, l, c->in, plen, elen, p);
    return rc;
}

CUresult be_h_cuLaunchKernel(struct sl_be_call *c)
{
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    const Sluice__Cuda__CuLaunchKernelRequest *rq = call->cu_launch_kernel;
    struct packed *p = malloc(sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *f;
    CUstream hs;
    uint64_t total = rq->kernel_params + rq->extra;
    CUresult rc =
        rq->kernel_params > BE_MAX_PARAM_BYTES || rq->extra > BE_MAX_PARAM_BYTES
            ? CUDA_ERROR_INVALID_VALUE
            : prepare(c, rq->f, rq->h_stream, rq->kernel_params, rq->extra, total, p, &f, &hs);
    if (rc == CUDA_SUCCESS) {
        CUresult (*fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream, void **, void **) =
            call->per_thread_stream && api->cuLaunchKernel_ptsz ? api->cuLaunchKernel_ptsz
                                                                : api->cuLaunchKernel;
        rc = fn ? fn((CUfunction)f, rq->grid_dim_x, rq->grid_dim_y, rq->grid_dim_z, rq->block_dim_x,
                     rq->block_dim_y, rq->block_dim_z, rq->shared_mem_bytes, hs, p->kp, p->ex)
                : CUDA_ERROR_NOT_SUPPORTED;
    }
    free(p);
    return rc;
}

CUresult be_h_cuLaunchCooperativeKernel(struct sl_be_call *c)
{
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    const Sluice__Cuda__CuLaunchCooperativeKernelRequest *rq = call->cu_launch_cooperative_kernel;
    struct packed *p = malloc(sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *f;
    CUstream hs;
    CUresult rc =
        rq->kernel_params > BE_MAX_PARAM_BYTES
            ? CUDA_ERROR_INVALID_VALUE
            : prepare(c, rq->f, rq->h_stream, rq->kernel_params, 0, rq->kernel_params, p, &f, &hs);
    if (rc == CUDA_SUCCESS) {
        CUresult (*fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream, void **) =
            call->per_thread_stream && api->cuLaunchCooperativeKernel_ptsz
                ? api->cuLaunchCooperativeKernel_ptsz
                : api->cuLaunchCooperativeKernel;
        rc = fn ? fn((CUfunction)f, rq->grid_dim_x, rq->grid_dim_y, rq->grid_dim_z, rq->block_dim_x,
                     rq->block_dim_y, rq->block_dim_z, rq->shared_mem_bytes, hs, p->kp)
                : CUDA_ERROR_NOT_SUPPORTED;
    }
    free(p);
    return rc;
}

/* Launch attributes: scalar ones pass; those carrying handles or pointers are checked or
 * refused. */
static CUresult check_attr(sl_be_session *s, Sluice__Wire__Reply *reply, CUlaunchAttribute *a)
{
    switch (a->id) {
    case CU_LAUNCH_ATTRIBUTE_IGNORE:
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
        if (a->value.accessPolicyWindow.num_bytes == 0)
            return CUDA_SUCCESS;
        return sl_be_devptr_check(s, (uint64_t)(uintptr_t)a->value.accessPolicyWindow.base_ptr,
                                  a->value.accessPolicyWindow.num_bytes);
    default:
        sl_be_detail(reply, "launch attribute %d is not supported", (int)a->id);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

CUresult be_h_cuLaunchKernelEx(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuLaunchKernelExRequest *rq = call->cu_launch_kernel_ex;
    CUlaunchConfig cfg;
    if (rq->config.len != sizeof cfg) {
        sl_be_detail(reply, "CUlaunchConfig of %zu bytes", rq->config.len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&cfg, rq->config.data, sizeof cfg);
    if (cfg.numAttrs > 64 || rq->kernel_params > BE_MAX_PARAM_BYTES ||
        rq->extra > BE_MAX_PARAM_BYTES)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t plen = rq->kernel_params + rq->extra;
    uint64_t alen = (uint64_t)cfg.numAttrs * sizeof(CUlaunchAttribute);
    CUlaunchAttribute attrs[64];
    if (c->in_len != plen + alen) {
        sl_be_detail(reply, "launch with %llu bulk bytes, %llu expected",
                     (unsigned long long)c->in_len, (unsigned long long)(plen + alen));
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (alen)
        memcpy(attrs, c->in + plen, alen);
    for (unsigned i = 0; i < cfg.numAttrs; i++) {
        CUresult rc = check_attr(s, reply, &attrs[i]);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    struct packed *p = malloc(sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *f;
    CUstream hs;
    struct be_layout *l;
    CUresult rc = be_layout_get(s, rq->f, &l, &f);
    if (rc == CUDA_SUCCESS)
        rc = be_stream(s, (uint64_t)(uintptr_t)cfg.hStream, &hs);
    if (rc == CUDA_SUCCESS)
        rc = unpack(s, reply, l, c->in, rq->kernel_params, rq->extra, p);
    if (rc == CUDA_SUCCESS) {
        cfg.hStream = hs;
        cfg.attrs = cfg.numAttrs ? attrs : NULL;
        CUresult (*fn)(const CUlaunchConfig *, CUfunction, void **, void **) =
            call->per_thread_stream && api->cuLaunchKernelEx_ptsz ? api->cuLaunchKernelEx_ptsz
                                                                  : api->cuLaunchKernelEx;
        rc = fn ? fn(&cfg, (CUfunction)f, p->kp, p->ex) : CUDA_ERROR_NOT_SUPPORTED;
    }
    free(p);
    return rc;
}
