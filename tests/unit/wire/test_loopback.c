/* wire.loopback: generated frontend stubs -> envelope encode/decode -> generated dispatch ->
 * a FAKE driver, and back, all in one process.
 *
 * Test doubles defined here (nothing of this is a GPU result):
 *   - fake_* functions: a fake driver (struct sl_driver_api) with one device, host-side
 *     "allocations" and heap-allocated "streams";
 *   - the sl_be_* hooks: a fake session handle table (ids 1..N, per kind);
 *   - the sl_fe_* hooks: a fake frontend runtime that loops every call through the codec. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/backend_dispatch.h"
#include "sluice/backend_handlers.h"
#include "sluice/driver_api.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

/* ---------------------------------------------------------------- fake driver */

static int fake_driver_calls;
static unsigned char fake_memset_value;
static int fake_memset_per_thread;

static CUresult fake_cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice src,
                                             CUdevice dst)
{
    fake_driver_calls++;
    *value = (int)attrib * 100 + src * 10 + dst;
    return CUDA_SUCCESS;
}

static CUresult fake_cuCtxGetFlags(unsigned int *flags)
{
    fake_driver_calls++;
    *flags = CU_CTX_SCHED_BLOCKING_SYNC;
    return CUDA_SUCCESS;
}

static char fake_pool_object;

static CUresult fake_cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    fake_driver_calls++;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *pool = (CUmemoryPool)&fake_pool_object;
    return CUDA_SUCCESS;
}

static CUresult fake_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    fake_driver_calls++;
    *dptr = (CUdeviceptr)(uintptr_t)malloc(bytesize);
    return *dptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult fake_cuMemFree_v2(CUdeviceptr dptr)
{
    fake_driver_calls++;
    free((void *)(uintptr_t)dptr);
    return CUDA_SUCCESS;
}

static CUresult fake_cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    fake_driver_calls++;
    (void)Flags;
    *phStream = (CUstream)malloc(16);
    return CUDA_SUCCESS;
}

static CUresult fake_cuStreamDestroy_v2(CUstream hStream)
{
    fake_driver_calls++;
    free(hStream);
    return CUDA_SUCCESS;
}

static CUresult fake_memsetD8Async(CUdeviceptr dst, unsigned char uc, size_t n, CUstream s, int pts)
{
    fake_driver_calls++;
    (void)s;
    memset((void *)(uintptr_t)dst, uc, n);
    fake_memset_value = uc;
    fake_memset_per_thread = pts;
    return CUDA_SUCCESS;
}

static CUresult fake_cuMemsetD8Async(CUdeviceptr d, unsigned char uc, size_t n, CUstream s)
{
    return fake_memsetD8Async(d, uc, n, s, 0);
}

static CUresult fake_cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char uc, size_t n, CUstream s)
{
    return fake_memsetD8Async(d, uc, n, s, 1);
}

static char fake_kernel_object;

static CUresult fake_cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name)
{
    fake_driver_calls++;
    (void)lib;
    if (strcmp(name, "vadd") != 0)
        return CUDA_ERROR_NOT_FOUND;
    *k = (CUkernel)&fake_kernel_object;
    return CUDA_SUCCESS;
}

static struct sl_driver_api fake_api;

/* ---------------------------------------------------------------- fake session hooks */

#define FAKE_HANDLES 64
static struct {
    enum sl_handle_kind kind;
    void *native;
    int live;
} fake_handles[FAKE_HANDLES];
static uint64_t fake_devptrs[FAKE_HANDLES];

CUresult sl_be_handle_get(sl_be_session *s, enum sl_handle_kind kind, uint64_t id, void **native)
{
    (void)s;
    if (id == 0 && kind == SL_H_STREAM) {
        *native = NULL; /* the legacy default stream */
        return CUDA_SUCCESS;
    }
    if (id == 0 || id > FAKE_HANDLES || !fake_handles[id - 1].live ||
        fake_handles[id - 1].kind != kind)
        return CUDA_ERROR_INVALID_HANDLE;
    *native = fake_handles[id - 1].native;
    return CUDA_SUCCESS;
}

CUresult sl_be_handle_put(sl_be_session *s, enum sl_handle_kind kind, void *native, uint64_t parent,
                          uint64_t *id)
{
    (void)s;
    (void)parent;
    for (uint64_t i = 0; i < FAKE_HANDLES; i++) {
        if (!fake_handles[i].live) {
            fake_handles[i].kind = kind;
            fake_handles[i].native = native;
            fake_handles[i].live = 1;
            *id = i + 1;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

void sl_be_handle_drop(sl_be_session *s, enum sl_handle_kind kind, uint64_t id)
{
    (void)s;
    (void)kind;
    if (id >= 1 && id <= FAKE_HANDLES)
        fake_handles[id - 1].live = 0;
}

CUresult sl_be_device_get(sl_be_session *s, int32_t ordinal, CUdevice *dev)
{
    (void)s;
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = 0;
    return CUDA_SUCCESS;
}

CUresult sl_be_device_put(sl_be_session *s, CUdevice dev, int32_t *ordinal)
{
    (void)s;
    *ordinal = dev;
    return CUDA_SUCCESS;
}

CUresult sl_be_devptr_check(sl_be_session *s, uint64_t ptr, uint64_t len)
{
    (void)s;
    (void)len;
    for (int i = 0; i < FAKE_HANDLES; i++)
        if (fake_devptrs[i] == ptr && ptr)
            return CUDA_SUCCESS;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult sl_be_devptr_add(sl_be_session *s, uint32_t call_id, uint64_t ptr, uint64_t len)
{
    (void)s;
    (void)call_id;
    (void)len;
    for (int i = 0; i < FAKE_HANDLES; i++) {
        if (!fake_devptrs[i]) {
            fake_devptrs[i] = ptr;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

void sl_be_devptr_release(sl_be_session *s, uint64_t ptr)
{
    (void)s;
    for (int i = 0; i < FAKE_HANDLES; i++)
        if (fake_devptrs[i] == ptr)
            fake_devptrs[i] = 0;
}

/* A fake layout for every function or kernel: two parameters (a pointer and an int), or none
 * where fake_layout_none says so */
static int fake_layout_none;

void sl_be_layout_out(sl_be_session *s, uint64_t id, size_t *n_offsets, uint64_t **offsets,
                      size_t *n_sizes, uint64_t **sizes, protobuf_c_boolean *given)
{
    (void)s;
    (void)id;
    if (fake_layout_none)
        return;
    *offsets = malloc(2 * sizeof **offsets);
    *sizes = malloc(2 * sizeof **sizes);
    assert_non_null(*offsets);
    assert_non_null(*sizes);
    (*offsets)[0] = 0;
    (*sizes)[0] = 8;
    (*offsets)[1] = 8;
    (*sizes)[1] = 4;
    *n_offsets = *n_sizes = 2;
    *given = 1;
}

/* ---------------------------------------------------------------- fake frontend runtime */

/* What the last layout seed brought */
static struct {
    int calls, given;
    uint64_t f;
    size_t n;
    uint64_t last_offset, last_size;
} fake_seed;

void sl_fe_layout_seed(uint64_t f, int given, size_t n_offsets, const uint64_t *offsets,
                       size_t n_sizes, const uint64_t *sizes)
{
    fake_seed.calls++;
    fake_seed.f = f;
    fake_seed.given = given;
    fake_seed.n = n_offsets == n_sizes ? n_offsets : (size_t)-1;
    if (given && n_offsets && n_offsets == n_sizes) {
        fake_seed.last_offset = offsets[n_offsets - 1];
        fake_seed.last_size = sizes[n_sizes - 1];
    }
}

/* The generated handlers of the calls these tests make (the backend's own table binds its hand
 * handlers too, which this test does not link). */
#define GEN(name) [SL_CALL_##name] = {SL_CALL_##name, sl_be_gen_##name}
static const struct sl_be_dispatch_entry fake_table[SL_CALL_ID_MAX + 1] = {
    GEN(cuCtxGetFlags),
    GEN(cuCtxGetLimit),
    GEN(cuDeviceGetDefaultMemPool),
    GEN(cuDeviceGetP2PAttribute),
    GEN(cuLibraryGetKernel),
    GEN(cuMemAlloc_v2),
    GEN(cuMemFree_v2),
    GEN(cuMemsetD8Async),
    GEN(cuStreamCreate),
    GEN(cuStreamDestroy_v2),
    [SL_CALL_cuGetProcAddress_v2] = {SL_CALL_cuGetProcAddress_v2, NULL},
};

static CUresult fake_dispatch(const Sluice__Wire__Call *call, Sluice__Wire__Reply *reply)
{
    struct sl_be_call c = {.api = &fake_api, .call = call, .reply = reply};
    return sl_be_dispatch(fake_table, &c);
}
static uint64_t fake_seq;
static Sluice__Wire__ServerMessage *fake_last_server_msg;
static CUresult fake_deferred;

/* Encodes the call as the frontend would, decodes it as the backend would, dispatches it,
 * and brings the reply back through the server codec. Returns the decoded ServerMessage. */
static Sluice__Wire__ServerMessage *fake_round_trip(Sluice__Wire__Call *call)
{
    sl_error e;
    Sluice__Wire__Call *calls[1] = {call};
    Sluice__Wire__CallFrame frame = SLUICE__WIRE__CALL_FRAME__INIT;
    Sluice__Wire__ClientMessage cm = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    call->seq = ++fake_seq;
    frame.n_calls = 1;
    frame.calls = calls;
    cm.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS;
    cm.calls = &frame;
    uint8_t *buf;
    size_t len;
    assert_int_equal(sl_wire_encode_client(&cm, NULL, &buf, &len, &e), SL_OK);

    Sluice__Wire__ClientMessage *in = NULL;
    assert_int_equal(sl_wire_decode_client(buf, len, NULL, &in, &e), SL_OK);
    free(buf);
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    Sluice__Wire__Reply *replies[1] = {&reply};
    Sluice__Wire__ReplyFrame rf = SLUICE__WIRE__REPLY_FRAME__INIT;
    Sluice__Wire__ServerMessage sm = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    fake_dispatch(in->calls->calls[0], &reply);
    rf.n_replies = 1;
    rf.replies = replies;
    sm.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES;
    sm.replies = &rf;
    assert_int_equal(sl_wire_encode_server(&sm, NULL, &buf, &len, &e), SL_OK);
    sl_be_reply_clear(&reply);
    sl_wire_free_client(in);

    Sluice__Wire__ServerMessage *out = NULL;
    assert_int_equal(sl_wire_decode_server(buf, len, NULL, &out, &e), SL_OK);
    free(buf);
    return out;
}

CUresult sl_fe_call(Sluice__Wire__Call *call, Sluice__Wire__Reply **reply)
{
    assert_null(fake_last_server_msg);
    fake_last_server_msg = fake_round_trip(call);
    *reply = fake_last_server_msg->replies->replies[0];
    return CUDA_SUCCESS;
}

void sl_fe_reply_free(Sluice__Wire__Reply *reply)
{
    assert_ptr_equal(reply, fake_last_server_msg->replies->replies[0]);
    sl_wire_free_server(fake_last_server_msg);
    fake_last_server_msg = NULL;
}

CUresult sl_fe_enqueue_async(Sluice__Wire__Call *call)
{
    CUresult earlier = fake_deferred;
    Sluice__Wire__ServerMessage *m = fake_round_trip(call);
    fake_deferred = (CUresult)m->replies->replies[0]->result;
    sl_wire_free_server(m);
    return earlier;
}

/* This runtime knows no allocations: every free goes synchronously. */
int sl_fe_nowait_take(const Sluice__Wire__Call *call)
{
    (void)call;
    return 0;
}

/* ---------------------------------------------------------------- tests */

static int setup(void **state)
{
    (void)state;
    memset(&fake_api, 0, sizeof fake_api);
    fake_api.cuDeviceGetP2PAttribute = fake_cuDeviceGetP2PAttribute;
    fake_api.cuCtxGetFlags = fake_cuCtxGetFlags;
    fake_api.cuDeviceGetDefaultMemPool = fake_cuDeviceGetDefaultMemPool;
    fake_api.cuMemAlloc_v2 = fake_cuMemAlloc_v2;
    fake_api.cuMemFree_v2 = fake_cuMemFree_v2;
    fake_api.cuStreamCreate = fake_cuStreamCreate;
    fake_api.cuStreamDestroy_v2 = fake_cuStreamDestroy_v2;
    fake_api.cuMemsetD8Async = fake_cuMemsetD8Async;
    fake_api.cuMemsetD8Async_ptsz = fake_cuMemsetD8Async_ptsz;
    fake_api.cuLibraryGetKernel = fake_cuLibraryGetKernel;
    fake_driver_calls = 0;
    fake_layout_none = 0;
    memset(&fake_seed, 0, sizeof fake_seed);
    return 0;
}

static void device_queries(void **state)
{
    (void)state;
    /* cuDeviceGet/GetAttribute/CtxGetDevice are answered by the frontend itself now; these
     * calls still travel. Device ordinals go through sl_be_device_get, scalar outs come back. */
    int v = -1;
    assert_int_equal(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 0),
                     CUDA_SUCCESS);
    assert_int_equal(v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED * 100);
    /* an unknown ordinal is refused by the session hook: the driver is not reached */
    int before = fake_driver_calls;
    v = -1;
    assert_int_equal(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 3),
                     CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(v, -1);
    assert_int_equal(fake_driver_calls, before);
    /* a scalar out-parameter without inputs */
    unsigned int flags = 0;
    assert_int_equal(cuCtxGetFlags(&flags), CUDA_SUCCESS);
    assert_int_equal(flags, CU_CTX_SCHED_BLOCKING_SYNC);
    /* a handle-returning call: the guest sees a wire id, not the native pointer */
    CUmemoryPool pool = NULL;
    assert_int_equal(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    assert_true((uintptr_t)pool >= 1 && (uintptr_t)pool <= FAKE_HANDLES);
    assert_ptr_not_equal(pool, (CUmemoryPool)&fake_pool_object);
    before = fake_driver_calls;
    assert_int_equal(cuDeviceGetDefaultMemPool(&pool, 7), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(fake_driver_calls, before);
}

/* cuMemAlloc_v2 as the frontend sends it when its cache has no allocation of the size (its guest
 * side is hand-written: frontend/api/alloc.c), through the generated backend handler. */
static CUresult mem_alloc(CUdeviceptr *p, size_t n)
{
    Sluice__Cuda__CuMemAllocV2Request req = SLUICE__CUDA__CU_MEM_ALLOC_V2_REQUEST__INIT;
    req.bytesize = n;
    Sluice__Wire__Call call = SL_FE_CALL(cuMemAlloc_v2, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS && SL_FE_REPLY(cuMemAlloc_v2, rep))
            *p = (CUdeviceptr)SL_FE_REPLY(cuMemAlloc_v2, rep)->dptr;
        sl_fe_reply_free(rep);
    }
    return rc;
}

/* cuMemFree_v2 as the frontend sends it (its guest side is hand-written: frontend/api/alloc.c,
 * which unmaps managed memory too), through the generated backend handler. */
static CUresult mem_free(CUdeviceptr p)
{
    Sluice__Cuda__CuMemFreeV2Request req = SLUICE__CUDA__CU_MEM_FREE_V2_REQUEST__INIT;
    req.dptr = p;
    Sluice__Wire__Call call = SL_FE_CALL(cuMemFree_v2, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    return rc;
}

static void memory_and_async_memset(void **state)
{
    (void)state;
    CUdeviceptr p = 0;
    assert_int_equal(mem_alloc(&p, 64), CUDA_SUCCESS);
    assert_true(p != 0);
    assert_int_equal(cuMemsetD8Async(p, 0x5a, 64, NULL), CUDA_SUCCESS);
    assert_int_equal(fake_memset_value, 0x5a);
    assert_int_equal(fake_memset_per_thread, 0);
    assert_int_equal(((unsigned char *)(uintptr_t)p)[63], 0x5a);
    assert_int_equal(cuMemsetD8Async_ptsz(p, 0x33, 64, NULL), CUDA_SUCCESS);
    assert_int_equal(fake_memset_per_thread, 1);
    assert_int_equal(mem_free(p), CUDA_SUCCESS);
    /* freed: the hook refuses it now, the driver is not reached */
    int before = fake_driver_calls;
    assert_int_equal(mem_free(p), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(fake_driver_calls, before);
}

static void streams_and_bad_handles(void **state)
{
    (void)state;
    CUstream s = NULL;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_true((uintptr_t)s >= 1 && (uintptr_t)s <= FAKE_HANDLES); /* the guest sees wire ids */
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    int before = fake_driver_calls;
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_ERROR_INVALID_HANDLE); /* already destroyed */
    assert_int_equal(cuStreamDestroy_v2((CUstream)(uintptr_t)999), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(fake_driver_calls, before);
}

/* A `layout` call (cuLibraryGetKernel): its reply carries the kernel's parameter layout, which
 * reaches the frontend runtime with the kernel's wire id; a backend without one says so. */
static void layout_travels_with_the_kernel(void **state)
{
    (void)state;
    CUlibrary lib = NULL;
    assert_int_equal(sl_be_handle_put(NULL, SL_H_LIBRARY, &fake_kernel_object, 0, (uint64_t *)&lib),
                     CUDA_SUCCESS);
    CUkernel k = NULL;
    assert_int_equal(cuLibraryGetKernel(&k, lib, "vadd"), CUDA_SUCCESS);
    assert_int_equal(fake_seed.calls, 1);
    assert_int_equal(fake_seed.f, (uint64_t)(uintptr_t)k);
    assert_int_equal(fake_seed.given, 1);
    assert_int_equal(fake_seed.n, 2);
    assert_int_equal(fake_seed.last_offset, 8);
    assert_int_equal(fake_seed.last_size, 4);
    /* no layout to give: the seed says so (the first launch asks slParamLayout) */
    fake_layout_none = 1;
    assert_int_equal(cuLibraryGetKernel(&k, lib, "vadd"), CUDA_SUCCESS);
    assert_int_equal(fake_seed.calls, 2);
    assert_int_equal(fake_seed.given, 0);
    assert_int_equal(fake_seed.n, 0);
    /* a failed call seeds nothing */
    assert_int_equal(cuLibraryGetKernel(&k, lib, "nope"), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(fake_seed.calls, 2);
}

static void unimplemented_calls_answer_not_supported(void **state)
{
    (void)state;
    size_t limit = 0;
    /* generated but the fake driver lacks it */
    assert_int_equal(cuCtxGetLimit(&limit, CU_LIMIT_STACK_SIZE), CUDA_ERROR_NOT_SUPPORTED);
    /* a call answered by the frontend has no handler: the dispatch says so */
    Sluice__Cuda__CuGetProcAddressV2Request req =
        SLUICE__CUDA__CU_GET_PROC_ADDRESS_V2_REQUEST__INIT;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuGetProcAddress_v2;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_GET_PROC_ADDRESS_V2;
    call.cu_get_proc_address_v2 = &req;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    assert_int_equal(fake_dispatch(&call, &reply), CUDA_ERROR_NOT_SUPPORTED);
    /* an unknown id, and a oneof that does not match the id */
    call.call_id = SL_CALL_ID_MAX + 1;
    assert_int_equal(fake_dispatch(&call, &reply), CUDA_ERROR_NOT_SUPPORTED);
    call.call_id = SL_CALL_cuCtxGetLimit; /* generated, but the args are another call's */
    assert_int_equal(fake_dispatch(&call, &reply), CUDA_ERROR_INVALID_VALUE);
    sl_be_reply_clear(&reply);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(device_queries, setup),
        cmocka_unit_test_setup(memory_and_async_memset, setup),
        cmocka_unit_test_setup(streams_and_bad_handles, setup),
        cmocka_unit_test_setup(layout_travels_with_the_kernel, setup),
        cmocka_unit_test_setup(unimplemented_calls_answer_not_supported, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
