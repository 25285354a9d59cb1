/* Managed memory (docs/remoting.md "Managed memory"): cuMemAllocManaged allocates real managed
 * memory in the session's worker (in its allocation table and quota) and maps the same address
 * in the guest, where call/managed.c keeps the pages coherent with the device's copy. Frees
 * of a managed base unmap the guest's pages (cuMemFree_v2 is api/alloc.c's). Prefetches and advice
 * are checked here and forwarded, so that the driver's range attributes answer as natively; a
 * prefetch to the host also brings the range into the guest. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdbool.h>
#include <stdint.h>

#include "api/managed.h"
#include "call/managed.h"
#include "call/rpc.h"
#include "component.h"
#include "sluice/fe_calls.h"
#include "sluice/log.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

/* The tracker's fetch: a synchronous device-to-host copy into the frontend's buffer. */
static CUresult fetch(void *dst, uint64_t src, size_t len)
{
    return cuMemcpyDtoH_v2(dst, (CUdeviceptr)src, len);
}

static CUresult free_remote(CUdeviceptr dptr)
{
    Sluice__Cuda__CuMemFreeV2Request req = SLUICE__CUDA__CU_MEM_FREE_V2_REQUEST__INIT;
    req.dptr = dptr;
    Sluice__Wire__Call call = SL_FE_CALL(cuMemFree_v2, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    return sl_fe_reply_result(rc, rep);
}

/* One managed allocation in the backend: its device address, or 0 with the error. */
static CUresult alloc_remote(size_t bytesize, unsigned int flags, uint64_t *d)
{
    Sluice__Cuda__CuMemAllocManagedRequest req = SLUICE__CUDA__CU_MEM_ALLOC_MANAGED_REQUEST__INIT;
    req.bytesize = bytesize;
    req.flags = flags;
    Sluice__Wire__Call call = SL_FE_CALL(cuMemAllocManaged, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    *d = 0;
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS && SL_FE_REPLY(cuMemAllocManaged, rep))
            *d = SL_FE_REPLY(cuMemAllocManaged, rep)->dptr;
        else if (rc == CUDA_SUCCESS)
            rc = CUDA_ERROR_UNKNOWN;
        sl_fe_reply_free(rep);
    }
    return rc;
}

#define MANAGED_TRIES 8 /* allocations whose address the guest process has taken, kept aside */

/* The device's address must be free in this process too (the guest's program and the backend's
 * worker lay out their address spaces independently: on one machine, as in the GPU tests, the
 * driver's managed range can fall on a mapping of the guest's). An address that is taken is
 * kept allocated while the backend is asked again, so that the driver gives another one; those
 * kept are freed at the end. */
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    if (!dptr || !bytesize || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    sl_fe_managed_set_fetch(fetch);
    uint64_t taken[MANAGED_TRIES], d = 0;
    size_t n = 0;
    const char *why = NULL;
    CUresult rc;
    for (;;) {
        rc = alloc_remote(bytesize, flags, &d);
        if (rc != CUDA_SUCCESS || sl_fe_managed_map(d, bytesize, &why) == 0)
            break;
        if (n == MANAGED_TRIES) {
            sl_log(SL_LOG_ERR, SL_FE_COMPONENT,
                   "cuMemAllocManaged: the device's address 0x%llx (%zu bytes) cannot be mapped in "
                   "this process: %s (%zu other addresses tried); returning "
                   "CUDA_ERROR_OUT_OF_MEMORY",
                   (unsigned long long)d, bytesize, why, n);
            (void)free_remote(d);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        taken[n++] = d;
    }
    for (size_t i = 0; i < n; i++)
        (void)free_remote(taken[i]);
    if (rc == CUDA_SUCCESS)
        *dptr = d;
    return rc;
}

int sl_fe_managed_free(CUdeviceptr dptr, CUresult *rc)
{
    uint64_t base = 0;
    size_t len = 0;
    if (!sl_fe_managed_find(dptr, &base, &len) || base != dptr)
        return 0;
    *rc = free_remote(dptr);
    if (*rc == CUDA_SUCCESS)
        sl_fe_managed_unmap(dptr);
    return 1;
}

/* ------------------------------------------------------------------ prefetch */
static CUresult stream_sync(bool pt, CUstream s)
{
    return pt ? cuStreamSynchronize_ptsz(s) : cuStreamSynchronize(s);
}

/* The range must lie in one managed allocation (the driver: CUDA_ERROR_INVALID_VALUE). */
static int in_managed(CUdeviceptr p, size_t n)
{
    uint64_t base = 0;
    size_t len = 0;
    return n && sl_fe_managed_find(p, &base, &len) && p + n >= p && p + n <= base + len;
}

static int is_host(CUmemLocation loc)
{
    return loc.type == CU_MEM_LOCATION_TYPE_HOST || loc.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           loc.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

/* Forwarded in every case, so that the driver's range attributes answer as natively; to the
 * host, the stream's work up to the prefetch is then waited for and the range comes into the
 * guest (stronger than asynchronous, as the copies into guest memory are). */
static CUresult prefetch(bool pt, CUdeviceptr p, size_t n, CUmemLocation loc, unsigned flags,
                         CUstream s)
{
    if (!in_managed(p, n))
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuMemPrefetchAsyncV2Request req =
        SLUICE__CUDA__CU_MEM_PREFETCH_ASYNC_V2_REQUEST__INIT;
    req.dev_ptr = p;
    req.count = n;
    req.location = (ProtobufCBinaryData){sizeof loc, (uint8_t *)&loc};
    req.flags = flags;
    req.h_stream = (uint64_t)(uintptr_t)s;
    Sluice__Wire__Call call = SL_FE_CALL(cuMemPrefetchAsync_v2, &req);
    call.per_thread_stream = pt;
    CUresult rc = sl_fe_enqueue_async(&call);
    if (rc != CUDA_SUCCESS || !is_host(loc))
        return rc;
    rc = stream_sync(pt, s);
    return rc != CUDA_SUCCESS ? rc : sl_fe_managed_fetch_range(p, n);
}

static CUmemLocation location_v1(CUdevice dev)
{
    if (dev == CU_DEVICE_CPU)
        return (CUmemLocation){.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
    return (CUmemLocation){.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
}

CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                               unsigned int flags, CUstream hStream)
{
    return prefetch(false, devPtr, count, location, flags, hStream);
}
CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                    unsigned int flags, CUstream hStream)
{
    return prefetch(true, devPtr, count, location, flags, hStream);
}
CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    return prefetch(false, devPtr, count, location_v1(dstDevice), 0, hStream);
}
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                 CUstream hStream)
{
    return prefetch(true, devPtr, count, location_v1(dstDevice), 0, hStream);
}

/* ------------------------------------------------------------------ advice */
CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                        CUmemLocation location)
{
    if (!in_managed(devPtr, count))
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuMemAdviseV2Request req = SLUICE__CUDA__CU_MEM_ADVISE_V2_REQUEST__INIT;
    req.dev_ptr = devPtr;
    req.count = count;
    req.advice = (uint32_t)advice;
    req.location = (ProtobufCBinaryData){sizeof location, (uint8_t *)&location};
    Sluice__Wire__Call call = SL_FE_CALL(cuMemAdvise_v2, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    return sl_fe_reply_result(rc, rep);
}

CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
    return cuMemAdvise_v2(devPtr, count, advice, location_v1(device));
}

/* ------------------------------------------------------------------ range attributes */
CUresult cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute,
                                CUdeviceptr devPtr, size_t count)
{
    if (!data || !dataSize)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuMemRangeGetAttributeRequest req =
        SLUICE__CUDA__CU_MEM_RANGE_GET_ATTRIBUTE_REQUEST__INIT;
    req.data = dataSize;
    req.data_size = dataSize;
    req.attribute = (uint32_t)attribute;
    req.dev_ptr = devPtr;
    req.count = count;
    Sluice__Wire__Call call = SL_FE_CALL(cuMemRangeGetAttribute, &req);
    size_t got = 0;
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call_bulk(&call, NULL, 0, data, dataSize, &got, &rep);
    rc = sl_fe_reply_result(rc, rep);
    return rc == CUDA_SUCCESS && got != dataSize ? CUDA_ERROR_UNKNOWN : rc;
}

CUresult cuMemRangeGetAttributes(void **data, size_t *dataSizes, CUmem_range_attribute *attributes,
                                 size_t numAttributes, CUdeviceptr devPtr, size_t count)
{
    if (!data || !dataSizes || !attributes || !numAttributes)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numAttributes; i++) {
        CUresult rc = cuMemRangeGetAttribute(data[i], dataSizes[i], attributes[i], devPtr, count);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}
