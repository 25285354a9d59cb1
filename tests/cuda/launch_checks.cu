// Invalid launches and an async copy to a bogus device pointer fail at the call, as the driver
// fails them (measured natively: docs/measurements/2026-11-26-run11/driver-facts-h100-native.jsonl),
// and leave nothing behind: the next synchronization succeeds and valid launches, a cluster
// launch and an async copy to a __device__ variable's address still work. Driver API launches
// of the runtime's kernel (cudaGetFuncBySymbol), so that the codes are the driver's own. Each
// case prints one line, the same natively and through Sluice.
#include "common.cuh"

#include <cstring>
#include <cuda.h>

__global__ void inc(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

__device__ int d_table[16]; // the name and size the driver double knows

static int g_bad = 0;

static void expect(const char *what, CUresult got, CUresult want)
{
    const char *name = nullptr;
    if (cuGetErrorName(got, &name) != CUDA_SUCCESS)
        name = "?";
    std::printf("launch_checks: %s -> %d %s\n", what, (int)got, name);
    if (got != want) {
        std::printf("launch_checks: %s: expected %d\n", what, (int)want);
        g_bad++;
    }
}

#define CU(call) expect(#call, (call), CUDA_SUCCESS)

int main()
{
    g_test_name = "launch_checks";
    const int n = 64;
    int *d = nullptr;
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    CHECK(cudaMemset(d, 0, n * sizeof(int)));
    inc<<<1, n>>>(d, n); // loads the module through cudart
    CHECK(cudaDeviceSynchronize());
    CUfunction f = nullptr;
    CHECK(cudaGetFuncBySymbol((cudaFunction_t *)&f, (const void *)inc));
    int count = n;
    void *args[] = {&d, &count};

    expect("block of 4096 threads", cuLaunchKernel(f, 1, 1, 1, 4096, 1, 1, 0, 0, args, 0),
           CUDA_ERROR_INVALID_VALUE);
    expect("block z of 65", cuLaunchKernel(f, 1, 1, 1, 1, 1, 65, 0, 0, args, 0),
           CUDA_ERROR_INVALID_VALUE);
    expect("1 GiB dynamic shared memory", cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 1u << 30, 0, args, 0),
           CUDA_ERROR_INVALID_VALUE);
    expect("grid x of 0", cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, 0, args, 0),
           CUDA_ERROR_INVALID_VALUE);
    expect("block y of 0", cuLaunchKernel(f, 1, 1, 1, 1, 0, 1, 0, 0, args, 0),
           CUDA_ERROR_INVALID_VALUE);

    CUlaunchConfig cfg;
    std::memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = 4, cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = n / 4, cfg.blockDimY = cfg.blockDimZ = 1;
    CUlaunchAttribute at;
    std::memset(&at, 0, sizeof at);
    at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at.value.clusterDim.x = 0, at.value.clusterDim.y = 1, at.value.clusterDim.z = 1;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    expect("cuLaunchKernelEx cluster dimension 0", cuLaunchKernelEx(&cfg, f, args, nullptr),
           CUDA_ERROR_INVALID_CLUSTER_SIZE);
    at.value.clusterDim.x = 3;
    expect("cuLaunchKernelEx cluster of 3 on a grid of 4", cuLaunchKernelEx(&cfg, f, args, nullptr),
           CUDA_ERROR_INVALID_CLUSTER_SIZE);
    at.id = (CUlaunchAttributeID)9999;
    expect("cuLaunchKernelEx attribute id 9999", cuLaunchKernelEx(&cfg, f, args, nullptr),
           CUDA_ERROR_INVALID_VALUE);
    cfg.gridDimX = 0;
    cfg.numAttrs = 0;
    expect("cuLaunchKernelEx grid x of 0", cuLaunchKernelEx(&cfg, f, args, nullptr),
           CUDA_ERROR_INVALID_VALUE);

    char host[64] = {0};
    expect("cuMemcpyHtoDAsync to device pointer 0x10",
           cuMemcpyHtoDAsync((CUdeviceptr)0x10, host, sizeof host, 0), CUDA_ERROR_INVALID_VALUE);
    expect("cuCtxSynchronize after the refusals", cuCtxSynchronize(), CUDA_SUCCESS);

    // what must keep working: a launch (twice: plain and with a cluster of 2), an async copy to
    // a __device__ variable's address
    CU(cuLaunchKernel(f, 1, 1, 1, n, 1, 1, 0, 0, args, 0));
    cfg.gridDimX = 4;
    at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at.value.clusterDim.x = 2;
    cfg.numAttrs = 1;
    CU(cuLaunchKernelEx(&cfg, f, args, nullptr));
    void *sym = nullptr;
    CHECK(cudaGetSymbolAddress(&sym, d_table));
    int words[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[8] = {0};
    CU(cuMemcpyHtoDAsync((CUdeviceptr)sym, words, sizeof words, 0));
    CU(cuCtxSynchronize());
    CHECK(cudaMemcpyFromSymbol(back, d_table, sizeof back));
    if (std::memcmp(words, back, sizeof words))
        FAIL("the __device__ words read back differ");
    int h[n];
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (h[i] != 3)
            FAIL("element %d is %d after three valid launches, expected 3", i, h[i]);
    std::printf("launch_checks: valid launches and copies after the refusals ok\n");
    CHECK(cudaFree(d));
    if (g_bad)
        FAIL("%d calls answered otherwise than the driver", g_bad);
    pass();
    return 0;
}
