/* CUDA arrays, texture and surface objects.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "texture.h"

#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "copy.h"

static size_t fmt_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 0;
    }
}

static CUresult array_create(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    size_t eb = d ? fmt_bytes(d->Format) : 0;
    if (!out || !eb || !d->Width || !d->NumChannels || d->NumChannels > 4 || d->NumChannels == 3)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_array *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* no owner context: a context drop would free only the struct, not the data */
    a->hdr = (struct dbl_obj){K_ARRAY, NULL};
    a->d = *d;
    a->pitch = d->Width * eb * d->NumChannels;
    a->height = d->Height ? d->Height : 1;
    a->depth = d->Depth ? d->Depth : 1;
    a->data = calloc(a->depth * a->height, a->pitch);
    if (!a->data) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    obj_add(a);
    *out = (CUarray)a;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = {p->Width, p->Height, 0, p->Format, p->NumChannels, 0};
    LOCKED(array_create(pHandle, &d));
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *p)
{
    LOCKED(array_create(pHandle, p));
}

static CUresult array_destroy(CUarray h)
{
    struct dbl_array *a = obj_get(h, K_ARRAY);
    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    obj_del(a);
    free(a->data);
    free(a);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    LOCKED(array_destroy(hArray));
}

static CUresult array_desc(CUDA_ARRAY3D_DESCRIPTOR *out, CUarray h)
{
    struct dbl_array *a = obj_get(h, K_ARRAY);
    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = a->d;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *p, CUarray hArray)
{
    LOCKED(array_desc(p, hArray));
}

EXPORT CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *p, CUarray hArray)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    dbl_lock();
    CUresult rc = p ? array_desc(&d, hArray) : CUDA_ERROR_INVALID_VALUE;
    dbl_unlock();
    if (!rc)
        *p = (CUDA_ARRAY_DESCRIPTOR){d.Width, d.Height, d.Format, d.NumChannels};
    return rc;
}

static unsigned long long objvals[256], next_objval = 0x1000;

static CUDA_TEXTURE_DESC objtex[256];

static CUDA_RESOURCE_DESC objres[256];

static size_t nobjvals;

static CUresult resource_ok(const CUDA_RESOURCE_DESC *r)
{
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    switch (r->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
        return obj_get(r->res.array.hArray, K_ARRAY) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    case CU_RESOURCE_TYPE_LINEAR:
        return dev_range(DEVPTR(r->res.linear.devPtr), r->res.linear.sizeInBytes)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    case CU_RESOURCE_TYPE_PITCH2D:
        return dev_range(DEVPTR(r->res.pitch2D.devPtr),
                         r->res.pitch2D.pitchInBytes * r->res.pitch2D.height)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

static CUresult objval_new(unsigned long long *out, const CUDA_RESOURCE_DESC *r)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = resource_ok(r);
    if (rc)
        return rc;
    if (!out || nobjvals == sizeof objvals / sizeof objvals[0])
        return CUDA_ERROR_INVALID_VALUE;
    memset(&objtex[nobjvals], 0, sizeof objtex[0]);
    objres[nobjvals] = *r;
    objvals[nobjvals++] = *out = next_objval++;
    return CUDA_SUCCESS;
}

static CUresult objval_del(unsigned long long v)
{
    for (size_t i = 0; i < nobjvals; i++)
        if (objvals[i] == v) {
            objvals[i] = objvals[--nobjvals];
            objtex[i] = objtex[nobjvals];
            objres[i] = objres[nobjvals];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                                  const CUDA_TEXTURE_DESC *pTexDesc,
                                  const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
    (void)pResViewDesc;
    if (!pTexDesc)
        return CUDA_ERROR_INVALID_VALUE;
    dbl_lock();
    CUresult rc = objval_new(pTexObject, pResDesc);
    if (!rc)
        objtex[nobjvals - 1] = *pTexDesc;
    dbl_unlock();
    return rc;
}

EXPORT CUresult cuTexObjectDestroy(CUtexObject texObject)
{
    LOCKED(objval_del(texObject));
}

EXPORT CUresult cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
    if (!pResDesc || pResDesc->resType != CU_RESOURCE_TYPE_ARRAY)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(objval_new(pSurfObject, pResDesc));
}

EXPORT CUresult cuSurfObjectDestroy(CUsurfObject surfObject)
{
    LOCKED(objval_del(surfObject));
}

static CUresult tex_desc(CUDA_TEXTURE_DESC *out, CUtexObject t)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nobjvals; i++)
        if (objvals[i] == t) {
            *out = objtex[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject)
{
    LOCKED(tex_desc(pTexDesc, texObject));
}

static CUresult res_desc(CUDA_RESOURCE_DESC *out, unsigned long long v)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nobjvals; i++)
        if (objvals[i] == v) {
            *out = objres[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject)
{
    LOCKED(res_desc(pResDesc, texObject));
}

EXPORT CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUsurfObject surfObject)
{
    LOCKED(res_desc(pResDesc, surfObject));
}

unsigned char *dbl_object_array(unsigned long long obj, size_t *pitch, size_t *width,
                                size_t *height, size_t *elem)
{
    for (size_t i = 0; i < nobjvals; i++)
        if (objvals[i] == obj && objres[i].resType == CU_RESOURCE_TYPE_ARRAY) {
            struct dbl_array *a = obj_get(objres[i].res.array.hArray, K_ARRAY);
            if (!a)
                return NULL;
            *pitch = a->pitch;
            *width = a->d.Width;
            *height = a->height;
            *elem = fmt_bytes(a->d.Format) * a->d.NumChannels;
            return a->data;
        }
    return NULL;
}
