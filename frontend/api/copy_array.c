/* Copies between host memory and an array (cuMemcpyHtoA, cuMemcpyAtoH; docs/remoting.md
 * "Copies"): the bytes as the call's or the reply's bulk, in pieces of at most
 * SL_FE_MAX_COPY_CHUNK (the array offset advances). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdbool.h>
#include <stdint.h>

#include "api/copy.h"
#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

static CUresult htoa(bool pt, CUarray dst, size_t off, const void *src, size_t n)
{
    if (n && !src)
        return CUDA_ERROR_INVALID_VALUE;
    size_t done = 0;
    do {
        size_t c = n - done < SL_FE_MAX_COPY_CHUNK ? n - done : SL_FE_MAX_COPY_CHUNK;
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        Sluice__Cuda__CuMemcpyHtoAV2Request rq = SLUICE__CUDA__CU_MEMCPY_HTO_AV2_REQUEST__INIT;
        rq.dst_array = (uint64_t)(uintptr_t)dst;
        rq.dst_offset = off + done;
        rq.src_host = c;
        rq.byte_count = c;
        call.per_thread_stream = pt;
        SL_FE_SET(cuMemcpyHtoA_v2, &call, &rq);
        struct iovec iov = {(char *)src + done, c};
        Sluice__Wire__Reply *rep = NULL;
        CUresult rc = sl_fe_call_bulk(&call, &iov, c ? 1 : 0, NULL, 0, NULL, &rep);
        rc = sl_fe_reply_result(rc, rep);
        if (rc != CUDA_SUCCESS)
            return rc;
        done += c;
    } while (done < n);
    return CUDA_SUCCESS;
}

static CUresult atoh(bool pt, void *dst, CUarray src, size_t off, size_t n)
{
    if (n && !dst)
        return CUDA_ERROR_INVALID_VALUE;
    size_t done = 0;
    do {
        size_t c = n - done < SL_FE_MAX_COPY_CHUNK ? n - done : SL_FE_MAX_COPY_CHUNK;
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        Sluice__Cuda__CuMemcpyAtoHV2Request rq = SLUICE__CUDA__CU_MEMCPY_ATO_HV2_REQUEST__INIT;
        rq.dst_host = c;
        rq.src_array = (uint64_t)(uintptr_t)src;
        rq.src_offset = off + done;
        rq.byte_count = c;
        call.per_thread_stream = pt;
        SL_FE_SET(cuMemcpyAtoH_v2, &call, &rq);
        size_t got = 0;
        Sluice__Wire__Reply *rep = NULL;
        CUresult rc = sl_fe_call_bulk(&call, NULL, 0, (char *)dst + done, c, &got, &rep);
        rc = sl_fe_reply_result(rc, rep);
        if (rc == CUDA_SUCCESS && got != c)
            rc = CUDA_ERROR_UNKNOWN;
        if (rc != CUDA_SUCCESS)
            return rc;
        done += c;
    } while (done < n);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{
    return htoa(false, dstArray, dstOffset, srcHost, ByteCount);
}

CUresult cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void *srcHost,
                              size_t ByteCount)
{
    return htoa(true, dstArray, dstOffset, srcHost, ByteCount);
}

CUresult cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
    return atoh(false, dstHost, srcArray, srcOffset, ByteCount);
}

CUresult cuMemcpyAtoH_v2_ptds(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
    return atoh(true, dstHost, srcArray, srcOffset, ByteCount);
}
