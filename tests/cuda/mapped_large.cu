// mapped_large: page-locked memory that kernels use directly, beyond the small buffers
// (docs/remoting.md, "Mapped host memory"; issue 20: simpleStreams, UnifiedMemoryPerf).
// A 64 MiB mmap'd range registered with cudaHostRegisterMapped, and cudaHostGetDevicePointer
// of page-locked memory that was not asked to be mapped: 2 MiB of cudaMallocHost, 1 MiB of
// cudaHostAlloc(cudaHostAllocDefault) and 1 MiB of malloc'd memory registered with
// cudaHostRegisterDefault. On a device with unified addressing the driver maps all of them and
// answers their device pointer. Each is written by the host, incremented by a kernel through
// the device pointer, and read back by the host after a synchronization, twice.
#include "common.cuh"
#include <cstdlib>
#include <sys/mman.h>

__global__ void inc(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

static void use(int *host, size_t bytes, const char *what)
{
    int n = (int)(bytes / sizeof(int));
    int *dev = nullptr;
    CHECK(cudaHostGetDevicePointer((void **)&dev, host, 0));
    if (!dev)
        FAIL("%s: no device pointer", what);
    for (int i = 0; i < n; i++)
        host[i] = i;
    for (int round = 1; round <= 2; round++) {
        inc<<<(n + 255) / 256, 256>>>(dev, n);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        for (int i = 0; i < n; i += 997)
            if (host[i] != i + round)
                FAIL("%s, round %d: element %d is %d, expected %d", what, round, i, host[i],
                     i + round);
        if (host[n - 1] != n - 1 + round)
            FAIL("%s, round %d: the last element is %d, expected %d", what, round, host[n - 1],
                 n - 1 + round);
    }
    std::printf("mapped_large: %s, %zu MiB: kernels used it through %s pointer\n", what,
                bytes >> 20, (void *)dev == (void *)host ? "the same" : "another");
}

int main()
{
    g_test_name = "mapped_large";
    int dev = 0;
    CHECK(cudaGetDevice(&dev));
    int uva = 0;
    CHECK(cudaDeviceGetAttribute(&uva, cudaDevAttrUnifiedAddressing, dev));
    if (!uva)
        FAIL("the device has no unified addressing");

    const size_t big = (size_t)64 << 20; // simpleStreams' registration
    void *m = mmap(nullptr, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        FAIL("mmap of 64 MiB failed");
    CHECK(cudaHostRegister(m, big, cudaHostRegisterMapped));
    use(static_cast<int *>(m), big, "registered mapped");
    CHECK(cudaHostUnregister(m));
    munmap(m, big);

    int *p = nullptr;
    CHECK(cudaMallocHost((void **)&p, (size_t)2 << 20)); // UnifiedMemoryPerf's zero copy
    use(p, (size_t)2 << 20, "cudaMallocHost");
    CHECK(cudaFreeHost(p));

    CHECK(cudaHostAlloc((void **)&p, (size_t)1 << 20, cudaHostAllocDefault));
    use(p, (size_t)1 << 20, "cudaHostAllocDefault");
    CHECK(cudaFreeHost(p));

    const size_t reg = (size_t)1 << 20;
    int *r = static_cast<int *>(std::aligned_alloc(4096, reg));
    CHECK(cudaHostRegister(r, reg, cudaHostRegisterDefault));
    use(r, reg, "registered default");
    CHECK(cudaHostUnregister(r));
    std::free(r);

    pass();
    return 0;
}
