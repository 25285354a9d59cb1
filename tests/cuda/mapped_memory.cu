// Mapped host memory (cudaHostAllocMapped, cudaHostRegisterMapped): a kernel reads what the host
// wrote and writes what the host reads after synchronizing, through the device pointer the
// runtime gives, twice (so both directions are seen after a first exchange); then a small
// cudaMallocHost buffer (no mapped flag), which unified addressing makes reachable too. Under
// Sluice the memory has a twin in the backend kept coherent at call boundaries
// (docs/remoting.md).
#include "common.cuh"

#include <cstdint>

__global__ void mapflag(int *flag, int *out)
{
    if (blockIdx.x * blockDim.x + threadIdx.x == 0) {
        out[0] = flag[0] * 2;
        flag[1] = flag[0] + 1000;
    }
}

static void round_trip(int *host, int *dev, int *dout, int v)
{
    host[0] = v;
    mapflag<<<1, 32>>>(dev, dout);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    int out = 0;
    CHECK(cudaMemcpy(&out, dout, sizeof out, cudaMemcpyDeviceToHost));
    if (out != 2 * v || host[1] != v + 1000)
        FAIL("value %d: kernel saw %d (want %d), host sees %d (want %d)", v, out / 2, v, host[1],
             v + 1000);
}

alignas(4096) static int registered[1024];

int main()
{
    g_test_name = "mapped_memory";
    int *dout = nullptr;
    CHECK(cudaMalloc(&dout, sizeof(int)));

    int *h = nullptr, *d = nullptr;
    CHECK(cudaHostAlloc(&h, 4096, cudaHostAllocMapped));
    CHECK(cudaHostGetDevicePointer((void **)&d, h, 0));
    unsigned int flags = 0;
    CHECK(cudaHostGetFlags(&flags, h));
    if (!(flags & cudaHostAllocMapped))
        FAIL("cudaHostGetFlags = 0x%x, mapped flag missing", flags);
    round_trip(h, d, dout, 21);
    round_trip(h, d, dout, 50);
    std::printf("mapped_memory: allocated, device pointer %s the host pointer\n",
                (void *)d == (void *)h ? "equals" : "differs from");

    int *d2 = nullptr;
    CHECK(cudaHostRegister(registered, sizeof registered, cudaHostRegisterMapped));
    CHECK(cudaHostGetDevicePointer((void **)&d2, registered, 0));
    round_trip(registered, d2, dout, 7);
    round_trip(registered, d2, dout, -3);
    CHECK(cudaHostUnregister(registered));

    // Under unified addressing page-locked memory is reachable by kernels whatever its flags:
    // MAGMA hands small cudaMallocHost buffers to its kernels directly.
    int *small = nullptr;
    CHECK(cudaMallocHost(&small, 2 * sizeof(int)));
    cudaPointerAttributes pa{};
    CHECK(cudaPointerGetAttributes(&pa, small));
    if (!pa.devicePointer)
        FAIL("cudaMallocHost memory has no device pointer");
    void *dsmall = nullptr;
    cudaError_t gdp = cudaHostGetDevicePointer(&dsmall, small, 0);
    cudaGetLastError();
    round_trip(small, (int *)pa.devicePointer, dout, 11);
    round_trip(small, (int *)pa.devicePointer, dout, 12);
    std::printf("mapped_memory: cudaMallocHost(8) used by a kernel, device pointer %s the host "
                "pointer; cudaHostGetDevicePointer -> %s\n",
                pa.devicePointer == (void *)small ? "equals" : "differs from",
                cudaGetErrorName(gdp));
    CHECK(cudaFreeHost(small));

    int plain = 0;
    void *none = nullptr;
    if (cudaHostGetDevicePointer(&none, &plain, 0) == cudaSuccess)
        FAIL("cudaHostGetDevicePointer of unregistered memory succeeded");
    cudaGetLastError();
    CHECK(cudaFreeHost(h));
    CHECK(cudaFree(dout));
    pass();
    return 0;
}
