/* Tests of libsluice-driver-double.so through its exported driver ABI (dlopen + dlsym), the way
 * sluice-backend binds it: devices, contexts, memory, a library and a vadd launch, parameter
 * layouts, globals, events, host functions, and failures that must be clean errors. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void *lib;

#define SYM(name) ((__typeof__(&name))sym(#name))
static void *sym(const char *name)
{
    void *p = dlsym(lib, name);
    if (!p)
        fail_msg("the double does not export %s", name);
    return p;
}

static CUcontext ctx_new(void)
{
    CUcontext c = NULL;
    assert_int_equal(SYM(cuCtxCreate_v4)(&c, NULL, 0, 0), CUDA_SUCCESS);
    return c;
}

/* A minimal fatbin header: magic, version, header size, files size (0). */
static const uint32_t fake_fatbin[4] = {0xba55ed50u, 0x00100001u, 0, 0};

static void test_device(void **state)
{
    (void)state;
    int n = 0, v = 0, major = 0, minor = 0, warp = 0, sms = 0;
    char name[128];
    size_t total = 0;
    assert_int_equal(SYM(cuDriverGetVersion)(&v), CUDA_SUCCESS);
    assert_int_equal(v, 13000);
    assert_int_equal(SYM(cuDeviceGetCount)(&n), CUDA_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(SYM(cuDeviceGetName)(name, sizeof name, 0), CUDA_SUCCESS);
    assert_string_equal(name, "Sluice driver test double (no GPU)");
    assert_int_equal(
        SYM(cuDeviceGetAttribute)(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0),
        CUDA_SUCCESS);
    SYM(cuDeviceGetAttribute)(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0);
    SYM(cuDeviceGetAttribute)(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0);
    SYM(cuDeviceGetAttribute)(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
    assert_int_equal(major * 10 + minor, 90);
    assert_int_equal(warp, 32);
    assert_int_equal(sms, 4);
    assert_int_equal(SYM(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_MAX, 0),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(SYM(cuDeviceGet)((CUdevice *)&v, 1), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(SYM(cuDeviceTotalMem_v2)(&total, 0), CUDA_SUCCESS);
    assert_int_equal(total, (size_t)64 << 20);
    assert_int_equal(SYM(cuDeviceGetLuid)(name, (unsigned *)&v, 0), CUDA_ERROR_NOT_SUPPORTED);
    const char *s = NULL;
    assert_int_equal(SYM(cuGetErrorName)(CUDA_ERROR_INVALID_HANDLE, &s), CUDA_SUCCESS);
    assert_string_equal(s, "CUDA_ERROR_INVALID_HANDLE");
}

static void test_contexts(void **state)
{
    (void)state;
    CUcontext none = (CUcontext)1, c, got, primary;
    CUdeviceptr d;
    assert_int_equal(SYM(cuCtxGetCurrent)(&none), CUDA_SUCCESS);
    assert_null(none);
    assert_int_equal(SYM(cuMemAlloc_v2)(&d, 64), CUDA_ERROR_INVALID_CONTEXT);
    c = ctx_new();
    assert_int_equal(SYM(cuCtxGetCurrent)(&got), CUDA_SUCCESS);
    assert_ptr_equal(got, c);
    unsigned long long id1 = 0, id2 = 0;
    assert_int_equal(SYM(cuCtxGetId)(c, &id1), CUDA_SUCCESS);
    assert_int_equal(SYM(cuDevicePrimaryCtxRetain)(&primary, 0), CUDA_SUCCESS);
    assert_int_equal(SYM(cuCtxPushCurrent_v2)(primary), CUDA_SUCCESS);
    assert_int_equal(SYM(cuCtxGetId)(NULL, &id2), CUDA_SUCCESS);
    assert_true(id1 != id2);
    assert_int_equal(SYM(cuCtxPopCurrent_v2)(&got), CUDA_SUCCESS);
    assert_ptr_equal(got, primary);
    assert_int_equal(SYM(cuDevicePrimaryCtxRelease_v2)(0), CUDA_SUCCESS);
    assert_int_equal(SYM(cuCtxDestroy_v2)(c), CUDA_SUCCESS);
    assert_int_equal(SYM(cuCtxDestroy_v2)(c), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(SYM(cuCtxGetCurrent)(&got), CUDA_SUCCESS);
    assert_null(got);
}

static void test_memory(void **state)
{
    (void)state;
    CUcontext c = ctx_new();
    CUdeviceptr a, b;
    char in[1000], out[1000];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (char)(i * 7);
    assert_int_equal(SYM(cuMemAlloc_v2)(&a, sizeof in), CUDA_SUCCESS);
    assert_int_equal(SYM(cuMemAlloc_v2)(&b, sizeof in), CUDA_SUCCESS);
    assert_int_equal(a % 256, 0);
    assert_int_equal(SYM(cuMemcpyHtoD_v2)(a, in, sizeof in), CUDA_SUCCESS);
    assert_int_equal(SYM(cuMemcpyDtoDAsync_v2)(b, a, sizeof in, 0), CUDA_SUCCESS);
    assert_int_equal(SYM(cuMemcpyDtoH_v2)(out, b, sizeof out), CUDA_SUCCESS);
    assert_memory_equal(in, out, sizeof in);
    assert_int_equal(SYM(cuMemsetD32_v2)(a, 0x01020304u, 250), CUDA_SUCCESS);
    assert_int_equal(SYM(cuMemcpyDtoH_v2)(out, a, 8), CUDA_SUCCESS);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[7], 1);
    size_t free_ = 0, total = 0;
    assert_int_equal(SYM(cuMemGetInfo_v2)(&free_, &total), CUDA_SUCCESS);
    assert_true(free_ < total);
    unsigned type = 0;
    assert_int_equal(SYM(cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 10),
                     CUDA_SUCCESS);
    assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
    CUdeviceptr base = 0;
    size_t range = 0;
    assert_int_equal(SYM(cuMemGetAddressRange_v2)(&base, &range, a + 999), CUDA_SUCCESS);
    assert_true(base == a && range == sizeof in);
    assert_int_equal(SYM(cuMemGetAddressRange_v2)(&base, &range, a + 1000), CUDA_ERROR_NOT_FOUND);
    /* 2D: 4 rows of 10 bytes from a (pitch 100) into b (pitch 10) */
    CUDA_MEMCPY2D m = {0};
    m.srcMemoryType = m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    m.srcDevice = a;
    m.srcPitch = 100;
    m.dstDevice = b;
    m.dstPitch = 10;
    m.WidthInBytes = 10;
    m.Height = 4;
    assert_int_equal(SYM(cuMemcpy2D_v2)(&m), CUDA_SUCCESS);
    m.Height = 11; /* runs past the source */
    assert_int_equal(SYM(cuMemcpy2D_v2)(&m), CUDA_ERROR_INVALID_VALUE);
    /* failures */
    assert_int_equal(SYM(cuMemcpyHtoD_v2)(a + 1, in, sizeof in), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(SYM(cuMemcpyHtoD_v2)((CUdeviceptr)0x7a0000001000ull, in, 16),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(SYM(cuMemcpyDtoH_v2)(out, (CUdeviceptr)(uintptr_t)in, 16),
                     CUDA_ERROR_INVALID_VALUE); /* host memory is not device memory */
    assert_int_equal(SYM(cuMemFree_v2)(a), CUDA_SUCCESS);
    assert_int_equal(SYM(cuMemcpyHtoD_v2)(a, in, 16), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(SYM(cuMemFree_v2)(a), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(SYM(cuMemcpyHtoDAsync_v2)(b, in, 16, (CUstream)(uintptr_t)0xdeadbeef),
                     CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(SYM(cuMemAlloc_v2)(&a, (size_t)65 << 20), CUDA_ERROR_OUT_OF_MEMORY);
    void *h = NULL;
    assert_int_equal(SYM(cuMemAllocHost_v2)(&h, 4096), CUDA_SUCCESS);
    assert_int_equal(SYM(cuMemcpyDtoH_v2)(h, b, 16), CUDA_SUCCESS);
    assert_int_equal(SYM(cuMemFreeHost)(h), CUDA_SUCCESS);
    assert_int_equal(SYM(cuCtxDestroy_v2)(c), CUDA_SUCCESS); /* frees b */
}

static void test_library_launch(void **state)
{
    (void)state;
    CUcontext c = ctx_new();
    CUmoduleLoadingMode mode;
    assert_int_equal(SYM(cuModuleGetLoadingMode)(&mode), CUDA_SUCCESS);
    CUlibrary l;
    CUkernel k, k2;
    assert_int_equal(SYM(cuLibraryLoadData)(&l, fake_fatbin, NULL, NULL, 0, NULL, NULL, 0),
                     CUDA_SUCCESS);
    assert_int_equal(SYM(cuLibraryLoadData)(&l, "garbage", NULL, NULL, 0, NULL, NULL, 0),
                     CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(SYM(cuLibraryGetKernel)(&k, l, "_Z4vaddPKfS0_Pfi"), CUDA_SUCCESS);
    assert_int_equal(SYM(cuLibraryGetKernel)(&k2, l, "_Z4vaddPKfS0_Pfi"), CUDA_SUCCESS);
    assert_ptr_equal(k, k2);
    assert_int_equal(SYM(cuLibraryGetKernel)(&k2, l, "_Z7missingv"), CUDA_ERROR_NOT_FOUND);
    size_t off = 0, size = 0;
    size_t want_off[4] = {0, 8, 16, 24}, want_size[4] = {8, 8, 8, 4};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(SYM(cuKernelGetParamInfo)(k, i, &off, &size), CUDA_SUCCESS);
        assert_int_equal(off, want_off[i]);
        assert_int_equal(size, want_size[i]);
    }
    assert_int_equal(SYM(cuKernelGetParamInfo)(k, 4, &off, &size), CUDA_ERROR_INVALID_VALUE);
    CUfunction f;
    assert_int_equal(SYM(cuKernelGetFunction)(&f, k), CUDA_SUCCESS);
    assert_int_equal(SYM(cuFuncGetParamInfo)(f, 3, &off, &size), CUDA_SUCCESS);
    int v = 0;
    assert_int_equal(SYM(cuFuncGetAttribute)(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f),
                     CUDA_SUCCESS);
    assert_int_equal(v, 1024);

    enum { N = 1000 };
    float a[N], b[N], out[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = 3.0f - (float)i;
    }
    CUdeviceptr da, db, dc;
    assert_int_equal(SYM(cuMemAlloc_v2)(&da, sizeof a), CUDA_SUCCESS);
    assert_int_equal(SYM(cuMemAlloc_v2)(&db, sizeof b), CUDA_SUCCESS);
    assert_int_equal(SYM(cuMemAlloc_v2)(&dc, sizeof out), CUDA_SUCCESS);
    SYM(cuMemcpyHtoD_v2)(da, a, sizeof a);
    SYM(cuMemcpyHtoD_v2)(db, b, sizeof b);
    int n = N;
    void *params[] = {&da, &db, &dc, &n};
    CUstream s;
    CUevent e0, e1;
    assert_int_equal(SYM(cuStreamCreate)(&s, 0), CUDA_SUCCESS);
    assert_int_equal(SYM(cuEventCreate)(&e0, 0), CUDA_SUCCESS);
    assert_int_equal(SYM(cuEventCreate)(&e1, 0), CUDA_SUCCESS);
    assert_int_equal(SYM(cuEventRecord)(e0, s), CUDA_SUCCESS);
    assert_int_equal(SYM(cuLaunchKernel)((CUfunction)k, 4, 1, 1, 256, 1, 1, 0, s, params, NULL),
                     CUDA_SUCCESS);
    assert_int_equal(SYM(cuEventRecord)(e1, s), CUDA_SUCCESS);
    assert_int_equal(SYM(cuStreamSynchronize)(s), CUDA_SUCCESS);
    float ms = -1;
    assert_int_equal(SYM(cuEventElapsedTime_v2)(&ms, e0, e1), CUDA_SUCCESS);
    assert_true(ms > 0);
    SYM(cuMemcpyDtoH_v2)(out, dc, sizeof out);
    for (int i = 0; i < N; i++)
        assert_true(out[i] == a[i] + b[i]);
    /* the same through `extra` (one packed buffer) */
    unsigned char buf[28];
    memset(out, 0, sizeof out);
    SYM(cuMemcpyHtoD_v2)(dc, out, sizeof out);
    memcpy(buf, &da, 8);
    memcpy(buf + 8, &db, 8);
    memcpy(buf + 16, &dc, 8);
    memcpy(buf + 24, &n, 4);
    size_t bsize = sizeof buf;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bsize,
                     CU_LAUNCH_PARAM_END};
    assert_int_equal(SYM(cuLaunchKernel)(f, 4, 1, 1, 256, 1, 1, 0, NULL, NULL, extra),
                     CUDA_SUCCESS);
    SYM(cuMemcpyDtoH_v2)(out, dc, sizeof out);
    assert_true(out[N - 1] == a[N - 1] + b[N - 1]);
    /* bad launches */
    assert_int_equal(SYM(cuLaunchKernel)(f, 1, 1, 1, 2048, 1, 1, 0, NULL, params, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(SYM(cuLaunchKernel)((CUfunction)(uintptr_t)0xdeadbeef, 1, 1, 1, 1, 1, 1, 0,
                                         NULL, params, NULL),
                     CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(SYM(cuStreamDestroy_v2)(s), CUDA_SUCCESS);
    assert_int_equal(SYM(cuStreamDestroy_v2)(s), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(SYM(cuEventDestroy_v2)(e0), CUDA_SUCCESS);
    assert_int_equal(SYM(cuLibraryUnload)(l), CUDA_SUCCESS);
    assert_int_equal(SYM(cuLibraryGetKernel)(&k2, l, "_Z4vaddPKfS0_Pfi"),
                     CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(SYM(cuCtxDestroy_v2)(c), CUDA_SUCCESS);
}

static void test_globals_and_sticky(void **state)
{
    (void)state;
    CUcontext c = ctx_new();
    CUmodule m;
    CUfunction f;
    assert_int_equal(SYM(cuModuleLoadData)(&m, fake_fatbin), CUDA_SUCCESS);
    assert_int_equal(SYM(cuModuleGetFunction)(&f, m, "_Z6lookupPii"), CUDA_SUCCESS);
    CUdeviceptr table, count, out;
    size_t bytes = 0;
    assert_int_equal(SYM(cuModuleGetGlobal_v2)(&table, &bytes, m, "d_table"), CUDA_SUCCESS);
    assert_int_equal(bytes, 64);
    assert_int_equal(SYM(cuModuleGetGlobal_v2)(&count, &bytes, m, "d_count"), CUDA_SUCCESS);
    assert_int_equal(SYM(cuModuleGetGlobal_v2)(&count, &bytes, m, "nope"), CUDA_ERROR_NOT_FOUND);
    int t[16], res[32], n = 32, cnt = 0;
    for (int i = 0; i < 16; i++)
        t[i] = i * i;
    assert_int_equal(SYM(cuMemcpyHtoD_v2)(table, t, sizeof t), CUDA_SUCCESS);
    assert_int_equal(SYM(cuMemAlloc_v2)(&out, sizeof res), CUDA_SUCCESS);
    void *params[] = {&out, &n};
    assert_int_equal(SYM(cuLaunchKernel)(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL),
                     CUDA_SUCCESS);
    SYM(cuMemcpyDtoH_v2)(res, out, sizeof res);
    SYM(cuMemcpyDtoH_v2)(&cnt, count, sizeof cnt);
    assert_int_equal(res[20], t[4] * 2 + 20);
    assert_int_equal(cnt, 32);
    /* a kernel handed a bad pointer: ILLEGAL_ADDRESS, sticky for the context */
    CUdeviceptr bad = 0x10;
    void *bad_params[] = {&bad, &n};
    assert_int_equal(SYM(cuLaunchKernel)(f, 1, 1, 1, 32, 1, 1, 0, NULL, bad_params, NULL),
                     CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(SYM(cuCtxSynchronize)(), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(SYM(cuCtxDestroy_v2)(c), CUDA_SUCCESS);
    c = ctx_new();
    assert_int_equal(SYM(cuCtxSynchronize)(), CUDA_SUCCESS);
    assert_int_equal(SYM(cuCtxDestroy_v2)(c), CUDA_SUCCESS);
}

static int host_calls;
static void host_fn(void *arg)
{
    host_calls += *(int *)arg;
}

static void test_host_func(void **state)
{
    (void)state;
    CUcontext c = ctx_new();
    int one = 1;
    assert_int_equal(SYM(cuLaunchHostFunc)(NULL, host_fn, &one), CUDA_SUCCESS);
    assert_int_equal(host_calls, 1);
    assert_int_equal(SYM(cuLaunchHostFunc)((CUstream)(uintptr_t)0xdeadbeef, host_fn, &one),
                     CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(host_calls, 1);
    assert_int_equal(SYM(cuCtxDestroy_v2)(c), CUDA_SUCCESS);
}

/* What the driver forbids while a capture runs: refused, and the capture invalidated. */
static void test_capture_prohibited(void **state)
{
    (void)state;
    CUcontext c = ctx_new();
    CUstream s = NULL;
    CUevent e = NULL;
    CUgraph g = NULL;
    CUstreamCaptureStatus st;
    assert_int_equal(SYM(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(SYM(cuEventCreate)(&e, 0), CUDA_SUCCESS);
    /* a stream's synchronization */
    assert_int_equal(SYM(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(SYM(cuStreamSynchronize)(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_int_equal(SYM(cuStreamIsCapturing)(s, &st), CUDA_SUCCESS);
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    assert_int_equal(SYM(cuStreamEndCapture)(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_null(g);
    assert_int_equal(SYM(cuStreamSynchronize)(s), CUDA_SUCCESS); /* no capture any more */
    /* an event recorded in the capture */
    assert_int_equal(SYM(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(SYM(cuEventRecord)(e, s), CUDA_SUCCESS);
    assert_int_equal(SYM(cuEventQuery)(e), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_int_equal(SYM(cuStreamEndCapture)(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* the context's synchronization while a stream captures */
    assert_int_equal(SYM(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(SYM(cuCtxSynchronize)(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_int_equal(SYM(cuStreamEndCapture)(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* a capture without them ends well */
    assert_int_equal(SYM(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(SYM(cuStreamEndCapture)(s, &g), CUDA_SUCCESS);
    assert_non_null(g);
    assert_int_equal(SYM(cuGraphDestroy)(g), CUDA_SUCCESS);
    assert_int_equal(SYM(cuCtxSynchronize)(), CUDA_SUCCESS);
    assert_int_equal(SYM(cuEventDestroy_v2)(e), CUDA_SUCCESS);
    assert_int_equal(SYM(cuStreamDestroy_v2)(s), CUDA_SUCCESS);
    assert_int_equal(SYM(cuCtxDestroy_v2)(c), CUDA_SUCCESS);
}

struct other_query {
    CUcontext ctx;
    CUstream st;
    CUstreamCaptureMode mode;
    CUresult rc;
};

static void *query_from_other_thread(void *arg)
{
    struct other_query *q = arg;
    SYM(cuCtxSetCurrent)(q->ctx);
    CUstreamCaptureMode m = q->mode;
    SYM(cuThreadExchangeStreamCaptureMode)(&m);
    q->rc = SYM(cuStreamQuery)(q->st);
    return NULL;
}

static CUresult query_on_thread(CUcontext c, CUstream st, CUstreamCaptureMode mode)
{
    struct other_query q = {c, st, mode, CUDA_ERROR_UNKNOWN};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, query_from_other_thread, &q), 0);
    pthread_join(t, NULL);
    return q.rc;
}

/* The capture modes: a potentially unsafe call (here a query of another, idle stream) is
 * refused and invalidates the capture when the calling thread's mode says so. */
static void test_capture_modes(void **state)
{
    (void)state;
    CUcontext c = ctx_new();
    CUstream s = NULL, other = NULL;
    CUgraph g = NULL;
    assert_int_equal(SYM(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(SYM(cuStreamCreate)(&other, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    /* own global capture: refused, invalidated */
    assert_int_equal(SYM(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(SYM(cuStreamQuery)(other), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_int_equal(SYM(cuStreamEndCapture)(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* the thread in relaxed mode: allowed, the capture ends well */
    assert_int_equal(SYM(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    assert_int_equal(SYM(cuThreadExchangeStreamCaptureMode)(&m), CUDA_SUCCESS);
    assert_int_equal(m, CU_STREAM_CAPTURE_MODE_GLOBAL);
    assert_int_equal(SYM(cuStreamQuery)(other), CUDA_SUCCESS);
    assert_int_equal(SYM(cuThreadExchangeStreamCaptureMode)(&m), CUDA_SUCCESS);
    /* another thread: refused in global mode, allowed in thread-local and relaxed mode */
    assert_int_equal(query_on_thread(c, other, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    assert_int_equal(query_on_thread(c, other, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    assert_int_equal(SYM(cuStreamEndCapture)(s, &g), CUDA_SUCCESS);
    assert_int_equal(SYM(cuGraphDestroy)(g), CUDA_SUCCESS);
    assert_int_equal(SYM(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(query_on_thread(c, other, CU_STREAM_CAPTURE_MODE_GLOBAL),
                     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_int_equal(SYM(cuStreamEndCapture)(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* a thread-local capture does not bind other threads */
    assert_int_equal(SYM(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                     CUDA_SUCCESS);
    assert_int_equal(query_on_thread(c, other, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(SYM(cuStreamEndCapture)(s, &g), CUDA_SUCCESS);
    assert_int_equal(SYM(cuGraphDestroy)(g), CUDA_SUCCESS);
    assert_int_equal(SYM(cuStreamDestroy_v2)(other), CUDA_SUCCESS);
    assert_int_equal(SYM(cuStreamDestroy_v2)(s), CUDA_SUCCESS);
    assert_int_equal(SYM(cuCtxDestroy_v2)(c), CUDA_SUCCESS);
}

int main(void)
{
    setenv("SLUICE_DOUBLE_MEM_MIB", "64", 1);
    lib = dlopen(SLUICE_DOUBLE_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", SLUICE_DOUBLE_PATH, dlerror());
        return 1;
    }
    if (SYM(cuInit)(0) != CUDA_SUCCESS)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device),
        cmocka_unit_test(test_contexts),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_library_launch),
        cmocka_unit_test(test_globals_and_sticky),
        cmocka_unit_test(test_host_func),
        cmocka_unit_test(test_capture_prohibited),
        cmocka_unit_test(test_capture_modes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
