/* The frontend runtime's pure pieces: backend.conf parsing, image measuring, kernel parameter
 * packing, the per-thread context stack, calls answered locally (error names and strings, the
 * profiler) and refusals made before any round trip (mapped host memory, context parameters). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <elf.h>

#include <cudaProfiler.h>

#include "api/device.h"
#include "api/context.h"
#include "api/errors.h"
#include "api/launch.h"
#include "api/launch_check.h"
#include "api/memory.h"
#include "api/module.h"
#include "call/config.h"
#include "call/contexts.h"
#include "call/memo.h"
#include "call/rpc_session.h"
#include "exports/exports.h"
#include "sluice/wire.h"

static void config_parse(void **state)
{
    (void)state;
    struct sl_fe_config c;
    sl_error e;
    assert_int_equal(sl_fe_config_parse("# comment\n\n endpoint = tcp://10.0.0.5:7000 \n", &c, &e),
                     SL_OK);
    assert_string_equal(c.endpoint, "tcp://10.0.0.5:7000");
    assert_int_equal(sl_fe_config_parse("endpoint=tcp://h:1 # trailing\nother = x\n", &c, &e),
                     SL_OK);
    assert_string_equal(c.endpoint, "tcp://h:1");
    assert_int_equal(sl_fe_config_parse("# nothing\n", &c, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "endpoint"));
    assert_int_equal(sl_fe_config_parse("endpoint tcp://h:1\n", &c, &e), SL_ERR_CONFIG);
    assert_int_equal(sl_fe_config_parse("endpoint = http://h:1\n", &c, &e), SL_ERR_CONFIG);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void config_load_names_missing_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/sl-fe-conf-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct sl_fe_config c;
    sl_error e;
    assert_int_equal(sl_fe_config_load(dir, &c, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "backend.conf"));
    write_file(dir, "backend.conf", "endpoint = tcp://127.0.0.1:5\n");
    write_file(dir, "ca.pem", "x");
    write_file(dir, "client.pem", "x");
    assert_int_equal(sl_fe_config_load(dir, &c, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "client.key"));
    write_file(dir, "client.key", "x");
    assert_int_equal(sl_fe_config_load(dir, &c, &e), SL_OK);
    assert_non_null(strstr(c.cert, "client.pem"));
    const char *names[] = {"backend.conf", "ca.pem", "client.pem", "client.key"};
    for (int i = 0; i < 4; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* ------------------------------------------------------------------ images */
static void image_fatbin_and_wrapper(void **state)
{
    (void)state;
    static uint8_t fatbin[64 + 100];
    memset(fatbin, 0xee, sizeof fatbin);
    uint32_t magic = 0xba55ed50u;
    uint16_t ver = 1, hs = 16;
    uint64_t files = 100;
    memcpy(fatbin, &magic, 4);
    memcpy(fatbin + 4, &ver, 2);
    memcpy(fatbin + 6, &hs, 2);
    memcpy(fatbin + 8, &files, 8);
    const void *b;
    size_t n;
    assert_int_equal(sl_fe_image_measure(fatbin, &b, &n), SL_FE_IMAGE_FATBIN);
    assert_ptr_equal(b, fatbin);
    assert_int_equal(n, 116);
    struct {
        uint32_t magic, version;
        const void *data, *fn;
    } w = {0x466243b1u, 1, fatbin, NULL};
    assert_int_equal(sl_fe_image_measure(&w, &b, &n), SL_FE_IMAGE_WRAPPER);
    assert_ptr_equal(b, fatbin);
    assert_int_equal(n, 116);
    /* a wrapper around something that is not a fatbin */
    static uint8_t junk[32] = {1, 2, 3};
    w.data = junk;
    assert_int_equal(sl_fe_image_measure(&w, &b, &n), SL_FE_IMAGE_INVALID);
}

static void image_elf(void **state)
{
    (void)state;
    static uint8_t img[4096];
    memset(img, 0, sizeof img);
    Elf64_Ehdr eh = {0};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ehsize = sizeof eh;
    eh.e_shoff = 1024;
    eh.e_shnum = 2;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_phoff = 64;
    eh.e_phnum = 1;
    eh.e_phentsize = sizeof(Elf64_Phdr);
    memcpy(img, &eh, sizeof eh);
    Elf64_Shdr sh[2] = {{0}};
    sh[1].sh_type = SHT_PROGBITS;
    sh[1].sh_offset = 2000;
    sh[1].sh_size = 500; /* the last byte of the image: 2500 */
    memcpy(img + 1024, sh, sizeof sh);
    Elf64_Phdr ph = {0};
    ph.p_offset = 200;
    ph.p_filesz = 100;
    memcpy(img + 64, &ph, sizeof ph);
    const void *b;
    size_t n;
    assert_int_equal(sl_fe_image_measure(img, &b, &n), SL_FE_IMAGE_ELF);
    assert_int_equal(n, 2500);
    sh[1].sh_type = SHT_NOBITS; /* takes no file space: the header table ends the image */
    memcpy(img + 1024, sh, sizeof sh);
    assert_int_equal(sl_fe_image_measure(img, &b, &n), SL_FE_IMAGE_ELF);
    assert_int_equal(n, 1024 + 2 * sizeof(Elf64_Shdr));
}

static void image_ptx_and_garbage(void **state)
{
    (void)state;
    const char *ptx = "//\n.version 8.0\n.target sm_90\n.visible .entry k() { ret; }\n";
    const void *b;
    size_t n;
    assert_int_equal(sl_fe_image_measure(ptx, &b, &n), SL_FE_IMAGE_PTX);
    assert_int_equal(n, strlen(ptx) + 1);
    static const uint8_t garbage[] = {0x13, 0x37, 0x00, 0xff, 0x01, 0x02, 0x00};
    assert_int_equal(sl_fe_image_measure(garbage, &b, &n), SL_FE_IMAGE_INVALID);
    assert_int_equal(sl_fe_image_measure("hello world", &b, &n), SL_FE_IMAGE_INVALID);
    assert_int_equal(sl_fe_image_measure(NULL, &b, &n), SL_FE_IMAGE_INVALID);
}

static void sha256_vector(void **state)
{
    (void)state;
    uint8_t d[32];
    sl_fe_sha256("abc", 3, d);
    static const uint8_t want[4] = {0xba, 0x78, 0x16, 0xbf};
    assert_memory_equal(d, want, 4);
}

/* ------------------------------------------------------------------ parameters */
static void params_pack(void **state)
{
    (void)state;
    size_t offs[3] = {0, 8, 16}, sizes[3] = {4, 8, 4};
    struct sl_fe_param_layout l = {3, offs, sizes, 20};
    int a = 7;
    uint64_t p = 0x1122334455667788ull;
    float f = 2.5f;
    void *params[3] = {&a, &p, &f};
    uint8_t buf[64];
    memset(buf, 0xaa, sizeof buf);
    assert_int_equal(sl_fe_pack_params(&l, params, buf, sizeof buf), 20);
    assert_memory_equal(buf, &a, 4);
    assert_int_equal(buf[4], 0); /* padding zeroed */
    assert_memory_equal(buf + 8, &p, 8);
    assert_memory_equal(buf + 16, &f, 4);
    assert_int_equal(sl_fe_pack_params(&l, params, buf, 10), 0); /* too small */
    params[1] = NULL;
    assert_int_equal(sl_fe_pack_params(&l, params, buf, sizeof buf), 0);
}

static void params_extra(void **state)
{
    (void)state;
    uint8_t argbuf[24];
    size_t sz = sizeof argbuf;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, argbuf, CU_LAUNCH_PARAM_BUFFER_SIZE, &sz,
                     CU_LAUNCH_PARAM_END};
    const void *b;
    size_t n;
    assert_int_equal(sl_fe_parse_extra(extra, &b, &n), 0);
    assert_ptr_equal(b, argbuf);
    assert_int_equal(n, 24);
    void *bad[] = {(void *)(uintptr_t)0x77, argbuf, CU_LAUNCH_PARAM_END};
    assert_int_not_equal(sl_fe_parse_extra(bad, &b, &n), 0);
    void *nosize[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, argbuf, CU_LAUNCH_PARAM_END};
    assert_int_not_equal(sl_fe_parse_extra(nosize, &b, &n), 0);
}

/* Launch configurations refused at the call (no session here: no device limits, so only what
 * needs none; tests/cuda/launch_checks.cu covers the device limits end to end). */
static void launch_refusals(void **state)
{
    (void)state;
    assert_int_equal(sl_fe_launch_check(1, 1, 1, 1, 1, 1, 0), CUDA_SUCCESS);
    assert_int_equal(sl_fe_launch_check(0, 1, 1, 1, 1, 1, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(sl_fe_launch_check(1, 1, 0, 1, 1, 1, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(sl_fe_launch_check(1, 1, 1, 1, 0, 1, 0), CUDA_ERROR_INVALID_VALUE);
    CUlaunchAttribute at;
    memset(&at, 0, sizeof at);
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = 4, cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at.value.clusterDim.x = 2, at.value.clusterDim.y = 1, at.value.clusterDim.z = 1;
    assert_int_equal(sl_fe_launch_check_config(&cfg), CUDA_SUCCESS);
    at.value.clusterDim.x = 0;
    assert_int_equal(sl_fe_launch_check_config(&cfg), CUDA_ERROR_INVALID_CLUSTER_SIZE);
    at.value.clusterDim.x = 3;
    assert_int_equal(sl_fe_launch_check_config(&cfg), CUDA_ERROR_INVALID_CLUSTER_SIZE);
    at.id = (CUlaunchAttributeID)9999;
    assert_int_equal(sl_fe_launch_check_config(&cfg), CUDA_ERROR_INVALID_VALUE);
    at.id = CU_LAUNCH_ATTRIBUTE_PRIORITY; /* others go to the backend */
    assert_int_equal(sl_fe_launch_check_config(&cfg), CUDA_SUCCESS);
    cfg.gridDimY = 0;
    assert_int_equal(sl_fe_launch_check_config(&cfg), CUDA_ERROR_INVALID_VALUE);
}

/* ------------------------------------------------------------------ contexts */
#define C1 ((CUcontext)(uintptr_t)0x0100000000000001ull)
#define C2 ((CUcontext)(uintptr_t)0x0100000000000002ull)

/* Before cuInit (no session yet) the context calls answer as the driver does:
 * CUDA_ERROR_NOT_INITIALIZED, out parameters untouched. */
static void ctx_calls_before_init(void **state)
{
    (void)state;
    assert_false(sl_fe_rpc_initialized());
    CUcontext c = (CUcontext)7;
    CUdevice d = 7;
    assert_int_equal(cuCtxGetCurrent(&c), CUDA_ERROR_NOT_INITIALIZED);
    assert_ptr_equal(c, (CUcontext)7);
    assert_int_equal(cuCtxGetDevice(&d), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(d, 7);
    assert_int_equal(cuCtxSetCurrent(C1), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cuCtxPushCurrent_v2(C1), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cuCtxPopCurrent_v2(&c), CUDA_ERROR_NOT_INITIALIZED);
    assert_ptr_equal(c, (CUcontext)7);
    /* as the driver answers (tests/gpu/driver_facts.cu, run 22) */
    assert_int_equal(cuProfilerStart(), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cuProfilerStop(), CUDA_ERROR_NOT_INITIALIZED);
    struct sl_fe_transport none = {0}; /* a session open (cuDriverGetVersion opens it) */
    sl_fe_rpc_attach(&none);
    assert_true(sl_fe_rpc_initialized());
    /* still before cuInit: the driver answers as before (run 22) */
    assert_int_equal(cuCtxGetCurrent(&c), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cuProfilerStart(), CUDA_ERROR_NOT_INITIALIZED);
    sl_fe_init_mark_done(); /* what cuInit's success records: the calls work */
    assert_int_equal(cuProfilerStart(), CUDA_ERROR_INVALID_CONTEXT); /* no current context */
    sl_fe_rpc_reset(); /* no transport for the later tests; initialized stays */
    assert_true(sl_fe_rpc_initialized());
}

static void ctx_stack(void **state)
{
    (void)state;
    sl_fe_ctx_reset();
    sl_fe_ctx_remember(C1, 0);
    sl_fe_ctx_remember(C2, 1);
    CUcontext c = (CUcontext)1;
    assert_int_equal(cuCtxGetCurrent(&c), CUDA_SUCCESS);
    assert_null(c);
    assert_int_equal(sl_fe_current_ctx_id(), 0);
    CUdevice d;
    assert_int_equal(cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxSetCurrent(C1), CUDA_SUCCESS);
    assert_int_equal(cuCtxPushCurrent_v2(C2), CUDA_SUCCESS);
    assert_int_equal(sl_fe_current_ctx_id(), (uint64_t)(uintptr_t)C2);
    assert_int_equal(cuCtxGetDevice(&d), CUDA_SUCCESS);
    assert_int_equal(d, 1);
    unsigned long long id;
    assert_int_equal(cuCtxGetId(NULL, &id), CUDA_SUCCESS);
    assert_int_equal(id, 2);
    assert_int_equal(cuCtxPopCurrent_v2(&c), CUDA_SUCCESS);
    assert_ptr_equal(c, C2);
    assert_ptr_equal(sl_fe_current_context(), C1);
    assert_int_equal(cuCtxSetCurrent(C2), CUDA_SUCCESS); /* replaces the top */
    assert_int_equal(cuCtxGetDevice_v2(&d, C1), CUDA_SUCCESS);
    assert_int_equal(d, 0);
    assert_int_equal(cuCtxPopCurrent_v2(&c), CUDA_SUCCESS);
    assert_ptr_equal(c, C2);
    assert_int_equal(cuCtxPopCurrent_v2(&c), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxSetCurrent(NULL), CUDA_SUCCESS); /* empty: no-op */
    assert_int_equal(cuCtxPushCurrent_v2(NULL), CUDA_ERROR_INVALID_CONTEXT);
}

static void *other_thread(void *arg)
{
    (void)arg;
    return sl_fe_current_context();
}

static void ctx_stack_is_per_thread(void **state)
{
    (void)state;
    sl_fe_ctx_reset();
    assert_int_equal(cuCtxSetCurrent(C1), CUDA_SUCCESS);
    pthread_t t;
    void *seen = (void *)1;
    assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, &seen);
    assert_null(seen);
    assert_ptr_equal(sl_fe_current_context(), C1);
    sl_fe_ctx_reset();
}

/* ------------------------------------------------------------------ local answers */
static void error_names_and_strings(void **state)
{
    (void)state;
    const char *s = NULL;
    assert_int_equal(cuGetErrorName(CUDA_SUCCESS, &s), CUDA_SUCCESS);
    assert_string_equal(s, "CUDA_SUCCESS");
    assert_int_equal(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s), CUDA_SUCCESS);
    assert_string_equal(s, "CUDA_ERROR_INVALID_VALUE");
    assert_int_equal(cuGetErrorName(CUDA_ERROR_UNKNOWN, &s), CUDA_SUCCESS);
    assert_string_equal(s, "CUDA_ERROR_UNKNOWN");
    assert_int_equal(cuGetErrorName(CUDA_ERROR_NOT_SUPPORTED, &s), CUDA_SUCCESS);
    assert_string_equal(s, "CUDA_ERROR_NOT_SUPPORTED");
    s = NULL;
    /* the real driver's strings, recorded on the GPU machine (frontend/gen/driver_errors.jsonl) */
    assert_int_equal(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s), CUDA_SUCCESS);
    assert_string_equal(s, "invalid argument");
    assert_int_equal(cuGetErrorString(CUDA_ERROR_INVALID_CONTEXT, &s), CUDA_SUCCESS);
    assert_string_equal(s, "invalid device context");
    assert_int_equal(cuGetErrorString(CUDA_ERROR_NOT_SUPPORTED, &s), CUDA_SUCCESS);
    assert_string_equal(s, "operation not supported");
    s = "x";
    assert_int_equal(cuGetErrorString((CUresult)123456, &s), CUDA_ERROR_INVALID_VALUE);
    assert_null(s);
    s = "x";
    assert_int_equal(cuGetErrorName((CUresult)-1, &s), CUDA_ERROR_INVALID_VALUE);
    assert_null(s);
    assert_int_equal(cuGetErrorName(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGetErrorString(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);
    /* the table is sorted and every entry has a name and a string */
    for (size_t i = 0; i < sl_fe_error_count; i++) {
        assert_non_null(sl_fe_error_table[i].name);
        assert_true(sl_fe_error_table[i].string[0] != 0);
        if (i)
            assert_true(sl_fe_error_table[i - 1].code < sl_fe_error_table[i].code);
    }
}

static void profiler_is_local(void **state)
{
    (void)state;
    sl_fe_ctx_reset();
    sl_fe_ctx_remember(C1, 0);
    assert_int_equal(cuProfilerStart(), CUDA_ERROR_INVALID_CONTEXT); /* the driver's answer */
    assert_int_equal(cuCtxSetCurrent(C1), CUDA_SUCCESS);
    assert_int_equal(cuProfilerStart(), CUDA_SUCCESS);
    assert_int_equal(cuProfilerStop(), CUDA_SUCCESS);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    assert_int_equal(cuProfilerInitialize(NULL, NULL, CU_OUT_CSV), CUDA_SUCCESS);
#pragma GCC diagnostic pop
    assert_ptr_equal(sl_fe_export_address("cuProfilerStart"), (const void *)cuProfilerStart);
    assert_ptr_equal(sl_fe_export_address("cuProfilerStop"), (const void *)cuProfilerStop);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    assert_ptr_equal(sl_fe_export_address("cuProfilerInitialize"),
                     (const void *)cuProfilerInitialize);
#pragma GCC diagnostic pop
    assert_null(sl_fe_export_address("cuProfilerNoSuchCall"));
    /* what cudaProfilerStart gets from cuGetProcAddress */
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    assert_int_equal(cuGetProcAddress_v2("cuProfilerStart", &fn, 13000, 0, &q), CUDA_SUCCESS);
    assert_int_equal(q, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_ptr_equal(fn, (void *)cuProfilerStart);
}

/* Pinned memory is guest memory tracked locally; mapped memory needs its twin in the backend
 * (tests/cuda/mapped_memory.cu covers it end to end), so without a backend it fails with the
 * connection's error and leaves nothing behind. NULL frees answer as the driver does. */
static void pinned_host_memory(void **state)
{
    (void)state;
    void *p = NULL;
    assert_int_not_equal(cuMemHostAlloc(&p, 4096, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
    assert_null(p);
    assert_int_equal(cuMemHostAlloc(&p, 4096, 0), CUDA_SUCCESS); /* cudaMallocHost's flags */
    assert_true(sl_fe_is_host_pointer(p));
    CUdeviceptr d; /* its twin, made when the pointer is asked, needs the backend */
    assert_int_not_equal(cuMemHostGetDevicePointer_v2(&d, p, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemHostGetDevicePointer_v2(&d, &d, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFreeHost(p), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocHost_v2(&p, 4096), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeHost(p), CUDA_SUCCESS);
    static char buf[8192];
    assert_int_not_equal(cuMemHostRegister_v2(buf, sizeof buf, CU_MEMHOSTREGISTER_DEVICEMAP),
                         CUDA_SUCCESS);
    assert_int_equal(cuMemHostRegister_v2(buf, sizeof buf, CU_MEMHOSTREGISTER_PORTABLE),
                     CUDA_SUCCESS);
    assert_int_equal(cuMemFreeHost(buf), CUDA_ERROR_INVALID_VALUE); /* registered, not ours */
    assert_true(sl_fe_is_host_pointer(buf));
    assert_int_equal(cuMemHostUnregister(buf), CUDA_SUCCESS);
    assert_int_equal(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    assert_int_equal(cuMemHostUnregister(NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFreeHost(NULL), CUDA_SUCCESS);
}

/* frontend/call/memo.c: a clean answer is given again for the same call and context only; an
 * answer with an error, bulk or a deferred failure is never kept; clear forgets. */
static void memo_answers(void **state)
{
    (void)state;
    sl_fe_memo_clear();
    Sluice__Cuda__CuKernelGetAttributeRequest rq =
        SLUICE__CUDA__CU_KERNEL_GET_ATTRIBUTE_REQUEST__INIT;
    rq.attrib = 8;
    rq.kernel = 0x0500000000000001ull;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuKernelGetAttribute;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_KERNEL_GET_ATTRIBUTE;
    call.cu_kernel_get_attribute = &rq;
    call.context = 0x10;
    call.seq = 7;
    Sluice__Cuda__CuKernelGetAttributeReply out = SLUICE__CUDA__CU_KERNEL_GET_ATTRIBUTE_REPLY__INIT;
    out.pi = 1024;
    Sluice__Wire__Reply rep = SLUICE__WIRE__REPLY__INIT;
    rep.out_case = SLUICE__WIRE__REPLY__OUT_CU_KERNEL_GET_ATTRIBUTE;
    rep.cu_kernel_get_attribute = &out;
    Sluice__Wire__Reply *got = NULL;
    assert_int_equal(sl_fe_memo_get(&call, &got), 0);
    sl_fe_memo_put(&call, &rep);
    call.seq = 8; /* the seq is not part of the key */
    assert_int_equal(sl_fe_memo_get(&call, &got), 1);
    assert_int_equal(got->seq, 8);
    assert_int_equal(got->cu_kernel_get_attribute->pi, 1024);
    sluice__wire__reply__free_unpacked(got, NULL);
    call.context = 0x11; /* another context */
    assert_int_equal(sl_fe_memo_get(&call, &got), 0);
    call.context = 0x10;
    rq.attrib = 9; /* another attribute */
    assert_int_equal(sl_fe_memo_get(&call, &got), 0);
    rep.result = 1; /* errors are not kept */
    sl_fe_memo_put(&call, &rep);
    assert_int_equal(sl_fe_memo_get(&call, &got), 0);
    rep.result = 0;
    rep.failed_seq = 3; /* nor answers carrying a deferred error */
    sl_fe_memo_put(&call, &rep);
    assert_int_equal(sl_fe_memo_get(&call, &got), 0);
    rq.attrib = 8;
    sl_fe_memo_clear();
    assert_int_equal(sl_fe_memo_get(&call, &got), 0);

    /* capture status: only "not capturing" is kept, and uncapture forgets it */
    Sluice__Cuda__CuStreamIsCapturingRequest cq =
        SLUICE__CUDA__CU_STREAM_IS_CAPTURING_REQUEST__INIT;
    Sluice__Wire__Call cc = SLUICE__WIRE__CALL__INIT;
    cc.call_id = SL_CALL_cuStreamIsCapturing;
    cc.args_case = SLUICE__WIRE__CALL__ARGS_CU_STREAM_IS_CAPTURING;
    cc.cu_stream_is_capturing = &cq;
    Sluice__Cuda__CuStreamIsCapturingReply cr = SLUICE__CUDA__CU_STREAM_IS_CAPTURING_REPLY__INIT;
    Sluice__Wire__Reply crep = SLUICE__WIRE__REPLY__INIT;
    crep.out_case = SLUICE__WIRE__REPLY__OUT_CU_STREAM_IS_CAPTURING;
    crep.cu_stream_is_capturing = &cr;
    cr.capture_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    sl_fe_memo_put(&cc, &crep);
    assert_int_equal(sl_fe_memo_get(&cc, &got), 0);
    cr.capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
    sl_fe_memo_put(&cc, &crep);
    rep.failed_seq = 0;
    sl_fe_memo_put(&call, &rep); /* an attribute answer, kept across uncapture */
    assert_int_equal(sl_fe_memo_get(&cc, &got), 1);
    sluice__wire__reply__free_unpacked(got, NULL);
    sl_fe_memo_uncapture();
    assert_int_equal(sl_fe_memo_get(&cc, &got), 0);
    assert_int_equal(sl_fe_memo_get(&call, &got), 1);
    sluice__wire__reply__free_unpacked(got, NULL);
    sl_fe_memo_clear();
}

static void ctx_create_refusals(void **state)
{
    (void)state;
    sl_fe_ctx_reset();
    CUcontext c = NULL;
    assert_int_equal(cuCtxCreate_v4(NULL, NULL, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CUexecAffinityParam aff = {0};
    CUctxCreateParams prm = {0};
    prm.execAffinityParams = &aff;
    prm.numExecAffinityParams = 1;
    assert_int_equal(cuCtxCreate_v4(&c, &prm, 0, 0), CUDA_ERROR_NOT_SUPPORTED);
    prm.execAffinityParams = NULL;
    assert_int_equal(cuCtxCreate_v4(&c, &prm, 0, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuCtxCreate_v3(&c, NULL, 1, 0, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuCtxCreate_v3(&c, &aff, 1, 0, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_null(c);
    assert_int_equal(cuCtxDestroy_v2(NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuCtxDestroy_v2(C1), CUDA_ERROR_INVALID_CONTEXT); /* never made */
    assert_null(sl_fe_current_context());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(config_parse),
        cmocka_unit_test(config_load_names_missing_file),
        cmocka_unit_test(image_fatbin_and_wrapper),
        cmocka_unit_test(image_elf),
        cmocka_unit_test(image_ptx_and_garbage),
        cmocka_unit_test(sha256_vector),
        cmocka_unit_test(params_pack),
        cmocka_unit_test(params_extra),
        cmocka_unit_test(launch_refusals),
        cmocka_unit_test(ctx_calls_before_init), /* first: nothing attached yet */
        cmocka_unit_test(ctx_stack),
        cmocka_unit_test(ctx_stack_is_per_thread),
        cmocka_unit_test(error_names_and_strings),
        cmocka_unit_test(profiler_is_local),
        cmocka_unit_test(pinned_host_memory),
        cmocka_unit_test(memo_answers),
        cmocka_unit_test(ctx_create_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
