/* Shareable handles (hand-written half; backend/api/shareable.c, docs/security.md "IPC
 * handles"). The guest gets a real file descriptor it can pass to another process of the guest
 * over SCM_RIGHTS, as a program expects of CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: a sealed
 * memfd of the guest holding a type tag and the 64-byte token the backend gave for the exported
 * allocation or pool. Import reads the token back from the descriptor; a descriptor that is not
 * such a memfd (of the right kind) is CUDA_ERROR_INVALID_VALUE, as the driver answers a bad
 * handle, and is never sent. Other handle types are CUDA_ERROR_NOT_SUPPORTED. The tokens
 * travel as bulk (export: the reply's, import: the call's). cuMemPoolImportPointer sends the
 * token the export data holds (cuMemPoolExportPointer is generated: the data is the token). */
#define __CUDA_API_VERSION_INTERNAL 1
#define _GNU_SOURCE                 1
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define TOKEN_BYTES 64
#define POSIX_FD    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
#define SEALS       (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

static const char MAGIC[16] = "sluice-share-v1";

enum share_kind { SHARE_ALLOC = 1, SHARE_POOL = 2 };

struct share_file { /* the memfd's whole content */
    char magic[16];
    uint32_t kind, reserved;
    uint8_t token[TOKEN_BYTES];
};

static CUresult handle_type(CUmemAllocationHandleType t)
{
    if (t == POSIX_FD)
        return CUDA_SUCCESS;
    return t == CU_MEM_HANDLE_TYPE_NONE ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
}

/* A sealed memfd holding token as kind: the descriptor, or -1. */
static int share_fd(enum share_kind kind, const uint8_t token[TOKEN_BYTES])
{
    struct share_file f = {.kind = (uint32_t)kind};
    memcpy(f.magic, MAGIC, sizeof f.magic);
    memcpy(f.token, token, TOKEN_BYTES);
    int fd = memfd_create("sluice-shareable", MFD_ALLOW_SEALING);
    if (fd >= 0 &&
        (pwrite(fd, &f, sizeof f, 0) != (ssize_t)sizeof f || fcntl(fd, F_ADD_SEALS, SEALS) != 0)) {
        close(fd);
        fd = -1;
    }
    memset(&f, 0, sizeof f);
    return fd;
}

/* The token in the descriptor os_handle, when it is one of ours of kind; 0, or -1. */
static int share_read(void *os_handle, enum share_kind kind, uint8_t token[TOKEN_BYTES])
{
    intptr_t v = (intptr_t)os_handle;
    if (v < 0 || v > INT32_MAX)
        return -1;
    int fd = (int)v;
    struct stat st;
    struct share_file f;
    int seals = fcntl(fd, F_GET_SEALS);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != (off_t)sizeof f || seals < 0 ||
        (seals & SEALS) != SEALS || pread(fd, &f, sizeof f, 0) != (ssize_t)sizeof f ||
        memcmp(f.magic, MAGIC, sizeof f.magic) || f.kind != (uint32_t)kind)
        return -1;
    memcpy(token, f.token, TOKEN_BYTES);
    memset(&f, 0, sizeof f);
    return 0;
}

/* Sends an export call whose reply's bulk is the token; *out = the memfd holding it. */
static CUresult export_call(Sluice__Wire__Call *call, enum share_kind kind, int *out)
{
    uint8_t token[TOKEN_BYTES];
    size_t got = 0;
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call_bulk(call, NULL, 0, token, sizeof token, &got, &rep);
    rc = sl_fe_reply_result(rc, rep); /* not in one expression: rep is set by the call */
    if (rc == CUDA_SUCCESS && got != sizeof token)
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS) {
        int fd = share_fd(kind, token);
        if (fd < 0)
            rc = errno == EMFILE || errno == ENFILE ? CUDA_ERROR_OUT_OF_MEMORY
                                                    : CUDA_ERROR_OPERATING_SYSTEM;
        else
            *out = fd;
    }
    memset(token, 0, sizeof token);
    return rc;
}

/* Sends an import call with the token as its bulk (wiped once sent). CUDA_SUCCESS: *rep is the
 * reply, for the caller to take its handle from and free. */
static CUresult import_call(Sluice__Wire__Call *call, uint8_t token[TOKEN_BYTES],
                            Sluice__Wire__Reply **rep)
{
    struct iovec iov = {token, TOKEN_BYTES};
    *rep = NULL;
    CUresult rc = sl_fe_call_bulk(call, &iov, 1, NULL, 0, NULL, rep);
    memset(token, 0, TOKEN_BYTES);
    if (*rep)
        rc = (CUresult)(*rep)->result;
    else if (rc == CUDA_SUCCESS)
        rc = CUDA_ERROR_UNKNOWN;
    if (rc != CUDA_SUCCESS && *rep) {
        sl_fe_reply_free(*rep);
        *rep = NULL;
    }
    return rc;
}

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType,
                                      unsigned long long flags)
{
    if (!shareableHandle)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = handle_type(handleType);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuMemExportToShareableHandleRequest rq =
        SLUICE__CUDA__CU_MEM_EXPORT_TO_SHAREABLE_HANDLE_REQUEST__INIT;
    rq.shareable_handle = TOKEN_BYTES;
    rq.handle = (uint64_t)handle;
    rq.handle_type = (uint32_t)handleType;
    rq.flags = flags;
    SL_FE_SET(cuMemExportToShareableHandle, &call, &rq);
    return export_call(&call, SHARE_ALLOC, (int *)shareableHandle);
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                        CUmemAllocationHandleType shHandleType)
{
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = handle_type(shHandleType);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint8_t token[TOKEN_BYTES];
    if (share_read(osHandle, SHARE_ALLOC, token) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuMemImportFromShareableHandleRequest rq =
        SLUICE__CUDA__CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE_REQUEST__INIT;
    rq.os_handle = TOKEN_BYTES;
    rq.sh_handle_type = (uint32_t)shHandleType;
    SL_FE_SET(cuMemImportFromShareableHandle, &call, &rq);
    Sluice__Wire__Reply *rep;
    rc = import_call(&call, token, &rep);
    if (rc == CUDA_SUCCESS) {
        if (SL_FE_REPLY(cuMemImportFromShareableHandle, rep))
            *handle =
                (CUmemGenericAllocationHandle)rep->cu_mem_import_from_shareable_handle->handle;
        else
            rc = CUDA_ERROR_UNKNOWN;
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                          CUmemAllocationHandleType handleType,
                                          unsigned long long flags)
{
    if (!handle_out)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = handle_type(handleType);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuMemPoolExportToShareableHandleRequest rq =
        SLUICE__CUDA__CU_MEM_POOL_EXPORT_TO_SHAREABLE_HANDLE_REQUEST__INIT;
    rq.handle_out = TOKEN_BYTES;
    rq.pool = (uint64_t)(uintptr_t)pool;
    rq.handle_type = (uint32_t)handleType;
    rq.flags = flags;
    SL_FE_SET(cuMemPoolExportToShareableHandle, &call, &rq);
    return export_call(&call, SHARE_POOL, (int *)handle_out);
}

CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                            CUmemAllocationHandleType handleType,
                                            unsigned long long flags)
{
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = handle_type(handleType);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint8_t token[TOKEN_BYTES];
    if (share_read(handle, SHARE_POOL, token) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuMemPoolImportFromShareableHandleRequest rq =
        SLUICE__CUDA__CU_MEM_POOL_IMPORT_FROM_SHAREABLE_HANDLE_REQUEST__INIT;
    rq.handle = TOKEN_BYTES;
    rq.handle_type = (uint32_t)handleType;
    rq.flags = flags;
    SL_FE_SET(cuMemPoolImportFromShareableHandle, &call, &rq);
    Sluice__Wire__Reply *rep;
    rc = import_call(&call, token, &rep);
    if (rc == CUDA_SUCCESS) {
        if (SL_FE_REPLY(cuMemPoolImportFromShareableHandle, rep))
            *pool_out =
                (CUmemoryPool)(uintptr_t)rep->cu_mem_pool_import_from_shareable_handle->pool_out;
        else
            rc = CUDA_ERROR_UNKNOWN;
        sl_fe_reply_free(rep);
    }
    return rc;
}

CUresult cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
                                CUmemPoolPtrExportData *shareData)
{
    if (!ptr_out || !shareData)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuMemPoolImportPointerRequest rq =
        SLUICE__CUDA__CU_MEM_POOL_IMPORT_POINTER_REQUEST__INIT;
    rq.pool = (uint64_t)(uintptr_t)pool;
    rq.share_data.data = (uint8_t *)shareData;
    rq.share_data.len = sizeof *shareData;
    SL_FE_SET(cuMemPoolImportPointer, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            if (SL_FE_REPLY(cuMemPoolImportPointer, rep))
                *ptr_out = (CUdeviceptr)rep->cu_mem_pool_import_pointer->ptr_out;
            else
                rc = CUDA_ERROR_UNKNOWN;
        }
        sl_fe_reply_free(rep);
    }
    return rc;
}
