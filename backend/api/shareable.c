/* Shareable handles between the processes of one guest (issue 20; docs/security.md, "IPC
 * handles"): POSIX file descriptors of physical allocations (cuMemExportToShareableHandle,
 * cuMemImportFromShareableHandle) and of memory pools (cuMemPoolExportToShareableHandle,
 * cuMemPoolImportFromShareableHandle), and pool pointers (cuMemPoolExportPointer,
 * cuMemPoolImportPointer). A real descriptor never reaches the guest: the exporting worker hands
 * the driver's descriptor to the backend's parent with its registration (SCM_RIGHTS,
 * api/ipc_broker.c) and closes its own; the guest gets the 64-byte token, which the frontend puts
 * in a memfd of the guest (frontend/api/shareable.c). An importing worker of the same instance
 * gets a copy of the parent's descriptor back with the resolution, imports it and closes it. Pool
 * pointer export data is a token of its own (nothing to hold). Only POSIX file descriptors
 * travel; other handle types are CUDA_ERROR_NOT_SUPPORTED. Imported memory is the exporter's:
 * not counted against the importer's quota (imported allocation handles join the VMM table
 * uncounted, imported pool pointers the allocation table). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "api/ipc_broker.h"
#include "api/reply.h"
#include "api/vmm.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

#define POSIX_FD CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

/* What a token of an allocation or a pool stands for: the exporter's object (the same object
 * exported again is the same token) and the allocation's size (the importer's VMM bounds). */
struct share_real {
    uint64_t handle, size;
};

static CUresult fd_type(Sluice__Wire__Reply *reply, uint32_t type)
{
    if (type == POSIX_FD)
        return CUDA_SUCCESS;
    sl_be_detail(reply, "shareable handle type %u: only POSIX file descriptors (1) travel", type);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* The guest's token as the reply's bulk. */
static CUresult token_out(struct sl_be_call *c, const uint8_t token[BE_IPC_TOKEN_BYTES])
{
    c->out = malloc(BE_IPC_TOKEN_BYTES);
    if (!c->out)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(c->out, token, BE_IPC_TOKEN_BYTES);
    c->out_len = BE_IPC_TOKEN_BYTES;
    return CUDA_SUCCESS;
}

/* The driver's descriptor fd (closed here) registered as kind for real: the token as the reply's
 * bulk. */
static CUresult export_fd(struct sl_be_call *c, enum be_ipc_token_kind kind,
                          const struct share_real *real, int fd)
{
    uint8_t token[BE_IPC_TOKEN_BYTES];
    CUresult rc = be_ipc_export(c->s, c->reply, kind, real, sizeof *real, fd, token);
    close(fd); /* the parent has its own copy */
    if (rc == CUDA_SUCCESS)
        rc = token_out(c, token);
    OPENSSL_cleanse(token, sizeof token);
    return rc;
}

static int wants_token(struct sl_be_call *c, uint64_t asked)
{
    if (asked == BE_IPC_TOKEN_BYTES && c->in_len == 0)
        return 1;
    sl_be_detail(c->reply, "a shareable handle of %llu bytes", (unsigned long long)asked);
    return 0;
}

static int has_token(struct sl_be_call *c, uint64_t given)
{
    if (given == BE_IPC_TOKEN_BYTES && c->in_len == BE_IPC_TOKEN_BYTES)
        return 1;
    sl_be_detail(c->reply, "a shareable handle of %llu bytes", (unsigned long long)c->in_len);
    return 0;
}

CUresult be_h_cuMemExportToShareableHandle(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Cuda__CuMemExportToShareableHandleRequest *rq =
        c->call->cu_mem_export_to_shareable_handle;
    if (!wants_token(c, rq->shareable_handle))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = fd_type(c->reply, rq->handle_type);
    void *h = NULL;
    if (rc == CUDA_SUCCESS)
        rc = sl_be_handle_get(s, SL_H_MEMHANDLE, rq->handle, &h);
    struct share_real real = {(uint64_t)(uintptr_t)h, 0};
    if (rc == CUDA_SUCCESS && be_vmm_handle_size(s, rq->handle, &real.size) != 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuMemExportToShareableHandle)
        return CUDA_ERROR_NOT_SUPPORTED;
    int fd = -1;
    rc = api->cuMemExportToShareableHandle(&fd, (CUmemGenericAllocationHandle)(uintptr_t)h,
                                           POSIX_FD, rq->flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (fd < 0) {
        sl_be_detail(c->reply, "the driver exported no descriptor");
        return CUDA_ERROR_UNKNOWN;
    }
    rc = export_fd(c, BE_TOKEN_ALLOC, &real, fd);
    if (rc == CUDA_SUCCESS)
        be_vmm_handle_exported(s, rq->handle);
    return rc;
}

CUresult be_h_cuMemImportFromShareableHandle(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Cuda__CuMemImportFromShareableHandleRequest *rq =
        c->call->cu_mem_import_from_shareable_handle;
    if (!has_token(c, rq->os_handle))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = fd_type(c->reply, rq->sh_handle_type);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuMemImportFromShareableHandle || !api->cuMemRelease)
        return CUDA_ERROR_NOT_SUPPORTED;
    Sluice__Cuda__CuMemImportFromShareableHandleReply *rp =
        BE_REPLY(c->reply, cu_mem_import_from_shareable_handle,
                 SLUICE__WIRE__REPLY__OUT_CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE,
                 Sluice__Cuda__CuMemImportFromShareableHandleReply,
                 sluice__cuda__cu_mem_import_from_shareable_handle_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct share_real real;
    int fd = -1;
    rc = be_ipc_import(s, c->reply, BE_TOKEN_ALLOC, c->in, (size_t)c->in_len, &real, sizeof real,
                       &fd);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUmemGenericAllocationHandle h = 0;
    rc = api->cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd, POSIX_FD);
    close(fd);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = sl_be_handle_put(s, SL_H_MEMHANDLE, (void *)(uintptr_t)h, 0, &rp->handle);
    if (rc == CUDA_SUCCESS && be_vmm_handle_imported(s, rp->handle, real.size) != 0) {
        sl_be_handle_drop(s, SL_H_MEMHANDLE, rp->handle);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc != CUDA_SUCCESS) {
        api->cuMemRelease(h);
        rp->handle = 0;
    }
    return rc;
}

CUresult be_h_cuMemPoolExportToShareableHandle(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Cuda__CuMemPoolExportToShareableHandleRequest *rq =
        c->call->cu_mem_pool_export_to_shareable_handle;
    if (!wants_token(c, rq->handle_out))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = fd_type(c->reply, rq->handle_type);
    void *pool = NULL;
    if (rc == CUDA_SUCCESS)
        rc = rq->pool ? sl_be_handle_get(s, SL_H_MEMPOOL, rq->pool, &pool)
                      : CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuMemPoolExportToShareableHandle)
        return CUDA_ERROR_NOT_SUPPORTED;
    int fd = -1;
    rc = api->cuMemPoolExportToShareableHandle(&fd, (CUmemoryPool)pool, POSIX_FD, rq->flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (fd < 0) {
        sl_be_detail(c->reply, "the driver exported no descriptor");
        return CUDA_ERROR_UNKNOWN;
    }
    struct share_real real = {(uint64_t)(uintptr_t)pool, 0};
    return export_fd(c, BE_TOKEN_POOL, &real, fd);
}

CUresult be_h_cuMemPoolImportFromShareableHandle(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Cuda__CuMemPoolImportFromShareableHandleRequest *rq =
        c->call->cu_mem_pool_import_from_shareable_handle;
    if (!has_token(c, rq->handle))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = fd_type(c->reply, rq->handle_type);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuMemPoolImportFromShareableHandle || !api->cuMemPoolDestroy)
        return CUDA_ERROR_NOT_SUPPORTED;
    Sluice__Cuda__CuMemPoolImportFromShareableHandleReply *rp =
        BE_REPLY(c->reply, cu_mem_pool_import_from_shareable_handle,
                 SLUICE__WIRE__REPLY__OUT_CU_MEM_POOL_IMPORT_FROM_SHAREABLE_HANDLE,
                 Sluice__Cuda__CuMemPoolImportFromShareableHandleReply,
                 sluice__cuda__cu_mem_pool_import_from_shareable_handle_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct share_real real;
    int fd = -1;
    rc = be_ipc_import(s, c->reply, BE_TOKEN_POOL, c->in, (size_t)c->in_len, &real, sizeof real,
                       &fd);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUmemoryPool pool = NULL;
    rc = api->cuMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)fd, POSIX_FD, rq->flags);
    close(fd);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = sl_be_handle_put(s, SL_H_MEMPOOL, pool, 0, &rp->pool_out);
    if (rc != CUDA_SUCCESS)
        api->cuMemPoolDestroy(pool);
    return rc;
}

CUresult be_h_cuMemPoolExportPointer(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Cuda__CuMemPoolExportPointerRequest *rq = c->call->cu_mem_pool_export_pointer;
    if (!rq->ptr || sl_be_devptr_check(s, rq->ptr, 0) != CUDA_SUCCESS) {
        sl_be_detail(c->reply, "0x%llx is not in the session's device memory",
                     (unsigned long long)rq->ptr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!api->cuMemPoolExportPointer)
        return CUDA_ERROR_NOT_SUPPORTED;
    Sluice__Cuda__CuMemPoolExportPointerReply *rp = BE_REPLY(
        c->reply, cu_mem_pool_export_pointer, SLUICE__WIRE__REPLY__OUT_CU_MEM_POOL_EXPORT_POINTER,
        Sluice__Cuda__CuMemPoolExportPointerReply,
        sluice__cuda__cu_mem_pool_export_pointer_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUmemPoolPtrExportData data;
    CUresult rc = api->cuMemPoolExportPointer(&data, (CUdeviceptr)rq->ptr);
    uint8_t token[BE_IPC_TOKEN_BYTES];
    if (rc == CUDA_SUCCESS)
        rc = be_ipc_export(s, c->reply, BE_TOKEN_POOL_PTR, &data, sizeof data, -1, token);
    OPENSSL_cleanse(&data, sizeof data);
    if (rc != CUDA_SUCCESS)
        return rc;
    rp->share_data_out.data = malloc(BE_IPC_TOKEN_BYTES);
    if (!rp->share_data_out.data)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(rp->share_data_out.data, token, BE_IPC_TOKEN_BYTES);
    rp->share_data_out.len = BE_IPC_TOKEN_BYTES;
    return CUDA_SUCCESS;
}

CUresult be_h_cuMemPoolImportPointer(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Cuda__CuMemPoolImportPointerRequest *rq = c->call->cu_mem_pool_import_pointer;
    void *pool = NULL;
    CUresult rc =
        rq->pool ? sl_be_handle_get(s, SL_H_MEMPOOL, rq->pool, &pool) : CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuMemPoolImportPointer || !api->cuMemFree_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    Sluice__Cuda__CuMemPoolImportPointerReply *rp = BE_REPLY(
        c->reply, cu_mem_pool_import_pointer, SLUICE__WIRE__REPLY__OUT_CU_MEM_POOL_IMPORT_POINTER,
        Sluice__Cuda__CuMemPoolImportPointerReply,
        sluice__cuda__cu_mem_pool_import_pointer_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUmemPoolPtrExportData data;
    rc = be_ipc_import(s, c->reply, BE_TOKEN_POOL_PTR, rq->share_data.data, rq->share_data.len,
                       &data, sizeof data, NULL);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUdeviceptr p = 0;
    rc = api->cuMemPoolImportPointer(&p, (CUmemoryPool)pool, &data);
    OPENSSL_cleanse(&data, sizeof data);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* its size from the driver; not counted (the call has no quota): the exporter's memory */
    rc = sl_be_devptr_add(s, c->call->call_id, (uint64_t)p, 0);
    if (rc != CUDA_SUCCESS) {
        api->cuMemFree_v2(p);
        sl_be_detail(c->reply, "the imported pool memory at 0x%llx cannot be bounded",
                     (unsigned long long)p);
        return rc;
    }
    rp->ptr_out = (uint64_t)p;
    return CUDA_SUCCESS;
}
