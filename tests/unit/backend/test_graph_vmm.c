/* Unit tests (no GPU, no driver: a fake driver table) of the backend's checks for graphs on
 * guest memory, virtual memory management, stream attributes, the JIT linker's options and
 * conditional handles (backend/api/graph*.c, vmm.c, stream_attr.c, link.c), and texture references'
 * border colour (texture.c): what must be refused is refused before the driver sees it, and
 * what reaches the driver is the backend's own memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "session/bulk_pool.h"
#include "session/devices.h"
#include "session/ranges.h"
#include "session/session.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/backend_dispatch.h"
#include "sluice/backend_hooks.h"

static struct be_device one_dev = {.dev = 5};
static struct be_devices devs = {13000, 1, &one_dev};

/* ---------------------------------------------------------------- a fake driver */

static int driver_calls;
static CUdeviceptr fake_base = 0x40000000;
static uint8_t fake_dev[4096]; /* the "device" a fake memcpy node copies into */
static CUDA_MEMCPY3D last_copy;

static CUresult f_reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                          unsigned long long flags)
{
    (void)size, (void)align, (void)addr, (void)flags;
    driver_calls++;
    *p = fake_base;
    return CUDA_SUCCESS;
}

static CUresult f_create(CUmemGenericAllocationHandle *h, size_t size,
                         const CUmemAllocationProp *prop, unsigned long long flags)
{
    (void)size, (void)flags;
    driver_calls++;
    assert_int_equal(prop->location.id, 5); /* the guest's ordinal 0, translated */
    static CUmemGenericAllocationHandle next = 0x100;
    *h = next++;
    return CUDA_SUCCESS;
}

static CUresult f_map(CUdeviceptr p, size_t size, size_t off, CUmemGenericAllocationHandle h,
                      unsigned long long flags)
{
    (void)p, (void)size, (void)off, (void)h, (void)flags;
    driver_calls++;
    return CUDA_SUCCESS;
}

static CUresult f_unmap(CUdeviceptr p, size_t size)
{
    (void)p, (void)size;
    driver_calls++;
    return CUDA_SUCCESS;
}

static CUresult f_free(CUdeviceptr p, size_t size)
{
    (void)p, (void)size;
    driver_calls++;
    return CUDA_SUCCESS;
}

static CUresult f_graph_create(CUgraph *g, unsigned flags)
{
    (void)flags;
    *g = (CUgraph)0x6000;
    return CUDA_SUCCESS;
}

static CUresult f_add_memcpy(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd,
                             const CUDA_MEMCPY3D *c, CUcontext ctx)
{
    (void)g, (void)d, (void)nd, (void)ctx;
    driver_calls++;
    last_copy = *c;
    *n = (CUgraphNode)0x7000;
    return CUDA_SUCCESS;
}

static CUresult f_instantiate(CUgraphExec *e, CUgraph g, unsigned long long flags)
{
    (void)g, (void)flags;
    *e = (CUgraphExec)0x8000;
    return CUDA_SUCCESS;
}

static CUresult f_launch(CUgraphExec e, CUstream s)
{
    (void)e, (void)s;
    driver_calls++;
    /* the node as the backend made it: host side on its staging block */
    memcpy(fake_dev, last_copy.srcHost, last_copy.WidthInBytes);
    return CUDA_SUCCESS;
}

static CUresult f_sync(CUstream s)
{
    (void)s;
    return CUDA_SUCCESS;
}

static CUresult f_set_attr(CUstream s, CUstreamAttrID a, const CUstreamAttrValue *v)
{
    (void)s, (void)a, (void)v;
    driver_calls++;
    return CUDA_SUCCESS;
}

static CUresult f_link_create(unsigned n, CUjit_option *o, void **v, CUlinkState *st)
{
    (void)n, (void)o, (void)v, (void)st;
    driver_calls++;
    return CUDA_SUCCESS;
}

static CUresult f_add_node(CUgraphNode *n, CUgraph g, const CUgraphNode *d,
                           const CUgraphEdgeData *e, size_t nd, CUgraphNodeParams *p)
{
    (void)n, (void)g, (void)d, (void)e, (void)nd, (void)p;
    driver_calls++;
    return CUDA_SUCCESS;
}

static struct sl_driver_api api;

static void fake_api(void)
{
    memset(&api, 0, sizeof api);
    api.cuMemAddressReserve = f_reserve;
    api.cuMemCreate = f_create;
    api.cuMemMap = f_map;
    api.cuMemUnmap = f_unmap;
    api.cuMemAddressFree = f_free;
    api.cuGraphCreate = f_graph_create;
    api.cuGraphAddMemcpyNode = f_add_memcpy;
    api.cuGraphInstantiateWithFlags = f_instantiate;
    api.cuGraphLaunch = f_launch;
    api.cuStreamSynchronize = f_sync;
    api.cuStreamSetAttribute = f_set_attr;
    api.cuLinkCreate_v2 = f_link_create;
    api.cuGraphAddNode_v2 = f_add_node;
}

/* Runs one call through the dispatch table with bulk; the reply is cleared. */
static CUresult run(sl_be_session *s, Sluice__Wire__Call *call, const void *bulk, size_t blen,
                    Sluice__Wire__Reply *keep)
{
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    struct sl_be_call c = {
        .s = s, .api = &api, .call = call, .reply = &reply, .in = bulk, .in_len = blen};
    CUresult rc = sl_be_dispatch(sl_be_table, &c);
    be_bulk_free(c.out); /* a slot (session/bulk_pool.c) or malloc'd */
    if (keep)
        *keep = reply;
    else
        sl_be_reply_clear(&reply);
    return rc;
}

#define CALL(var, field, ID, CASE, req)                                                            \
    Sluice__Wire__Call var = SLUICE__WIRE__CALL__INIT;                                             \
    var.call_id = ID;                                                                              \
    var.args_case = CASE;                                                                          \
    var.field = &req

/* ---------------------------------------------------------------- VMM */

static CUresult map(sl_be_session *s, uint64_t ptr, uint64_t size, uint64_t off, uint64_t h)
{
    Sluice__Cuda__CuMemMapRequest rq = SLUICE__CUDA__CU_MEM_MAP_REQUEST__INIT;
    rq.ptr = ptr, rq.size = size, rq.offset = off, rq.handle = h;
    CALL(c, cu_mem_map, SL_CALL_cuMemMap, SLUICE__WIRE__CALL__ARGS_CU_MEM_MAP, rq);
    return run(s, &c, NULL, 0, NULL);
}

static void test_vmm(void **state)
{
    (void)state;
    fake_api();
    sl_be_session *s = be_session_new(1, &api, &devs);
    const uint64_t G = 2 << 20;

    Sluice__Cuda__CuMemAddressReserveRequest rr =
        SLUICE__CUDA__CU_MEM_ADDRESS_RESERVE_REQUEST__INIT;
    rr.size = 2 * G;
    CALL(c, cu_mem_address_reserve, SL_CALL_cuMemAddressReserve,
         SLUICE__WIRE__CALL__ARGS_CU_MEM_ADDRESS_RESERVE, rr);
    Sluice__Wire__Reply reply;
    assert_int_equal(run(s, &c, NULL, 0, &reply), CUDA_SUCCESS);
    assert_int_equal(reply.cu_mem_address_reserve->ptr, fake_base);
    sl_be_reply_clear(&reply);
    /* reserved, not mapped: not the session's memory */
    assert_int_equal(sl_be_devptr_check(s, fake_base, 16), CUDA_ERROR_INVALID_VALUE);

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    Sluice__Cuda__CuMemCreateRequest cr = SLUICE__CUDA__CU_MEM_CREATE_REQUEST__INIT;
    cr.size = G;
    cr.prop = (ProtobufCBinaryData){sizeof prop, (uint8_t *)&prop};
    CALL(cc, cu_mem_create, SL_CALL_cuMemCreate, SLUICE__WIRE__CALL__ARGS_CU_MEM_CREATE, cr);
    uint64_t h[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(run(s, &cc, NULL, 0, &reply), CUDA_SUCCESS);
        h[i] = reply.cu_mem_create->handle;
        sl_be_reply_clear(&reply);
    }
    /* shareable handle types other than POSIX file descriptors are refused before the driver */
    int before = driver_calls;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
    assert_int_equal(run(s, &cc, NULL, 0, NULL), CUDA_ERROR_NOT_SUPPORTED);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    prop.location.id = 3; /* no such device */
    assert_int_equal(run(s, &cc, NULL, 0, NULL), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(driver_calls, before);

    /* maps: outside the reservation, past the allocation, overlapping: refused */
    assert_int_equal(map(s, fake_base + G, 2 * G, 0, h[0]), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(map(s, fake_base, G, G / 2, h[0]), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(map(s, fake_base, G, 0, h[0] + 99), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(driver_calls, before);
    assert_int_equal(map(s, fake_base, G, 0, h[0]), CUDA_SUCCESS);
    assert_int_equal(map(s, fake_base + G / 2, G / 2, 0, h[1]), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(map(s, fake_base + G, G, 0, h[1]), CUDA_SUCCESS);
    /* adjacent mappings are one range of the session's memory */
    assert_int_equal(sl_be_devptr_check(s, fake_base + G / 2, G), CUDA_SUCCESS);
    assert_int_equal(sl_be_devptr_check(s, fake_base, 2 * G + 1), CUDA_ERROR_INVALID_VALUE);

    Sluice__Cuda__CuMemUnmapRequest ur = SLUICE__CUDA__CU_MEM_UNMAP_REQUEST__INIT;
    ur.ptr = fake_base + G;
    ur.size = G;
    CALL(uc, cu_mem_unmap, SL_CALL_cuMemUnmap, SLUICE__WIRE__CALL__ARGS_CU_MEM_UNMAP, ur);
    assert_int_equal(run(s, &uc, NULL, 0, NULL), CUDA_SUCCESS);
    assert_int_equal(sl_be_devptr_check(s, fake_base + G, 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(sl_be_devptr_check(s, fake_base, G), CUDA_SUCCESS);

    Sluice__Cuda__CuMemAddressFreeRequest fr = SLUICE__CUDA__CU_MEM_ADDRESS_FREE_REQUEST__INIT;
    fr.ptr = fake_base;
    fr.size = G; /* not the reserved size */
    CALL(fc, cu_mem_address_free, SL_CALL_cuMemAddressFree,
         SLUICE__WIRE__CALL__ARGS_CU_MEM_ADDRESS_FREE, fr);
    assert_int_equal(run(s, &fc, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    fr.size = 2 * G;
    assert_int_equal(run(s, &fc, NULL, 0, NULL), CUDA_SUCCESS);
    assert_int_equal(sl_be_devptr_check(s, fake_base, 1), CUDA_ERROR_INVALID_VALUE);
    be_session_free(s);
}

/* ---------------------------------------------------------------- graphs on guest memory */

static void test_graph_host_memcpy(void **state)
{
    (void)state;
    fake_api();
    sl_be_session *s = be_session_new(2, &api, &devs);
    uint8_t dev[256]; /* "device" memory of the session */
    assert_int_equal(be_mem_add(&s->mem, (uint64_t)(uintptr_t)dev, sizeof dev, BE_R_ALLOC, 0, 0),
                     CUDA_SUCCESS);

    Sluice__Cuda__CuGraphCreateRequest gr = SLUICE__CUDA__CU_GRAPH_CREATE_REQUEST__INIT;
    CALL(gc, cu_graph_create, SL_CALL_cuGraphCreate, SLUICE__WIRE__CALL__ARGS_CU_GRAPH_CREATE, gr);
    Sluice__Wire__Reply reply;
    assert_int_equal(run(s, &gc, NULL, 0, &reply), CUDA_SUCCESS);
    uint64_t graph = reply.cu_graph_create->ph_graph;
    sl_be_reply_clear(&reply);

    /* host (the guest's pointer, a number here) to device */
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = (const void *)(uintptr_t)0xdead0000; /* never dereferenced by the backend */
    c.srcPitch = 1000;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = (CUdeviceptr)(uintptr_t)dev;
    c.WidthInBytes = 64;
    c.Height = 1;
    c.Depth = 1;
    ProtobufCBinaryData pod = {sizeof c, (uint8_t *)&c};
    Sluice__Cuda__CuGraphAddMemcpyNodeRequest mr =
        SLUICE__CUDA__CU_GRAPH_ADD_MEMCPY_NODE_REQUEST__INIT;
    mr.h_graph = graph;
    mr.copy_params = &pod;
    mr.n_copy_params = 1;
    CALL(mc, cu_graph_add_memcpy_node, SL_CALL_cuGraphAddMemcpyNode,
         SLUICE__WIRE__CALL__ARGS_CU_GRAPH_ADD_MEMCPY_NODE, mr);
    /* a device side outside the session's memory is refused */
    c.dstDevice += 200;
    int before = driver_calls;
    assert_int_equal(run(s, &mc, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(driver_calls, before);
    c.dstDevice -= 200;
    assert_int_equal(run(s, &mc, NULL, 0, NULL), CUDA_SUCCESS);
    /* the driver's node reads the backend's staging block, not the guest's pointer */
    assert_true(last_copy.srcHost != c.srcHost && last_copy.srcHost != NULL);
    assert_int_equal(last_copy.srcPitch, 64);

    Sluice__Cuda__CuGraphInstantiateWithFlagsRequest ir =
        SLUICE__CUDA__CU_GRAPH_INSTANTIATE_WITH_FLAGS_REQUEST__INIT;
    ir.h_graph = graph;
    CALL(ic, cu_graph_instantiate_with_flags, SL_CALL_cuGraphInstantiateWithFlags,
         SLUICE__WIRE__CALL__ARGS_CU_GRAPH_INSTANTIATE_WITH_FLAGS, ir);
    assert_int_equal(run(s, &ic, NULL, 0, &reply), CUDA_SUCCESS);
    uint64_t exec = reply.cu_graph_instantiate_with_flags->ph_graph_exec;
    sl_be_reply_clear(&reply);

    Sluice__Cuda__SlGraphExecHostRequest xr = SLUICE__CUDA__SL_GRAPH_EXEC_HOST_REQUEST__INIT;
    xr.exec = exec;
    CALL(xc, sl_graph_exec_host, SL_CALL_slGraphExecHost,
         SLUICE__WIRE__CALL__ARGS_SL_GRAPH_EXEC_HOST, xr);
    assert_int_equal(run(s, &xc, NULL, 0, &reply), CUDA_SUCCESS);
    assert_int_equal(reply.sl_graph_exec_host->n_kinds, 1);
    assert_int_equal(reply.sl_graph_exec_host->kinds[0], 1);
    assert_int_equal(reply.sl_graph_exec_host->lens[0], 64);
    uint64_t gen = reply.sl_graph_exec_host->generation;
    const CUDA_MEMCPY3D *back = (const CUDA_MEMCPY3D *)reply.sl_graph_exec_host->pods.data;
    assert_ptr_equal(back->srcHost, c.srcHost); /* the guest's parameters, as given */
    sl_be_reply_clear(&reply);

    /* cuGraphLaunch of a graph on guest memory is refused: it needs the guest's bytes */
    Sluice__Cuda__CuGraphLaunchRequest lr = SLUICE__CUDA__CU_GRAPH_LAUNCH_REQUEST__INIT;
    lr.h_graph_exec = exec;
    CALL(lc, cu_graph_launch, SL_CALL_cuGraphLaunch, SLUICE__WIRE__CALL__ARGS_CU_GRAPH_LAUNCH, lr);
    assert_int_equal(run(s, &lc, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);

    uint8_t bytes[64];
    for (int i = 0; i < 64; i++)
        bytes[i] = (uint8_t)(i * 3 + 1);
    Sluice__Cuda__SlGraphLaunchRequest sr = SLUICE__CUDA__SL_GRAPH_LAUNCH_REQUEST__INIT;
    sr.exec = exec;
    sr.generation = gen;
    CALL(sc, sl_graph_launch, SL_CALL_slGraphLaunch, SLUICE__WIRE__CALL__ARGS_SL_GRAPH_LAUNCH, sr);
    before = driver_calls;
    assert_int_equal(run(s, &sc, bytes, 63, NULL), CUDA_ERROR_INVALID_VALUE); /* short */
    sr.generation = gen + 1;                                                  /* stale */
    assert_int_equal(run(s, &sc, bytes, 64, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(driver_calls, before);
    sr.generation = gen;
    assert_int_equal(run(s, &sc, bytes, 64, NULL), CUDA_SUCCESS);
    assert_memory_equal(fake_dev, bytes, 64);

    /* put and get: only inside the right kind of item */
    Sluice__Cuda__SlGraphHostPutRequest pr = SLUICE__CUDA__SL_GRAPH_HOST_PUT_REQUEST__INIT;
    pr.exec = exec;
    pr.generation = gen;
    pr.offset = 60;
    CALL(pc, sl_graph_host_put, SL_CALL_slGraphHostPut, SLUICE__WIRE__CALL__ARGS_SL_GRAPH_HOST_PUT,
         pr);
    assert_int_equal(run(s, &pc, bytes, 8, NULL), CUDA_ERROR_INVALID_VALUE);
    pr.offset = 56;
    assert_int_equal(run(s, &pc, bytes, 8, NULL), CUDA_SUCCESS);
    pr.item = 1;
    assert_int_equal(run(s, &pc, bytes, 8, NULL), CUDA_ERROR_INVALID_VALUE);
    Sluice__Cuda__SlGraphHostGetRequest qr = SLUICE__CUDA__SL_GRAPH_HOST_GET_REQUEST__INIT;
    qr.exec = exec;
    qr.length = 8;
    CALL(qc, sl_graph_host_get, SL_CALL_slGraphHostGet, SLUICE__WIRE__CALL__ARGS_SL_GRAPH_HOST_GET,
         qr);
    assert_int_equal(run(s, &qc, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE); /* not device-to-host */
    be_session_free(s);
}

/* ---------------------------------------------------------------- others */

static void test_stream_attr_link_cond(void **state)
{
    (void)state;
    fake_api();
    sl_be_session *s = be_session_new(3, &api, &devs);
    int before = driver_calls;

    CUstreamAttrValue v;
    memset(&v, 0, sizeof v);
    v.accessPolicyWindow.base_ptr = (void *)(uintptr_t)0x123000;
    v.accessPolicyWindow.num_bytes = 4096;
    Sluice__Cuda__CuStreamSetAttributeRequest ar =
        SLUICE__CUDA__CU_STREAM_SET_ATTRIBUTE_REQUEST__INIT;
    ar.attr = CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW;
    ar.value = (ProtobufCBinaryData){sizeof v, (uint8_t *)&v};
    CALL(ac, cu_stream_set_attribute, SL_CALL_cuStreamSetAttribute,
         SLUICE__WIRE__CALL__ARGS_CU_STREAM_SET_ATTRIBUTE, ar);
    assert_int_equal(run(s, &ac, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE); /* not its memory */
    ar.attr = CU_LAUNCH_ATTRIBUTE_COOPERATIVE; /* not a stream attribute */
    assert_int_equal(run(s, &ac, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    ar.attr = CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW;
    v.accessPolicyWindow.num_bytes = 0; /* clears the window */
    assert_int_equal(run(s, &ac, NULL, 0, NULL), CUDA_SUCCESS);
    assert_int_equal(driver_calls, before + 1);

    /* a link option naming guest memory is refused */
    uint8_t opts[12];
    uint32_t o = CU_JIT_GLOBAL_SYMBOL_NAMES;
    uint64_t val = 0x1000;
    memcpy(opts, &o, 4);
    memcpy(opts + 4, &val, 8);
    Sluice__Cuda__CuLinkCreateV2Request kr = SLUICE__CUDA__CU_LINK_CREATE_V2_REQUEST__INIT;
    kr.num_options = 1;
    kr.option_values = sizeof opts;
    CALL(kc, cu_link_create_v2, SL_CALL_cuLinkCreate_v2, SLUICE__WIRE__CALL__ARGS_CU_LINK_CREATE_V2,
         kr);
    assert_int_equal(run(s, &kc, opts, sizeof opts, NULL), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(run(s, &kc, opts, 11, NULL), CUDA_ERROR_INVALID_VALUE);

    /* a conditional node on a handle that is not the session's */
    Sluice__Cuda__SlGraphAddConditionalRequest cr =
        SLUICE__CUDA__SL_GRAPH_ADD_CONDITIONAL_REQUEST__INIT;
    cr.handle = 0xabcdef;
    cr.size = 1;
    CALL(cc, sl_graph_add_conditional, SL_CALL_slGraphAddConditional,
         SLUICE__WIRE__CALL__ARGS_SL_GRAPH_ADD_CONDITIONAL, cr);
    assert_int_equal(run(s, &cc, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(driver_calls, before + 1);
    be_session_free(s);
}

/* ---------------------------------------------------------------- capture */

static CUstreamCaptureStatus capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
static int host_funcs;

static CUresult f_is_capturing(CUstream st, CUstreamCaptureStatus *cs)
{
    (void)st;
    *cs = capture_status;
    return CUDA_SUCCESS;
}

static CUresult f_launch_host_func(CUstream st, CUhostFn fn, void *user)
{
    (void)st, (void)fn, (void)user;
    host_funcs++;
    return CUDA_ERROR_NOT_READY; /* not queued: the backend frees its record */
}

/* A host callback or a copy through the session's transient buffers is not captured into a
 * graph (the graph would replay freed memory): refused before the driver sees it. */
static void test_capture_refusals(void **state)
{
    (void)state;
    api.cuStreamIsCapturing = f_is_capturing;
    api.cuLaunchHostFunc = f_launch_host_func;
    sl_be_session *s = be_session_new(4, &api, &devs);
    Sluice__Cuda__CuLaunchHostFuncRequest hr = SLUICE__CUDA__CU_LAUNCH_HOST_FUNC_REQUEST__INIT;
    hr.fn = 1;
    CALL(hc, cu_launch_host_func, SL_CALL_cuLaunchHostFunc,
         SLUICE__WIRE__CALL__ARGS_CU_LAUNCH_HOST_FUNC, hr);
    capture_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    assert_int_equal(run(s, &hc, NULL, 0, NULL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_int_equal(host_funcs, 0);
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    assert_int_equal(be_refuse_if_capturing(s, &reply, NULL, 0, "a copy"),
                     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_non_null(strstr(reply.detail, "a copy"));
    sl_be_reply_clear(&reply);
    capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
    assert_int_equal(run(s, &hc, NULL, 0, NULL), CUDA_ERROR_NOT_READY);
    assert_int_equal(host_funcs, 1);
    be_session_free(s);
}

/* ---------------------------------------------------------------- texture references */

static float border[4];

static CUresult f_texref_create(CUtexref *t)
{
    *t = (CUtexref)(uintptr_t)0x7000;
    return CUDA_SUCCESS;
}

static CUresult f_set_border(CUtexref t, float *rgba)
{
    assert_ptr_equal(t, (CUtexref)(uintptr_t)0x7000);
    memcpy(border, rgba, sizeof border);
    return CUDA_SUCCESS;
}

static CUresult f_get_border(float *rgba, CUtexref t)
{
    assert_ptr_equal(t, (CUtexref)(uintptr_t)0x7000);
    memcpy(rgba, border, sizeof border);
    return CUDA_SUCCESS;
}

/* The border colour is four floats: all four reach the driver and come back (as bulk); a
 * colour of another size is refused before the driver. */
static void test_texref_border_colour(void **state)
{
    (void)state;
    api.cuTexRefCreate = f_texref_create;
    api.cuTexRefSetBorderColor = f_set_border;
    api.cuTexRefGetBorderColor = f_get_border;
    sl_be_session *s = be_session_new(5, &api, &devs);
    Sluice__Cuda__CuTexRefCreateRequest cr = SLUICE__CUDA__CU_TEX_REF_CREATE_REQUEST__INIT;
    CALL(cc, cu_tex_ref_create, SL_CALL_cuTexRefCreate, SLUICE__WIRE__CALL__ARGS_CU_TEX_REF_CREATE,
         cr);
    Sluice__Wire__Reply reply;
    assert_int_equal(run(s, &cc, NULL, 0, &reply), CUDA_SUCCESS);
    uint64_t tr = reply.cu_tex_ref_create->p_tex_ref;
    sl_be_reply_clear(&reply);

    const float rgba[4] = {0.25f, 0.5f, 0.75f, 1.0f};
    Sluice__Cuda__CuTexRefSetBorderColorRequest sr =
        SLUICE__CUDA__CU_TEX_REF_SET_BORDER_COLOR_REQUEST__INIT;
    sr.h_tex_ref = tr;
    CALL(sc, cu_tex_ref_set_border_color, SL_CALL_cuTexRefSetBorderColor,
         SLUICE__WIRE__CALL__ARGS_CU_TEX_REF_SET_BORDER_COLOR, sr);
    assert_int_equal(run(s, &sc, rgba, sizeof(float), NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(run(s, &sc, rgba, sizeof rgba, NULL), CUDA_SUCCESS);
    assert_memory_equal(border, rgba, sizeof rgba);
    sr.h_tex_ref = tr + 1; /* not a texture reference of the session */
    assert_int_equal(run(s, &sc, rgba, sizeof rgba, NULL), CUDA_ERROR_INVALID_HANDLE);

    Sluice__Cuda__CuTexRefGetBorderColorRequest gr =
        SLUICE__CUDA__CU_TEX_REF_GET_BORDER_COLOR_REQUEST__INIT;
    gr.h_tex_ref = tr;
    CALL(gc, cu_tex_ref_get_border_color, SL_CALL_cuTexRefGetBorderColor,
         SLUICE__WIRE__CALL__ARGS_CU_TEX_REF_GET_BORDER_COLOR, gr);
    Sluice__Wire__Reply gre = SLUICE__WIRE__REPLY__INIT;
    struct sl_be_call gcall = {.s = s, .api = &api, .call = &gc, .reply = &gre};
    assert_int_equal(sl_be_dispatch(sl_be_table, &gcall), CUDA_SUCCESS);
    assert_int_equal(gcall.out_len, sizeof rgba);
    assert_memory_equal(gcall.out, rgba, sizeof rgba);
    free(gcall.out);
    sl_be_reply_clear(&gre);
    be_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vmm),
        cmocka_unit_test(test_graph_host_memcpy),
        cmocka_unit_test(test_stream_attr_link_cond),
        cmocka_unit_test(test_capture_refusals),
        cmocka_unit_test(test_texref_border_colour),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
