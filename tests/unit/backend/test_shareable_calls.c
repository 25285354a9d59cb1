/* The shareable handle handlers (backend/api/shareable.c) through the dispatch table, with the
 * broker wired to a registry in this process (the parent's side, daemon/ipc_tokens.c; the
 * SCM_RIGHTS copy a dup) and a driver of test functions whose descriptors are memfds: the guest
 * gets a token, never a descriptor; the driver's import sees a descriptor of the exported file
 * only in a session of the exporter's instance; another instance's token, a forged one, another
 * kind's or one whose exporter released or ended is CUDA_ERROR_INVALID_VALUE and the driver never
 * sees it; imported memory is not counted; handle types other than POSIX file descriptors are
 * refused; every descriptor is closed (counted in /proc/self/fd). */
#define _GNU_SOURCE 1
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "session/bulk_pool.h"
#include "api/vmm.h"
#include "daemon/broker.h"
#include "daemon/ipc_tokens.h"
#include "session/devices.h"
#include "session/handles.h"
#include "session/ranges.h"
#include "session/session.h"
#include "session/state.h"
#include "sluice/backend_dispatch.h"

#define INST_A   "11111111-1111-1111-1111-111111111111"
#define INST_B   "22222222-2222-2222-2222-222222222222"
#define EXPORTED 0x300000001000ull
#define IMPORTED 0x7f0000000000ull
#define POOL     ((void *)0x9000)
#define ALLOC    ((void *)0xa000)
#define FD_TYPE  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

static struct be_devices no_devs;
static be_ipc_tokens *g_reg;
static be_broker *g_broker;
static const sl_be_session *g_asking;
static ino_t g_pool_ino, g_alloc_ino; /* the files the driver exported */
static int g_imports;                 /* the driver's imports that got a descriptor */

static int send_to_parent(const void *msg, size_t len, int fd)
{
    struct be_ipc_token_ans ans;
    int out = -1;
    be_ipc_tokens_serve_fd(g_reg, g_asking->instance, g_asking->id, msg, len,
                           fd >= 0 ? dup(fd) : -1, &ans, &out);
    return be_broker_answer(g_broker, &ans, sizeof ans, out);
}

static ino_t ino(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n - 1;
}

static CUresult pool_export(void *out, CUmemoryPool pool, CUmemAllocationHandleType t,
                            unsigned long long flags)
{
    if (pool != POOL || t != FD_TYPE || flags)
        return CUDA_ERROR_INVALID_VALUE;
    int fd = memfd_create("driver-pool", 0);
    if (!g_pool_ino) /* the registry keeps the first descriptor of a pool exported again */
        g_pool_ino = ino(fd);
    *(int *)out = fd;
    return CUDA_SUCCESS;
}

static CUresult pool_import(CUmemoryPool *pool, void *os, CUmemAllocationHandleType t,
                            unsigned long long flags)
{
    (void)flags;
    if (t != FD_TYPE || ino((int)(intptr_t)os) != g_pool_ino)
        return CUDA_ERROR_INVALID_VALUE;
    g_imports++;
    *pool = (CUmemoryPool)0x9100;
    return CUDA_SUCCESS;
}

static CUresult pool_destroy(CUmemoryPool pool)
{
    (void)pool;
    return CUDA_SUCCESS;
}

static CUresult alloc_export(void *out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType t,
                             unsigned long long flags)
{
    if (h != (CUmemGenericAllocationHandle)(uintptr_t)ALLOC || t != FD_TYPE || flags)
        return CUDA_ERROR_INVALID_VALUE;
    int fd = memfd_create("driver-alloc", 0);
    g_alloc_ino = ino(fd);
    *(int *)out = fd;
    return CUDA_SUCCESS;
}

static CUresult alloc_import(CUmemGenericAllocationHandle *h, void *os, CUmemAllocationHandleType t)
{
    if (t != FD_TYPE || ino((int)(intptr_t)os) != g_alloc_ino)
        return CUDA_ERROR_INVALID_VALUE;
    g_imports++;
    *h = 0xa100;
    return CUDA_SUCCESS;
}

static CUresult release(CUmemGenericAllocationHandle h)
{
    (void)h;
    return CUDA_SUCCESS;
}

static CUresult ptr_export(CUmemPoolPtrExportData *d, CUdeviceptr p)
{
    memset(d, 0x77, sizeof *d);
    memcpy(d->reserved, &p, sizeof p);
    return CUDA_SUCCESS;
}

static CUresult ptr_import(CUdeviceptr *p, CUmemoryPool pool, CUmemPoolPtrExportData *d)
{
    CUdeviceptr was;
    memcpy(&was, d->reserved, sizeof was);
    if (pool != (CUmemoryPool)0x9100 || was != EXPORTED)
        return CUDA_ERROR_INVALID_VALUE;
    g_imports++;
    *p = IMPORTED;
    return CUDA_SUCCESS;
}

static CUresult mem_free(CUdeviceptr p)
{
    (void)p;
    return CUDA_SUCCESS;
}

static CUresult range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    *base = p;
    *size = 1 << 20;
    return CUDA_SUCCESS;
}

static struct sl_driver_api api = {
    .cuMemPoolExportToShareableHandle = pool_export,
    .cuMemPoolImportFromShareableHandle = pool_import,
    .cuMemPoolDestroy = pool_destroy,
    .cuMemExportToShareableHandle = alloc_export,
    .cuMemImportFromShareableHandle = alloc_import,
    .cuMemRelease = release,
    .cuMemPoolExportPointer = ptr_export,
    .cuMemPoolImportPointer = ptr_import,
    .cuMemFree_v2 = mem_free,
    .cuMemGetAddressRange_v2 = range,
};

static sl_be_session *session(uint64_t id, const char *instance, be_broker *b)
{
    sl_be_session *s = be_session_new(id, &api, &no_devs);
    assert_non_null(s);
    strcpy(s->instance, instance);
    s->broker = b;
    return s;
}

/* Runs call in s with in[in_len] as its bulk; the reply's bulk (the token) into out[64]. */
static CUresult run(sl_be_session *s, Sluice__Wire__Call *call, Sluice__Wire__Reply *reply,
                    const uint8_t *in, size_t in_len, uint8_t *out)
{
    g_asking = s;
    struct sl_be_call c = {
        .s = s, .api = &api, .call = call, .reply = reply, .in = in, .in_len = in_len};
    CUresult rc = sl_be_dispatch(sl_be_table, &c);
    if (rc == CUDA_SUCCESS && out) {
        assert_int_equal(c.out_len, 64);
        memcpy(out, c.out, 64);
    }
    be_bulk_free(c.out); /* a slot (session/bulk_pool.c) or malloc'd */
    return rc;
}

static CUresult export_pool(sl_be_session *s, uint64_t pool, uint32_t type, uint8_t tok[64])
{
    Sluice__Cuda__CuMemPoolExportToShareableHandleRequest rq =
        SLUICE__CUDA__CU_MEM_POOL_EXPORT_TO_SHAREABLE_HANDLE_REQUEST__INIT;
    rq.handle_out = 64;
    rq.pool = pool;
    rq.handle_type = type;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuMemPoolExportToShareableHandle;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEM_POOL_EXPORT_TO_SHAREABLE_HANDLE;
    call.cu_mem_pool_export_to_shareable_handle = &rq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    CUresult rc = run(s, &call, &reply, NULL, 0, tok);
    sl_be_reply_clear(&reply);
    return rc;
}

static CUresult import_pool(sl_be_session *s, const uint8_t tok[64], uint64_t *pool)
{
    Sluice__Cuda__CuMemPoolImportFromShareableHandleRequest rq =
        SLUICE__CUDA__CU_MEM_POOL_IMPORT_FROM_SHAREABLE_HANDLE_REQUEST__INIT;
    rq.handle = 64;
    rq.handle_type = FD_TYPE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuMemPoolImportFromShareableHandle;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEM_POOL_IMPORT_FROM_SHAREABLE_HANDLE;
    call.cu_mem_pool_import_from_shareable_handle = &rq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    CUresult rc = run(s, &call, &reply, tok, 64, NULL);
    if (rc == CUDA_SUCCESS)
        *pool = reply.cu_mem_pool_import_from_shareable_handle->pool_out;
    sl_be_reply_clear(&reply);
    return rc;
}

static CUresult export_alloc(sl_be_session *s, uint64_t h, uint8_t tok[64])
{
    Sluice__Cuda__CuMemExportToShareableHandleRequest rq =
        SLUICE__CUDA__CU_MEM_EXPORT_TO_SHAREABLE_HANDLE_REQUEST__INIT;
    rq.shareable_handle = 64;
    rq.handle = h;
    rq.handle_type = FD_TYPE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuMemExportToShareableHandle;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEM_EXPORT_TO_SHAREABLE_HANDLE;
    call.cu_mem_export_to_shareable_handle = &rq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    CUresult rc = run(s, &call, &reply, NULL, 0, tok);
    sl_be_reply_clear(&reply);
    return rc;
}

static CUresult import_alloc(sl_be_session *s, const uint8_t tok[64], uint64_t *h)
{
    Sluice__Cuda__CuMemImportFromShareableHandleRequest rq =
        SLUICE__CUDA__CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE_REQUEST__INIT;
    rq.os_handle = 64;
    rq.sh_handle_type = FD_TYPE;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuMemImportFromShareableHandle;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE;
    call.cu_mem_import_from_shareable_handle = &rq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    CUresult rc = run(s, &call, &reply, tok, 64, NULL);
    if (rc == CUDA_SUCCESS)
        *h = reply.cu_mem_import_from_shareable_handle->handle;
    sl_be_reply_clear(&reply);
    return rc;
}

static CUresult release_alloc(sl_be_session *s, uint64_t h)
{
    Sluice__Cuda__CuMemReleaseRequest rq = SLUICE__CUDA__CU_MEM_RELEASE_REQUEST__INIT;
    rq.handle = h;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuMemRelease;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEM_RELEASE;
    call.cu_mem_release = &rq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    CUresult rc = run(s, &call, &reply, NULL, 0, NULL);
    sl_be_reply_clear(&reply);
    return rc;
}

static CUresult export_ptr(sl_be_session *s, uint64_t p, uint8_t tok[64])
{
    Sluice__Cuda__CuMemPoolExportPointerRequest rq =
        SLUICE__CUDA__CU_MEM_POOL_EXPORT_POINTER_REQUEST__INIT;
    rq.ptr = p;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuMemPoolExportPointer;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEM_POOL_EXPORT_POINTER;
    call.cu_mem_pool_export_pointer = &rq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    CUresult rc = run(s, &call, &reply, NULL, 0, NULL);
    if (rc == CUDA_SUCCESS) {
        assert_int_equal(reply.cu_mem_pool_export_pointer->share_data_out.len, 64);
        memcpy(tok, reply.cu_mem_pool_export_pointer->share_data_out.data, 64);
    }
    sl_be_reply_clear(&reply);
    return rc;
}

static CUresult import_ptr(sl_be_session *s, uint64_t pool, const uint8_t tok[64], uint64_t *p)
{
    Sluice__Cuda__CuMemPoolImportPointerRequest rq =
        SLUICE__CUDA__CU_MEM_POOL_IMPORT_POINTER_REQUEST__INIT;
    rq.pool = pool;
    rq.share_data.data = (uint8_t *)tok;
    rq.share_data.len = 64;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuMemPoolImportPointer;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEM_POOL_IMPORT_POINTER;
    call.cu_mem_pool_import_pointer = &rq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    CUresult rc = run(s, &call, &reply, NULL, 0, NULL);
    if (rc == CUDA_SUCCESS)
        *p = reply.cu_mem_pool_import_pointer->ptr_out;
    sl_be_reply_clear(&reply);
    return rc;
}

static void pools_and_pointers(void **state)
{
    (void)state;
    int before = open_fds();
    g_pool_ino = 0;
    g_reg = be_ipc_tokens_new();
    g_broker = be_broker_new(send_to_parent);
    sl_be_session *a = session(1, INST_A, g_broker), *a2 = session(2, INST_A, g_broker),
                  *b = session(3, INST_B, g_broker);
    uint64_t pool;
    assert_int_equal(be_handles_put(&a->h, SL_H_MEMPOOL, POOL, 0, 0, &pool), CUDA_SUCCESS);
    uint8_t tok[64], again[64];
    assert_int_equal(export_pool(a, pool, CU_MEM_HANDLE_TYPE_FABRIC, tok),
                     CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(export_pool(a, pool + 1000, FD_TYPE, tok), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(export_pool(a, pool, FD_TYPE, tok), CUDA_SUCCESS);
    assert_int_equal(export_pool(a, pool, FD_TYPE, again), CUDA_SUCCESS);
    assert_memory_equal(tok, again, 64); /* the same pool: the same token */
    /* the registry holds the one descriptor; the worker closed its own */
    assert_int_equal(be_ipc_tokens_fds(g_reg), 1);
    assert_int_equal(open_fds(), before + 1);

    /* another session of the instance imports the exported file */
    uint64_t ipool = 0;
    g_imports = 0;
    assert_int_equal(import_pool(a2, tok, &ipool), CUDA_SUCCESS);
    assert_int_equal(g_imports, 1);
    assert_int_equal(open_fds(), before + 1);
    /* another instance, a forged token: refused, the driver never asked */
    uint64_t x = 0;
    assert_int_equal(import_pool(b, tok, &x), CUDA_ERROR_INVALID_VALUE);
    uint8_t forged[64];
    memcpy(forged, tok, 64);
    forged[40] ^= 1;
    assert_int_equal(import_pool(a2, forged, &x), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(import_alloc(a2, tok, &x), CUDA_ERROR_INVALID_VALUE); /* a pool's token */
    assert_int_equal(g_imports, 1);

    /* a pointer of the exporter's: a token; imported into the imported pool, uncounted */
    assert_int_equal(be_mem_add(&a->mem, EXPORTED, 4096, BE_R_ALLOC, 0, 0), CUDA_SUCCESS);
    uint8_t ptok[64];
    assert_int_equal(export_ptr(a, EXPORTED + (1 << 20), ptok), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(export_ptr(a, EXPORTED, ptok), CUDA_SUCCESS);
    CUmemPoolPtrExportData real;
    ptr_export(&real, EXPORTED);
    assert_memory_not_equal(ptok, &real, 64); /* the guest never sees the real data */
    uint64_t p = 0;
    assert_int_equal(import_ptr(b, ipool, ptok, &p), CUDA_ERROR_INVALID_HANDLE); /* not b's */
    assert_int_equal(import_ptr(a2, ipool, ptok, &p), CUDA_SUCCESS);
    assert_int_equal(p, IMPORTED);
    assert_true(be_mem_contains(&a2->mem, IMPORTED, 1 << 20));
    assert_int_equal(a2->mem.counted, 0);
    assert_int_equal(import_ptr(a2, ipool, forged, &p), CUDA_ERROR_INVALID_VALUE);

    /* the exporter ended: its tokens and the descriptor are gone */
    assert_int_equal(be_ipc_tokens_drop_session(g_reg, a->id), 2);
    assert_int_equal(import_pool(a2, tok, &x), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(import_ptr(a2, ipool, ptok, &p), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(open_fds(), before);

    be_session_free(a);
    be_session_free(a2);
    be_session_free(b);
    be_broker_free(g_broker);
    be_ipc_tokens_free(g_reg);
    assert_int_equal(open_fds(), before);
}

static void allocations(void **state)
{
    (void)state;
    int before = open_fds();
    g_reg = be_ipc_tokens_new();
    g_broker = be_broker_new(send_to_parent);
    sl_be_session *a = session(1, INST_A, g_broker), *a2 = session(2, INST_A, g_broker),
                  *b = session(3, INST_B, g_broker);
    uint64_t h;
    assert_int_equal(be_handles_put(&a->h, SL_H_MEMHANDLE, ALLOC, 0, 0, &h), CUDA_SUCCESS);
    uint8_t tok[64];
    /* a handle the VMM table does not know: refused */
    assert_int_equal(export_alloc(a, h, tok), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(be_vmm_handle_imported(a, h, 2 << 20), 0);
    assert_int_equal(export_alloc(a, h, tok), CUDA_SUCCESS);
    assert_int_equal(open_fds(), before + 1);
    uint64_t ih = 0, x = 0, size = 0;
    g_imports = 0;
    assert_int_equal(import_alloc(b, tok, &x), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(import_pool(a2, tok, &x), CUDA_ERROR_INVALID_VALUE); /* an allocation's */
    assert_int_equal(g_imports, 0);
    assert_int_equal(import_alloc(a2, tok, &ih), CUDA_SUCCESS);
    assert_int_equal(g_imports, 1);
    /* the importer knows its size (mappings are bounded by it), and does not count it */
    assert_int_equal(be_vmm_handle_size(a2, ih, &size), 0);
    assert_int_equal(size, 2 << 20);
    assert_int_equal(a2->mem.counted_vmm, 0);
    assert_int_equal(release_alloc(a2, ih), CUDA_SUCCESS);
    assert_int_equal(a2->mem.counted_vmm, 0);
    /* the exporter released it: the token and the parent's descriptor are gone */
    assert_int_equal(release_alloc(a, h), CUDA_SUCCESS);
    assert_int_equal(be_ipc_tokens_fds(g_reg), 0);
    assert_int_equal(open_fds(), before);
    assert_int_equal(import_alloc(a2, tok, &x), CUDA_ERROR_INVALID_VALUE);
    be_session_free(a);
    be_session_free(a2);
    be_session_free(b);
    be_broker_free(g_broker);
    be_ipc_tokens_free(g_reg);
    assert_int_equal(open_fds(), before);
}

static void without_a_broker_refused(void **state)
{
    (void)state;
    sl_be_session *s = session(1, INST_A, NULL);
    uint64_t pool;
    assert_int_equal(be_handles_put(&s->h, SL_H_MEMPOOL, POOL, 0, 0, &pool), CUDA_SUCCESS);
    int before = open_fds();
    uint8_t tok[64] = {0};
    assert_int_equal(export_pool(s, pool, FD_TYPE, tok), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(open_fds(), before); /* the driver's descriptor closed */
    uint64_t x;
    assert_int_equal(import_pool(s, tok, &x), CUDA_ERROR_NOT_SUPPORTED);
    be_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pools_and_pointers),
        cmocka_unit_test(allocations),
        cmocka_unit_test(without_a_broker_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
