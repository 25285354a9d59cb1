/* Texture and surface objects, and texture references' border colour.
 *
 * cuTexObjectCreate / cuSurfObjectCreate: the CUDA_RESOURCE_DESC pod names an array or
 * mipmapped array by id (translated) or device memory (linear: devPtr + sizeInBytes, pitch2D:
 * pitchInBytes * (height - 1) + a row; checked against the session's memory). The object's value
 * goes back to the guest as the driver made it, because kernels receive it inside their
 * parameters (like device pointers, it cannot be translated); the session's handle table keeps
 * it (kind texobj/surfobj, native = the value) so that only the session's own objects can be
 * destroyed or queried. The 2D/3D and array copies arrays are filled and read with are
 * api/copy.c. */
#include <stdlib.h>
#include <string.h>

#include "api/reply.h"
#include "session/handles.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"
#include "sluice/pod_facts.h"

/* ---------------------------------------------------------------- objects by value */

static struct be_handle *by_value(sl_be_session *s, enum sl_handle_kind kind, uint64_t v)
{
    if (!v)
        return NULL;
    for (size_t i = 0; i < s->h.cap; i++) {
        struct be_handle *h = &s->h.slot[i];
        if (be_id_kind(h->id) == kind && (uint64_t)(uintptr_t)h->native == v &&
            be_handles_find(&s->h, kind, h->id) == h)
            return h;
    }
    return NULL;
}

static CUresult res_desc_in(sl_be_session *s, Sluice__Wire__Reply *reply,
                            const ProtobufCBinaryData *pod, CUDA_RESOURCE_DESC *d)
{
    if (pod->len != sizeof *d) {
        sl_be_detail(reply, "CUDA_RESOURCE_DESC of %zu bytes", pod->len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(d, pod->data, sizeof *d);
    void *n = NULL;
    CUresult rc;
    switch (d->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
        rc = d->res.array.hArray
                 ? sl_be_handle_get(s, SL_H_ARRAY, (uint64_t)(uintptr_t)d->res.array.hArray, &n)
                 : CUDA_ERROR_INVALID_HANDLE;
        d->res.array.hArray = (CUarray)n;
        return rc;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        rc = d->res.mipmap.hMipmappedArray
                 ? sl_be_handle_get(s, SL_H_MIPMAPPEDARRAY,
                                    (uint64_t)(uintptr_t)d->res.mipmap.hMipmappedArray, &n)
                 : CUDA_ERROR_INVALID_HANDLE;
        d->res.mipmap.hMipmappedArray = (CUmipmappedArray)n;
        return rc;
    case CU_RESOURCE_TYPE_LINEAR:
        rc = sl_be_devptr_check(s, d->res.linear.devPtr, d->res.linear.sizeInBytes);
        if (rc != CUDA_SUCCESS)
            sl_be_detail(reply, "linear texture memory outside the session's memory");
        return rc;
    case CU_RESOURCE_TYPE_PITCH2D: {
        size_t row = sl_array_format_bytes(d->res.pitch2D.format);
        uint64_t span;
        if (!d->res.pitch2D.height || !d->res.pitch2D.width)
            return CUDA_ERROR_INVALID_VALUE;
        if (!row) /* a format we do not size: the whole rows */
            row = d->res.pitch2D.pitchInBytes;
        else if (__builtin_mul_overflow(row * d->res.pitch2D.numChannels, d->res.pitch2D.width,
                                        &row))
            return CUDA_ERROR_INVALID_VALUE;
        if (__builtin_mul_overflow((uint64_t)d->res.pitch2D.pitchInBytes,
                                   (uint64_t)d->res.pitch2D.height - 1, &span) ||
            __builtin_add_overflow(span, (uint64_t)row, &span))
            return CUDA_ERROR_INVALID_VALUE;
        rc = sl_be_devptr_check(s, d->res.pitch2D.devPtr, span);
        if (rc != CUDA_SUCCESS)
            sl_be_detail(reply, "pitch2D texture memory outside the session's memory");
        return rc;
    }
    default:
        sl_be_detail(reply, "resource type %d is not supported", (int)d->resType);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

CUresult be_h_cuTexObjectCreate(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuTexObjectCreateRequest *rq = call->cu_tex_object_create;
    CUDA_RESOURCE_DESC rd;
    CUDA_TEXTURE_DESC td;
    CUDA_RESOURCE_VIEW_DESC vd;
    if (rq->p_tex_desc.len != sizeof td ||
        (rq->p_res_view_desc.len && rq->p_res_view_desc.len != sizeof vd)) {
        sl_be_detail(reply, "texture descriptors of %zu and %zu bytes", rq->p_tex_desc.len,
                     rq->p_res_view_desc.len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = res_desc_in(s, reply, &rq->p_res_desc, &rd);
    if (rc != CUDA_SUCCESS)
        return rc;
    memcpy(&td, rq->p_tex_desc.data, sizeof td);
    if (rq->p_res_view_desc.len)
        memcpy(&vd, rq->p_res_view_desc.data, sizeof vd);
    if (!api->cuTexObjectCreate)
        return CUDA_ERROR_NOT_SUPPORTED;
    Sluice__Cuda__CuTexObjectCreateReply *rp = BE_REPLY(
        reply, cu_tex_object_create, SLUICE__WIRE__REPLY__OUT_CU_TEX_OBJECT_CREATE,
        Sluice__Cuda__CuTexObjectCreateReply, sluice__cuda__cu_tex_object_create_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUtexObject t = 0;
    rc = api->cuTexObjectCreate(&t, &rd, &td, rq->p_res_view_desc.len ? &vd : NULL);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t id;
    rc = sl_be_handle_put(s, SL_H_TEXOBJ, (void *)(uintptr_t)t, 0, &id);
    if (rc != CUDA_SUCCESS) {
        if (api->cuTexObjectDestroy)
            api->cuTexObjectDestroy(t);
        return rc;
    }
    rp->p_tex_object = (uint64_t)t; /* the value, not the id: kernels receive it */
    return CUDA_SUCCESS;
}

CUresult be_h_cuSurfObjectCreate(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuSurfObjectCreateRequest *rq = call->cu_surf_object_create;
    CUDA_RESOURCE_DESC rd;
    CUresult rc = res_desc_in(s, reply, &rq->p_res_desc, &rd);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (rd.resType != CU_RESOURCE_TYPE_ARRAY)
        return CUDA_ERROR_INVALID_VALUE; /* surfaces are arrays only */
    if (!api->cuSurfObjectCreate)
        return CUDA_ERROR_NOT_SUPPORTED;
    Sluice__Cuda__CuSurfObjectCreateReply *rp = BE_REPLY(
        reply, cu_surf_object_create, SLUICE__WIRE__REPLY__OUT_CU_SURF_OBJECT_CREATE,
        Sluice__Cuda__CuSurfObjectCreateReply, sluice__cuda__cu_surf_object_create_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUsurfObject o = 0;
    rc = api->cuSurfObjectCreate(&o, &rd);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t id;
    rc = sl_be_handle_put(s, SL_H_SURFOBJ, (void *)(uintptr_t)o, 0, &id);
    if (rc != CUDA_SUCCESS) {
        if (api->cuSurfObjectDestroy)
            api->cuSurfObjectDestroy(o);
        return rc;
    }
    rp->p_surf_object = (uint64_t)o;
    return CUDA_SUCCESS;
}

CUresult be_h_cuTexObjectDestroy(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    struct be_handle *h = by_value(s, SL_H_TEXOBJ, call->cu_tex_object_destroy->tex_object);
    if (!h)
        return CUDA_ERROR_INVALID_VALUE;
    if (!api->cuTexObjectDestroy)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = api->cuTexObjectDestroy((CUtexObject)(uintptr_t)h->native);
    if (rc == CUDA_SUCCESS)
        be_handles_del(&s->h, h->id);
    return rc;
}

CUresult be_h_cuSurfObjectDestroy(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    struct be_handle *h = by_value(s, SL_H_SURFOBJ, call->cu_surf_object_destroy->surf_object);
    if (!h)
        return CUDA_ERROR_INVALID_VALUE;
    if (!api->cuSurfObjectDestroy)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = api->cuSurfObjectDestroy((CUsurfObject)(uintptr_t)h->native);
    if (rc == CUDA_SUCCESS)
        be_handles_del(&s->h, h->id);
    return rc;
}

CUresult be_h_cuTexObjectGetTextureDesc(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    struct be_handle *h =
        by_value(s, SL_H_TEXOBJ, call->cu_tex_object_get_texture_desc->tex_object);
    if (!h)
        return CUDA_ERROR_INVALID_VALUE;
    if (!api->cuTexObjectGetTextureDesc)
        return CUDA_ERROR_NOT_SUPPORTED;
    Sluice__Cuda__CuTexObjectGetTextureDescReply *rp =
        BE_REPLY(reply, cu_tex_object_get_texture_desc,
                 SLUICE__WIRE__REPLY__OUT_CU_TEX_OBJECT_GET_TEXTURE_DESC,
                 Sluice__Cuda__CuTexObjectGetTextureDescReply,
                 sluice__cuda__cu_tex_object_get_texture_desc_reply__init);
    CUDA_TEXTURE_DESC *d = rp ? calloc(1, sizeof *d) : NULL;
    if (!d)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->p_tex_desc.data = (uint8_t *)d; /* freed with the reply */
    rp->p_tex_desc.len = sizeof *d;
    return api->cuTexObjectGetTextureDesc(d, (CUtexObject)(uintptr_t)h->native);
}

CUresult be_h_cuTexObjectGetResourceViewDesc(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    struct be_handle *h =
        by_value(s, SL_H_TEXOBJ, call->cu_tex_object_get_resource_view_desc->tex_object);
    if (!h)
        return CUDA_ERROR_INVALID_VALUE;
    if (!api->cuTexObjectGetResourceViewDesc)
        return CUDA_ERROR_NOT_SUPPORTED;
    Sluice__Cuda__CuTexObjectGetResourceViewDescReply *rp =
        BE_REPLY(reply, cu_tex_object_get_resource_view_desc,
                 SLUICE__WIRE__REPLY__OUT_CU_TEX_OBJECT_GET_RESOURCE_VIEW_DESC,
                 Sluice__Cuda__CuTexObjectGetResourceViewDescReply,
                 sluice__cuda__cu_tex_object_get_resource_view_desc_reply__init);
    CUDA_RESOURCE_VIEW_DESC *d = rp ? calloc(1, sizeof *d) : NULL;
    if (!d)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rp->p_res_view_desc.data = (uint8_t *)d;
    rp->p_res_view_desc.len = sizeof *d;
    return api->cuTexObjectGetResourceViewDesc(d, (CUtexObject)(uintptr_t)h->native);
}

/* A resource descriptor the driver gave back, with array handles turned into the session's
 * ids (an array the session does not know is refused). */
static CUresult res_desc_out(sl_be_session *s, CUDA_RESOURCE_DESC *d)
{
    struct be_handle *h;
    switch (d->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
        h = by_value(s, SL_H_ARRAY, (uint64_t)(uintptr_t)d->res.array.hArray);
        if (!h)
            return CUDA_ERROR_INVALID_HANDLE;
        d->res.array.hArray = (CUarray)(uintptr_t)h->id;
        return CUDA_SUCCESS;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        h = by_value(s, SL_H_MIPMAPPEDARRAY, (uint64_t)(uintptr_t)d->res.mipmap.hMipmappedArray);
        if (!h)
            return CUDA_ERROR_INVALID_HANDLE;
        d->res.mipmap.hMipmappedArray = (CUmipmappedArray)(uintptr_t)h->id;
        return CUDA_SUCCESS;
    default:
        return CUDA_SUCCESS; /* device pointers are real addresses */
    }
}

static CUresult res_desc_reply(sl_be_session *s, const struct sl_driver_api *api,
                               enum sl_handle_kind kind, uint64_t value, ProtobufCBinaryData *out)
{
    struct be_handle *h = by_value(s, kind, value);
    if (!h)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult (*fn)(CUDA_RESOURCE_DESC *, unsigned long long) =
        kind == SL_H_TEXOBJ ? api->cuTexObjectGetResourceDesc : api->cuSurfObjectGetResourceDesc;
    if (!fn)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUDA_RESOURCE_DESC *d = calloc(1, sizeof *d);
    if (!d)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = fn(d, (unsigned long long)(uintptr_t)h->native);
    if (rc == CUDA_SUCCESS)
        rc = res_desc_out(s, d);
    if (rc != CUDA_SUCCESS) {
        free(d);
        return rc;
    }
    out->data = (uint8_t *)d; /* freed with the reply */
    out->len = sizeof *d;
    return CUDA_SUCCESS;
}

CUresult be_h_cuTexObjectGetResourceDesc(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    Sluice__Cuda__CuTexObjectGetResourceDescReply *rp =
        BE_REPLY(reply, cu_tex_object_get_resource_desc,
                 SLUICE__WIRE__REPLY__OUT_CU_TEX_OBJECT_GET_RESOURCE_DESC,
                 Sluice__Cuda__CuTexObjectGetResourceDescReply,
                 sluice__cuda__cu_tex_object_get_resource_desc_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return res_desc_reply(s, api, SL_H_TEXOBJ, call->cu_tex_object_get_resource_desc->tex_object,
                          &rp->p_res_desc);
}

CUresult be_h_cuSurfObjectGetResourceDesc(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    Sluice__Cuda__CuSurfObjectGetResourceDescReply *rp =
        BE_REPLY(reply, cu_surf_object_get_resource_desc,
                 SLUICE__WIRE__REPLY__OUT_CU_SURF_OBJECT_GET_RESOURCE_DESC,
                 Sluice__Cuda__CuSurfObjectGetResourceDescReply,
                 sluice__cuda__cu_surf_object_get_resource_desc_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return res_desc_reply(s, api, SL_H_SURFOBJ, call->cu_surf_object_get_resource_desc->surf_object,
                          &rp->p_res_desc);
}

/* Texture references' border colour: RGBA, four floats, as 16 bytes of bulk (in for the set,
 * out for the get; proto/api/cuda_driver.api, call 378). */
#define RGBA_BYTES (4 * sizeof(float))

CUresult be_h_cuTexRefSetBorderColor(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    void *tr = NULL;
    CUresult rc =
        sl_be_handle_get(s, SL_H_TEXREF, call->cu_tex_ref_set_border_color->h_tex_ref, &tr);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!c->in || c->in_len != RGBA_BYTES) {
        sl_be_detail(reply, "cuTexRefSetBorderColor: %zu bytes of RGBA expected, got %llu",
                     RGBA_BYTES, (unsigned long long)c->in_len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuTexRefSetBorderColor)
        return CUDA_ERROR_NOT_SUPPORTED;
    float rgba[4];
    memcpy(rgba, c->in, RGBA_BYTES);
    return api->cuTexRefSetBorderColor((CUtexref)tr, rgba);
}

CUresult be_h_cuTexRefGetBorderColor(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    void *tr = NULL;
    CUresult rc =
        sl_be_handle_get(s, SL_H_TEXREF, call->cu_tex_ref_get_border_color->h_tex_ref, &tr);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuTexRefGetBorderColor)
        return CUDA_ERROR_NOT_SUPPORTED;
    float *rgba = malloc(RGBA_BYTES);
    if (!rgba)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = api->cuTexRefGetBorderColor(rgba, (CUtexref)tr);
    if (rc != CUDA_SUCCESS) {
        free(rgba);
        return rc;
    }
    c->out = (uint8_t *)rgba;
    c->out_len = RGBA_BYTES;
    return CUDA_SUCCESS;
}
