/* sluice-backend unit tests (no GPU, no driver): the handle table, the allocation table, the
 * parameter buffer rebuild, the deferred-error state machine, image bounds, grants, and the
 * control channel against a fake agent (a ZeroMQ ROUTER) with a real backend server thread and
 * a real TLS client: hello, grant, ping, revoke ends a live session, shutdown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "session/bulk_pool.h"
#include "api/launch.h"
#include "api/module.h"
#include "bounds.h"
#include "daemon/config.h"
#include "daemon/grants.h"
#include "daemon/loop.h"
#include "session/deferred.h"
#include "session/devices.h"
#include "session/handles.h"
#include "session/ranges.h"
#include "session/session.h"
#include "session/state.h"
#include "sluice/backend_dispatch.h"
#include "sluice/backend_handlers.h"
#include "pki.h"
#include "sluice_control.pb-c.h"

static struct sl_driver_api no_api; /* every entry NULL */
static struct be_devices no_devs;

/* ---------------------------------------------------------------- handles */

static void test_handles_kinds_and_reuse(void **state)
{
    (void)state;
    sl_be_session *s = be_session_new(1, &no_api, &no_devs);
    assert_non_null(s);
    uint64_t a, b, c;
    assert_int_equal(sl_be_handle_put(s, SL_H_STREAM, (void *)0x1000, 0, &a), CUDA_SUCCESS);
    assert_int_equal(a >> 56, SL_H_STREAM);
    void *n = NULL;
    assert_int_equal(sl_be_handle_get(s, SL_H_STREAM, a, &n), CUDA_SUCCESS);
    assert_ptr_equal(n, (void *)0x1000);
    /* wrong kind */
    assert_int_equal(sl_be_handle_get(s, SL_H_EVENT, a, &n), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(sl_be_handle_get(s, SL_H_CONTEXT, a, &n), CUDA_ERROR_INVALID_CONTEXT);
    /* the same counter with another kind's bits */
    uint64_t forged = (a & BE_ID_COUNTER_MASK) | ((uint64_t)SL_H_EVENT << 56);
    assert_int_equal(sl_be_handle_get(s, SL_H_EVENT, forged, &n), CUDA_ERROR_INVALID_HANDLE);
    /* drop, then never reused */
    sl_be_handle_drop(s, SL_H_STREAM, a);
    assert_int_equal(sl_be_handle_get(s, SL_H_STREAM, a, &n), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(sl_be_handle_put(s, SL_H_STREAM, (void *)0x1000, 0, &b), CUDA_SUCCESS);
    assert_true(b != a);
    /* stream pass-through ids */
    for (uint64_t id = 0; id <= 2; id++) {
        assert_int_equal(sl_be_handle_get(s, SL_H_STREAM, id, &n), CUDA_SUCCESS);
        assert_ptr_equal(n, (void *)(uintptr_t)id);
    }
    /* a kernel id is accepted where a function is, not the reverse */
    assert_int_equal(sl_be_handle_put(s, SL_H_KERNEL, (void *)0x2000, 0, &c), CUDA_SUCCESS);
    assert_int_equal(sl_be_handle_get(s, SL_H_FUNCTION, c, &n), CUDA_SUCCESS);
    assert_ptr_equal(n, (void *)0x2000);
    uint64_t f;
    assert_int_equal(sl_be_handle_put(s, SL_H_FUNCTION, (void *)0x3000, 0, &f), CUDA_SUCCESS);
    assert_int_equal(sl_be_handle_get(s, SL_H_KERNEL, f, &n), CUDA_ERROR_INVALID_HANDLE);
    be_session_free(s);
}

static void test_handles_other_session(void **state)
{
    (void)state;
    sl_be_session *s1 = be_session_new(1, &no_api, &no_devs);
    sl_be_session *s2 = be_session_new(2, &no_api, &no_devs);
    uint64_t a, b;
    void *n;
    assert_int_equal(sl_be_handle_put(s1, SL_H_EVENT, (void *)0x10, 0, &a), CUDA_SUCCESS);
    assert_int_equal(sl_be_handle_put(s2, SL_H_EVENT, (void *)0x20, 0, &b), CUDA_SUCCESS);
    assert_true(a != b);
    assert_int_equal(sl_be_handle_get(s2, SL_H_EVENT, a, &n), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(sl_be_handle_get(s1, SL_H_EVENT, b, &n), CUDA_ERROR_INVALID_HANDLE);
    be_session_free(s1);
    be_session_free(s2);
}

static void test_handles_many_and_module_children(void **state)
{
    (void)state;
    sl_be_session *s = be_session_new(1, &no_api, &no_devs);
    static uint64_t ids[20000];
    for (int i = 0; i < 20000; i++)
        assert_int_equal(sl_be_handle_put(s, SL_H_EVENT, (void *)(uintptr_t)(i + 1), 0, &ids[i]),
                         CUDA_SUCCESS);
    for (int i = 0; i < 20000; i += 2)
        sl_be_handle_drop(s, SL_H_EVENT, ids[i]);
    void *n;
    for (int i = 0; i < 20000; i++)
        assert_int_equal(sl_be_handle_get(s, SL_H_EVENT, ids[i], &n),
                         i % 2 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
    /* functions made after a module lookup belong to it and go with it */
    uint64_t mod, fn;
    assert_int_equal(sl_be_handle_put(s, SL_H_MODULE, (void *)0x77, 0, &mod), CUDA_SUCCESS);
    assert_int_equal(sl_be_handle_get(s, SL_H_MODULE, mod, &n), CUDA_SUCCESS);
    assert_int_equal(sl_be_handle_put(s, SL_H_FUNCTION, (void *)0x78, mod, &fn), CUDA_SUCCESS);
    assert_int_equal(be_mem_add(&s->mem, 0x100000, 64, BE_R_GLOBAL, 0, mod), CUDA_SUCCESS);
    sl_be_handle_drop(s, SL_H_MODULE, mod);
    assert_int_equal(sl_be_handle_get(s, SL_H_FUNCTION, fn, &n), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(sl_be_devptr_check(s, 0x100000, 1), CUDA_ERROR_INVALID_VALUE);
    be_session_free(s);
}

static void test_contexts(void **state)
{
    (void)state;
    struct be_device dev = {.dev = 0, .name = "fake"};
    struct be_devices devs = {.driver_version = 13000, .count = 1, .dev = &dev};
    sl_be_session *s = be_session_new(1, &no_api, &devs);
    assert_int_equal(s->primary_ids[0] >> 56, SL_H_CONTEXT);
    void *n;
    /* no driver: creating the lazy primary context fails cleanly */
    assert_int_equal(sl_be_handle_get(s, SL_H_CONTEXT, s->primary_ids[0], &n),
                     CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(sl_be_handle_get(s, SL_H_CONTEXT, 12345, &n), CUDA_ERROR_INVALID_CONTEXT);
    CUdevice d;
    assert_int_equal(sl_be_device_get(s, 0, &d), CUDA_SUCCESS);
    assert_int_equal(sl_be_device_get(s, 1, &d), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(sl_be_device_get(s, -1, &d), CUDA_ERROR_INVALID_DEVICE);
    be_session_free(s);
}

/* ---------------------------------------------------------------- occupancy */

static CUfunction occ_seen;
static CUresult occ_max_active(int *n, CUfunction f, int block, size_t smem, unsigned flags)
{
    (void)smem;
    (void)flags;
    occ_seen = f;
    *n = 2048 / block;
    return CUDA_SUCCESS;
}

/* Runs one call through the backend's dispatch table (no bulk). */
static CUresult dispatch(sl_be_session *s, const struct sl_driver_api *api,
                         const Sluice__Wire__Call *call, Sluice__Wire__Reply *reply)
{
    struct sl_be_call c = {.s = s, .api = api, .call = call, .reply = reply};
    CUresult rc = sl_be_dispatch(sl_be_table, &c);
    be_bulk_free(c.out); /* a slot (session/bulk_pool.c) or malloc'd */
    return rc;
}

/* backend/api/occupancy.c: a kernel id is accepted as the function (the native CUkernel reaches the
 * driver), a guest callback id is refused (the frontend computes that case), the cluster calls
 * check the attribute bulk against the config. */
static void test_occupancy_handlers(void **state)
{
    (void)state;
    struct sl_driver_api api = {0};
    api.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags = occ_max_active;
    sl_be_session *s = be_session_new(1, &api, &no_devs);
    uint64_t kid;
    assert_int_equal(be_handles_put(&s->h, SL_H_KERNEL, (void *)0x5150, 0, 0, &kid), CUDA_SUCCESS);

    Sluice__Cuda__CuOccupancyMaxActiveBlocksPerMultiprocessorRequest rq =
        SLUICE__CUDA__CU_OCCUPANCY_MAX_ACTIVE_BLOCKS_PER_MULTIPROCESSOR_REQUEST__INIT;
    rq.func = kid;
    rq.block_size = 256;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuOccupancyMaxActiveBlocksPerMultiprocessor;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_OCCUPANCY_MAX_ACTIVE_BLOCKS_PER_MULTIPROCESSOR;
    call.cu_occupancy_max_active_blocks_per_multiprocessor = &rq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    assert_int_equal(dispatch(s, &api, &call, &reply), CUDA_SUCCESS);
    assert_int_equal(reply.cu_occupancy_max_active_blocks_per_multiprocessor->num_blocks, 8);
    assert_ptr_equal(occ_seen, (void *)0x5150);
    sl_be_reply_clear(&reply);
    rq.func = kid + 1000; /* unknown */
    reply = (Sluice__Wire__Reply)SLUICE__WIRE__REPLY__INIT;
    assert_int_equal(dispatch(s, &api, &call, &reply), CUDA_ERROR_INVALID_HANDLE);
    sl_be_reply_clear(&reply);

    Sluice__Cuda__CuOccupancyMaxPotentialBlockSizeRequest pq =
        SLUICE__CUDA__CU_OCCUPANCY_MAX_POTENTIAL_BLOCK_SIZE_REQUEST__INIT;
    pq.func = kid;
    pq.block_size_to_dynamic_smem_size = 7; /* a guest callback: never run here */
    call = (Sluice__Wire__Call)SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuOccupancyMaxPotentialBlockSize;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_OCCUPANCY_MAX_POTENTIAL_BLOCK_SIZE;
    call.cu_occupancy_max_potential_block_size = &pq;
    reply = (Sluice__Wire__Reply)SLUICE__WIRE__REPLY__INIT;
    assert_int_equal(dispatch(s, &api, &call, &reply), CUDA_ERROR_INVALID_VALUE);
    sl_be_reply_clear(&reply);

    CUlaunchConfig cfg = {0};
    cfg.blockDimX = 128;
    cfg.numAttrs = 1; /* but no attribute bytes follow */
    Sluice__Cuda__CuOccupancyMaxActiveClustersRequest cq =
        SLUICE__CUDA__CU_OCCUPANCY_MAX_ACTIVE_CLUSTERS_REQUEST__INIT;
    cq.func = kid;
    cq.config.data = (uint8_t *)&cfg;
    cq.config.len = sizeof cfg;
    call = (Sluice__Wire__Call)SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuOccupancyMaxActiveClusters;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_OCCUPANCY_MAX_ACTIVE_CLUSTERS;
    call.cu_occupancy_max_active_clusters = &cq;
    reply = (Sluice__Wire__Reply)SLUICE__WIRE__REPLY__INIT;
    assert_int_equal(dispatch(s, &api, &call, &reply), CUDA_ERROR_INVALID_VALUE);
    sl_be_reply_clear(&reply);
    cq.config.len = sizeof cfg - 1;
    reply = (Sluice__Wire__Reply)SLUICE__WIRE__REPLY__INIT;
    assert_int_equal(dispatch(s, &api, &call, &reply), CUDA_ERROR_INVALID_VALUE);
    sl_be_reply_clear(&reply);
    be_session_free(s);
}

/* ---------------------------------------------------------------- security */

/* Multicast, address-range handles and allocation handle retention are never dispatched to the
 * driver. CUDA IPC, shareable handles and pool pointers are, through the token broker's hand
 * handlers only (api/ipc.c, api/shareable.c: a real handle never reaches the guest), and the
 * legacy cuIpcOpenMemHandle stays refused. */
static void test_security_calls_have_no_handler(void **state)
{
    (void)state;
    static const uint32_t ids[] = {
        SL_CALL_cuIpcOpenMemHandle,          SL_CALL_cuMemGetHandleForAddressRange,
        SL_CALL_cuMemRetainAllocationHandle, SL_CALL_cuMulticastCreate,
        SL_CALL_cuMulticastAddDevice,        SL_CALL_cuMulticastBindMem,
        SL_CALL_cuMulticastBindAddr,         SL_CALL_cuMulticastUnbind,
        SL_CALL_cuMulticastGetGranularity,
    };
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        assert_null(sl_be_table[ids[i]].handler);
        assert_non_null(sl_call_lookup(ids[i])->refuse);
    }
    static const struct {
        uint32_t id;
        CUresult (*handler)(struct sl_be_call *);
    } brokered[] = {
        {SL_CALL_cuIpcGetMemHandle, be_h_cuIpcGetMemHandle},
        {SL_CALL_cuIpcOpenMemHandle_v2, be_h_cuIpcOpenMemHandle_v2},
        {SL_CALL_cuIpcGetEventHandle, be_h_cuIpcGetEventHandle},
        {SL_CALL_cuIpcOpenEventHandle, be_h_cuIpcOpenEventHandle},
        {SL_CALL_cuMemPoolExportPointer, be_h_cuMemPoolExportPointer},
        {SL_CALL_cuMemPoolImportPointer, be_h_cuMemPoolImportPointer},
        {SL_CALL_cuMemPoolExportToShareableHandle, be_h_cuMemPoolExportToShareableHandle},
        {SL_CALL_cuMemPoolImportFromShareableHandle, be_h_cuMemPoolImportFromShareableHandle},
        {SL_CALL_cuMemExportToShareableHandle, be_h_cuMemExportToShareableHandle},
        {SL_CALL_cuMemImportFromShareableHandle, be_h_cuMemImportFromShareableHandle},
    };
    for (size_t i = 0; i < sizeof brokered / sizeof *brokered; i++) {
        assert_null(sl_call_lookup(brokered[i].id)->refuse);
        assert_true(sl_be_table[brokered[i].id].handler == brokered[i].handler);
    }
}

/* The static dispatch table: every call that travels has a handler (generated or bound by
 * name), every call that does not (refused, local, sent as other calls) has none. */
static void test_every_sent_call_has_a_handler(void **state)
{
    (void)state;
    size_t sent = 0;
    for (uint32_t id = 1; id <= SL_CALL_ID_MAX; id++) {
        const struct sl_call_info *ci = sl_call_lookup(id);
        if (!ci) {
            assert_null(sl_be_table[id].handler);
            continue;
        }
        assert_int_equal(sl_be_table[id].call_id, id);
        if (ci->flags & SL_CALL_SENT) {
            if (!sl_be_table[id].handler)
                fail_msg("%s travels but has no backend handler", ci->name);
            sent++;
        } else if (sl_be_table[id].handler) {
            fail_msg("%s does not travel but has a backend handler", ci->name);
        }
    }
    assert_true(sent > 300);
}

/* ---------------------------------------------------------------- allocations */

/* The device bytes one side of a rectangle copy touches, and overflow refused. */
static void test_rect_extent(void **state)
{
    (void)state;
    uint64_t start = 0, span = 0;
    /* 2D: 64 bytes of 16 rows 256 apart, from byte 8 of row 2 */
    assert_true(be_rect_extent(0x10000, 8, 2, 0, 256, 0, 64, 16, 1, &start, &span));
    assert_int_equal(start, 0x10000 + 2 * 256 + 8);
    assert_int_equal(span, 15 * 256 + 64);
    /* 3D: 2 slices of 4 rows 128 apart, slices 8 rows apart, from slice 1 */
    assert_true(be_rect_extent(0x20000, 0, 0, 1, 128, 8, 32, 4, 2, &start, &span));
    assert_int_equal(start, 0x20000 + 8 * 128);
    assert_int_equal(span, (1 * 8 + 3) * 128 + 32);
    assert_false(be_rect_extent(0x1000, 0, 0, 0, UINT64_MAX / 2, 0, 1, 4, 1, &start, &span));
    assert_false(be_rect_extent(UINT64_MAX - 4, 8, 0, 0, 16, 0, 1, 1, 1, &start, &span));
    assert_false(be_rect_extent(0, 0, UINT64_MAX, 1, 1, UINT64_MAX, 1, 1, 1, &start, &span));
}

static void test_memory_ranges(void **state)
{
    (void)state;
    struct be_mem m;
    be_mem_init(&m, 16);
    assert_int_equal(be_mem_add(&m, 0x1000, 0x100, BE_R_ALLOC, 1, 0), CUDA_SUCCESS);
    assert_int_equal(be_mem_add(&m, 0x3000, 0x100, BE_R_ALLOC, 1, 0), CUDA_SUCCESS);
    assert_true(be_mem_contains(&m, 0x1000, 0x100));
    assert_true(be_mem_contains(&m, 0x1080, 0x80));
    assert_true(be_mem_contains(&m, 0x10ff, 0));
    assert_false(be_mem_contains(&m, 0x1080, 0x81));
    assert_false(be_mem_contains(&m, 0x1100, 0));
    assert_false(be_mem_contains(&m, 0xfff, 1));
    assert_false(be_mem_contains(&m, 0x2000, 1));
    /* spanning two allocations is refused */
    assert_false(be_mem_contains(&m, 0x10f0, 0x3000));
    /* wrap-around: ptr + len overflows */
    assert_false(be_mem_contains(&m, 0x1080, UINT64_MAX - 0x10));
    assert_int_equal(be_mem_add(&m, UINT64_MAX - 0x10, 0x100, BE_R_ALLOC, 1, 0),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(be_mem_add(&m, 0x5000, 0, BE_R_ALLOC, 1, 0), CUDA_ERROR_INVALID_VALUE);
    /* an identical range is kept once; an overlapping one replaces */
    assert_int_equal(be_mem_add(&m, 0x1000, 0x100, BE_R_GLOBAL, 1, 9), CUDA_SUCCESS);
    assert_int_equal(m.n, 2);
    assert_int_equal(be_mem_add(&m, 0x1080, 0x2000, BE_R_ALLOC, 2, 0), CUDA_SUCCESS);
    assert_int_equal(m.n, 1);
    assert_true(be_mem_contains(&m, 0x1080, 0x2000));
    assert_false(be_mem_contains(&m, 0x1000, 1));
    /* free only at the base */
    assert_int_equal(be_mem_remove(&m, 0x1081), 0);
    assert_int_equal(be_mem_remove(&m, 0x1080), 1);
    assert_int_equal(m.n, 0);
    /* owners and parents */
    be_mem_add(&m, 0x1000, 0x10, BE_R_ALLOC, 1, 0);
    be_mem_add(&m, 0x2000, 0x10, BE_R_GLOBAL, 2, 7);
    be_mem_add(&m, 0x3000, 0x10, BE_R_ALLOC, 2, 0);
    be_mem_remove_parent(&m, 7);
    assert_false(be_mem_contains(&m, 0x2000, 1));
    be_mem_remove_owner(&m, 2);
    assert_false(be_mem_contains(&m, 0x3000, 1));
    assert_true(be_mem_contains(&m, 0x1000, 0x10));
    /* the limit */
    for (uint64_t i = 0; i < 15; i++)
        assert_int_equal(be_mem_add(&m, 0x100000 + i * 0x100, 0x10, BE_R_ALLOC, 1, 0),
                         CUDA_SUCCESS);
    assert_int_equal(be_mem_add(&m, 0x900000, 0x10, BE_R_ALLOC, 1, 0), CUDA_ERROR_OUT_OF_MEMORY);
    be_mem_free(&m);
}

static void test_devptr_hooks_isolated(void **state)
{
    (void)state;
    sl_be_session *a = be_session_new(1, &no_api, &no_devs);
    sl_be_session *b = be_session_new(2, &no_api, &no_devs);
    assert_int_equal(sl_be_devptr_add(a, SL_CALL_cuMemAlloc_v2, 0x7000000, 4096), CUDA_SUCCESS);
    assert_int_equal(sl_be_devptr_check(a, 0x7000000, 4096), CUDA_SUCCESS);
    assert_int_equal(sl_be_devptr_check(b, 0x7000000, 1), CUDA_ERROR_INVALID_VALUE);
    /* unknown size and no driver to ask: not handed out */
    assert_int_equal(sl_be_devptr_add(a, SL_CALL_cuMemAllocPitch_v2, 0x9000000, 0),
                     CUDA_ERROR_NOT_SUPPORTED);
    sl_be_devptr_release(a, 0x7000000);
    assert_int_equal(sl_be_devptr_check(a, 0x7000000, 1), CUDA_ERROR_INVALID_VALUE);
    be_session_free(a);
    be_session_free(b);
}

/* ---------------------------------------------------------------- params */

static void test_param_rebuild(void **state)
{
    (void)state;
    uint64_t off[3] = {0, 8, 16}, sz[3] = {8, 4, 8};
    struct be_layout l = {3, 24, off, sz};
    uint8_t buf[24] = {0};
    void *p[3];
    assert_int_equal(be_params_rebuild(&l, buf, 24, p), CUDA_SUCCESS);
    assert_ptr_equal(p[0], buf);
    assert_ptr_equal(p[1], buf + 8);
    assert_ptr_equal(p[2], buf + 16);
    assert_int_equal(be_params_rebuild(&l, buf, 23, p), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(be_params_rebuild(&l, buf, 25, p), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(be_params_rebuild(&l, NULL, 24, p), CUDA_ERROR_INVALID_VALUE);
    /* a layout that lies about its extent */
    uint64_t off2[1] = {UINT64_MAX - 2}, sz2[1] = {8};
    struct be_layout bad = {1, 24, off2, sz2};
    assert_int_equal(be_params_rebuild(&bad, buf, 24, p), CUDA_ERROR_INVALID_VALUE);
    struct be_layout none = {0, 0, NULL, NULL};
    assert_int_equal(be_params_rebuild(&none, NULL, 0, p), CUDA_SUCCESS);
}

/* ---------------------------------------------------------------- deferred errors */

static void test_deferred(void **state)
{
    (void)state;
    struct be_deferred d = {0};
    uint64_t fs = 0;
    int32_t r = CUDA_SUCCESS;
    be_deferred_stamp(&d, 10, &fs, &r);
    assert_int_equal(fs, 0);
    assert_int_equal(r, CUDA_SUCCESS);
    be_deferred_async(&d, 5, CUDA_SUCCESS);
    be_deferred_async(&d, 6, CUDA_ERROR_INVALID_VALUE);
    be_deferred_async(&d, 7, CUDA_ERROR_INVALID_HANDLE); /* the first failure wins */
    be_deferred_stamp(&d, 6, &fs, &r); /* a late reply of a wait made before it: not yet */
    assert_int_equal(fs, 0);
    be_deferred_stamp(&d, 8, &fs, &r);
    assert_int_equal(fs, 6);
    assert_int_equal(r, CUDA_ERROR_INVALID_VALUE);
    /* reported once */
    fs = 0;
    r = CUDA_SUCCESS;
    be_deferred_stamp(&d, 10, &fs, &r);
    assert_int_equal(fs, 0);
    assert_int_equal(r, CUDA_SUCCESS);
    /* a failing synchronous call keeps its own result, failed_seq still says which */
    be_deferred_async(&d, 9, CUDA_ERROR_LAUNCH_FAILED);
    r = CUDA_ERROR_OUT_OF_MEMORY;
    be_deferred_stamp(&d, 10, &fs, &r);
    assert_int_equal(fs, 9);
    assert_int_equal(r, CUDA_ERROR_OUT_OF_MEMORY);
    assert_true(be_is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS));
    assert_true(be_is_sticky(CUDA_ERROR_LAUNCH_FAILED));
    assert_false(be_is_sticky(CUDA_ERROR_INVALID_VALUE));
}

/* ---------------------------------------------------------------- images */

static void test_image_bounds(void **state)
{
    (void)state;
    uint8_t fb[64] = {0};
    uint32_t magic = 0xba55ed50u;
    uint16_t ver = 1, hs = 16;
    uint64_t fs = 48;
    memcpy(fb, &magic, 4);
    memcpy(fb + 4, &ver, 2);
    memcpy(fb + 6, &hs, 2);
    memcpy(fb + 8, &fs, 8);
    assert_int_equal(be_image_validate(fb, 64, 2), CUDA_SUCCESS);
    assert_int_equal(be_image_validate(fb, 64, 1), CUDA_SUCCESS);
    assert_int_equal(be_image_validate(fb, 63, 2), CUDA_ERROR_INVALID_IMAGE);
    fs = 1u << 30;
    memcpy(fb + 8, &fs, 8);
    assert_int_equal(be_image_validate(fb, 64, 2), CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(be_image_validate((const uint8_t *)".version 8.0", 12, 4),
                     CUDA_ERROR_INVALID_IMAGE); /* no NUL */
    assert_int_equal(be_image_validate((const uint8_t *)".version 8.0", 13, 4), CUDA_SUCCESS);
    uint8_t elf[64] = {0x7f, 'E', 'L', 'F', 2};
    assert_int_equal(be_image_validate(elf, 64, 3), CUDA_SUCCESS);
    uint64_t shoff = 1u << 20;
    uint16_t shnum = 3, shent = 64;
    memcpy(elf + 0x28, &shoff, 8);
    memcpy(elf + 0x3a, &shent, 2);
    memcpy(elf + 0x3c, &shnum, 2);
    assert_int_equal(be_image_validate(elf, 64, 3), CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(be_image_validate(elf, 64, 9), CUDA_ERROR_INVALID_VALUE);
}

/* ---------------------------------------------------------------- grants */

static void test_grants(void **state)
{
    (void)state;
    struct be_grants *g = be_grants_new();
    char path[] = "/tmp/sluice-allow-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "# granted\nuuid-a\n  uuid-b  # comment\n\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    sl_error e;
    assert_int_equal(be_grants_load_allow(g, path, &e), SL_OK);
    unlink(path);
    sl_peer_identity id = {.authenticated = 1};
    char why[200];
    strcpy(id.instance_id, "uuid-b");
    strcpy(id.project_id, "proj");
    assert_int_equal(be_grants_check(g, "proj", &id, why, sizeof why), 0);
    assert_int_not_equal(be_grants_check(g, "other", &id, why, sizeof why), 0);
    strcpy(id.instance_id, "uuid-c");
    assert_int_not_equal(be_grants_check(g, "proj", &id, why, sizeof why), 0);
    /* pinned fingerprint */
    uint8_t sha[32];
    memset(sha, 0xab, 32);
    be_grants_add(g, "uuid-c", sha, 32, 0);
    for (int i = 0; i < 32; i++)
        snprintf(id.fingerprint + 2 * i, 3, "ab");
    assert_int_equal(be_grants_check(g, "proj", &id, why, sizeof why), 0);
    id.fingerprint[0] = 'c';
    assert_int_not_equal(be_grants_check(g, "proj", &id, why, sizeof why), 0);
    /* every enrollment adds a certificate: the first one keeps working (another user of the
     * instance); up to 8, then the one that ends first goes */
    uint8_t sha2[32];
    memset(sha2, 0xcd, 32);
    be_grants_add(g, "uuid-c", sha2, 32, 100);
    for (int i = 0; i < 32; i++)
        snprintf(id.fingerprint + 2 * i, 3, "ab");
    assert_int_equal(be_grants_check(g, "proj", &id, why, sizeof why), 0);
    for (int i = 0; i < 32; i++)
        snprintf(id.fingerprint + 2 * i, 3, "cd");
    assert_int_equal(be_grants_check(g, "proj", &id, why, sizeof why), 0);
    for (int k = 0; k < 7; k++) {
        uint8_t other[32];
        memset(other, 0x10 + k, 32);
        be_grants_add(g, "uuid-c", other, 32, 1000 + k);
    }
    assert_int_equal(be_grants_check(g, "proj", &id, why, sizeof why), 0); /* 0xab went */
    for (int i = 0; i < 32; i++)
        snprintf(id.fingerprint + 2 * i, 3, "ab");
    assert_int_not_equal(be_grants_check(g, "proj", &id, why, sizeof why), 0);
    assert_non_null(strstr(why, "not one of the 8 granted"));
    /* a revocation ends them all; a new grant starts afresh */
    be_grants_revoke(g, "uuid-c");
    for (int i = 0; i < 32; i++)
        snprintf(id.fingerprint + 2 * i, 3, "cd");
    assert_int_not_equal(be_grants_check(g, "proj", &id, why, sizeof why), 0);
    be_grants_add(g, "uuid-c", sha, 32, 0);
    assert_int_not_equal(be_grants_check(g, "proj", &id, why, sizeof why), 0);
    be_grants_revoke(g, "uuid-a");
    strcpy(id.instance_id, "uuid-a");
    assert_int_not_equal(be_grants_check(g, "proj", &id, why, sizeof why), 0);
    be_grants_free(g);
    /* a bad allow-list */
    g = be_grants_new();
    strcpy(path, "/tmp/sluice-allow-XXXXXX");
    fd = mkstemp(path);
    assert_int_equal(write(fd, "bad uuid!\n", 10), 10);
    close(fd);
    assert_int_not_equal(be_grants_load_allow(g, path, &e), SL_OK);
    unlink(path);
    be_grants_free(g);
}

/* ---------------------------------------------------------------- control channel */

struct srv_thread {
    struct be_config cfg;
    volatile int stop;
    int rc;
    pthread_t t;
};

static void *srv_main(void *arg)
{
    struct srv_thread *st = arg;
    st->rc = be_server_run(&st->cfg, &no_api, &no_devs, &st->stop);
    return NULL;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t n = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &n);
    close(fd);
    return ntohs(a.sin_port);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static Sluice__Control__BackendReport *agent_recv(void *sock, unsigned char *rid, size_t *rlen)
{
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 5000) <= 0)
        return NULL;
    int n = zmq_recv(sock, rid, 256, 0);
    assert_true(n > 0);
    *rlen = (size_t)n;
    uint8_t buf[4096];
    n = zmq_recv(sock, buf, sizeof buf, 0);
    assert_true(n > 0);
    return sluice__control__backend_report__unpack(NULL, (size_t)n, buf);
}

static void agent_send(void *sock, const unsigned char *rid, size_t rlen,
                       Sluice__Control__BackendControl *m)
{
    uint8_t buf[4096];
    size_t n = sluice__control__backend_control__pack(m, buf);
    assert_int_equal(zmq_send(sock, rid, rlen, ZMQ_SNDMORE), (int)rlen);
    assert_int_equal(zmq_send(sock, buf, n, 0), (int)n);
}

/* Waits for an ack of seq (skipping pongs, which it returns through *pong). */
static int wait_ack(void *sock, uint64_t seq, uint64_t *pong)
{
    unsigned char rid[256];
    size_t rlen;
    for (int i = 0; i < 16; i++) { /* session events and usage records may come first */
        Sluice__Control__BackendReport *r = agent_recv(sock, rid, &rlen);
        if (!r)
            return -1;
        int ok = -1;
        if (r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_PONG && pong)
            *pong = r->pong->nonce;
        if (r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_ACK && r->ack->control_seq == seq)
            ok = r->ack->ok;
        sluice__control__backend_report__free_unpacked(r, NULL);
        if (ok >= 0)
            return ok;
    }
    return -1;
}

static sl_code client_connect(const char *ep, const char *ca, const pki_cred *cred, sl_client **c,
                              sl_error *e)
{
    sl_tls_config cfg = {.mode = SL_TLS_MUTUAL,
                         .ca_pem = ca,
                         .cert_pem = cred->cert_pem,
                         .key_pem = cred->key_pem,
                         .server_name = "127.0.0.1"};
    sl_channel_opts o;
    sl_channel_opts_default(&o);
    o.connect_attempts = 1;
    o.handshake_timeout_ms = 5000;
    return sl_client_connect(ep, &cfg, &o, c, e);
}

static void test_control_channel(void **state)
{
    (void)state;
    pki_ca ca;
    pki_cred server, guest;
    assert_int_equal(pki_ca_new(&ca, "test ca"), 0);
    assert_int_equal(pki_issue(&ca, "backend", NULL, 1, -60, 3600, &server), 0);
    assert_int_equal(pki_issue(&ca, "inst-1", "proj-1", 0, -60, 3600, &guest), 0);
    char dir[] = "/tmp/sluice-be-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cert[128], key[128], cap[128], sock[128], ctl[160], listen[64];
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(cap, sizeof cap, "%s/ca.pem", dir);
    snprintf(sock, sizeof sock, "%s/control.sock", dir);
    snprintf(ctl, sizeof ctl, "ipc://%s", sock);
    snprintf(listen, sizeof listen, "tcp://127.0.0.1:%d", free_port());
    write_file(cert, server.cert_pem);
    write_file(key, server.key_pem);
    write_file(cap, ca.pem);

    void *zctx = zmq_ctx_new();
    void *router = zmq_socket(zctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_bind(router, ctl), 0);

    struct srv_thread st = {.cfg = {.project = "proj-1",
                                    .listen = listen,
                                    .cert = cert,
                                    .key = key,
                                    .ca = cap,
                                    .control = ctl}};
    assert_int_equal(pthread_create(&st.t, NULL, srv_main, &st), 0);

    /* hello */
    unsigned char rid[256];
    size_t rlen;
    Sluice__Control__BackendReport *r = agent_recv(router, rid, &rlen);
    assert_non_null(r);
    assert_int_equal(r->kind_case, SLUICE__CONTROL__BACKEND_REPORT__KIND_HELLO);
    assert_string_equal(r->hello->project_id, "proj-1");
    assert_int_equal(r->hello->pid, (uint32_t)getpid());
    assert_non_null(strstr(r->hello->endpoint, "127.0.0.1"));
    sluice__control__backend_report__free_unpacked(r, NULL);

    /* not granted yet: refused */
    sl_client *c = NULL;
    sl_error e;
    assert_int_equal(client_connect(listen, ca.pem, &guest, &c, &e), SL_ERR_REFUSED);

    /* grant */
    Sluice__Control__Grant g = SLUICE__CONTROL__GRANT__INIT;
    g.instance_uuid = "inst-1";
    g.project_id = "proj-1";
    Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.seq = 1;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT;
    m.grant = &g;
    agent_send(router, rid, rlen, &m);
    assert_int_equal(wait_ack(router, 1, NULL), 1);

    /* ping */
    Sluice__Control__Ping p = SLUICE__CONTROL__PING__INIT;
    p.nonce = 4242;
    m = (Sluice__Control__BackendControl)SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.seq = 2;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_PING;
    m.ping = &p;
    agent_send(router, rid, rlen, &m);
    uint64_t pong = 0;
    assert_int_equal(wait_ack(router, 2, &pong), 1);
    assert_int_equal(pong, 4242);

    /* a live session */
    assert_int_equal(client_connect(listen, ca.pem, &guest, &c, &e), SL_OK);
    Sluice__Wire__SessionOpen open = SLUICE__WIRE__SESSION_OPEN__INIT;
    open.protocol_version = 1;
    open.cuda_version = 13000;
    open.client = "test";
    Sluice__Wire__ClientMessage cm = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    cm.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_OPEN;
    cm.open = &open;
    uint8_t *buf;
    size_t len;
    assert_int_equal(sl_wire_encode_client(&cm, NULL, &buf, &len, &e), SL_OK);
    assert_int_equal(sl_client_send(c, buf, len, NULL, 0, &e), SL_OK);
    free(buf);
    const void *msg;
    uint64_t blen;
    assert_int_equal(sl_client_recv(c, &msg, &len, &blen, 5000, &e), SL_OK);
    Sluice__Wire__ServerMessage *sm = NULL;
    assert_int_equal(sl_wire_decode_server(msg, len, NULL, &sm, &e), SL_OK);
    assert_int_equal(sm->kind_case, SLUICE__WIRE__SERVER_MESSAGE__KIND_ACCEPT);
    assert_true(sm->accept->driver_version >= 13000);
    sl_wire_free_server(sm);

    /* a garbage CallFrame ends only that session: covered by revoke below on a fresh one */

    /* revoke ends it */
    Sluice__Control__Revoke rv = SLUICE__CONTROL__REVOKE__INIT;
    rv.instance_uuid = "inst-1";
    rv.reason = "stopped";
    m = (Sluice__Control__BackendControl)SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.seq = 3;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_REVOKE;
    m.revoke = &rv;
    agent_send(router, rid, rlen, &m);
    assert_int_equal(wait_ack(router, 3, NULL), 1);
    assert_int_equal(sl_client_recv(c, &msg, &len, &blen, 5000, &e), SL_ERR_REVOKED);
    sl_client_close(c);
    /* and refused from then on */
    assert_int_equal(client_connect(listen, ca.pem, &guest, &c, &e), SL_ERR_REFUSED);

    /* shutdown: the server exits cleanly */
    Sluice__Control__Shutdown sd = SLUICE__CONTROL__SHUTDOWN__INIT;
    sd.reason = "test";
    m = (Sluice__Control__BackendControl)SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.seq = 4;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_SHUTDOWN;
    m.shutdown = &sd;
    agent_send(router, rid, rlen, &m);
    assert_int_equal(wait_ack(router, 4, NULL), 1);
    pthread_join(st.t, NULL);
    assert_int_equal(st.rc, 0);

    zmq_close(router);
    zmq_ctx_term(zctx);
    unlink(cert);
    unlink(key);
    unlink(cap);
    unlink(sock);
    rmdir(dir);
    pki_cred_free(&server);
    pki_cred_free(&guest);
    pki_ca_free(&ca);
}

/* Accounting on the control channel (docs/accounting.md): session events, a session refused
 * by its SLA's max_sessions, usage records every interval with the grant's flavor, a record
 * sent again until it is acknowledged. Sessions run in this process (no driver: measurement
 * "none"). */
static sl_code open_session(const char *listen, const char *ca, const pki_cred *guest,
                            sl_client **c, sl_error *e)
{
    sl_code rc = client_connect(listen, ca, guest, c, e);
    if (rc != SL_OK)
        return rc;
    Sluice__Wire__SessionOpen open = SLUICE__WIRE__SESSION_OPEN__INIT;
    open.protocol_version = 1;
    open.cuda_version = 13000;
    open.client = "test";
    Sluice__Wire__ClientMessage cm = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    cm.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_OPEN;
    cm.open = &open;
    uint8_t *buf;
    size_t len;
    if ((rc = sl_wire_encode_client(&cm, NULL, &buf, &len, e)) != SL_OK)
        return rc;
    rc = sl_client_send(*c, buf, len, NULL, 0, e);
    free(buf);
    const void *msg;
    uint64_t blen;
    if (rc == SL_OK)
        rc = sl_client_recv(*c, &msg, &len, &blen, 5000, e);
    return rc;
}

static void test_control_usage(void **state)
{
    (void)state;
    pki_ca ca;
    pki_cred server, guest;
    assert_int_equal(pki_ca_new(&ca, "test ca"), 0);
    assert_int_equal(pki_issue(&ca, "backend", NULL, 1, -60, 3600, &server), 0);
    assert_int_equal(pki_issue(&ca, "inst-9", "proj-9", 0, -60, 3600, &guest), 0);
    char dir[] = "/tmp/sluice-be-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cert[128], key[128], cap[128], sock[128], ctl[160], listen[64];
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(cap, sizeof cap, "%s/ca.pem", dir);
    snprintf(sock, sizeof sock, "%s/control.sock", dir);
    snprintf(ctl, sizeof ctl, "ipc://%s", sock);
    snprintf(listen, sizeof listen, "tcp://127.0.0.1:%d", free_port());
    write_file(cert, server.cert_pem);
    write_file(key, server.key_pem);
    write_file(cap, ca.pem);
    void *zctx = zmq_ctx_new();
    void *router = zmq_socket(zctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_bind(router, ctl), 0);
    struct srv_thread st = {.cfg = {.project = "proj-9",
                                    .listen = listen,
                                    .cert = cert,
                                    .key = key,
                                    .ca = cap,
                                    .control = ctl,
                                    .usage_interval_s = 1,
                                    .usage_resend_s = 1}};
    assert_int_equal(pthread_create(&st.t, NULL, srv_main, &st), 0);
    unsigned char rid[256];
    size_t rlen;
    Sluice__Control__BackendReport *r = agent_recv(router, rid, &rlen);
    assert_non_null(r);
    assert_int_equal(r->kind_case, SLUICE__CONTROL__BACKEND_REPORT__KIND_HELLO);
    sluice__control__backend_report__free_unpacked(r, NULL);

    /* a share outside 0..1 is refused */
    Sluice__Control__Sla sla = SLUICE__CONTROL__SLA__INIT;
    sla.flavor = "g1.test";
    sla.gpu_share = 1.5;
    Sluice__Control__Grant g = SLUICE__CONTROL__GRANT__INIT;
    g.instance_uuid = "inst-9";
    g.project_id = "proj-9";
    g.sla = &sla;
    Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.seq = 1;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT;
    m.grant = &g;
    agent_send(router, rid, rlen, &m);
    assert_int_equal(wait_ack(router, 1, NULL), 0);
    sla.gpu_share = 1;
    sla.max_sessions = 1;
    m.seq = 2;
    agent_send(router, rid, rlen, &m);
    assert_int_equal(wait_ack(router, 2, NULL), 1);

    sl_client *c1 = NULL, *c2 = NULL;
    sl_error e;
    assert_int_equal(open_session(listen, ca.pem, &guest, &c1, &e), SL_OK);
    assert_int_not_equal(open_session(listen, ca.pem, &guest, &c2, &e), SL_OK); /* max 1 */
    if (c2)
        sl_client_close(c2);

    /* over ~3.5 s: OPENED, REFUSED, records every second; the first one is not acknowledged */
    int opened = 0, refused = 0, records = 0, first_again = 0;
    char first[40] = "";
    for (int i = 0; i < 40 && !(first_again && records >= 3); i++) {
        r = agent_recv(router, rid, &rlen);
        if (!r)
            break;
        if (r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_SESSION) {
            opened += r->session->kind == SLUICE__CONTROL__SESSION_EVENT__KIND__OPENED;
            if (r->session->kind == SLUICE__CONTROL__SESSION_EVENT__KIND__REFUSED) {
                refused++;
                assert_non_null(strstr(r->session->detail, "maximum of 1 session"));
                assert_string_equal(r->session->instance_uuid, "inst-9");
            }
        } else if (r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_USAGE) {
            const Sluice__Control__UsageRecord *u = r->usage;
            assert_string_equal(u->instance_uuid, "inst-9");
            assert_string_equal(u->project_id, "proj-9");
            assert_string_equal(u->flavor, "g1.test");
            assert_string_equal(u->measurement, "none");
            assert_false(u->final);
            if (!first[0]) {
                snprintf(first, sizeof first, "%s", u->record_id);
            } else if (!strcmp(first, u->record_id)) {
                first_again = 1; /* sent again: acknowledge it now */
            }
            if (strcmp(first, u->record_id) || first_again) {
                char *ids[1] = {u->record_id};
                Sluice__Control__UsageAck ua = SLUICE__CONTROL__USAGE_ACK__INIT;
                ua.record_ids = ids;
                ua.n_record_ids = 1;
                m = (Sluice__Control__BackendControl)SLUICE__CONTROL__BACKEND_CONTROL__INIT;
                m.seq = 100 + (uint64_t)i;
                m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_USAGE_ACK;
                m.usage_ack = &ua;
                agent_send(router, rid, rlen, &m);
            }
            if (strcmp(first, u->record_id) || !first_again)
                records++;
        }
        sluice__control__backend_report__free_unpacked(r, NULL);
    }
    assert_int_equal(opened, 1);
    assert_int_equal(refused, 1);
    assert_true(records >= 3);
    assert_true(first_again);

    /* the session ends: CLOSED, then its final record */
    sl_client_close(c1);
    int closed = 0, final = 0;
    for (int i = 0; i < 20 && !(closed && final); i++) {
        r = agent_recv(router, rid, &rlen);
        if (!r)
            break;
        if (r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_SESSION)
            closed += r->session->kind == SLUICE__CONTROL__SESSION_EVENT__KIND__CLOSED;
        if (r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_USAGE && r->usage->final) {
            final++;
            char *ids[1] = {r->usage->record_id};
            Sluice__Control__UsageAck ua = SLUICE__CONTROL__USAGE_ACK__INIT;
            ua.record_ids = ids;
            ua.n_record_ids = 1;
            m = (Sluice__Control__BackendControl)SLUICE__CONTROL__BACKEND_CONTROL__INIT;
            m.seq = 200;
            m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_USAGE_ACK;
            m.usage_ack = &ua;
            agent_send(router, rid, rlen, &m);
        }
        sluice__control__backend_report__free_unpacked(r, NULL);
    }
    assert_int_equal(closed, 1);
    assert_int_equal(final, 1);

    st.stop = 1;
    pthread_join(st.t, NULL);
    assert_int_equal(st.rc, 0);
    zmq_close(router);
    zmq_ctx_term(zctx);
    unlink(cert);
    unlink(key);
    unlink(cap);
    unlink(sock);
    rmdir(dir);
    pki_cred_free(&server);
    pki_cred_free(&guest);
    pki_ca_free(&ca);
}

/* A peer that sends garbage after SessionOpen loses its session; the server keeps serving. */
static void test_malformed_ends_session_only(void **state)
{
    (void)state;
    pki_ca ca;
    pki_cred server, guest;
    assert_int_equal(pki_ca_new(&ca, "test ca"), 0);
    assert_int_equal(pki_issue(&ca, "backend", NULL, 1, -60, 3600, &server), 0);
    assert_int_equal(pki_issue(&ca, "inst-2", "proj-2", 0, -60, 3600, &guest), 0);
    char dir[] = "/tmp/sluice-be-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cert[128], key[128], cap[128], allow[128], listen[64];
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(cap, sizeof cap, "%s/ca.pem", dir);
    snprintf(allow, sizeof allow, "%s/allow", dir);
    snprintf(listen, sizeof listen, "tcp://127.0.0.1:%d", free_port());
    write_file(cert, server.cert_pem);
    write_file(key, server.key_pem);
    write_file(cap, ca.pem);
    write_file(allow, "inst-2\n");
    struct srv_thread st = {.cfg = {.project = "proj-2",
                                    .listen = listen,
                                    .cert = cert,
                                    .key = key,
                                    .ca = cap,
                                    .allow = allow}};
    assert_int_equal(pthread_create(&st.t, NULL, srv_main, &st), 0);
    sl_error e;
    for (int round = 0; round < 2; round++) {
        sl_client *c = NULL;
        sl_code rc = SL_ERR_TIMEOUT;
        for (int i = 0; i < 50 && rc != SL_OK; i++) {
            rc = client_connect(listen, ca.pem, &guest, &c, &e);
            if (rc != SL_OK)
                usleep(100000);
        }
        assert_int_equal(rc, SL_OK);
        const char garbage[] = "\x12\x05\x0a\x03\x08\x00\x10";
        assert_int_equal(sl_client_send(c, garbage, sizeof garbage - 1, NULL, 0, &e), SL_OK);
        const void *msg;
        size_t len;
        uint64_t blen;
        assert_int_not_equal(sl_client_recv(c, &msg, &len, &blen, 5000, &e), SL_OK);
        sl_client_close(c);
    }
    /* a seq used again in the next frame ends the session as out-of-order does */
    sl_client *c = NULL;
    assert_int_equal(open_session(listen, ca.pem, &guest, &c, &e), SL_OK);
    Sluice__Cuda__CuCtxSynchronizeRequest rq = SLUICE__CUDA__CU_CTX_SYNCHRONIZE_REQUEST__INIT;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.seq = 1;
    call.call_id = SL_CALL_cuCtxSynchronize;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_CTX_SYNCHRONIZE;
    call.cu_ctx_synchronize = &rq;
    Sluice__Wire__Call *calls[1] = {&call};
    Sluice__Wire__CallFrame f = SLUICE__WIRE__CALL_FRAME__INIT;
    f.calls = calls;
    f.n_calls = 1;
    Sluice__Wire__ClientMessage cm = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    cm.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS;
    cm.calls = &f;
    uint8_t *buf;
    size_t blen_out;
    assert_int_equal(sl_wire_encode_client(&cm, NULL, &buf, &blen_out, &e), SL_OK);
    const void *msg;
    size_t len;
    uint64_t blen;
    assert_int_equal(sl_client_send(c, buf, blen_out, NULL, 0, &e), SL_OK);
    assert_int_equal(sl_client_recv(c, &msg, &len, &blen, 5000, &e), SL_OK); /* its reply */
    assert_int_equal(sl_client_send(c, buf, blen_out, NULL, 0, &e), SL_OK);  /* seq 1 again */
    assert_int_equal(sl_client_recv(c, &msg, &len, &blen, 5000, &e), SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "call seq 1 is not above the session's last seq 1"));
    free(buf);
    sl_client_close(c);
    st.stop = 1;
    pthread_join(st.t, NULL);
    assert_int_equal(st.rc, 0);
    unlink(cert);
    unlink(key);
    unlink(cap);
    unlink(allow);
    rmdir(dir);
    pki_cred_free(&server);
    pki_cred_free(&guest);
    pki_ca_free(&ca);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handles_kinds_and_reuse),
        cmocka_unit_test(test_handles_other_session),
        cmocka_unit_test(test_handles_many_and_module_children),
        cmocka_unit_test(test_contexts),
        cmocka_unit_test(test_occupancy_handlers),
        cmocka_unit_test(test_security_calls_have_no_handler),
        cmocka_unit_test(test_every_sent_call_has_a_handler),
        cmocka_unit_test(test_memory_ranges),
        cmocka_unit_test(test_rect_extent),
        cmocka_unit_test(test_devptr_hooks_isolated),
        cmocka_unit_test(test_param_rebuild),
        cmocka_unit_test(test_deferred),
        cmocka_unit_test(test_image_bounds),
        cmocka_unit_test(test_grants),
        cmocka_unit_test(test_control_channel),
        cmocka_unit_test(test_malformed_ends_session_only),
        cmocka_unit_test(test_control_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
