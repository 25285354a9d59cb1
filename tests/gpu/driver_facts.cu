// driver_facts: what the real driver answers where Sluice must answer the same (issue 20),
// recorded on the GPU machine natively (and, for comparison, through Sluice). A probe, not a
// test: its JSON output is committed (frontend/gen/driver_error_strings.json) and the test
// programs of tests/cuda check the same behaviour.
//
//   nvcc -std=c++17 -O2 -gencode arch=compute_90,code=sm_90 driver_facts.cu -lcuda -o driver_facts
//   ./driver_facts > facts.json
//
// One JSON object per line: {"fact": name, ...}.
#include <cstdio>
#include <cstring>
#include <cuda.h>
#include <cudaProfiler.h>

__global__ void k_probe(int *p)
{
    if (p)
        *p = 1;
}

static void json_string(const char *s)
{
    std::putchar('"');
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            std::printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            std::printf("\\u%04x", *s);
        else
            std::putchar(*s);
    }
    std::putchar('"');
}

static void fact_rc(const char *name, CUresult rc)
{
    std::printf("{\"fact\":\"%s\",\"result\":%d}\n", name, (int)rc);
}

int main()
{
    /* before cuInit */
    CUcontext ctx = (CUcontext)0x1;
    fact_rc("pre-init cuCtxGetCurrent", cuCtxGetCurrent(&ctx));
    std::printf("{\"fact\":\"pre-init cuCtxGetCurrent writes\",\"value\":%d}\n",
                ctx == (CUcontext)0x1 ? 0 : 1);
    CUdevice d = -7;
    fact_rc("pre-init cuCtxGetDevice", cuCtxGetDevice(&d));
    fact_rc("pre-init cuCtxPushCurrent", cuCtxPushCurrent(nullptr));
    CUcontext popped;
    fact_rc("pre-init cuCtxPopCurrent", cuCtxPopCurrent(&popped));
    fact_rc("pre-init cuCtxSetCurrent", cuCtxSetCurrent(nullptr));
    int ver = 0;
    fact_rc("pre-init cuDriverGetVersion", cuDriverGetVersion(&ver));
    fact_rc("pre-init cuProfilerStart", cuProfilerStart());
    fact_rc("pre-init cuProfilerStop", cuProfilerStop());

    /* error names and strings of every code the driver knows */
    for (int code = 0; code < 1100; code++) {
        const char *name = nullptr, *str = nullptr;
        CUresult rn = cuGetErrorName((CUresult)code, &name);
        CUresult rs = cuGetErrorString((CUresult)code, &str);
        if (rn != CUDA_SUCCESS && rs != CUDA_SUCCESS)
            continue;
        std::printf("{\"fact\":\"error\",\"code\":%d,\"name_result\":%d,\"name\":", code, (int)rn);
        json_string(rn == CUDA_SUCCESS ? name : "");
        std::printf(",\"string_result\":%d,\"string\":", (int)rs);
        json_string(rs == CUDA_SUCCESS ? str : "");
        std::printf("}\n");
    }
    const char *s = nullptr;
    fact_rc("cuGetErrorString of an unknown code", cuGetErrorString((CUresult)99999, &s));
    fact_rc("cuGetErrorName of an unknown code", cuGetErrorName((CUresult)99999, &s));

    if (cuInit(0) != CUDA_SUCCESS)
        return 1;
    CUdevice dev;
    cuDeviceGet(&dev, 0);
    fact_rc("cuProfilerStart after cuInit, no context", cuProfilerStart());
    fact_rc("cuProfilerStop after cuInit, no context", cuProfilerStop());
    fact_rc("cuDeviceGetP2PAttribute NULL value",
            cuDeviceGetP2PAttribute(nullptr, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, dev, dev));
    CUcontext c;
    cuDevicePrimaryCtxRetain(&c, dev);
    cuCtxSetCurrent(c);
    fact_rc("cuProfilerStart with a context", cuProfilerStart());
    fact_rc("cuProfilerStop with a context", cuProfilerStop());

    /* invalid launches: the call itself fails natively */
    k_probe<<<1, 1>>>(nullptr); /* loads the module through cudart */
    cuCtxSynchronize();
    CUfunction f = nullptr;
    {
        /* the CUfunction behind the kernel, through the runtime's entry point */
        cudaGetFuncBySymbol((cudaFunction_t *)&f, (const void *)k_probe);
    }
    void *args[] = {nullptr};
    int *null_p = nullptr;
    args[0] = &null_p;
    fact_rc("launch block 4096 threads", cuLaunchKernel(f, 1, 1, 1, 4096, 1, 1, 0, 0, args, 0));
    fact_rc("launch 1 GiB dynamic shared memory",
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 1u << 30, 0, args, 0));
    fact_rc("launch grid 0", cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, 0, args, 0));
    CUlaunchConfig cfg;
    std::memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    CUlaunchAttribute at;
    std::memset(&at, 0, sizeof at);
    at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at.value.clusterDim.x = 0;
    at.value.clusterDim.y = 1;
    at.value.clusterDim.z = 1;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    fact_rc("cuLaunchKernelEx cluster dimension 0", cuLaunchKernelEx(&cfg, f, args, nullptr));
    at.id = (CUlaunchAttributeID)9999;
    fact_rc("cuLaunchKernelEx invalid attribute", cuLaunchKernelEx(&cfg, f, args, nullptr));
    cuCtxSynchronize();
    char host[64];
    fact_rc("cuMemcpyHtoDAsync to a bogus device pointer",
            cuMemcpyHtoDAsync((CUdeviceptr)0x10, host, sizeof host, 0));
    fact_rc("cuCtxSynchronize after it", cuCtxSynchronize());

    /* A small synchronous cuMemcpyDtoH (issue 18: the backend makes it an async copy into
     * page-locked memory, then a poll and a synchronization: backend/api/copy_small.c) during a
     * capture, and with a kernel's fault pending (last: the fault poisons the context). */
    CUdeviceptr dv = 0;
    cuMemAlloc(&dv, 4096);
    int v = 0;
    CUstream blocking, nonblocking;
    cuStreamCreate(&blocking, CU_STREAM_DEFAULT);
    cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING);
    const struct {
        CUstream *st;
        CUstreamCaptureMode mode;
        const char *what;
    } caps[] = {{&blocking, CU_STREAM_CAPTURE_MODE_GLOBAL, "a blocking stream captures (global)"},
                {&blocking, CU_STREAM_CAPTURE_MODE_RELAXED, "a blocking stream captures (relaxed)"},
                {&nonblocking, CU_STREAM_CAPTURE_MODE_GLOBAL,
                 "a non-blocking stream captures (global)"},
                {&nonblocking, CU_STREAM_CAPTURE_MODE_RELAXED,
                 "a non-blocking stream captures (relaxed)"}};
    char name[160];
    for (const auto &c : caps) {
        if (cuStreamBeginCapture(*c.st, c.mode) != CUDA_SUCCESS)
            continue;
        CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
        std::snprintf(name, sizeof name, "cuStreamIsCapturing(CU_STREAM_LEGACY) while %s", c.what);
        fact_rc(name, cuStreamIsCapturing(CU_STREAM_LEGACY, &cs));
        std::snprintf(name, sizeof name, "cuMemcpyDtoH 4 B while %s", c.what);
        fact_rc(name, cuMemcpyDtoH(&v, dv, 4));
        CUgraph g = nullptr;
        std::snprintf(name, sizeof name, "cuStreamEndCapture after the copy while %s", c.what);
        fact_rc(name, cuStreamEndCapture(*c.st, &g));
        if (g)
            cuGraphDestroy(g);
        std::snprintf(name, sizeof name, "cuCtxSynchronize after the capture while %s", c.what);
        fact_rc(name, cuCtxSynchronize());
    }
    k_probe<<<1, 1>>>((int *)0x10); /* an illegal address, found when the GPU runs it */
    fact_rc("cuMemcpyDtoH 4 B behind a kernel that faults", cuMemcpyDtoH(&v, dv, 4));
    fact_rc("cuMemcpyDtoH 4 B after that (sticky)", cuMemcpyDtoH(&v, dv, 4));
    return 0;
}
