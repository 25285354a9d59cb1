// driver_api: what the driver-API samples (vectorAddDrv, matrixMulDrv, ...) and a few runtime
// samples need: cuCtxCreate / cuModuleLoadData (a fatbin) / cuModuleGetFunction /
// cuLaunchKernel / cuCtxDestroy, the context queries on an explicitly created context,
// cuGetErrorName/String, cudaOccupancyMaxPotentialBlockSize, cudaProfilerStart/Stop, pointer
// attributes and NULL frees.
#include "driver.cuh"
#include "driver_api_kernel.cu"
#include <cstring>
#include <cuda_profiler_api.h>
#include <vector>

#include "driver_api_fatbin.h" // driver_api_fatbin[]: the fatbin of driver_api_kernel.cu

static size_t smem_for(int block)
{
    return (size_t)block * sizeof(float);
}

/* Pointer attributes of device memory answered in the guest's terms, and NULL frees as the
 * driver has them: cuMemFree(0) and cuMemFreeHost(NULL) succeed (cuBLAS relies on the first),
 * cuMemHostUnregister(NULL) does not. */
static void pointer_attributes(CUcontext ctx, CUdeviceptr d, size_t bytes)
{
    CUcontext pctx = nullptr;
    CU(cuPointerGetAttribute(&pctx, CU_POINTER_ATTRIBUTE_CONTEXT, d));
    if (pctx != ctx)
        FAIL("CU_POINTER_ATTRIBUTE_CONTEXT = %p, expected %p", (void *)pctx, (void *)ctx);
    unsigned type = 0;
    CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 4));
    if (type != CU_MEMORYTYPE_DEVICE)
        FAIL("CU_POINTER_ATTRIBUTE_MEMORY_TYPE = %u", type);
    CUdeviceptr base = 0, self = 0;
    size_t size = 0;
    int ordinal = -1;
    CU(cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 16));
    CU(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 16));
    CU(cuPointerGetAttribute(&self, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, d + 8));
    CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d));
    if (base != d || size < bytes || self != d + 8 || ordinal != 0)
        FAIL("pointer attributes: base %llx size %zu self %llx ordinal %d",
             (unsigned long long)base, size, (unsigned long long)self, ordinal);
    CUresult rc =
        cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + bytes + (1 << 20));
    if (rc != CUDA_ERROR_INVALID_VALUE)
        FAIL("pointer attribute of memory not allocated: %d", (int)rc);
    CU(cuMemFree(0));
    CU(cuMemFreeHost(nullptr));
    rc = cuMemHostUnregister(nullptr);
    if (rc != CUDA_ERROR_INVALID_VALUE)
        FAIL("cuMemHostUnregister(NULL) = %d", (int)rc);
}

/* The private table 6e163fbe... whose [7] cuFFT calls to get the one kernel of a module it
 * loads without naming it (docs/frontend-internals.md): the real driver and Sluice must visit
 * the same functions and count them alike. */
static void keep_function(void *opaque, CUfunction fn, const char *name)
{
    (void)name;
    static_cast<std::vector<CUfunction> *>(opaque)->push_back(fn);
}

static const void *const *export_table(const unsigned char (&id)[16])
{
    CUuuid uuid;
    std::memcpy(uuid.bytes, id, sizeof id);
    const void *table = nullptr;
    CU(cuGetExportTable(&table, &uuid));
    return static_cast<const void *const *>(table);
}

static CUfunction function_by_module_table(CUcontext ctx, CUmodule mod)
{
    static const unsigned char id[16] = {0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d,
                                         0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e};
    auto slots = export_table(id);
    if ((uintptr_t)slots[0] < 8 * sizeof(void *) || !slots[7])
        FAIL("table 6e163fbe has no slot 7 (size %zu)", (size_t)(uintptr_t)slots[0]);
    typedef unsigned long long (*visit_fn)(CUcontext, CUmodule,
                                           void (*)(void *, CUfunction, const char *), void *);
    std::vector<CUfunction> seen;
    unsigned long long n = ((visit_fn)slots[7])(ctx, mod, keep_function, &seen);
    unsigned count = 0;
    CU(cuModuleGetFunctionCount(&count, mod));
    if (n != 1 || seen.size() != 1 || count != 1)
        FAIL("6e163fbe[7] returned %llu and visited %zu functions; cuModuleGetFunctionCount %u", n,
             seen.size(), count);
    return seen[0];
}

/* The private table 21318c60... whose [51] and [39] cuBLAS calls to key its default workspace
 * by stream: the key must be the stream's cuStreamGetId, the same object every time, and a
 * context's own streams need the context. */
static void stream_key(CUcontext ctx)
{
    static const unsigned char id[16] = {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
                                         0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2};
    auto slots = export_table(id);
    typedef CUresult (*object_fn)(CUcontext, CUstream, void **, int);
    typedef CUresult (*id_fn)(CUcontext, void *, unsigned long long *);
    auto object = (object_fn)slots[51];
    auto key = (id_fn)slots[39];
    CUstream created;
    CU(cuStreamCreate(&created, CU_STREAM_NON_BLOCKING));
    CUstream streams[] = {created, nullptr, CU_STREAM_LEGACY};
    void *first[3] = {};
    for (int i = 0; i < 3; i++) {
        void *obj = nullptr, *again = nullptr;
        unsigned long long v = 0, sid = 1;
        CU(object(ctx, streams[i], &obj, 0));
        CU(object(ctx, streams[i], &again, 0));
        CU(key(ctx, obj, &v));
        CU(cuStreamGetId(streams[i], &sid));
        if (obj != again || v != sid)
            FAIL("21318c60[51]/[39] of stream %d: objects %p %p, key %llu, cuStreamGetId %llu", i,
                 obj, again, v, sid);
        first[i] = obj;
    }
    if (first[1] != first[2] || first[0] == first[1])
        FAIL("21318c60[51]: the NULL and legacy streams share an object, a created stream not");
    void *obj = nullptr;
    CUresult rc = object(nullptr, CU_STREAM_LEGACY, &obj, 0);
    if (rc != CUDA_ERROR_INVALID_HANDLE)
        FAIL("21318c60[51] of the legacy stream without a context = %d", (int)rc);
    CU(cuStreamDestroy(created));
}

static void driver_part(void)
{
    const int n = 1000;
    CU(cuInit(0));
    CUdevice dev;
    CU(cuDeviceGet(&dev, 0));

    // error strings, answered locally
    const char *s = nullptr;
    CU(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s));
    if (!s || std::strcmp(s, "CUDA_ERROR_INVALID_VALUE") != 0)
        FAIL("cuGetErrorName(1) = %s", s ? s : "(null)");
    s = nullptr;
    CU(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    if (!s || !*s)
        FAIL("cuGetErrorString(2) empty");
    s = "x";
    if (cuGetErrorString((CUresult)123456, &s) != CUDA_ERROR_INVALID_VALUE || s != nullptr)
        FAIL("cuGetErrorString(123456) should be INVALID_VALUE with NULL");

    CUcontext ctx = nullptr, cur = nullptr;
    CU(cuCtxCreate(&ctx, nullptr, CU_CTX_SCHED_BLOCKING_SYNC, dev));
    CU(cuCtxGetCurrent(&cur));
    if (cur != ctx)
        FAIL("cuCtxCreate did not make the new context current");
    unsigned flags = 0, api = 0;
    CU(cuCtxGetFlags(&flags));
    if ((flags & CU_CTX_SCHED_MASK) != CU_CTX_SCHED_BLOCKING_SYNC)
        FAIL("cuCtxGetFlags = 0x%x", flags);
    CU(cuCtxGetApiVersion(ctx, &api));
    int lo = 0, hi = 0;
    CU(cuCtxGetStreamPriorityRange(&lo, &hi));

    // a fatbin must be 8-byte aligned, as the samples' images (read from files) are
    std::vector<unsigned long long> image((sizeof driver_api_fatbin + 7) / 8);
    std::memcpy(image.data(), driver_api_fatbin, sizeof driver_api_fatbin);
    CUmodule mod;
    CU(cuModuleLoadData(&mod, image.data()));
    CUfunction f;
    CU(cuModuleGetFunction(&f, mod, "_Z5scalePffi"));
    const char *fname = nullptr;
    CU(cuFuncGetName(&fname, f));
    if (!fname || std::strcmp(fname, "_Z5scalePffi") != 0)
        FAIL("cuFuncGetName = %s", fname ? fname : "(null)");
    // the kernel launched below is the one the private table visits (cuFFT's way)
    CUfunction byname = f;
    f = function_by_module_table(ctx, mod);
    fname = nullptr;
    CU(cuFuncGetName(&fname, f));
    if (!fname || std::strcmp(fname, "_Z5scalePffi") != 0)
        FAIL("cuFuncGetName of the visited function = %s (by name: %p, visited: %p)",
             fname ? fname : "(null)", (void *)byname, (void *)f);
    int maxt = 0;
    CU(cuFuncGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    if (maxt <= 0)
        FAIL("CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = %d", maxt);
    int nb = 0;
    CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&nb, f, 128, 0));
    if (nb <= 0)
        FAIL("cuOccupancyMaxActiveBlocksPerMultiprocessor = %d", nb);
    int grid = 0, block = 0;
    CU(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, nullptr, 0, 0));
    if (grid <= 0 || block <= 0 || block > 1024)
        FAIL("cuOccupancyMaxPotentialBlockSize = %d, %d", grid, block);
    CU(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, smem_for, 0, 256));
    if (grid <= 0 || block <= 0 || block > 256)
        FAIL("cuOccupancyMaxPotentialBlockSize(callback) = %d, %d", grid, block);

    CUlaunchAttribute cl[1];
    cl[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cl[0].value.clusterDim.x = 2;
    cl[0].value.clusterDim.y = 1;
    cl[0].value.clusterDim.z = 1;
    CUlaunchConfig lc = {};
    lc.gridDimX = 8;
    lc.gridDimY = lc.gridDimZ = 1;
    lc.blockDimX = 128;
    lc.blockDimY = lc.blockDimZ = 1;
    lc.attrs = cl;
    lc.numAttrs = 1;
    int csize = 0, nclusters = 0;
    CU(cuOccupancyMaxPotentialClusterSize(&csize, f, &lc));
    CU(cuOccupancyMaxActiveClusters(&nclusters, f, &lc));
    if (csize < 1 || nclusters < 1)
        FAIL("cluster occupancy: size %d, active %d", csize, nclusters);

    std::vector<float> h(n);
    for (int i = 0; i < n; i++)
        h[i] = (float)i;
    CUdeviceptr d;
    CU(cuMemAlloc(&d, n * sizeof(float)));
    CU(cuMemcpyHtoD(d, h.data(), n * sizeof(float)));
    float factor = 2.5f;
    int count = n;
    void *args[] = {&d, &factor, &count};
    CU(cuLaunchKernel(f, (n + block - 1) / block, 1, 1, block, 1, 1, 0, nullptr, args, nullptr));
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH(h.data(), d, n * sizeof(float)));
    for (int i = 0; i < n; i++)
        if (h[i] != (float)i * 2.5f)
            FAIL("h[%d] = %f, expected %f", i, h[i], (float)i * 2.5f);
    pointer_attributes(ctx, d, n * sizeof(float));
    stream_key(ctx);
    CU(cuMemFree(d));
    CU(cuModuleUnload(mod));
    CU(cuCtxDestroy(ctx));
    CU(cuCtxGetCurrent(&cur));
    if (cur == ctx)
        FAIL("cuCtxDestroy left the destroyed context current");
}

static void runtime_part(void)
{
    const int n = 4096;
    int grid = 0, block = 0;
    CHECK(cudaOccupancyMaxPotentialBlockSize(&grid, &block, scale, 0, 0));
    if (grid <= 0 || block <= 0 || block > 1024)
        FAIL("cudaOccupancyMaxPotentialBlockSize = %d, %d", grid, block);
    int nb = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, scale, block, 0));
    if (nb <= 0)
        FAIL("cudaOccupancyMaxActiveBlocksPerMultiprocessor = %d", nb);
    CHECK(cudaProfilerStart());
    float *dx;
    std::vector<float> h(n, 3.0f);
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMemcpy(dx, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    scale<<<(n + block - 1) / block, block>>>(dx, 2.0f, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(h.data(), dx, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (h[i] != 6.0f)
            FAIL("x[%d] = %f, expected 6", i, h[i]);
    CHECK(cudaFree(dx));
    CHECK(cudaProfilerStop());

    // a 1D CUDA array written and read with cuMemcpyHtoA / cuMemcpyAtoH (current: the primary)
    CUarray arr;
    CUDA_ARRAY_DESCRIPTOR ad = {1024, 0, CU_AD_FORMAT_FLOAT,
                                1}; // 1D: HtoA/AtoH address it linearly
    CU(cuArrayCreate(&arr, &ad));
    std::vector<float> ain(1024), aout(1024, -1.0f);
    for (int i = 0; i < 1024; i++)
        ain[i] = (float)i;
    CU(cuMemcpyHtoA(arr, 0, ain.data(), 1024 * sizeof(float)));
    CU(cuMemcpyAtoH(aout.data(), arr, 512 * sizeof(float), 512 * sizeof(float)));
    for (int i = 0; i < 512; i++)
        if (aout[i] != ain[512 + i])
            FAIL("array element %d read back as %f", 512 + i, aout[i]);
    CU(cuArrayDestroy(arr));

    // pinned memory (mapped memory has its own program, mapped_memory.cu)
    void *p = nullptr;
    CHECK(cudaMallocHost(&p, 4096));
    CHECK(cudaFreeHost(p));
}

int main()
{
    g_test_name = "driver_api";
    driver_part();
    runtime_part();
    pass();
    return 0;
}
