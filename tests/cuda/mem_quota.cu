// mem_quota: the memory-quota check of Sluice's accounting (docs/accounting.md). With
// SLUICE_QUOTA_MIB=Q (the instance's quota, as the flavor's SLA sets it) it checks that
//   - cudaMemGetInfo reports total = Q MiB and free <= total,
//   - Q/2 MiB can be allocated, and then Q/2 + 1 MiB more is refused with
//     cudaErrorMemoryAllocation (the quota, not the device, is full),
//   - freeing makes room again, and cudaMemGetInfo's free follows the allocations;
//   - physical memory of the virtual memory management API (cuMemCreate) counts too: refused
//     past the quota, and while it is held a cudaMalloc that would pass the quota is refused;
//   - so do CUDA arrays (cudaMallocArray), until cudaFreeArray, graph memory nodes (a
//     node past the quota is refused) and managed memory (cudaMallocManaged).
// It prints one machine-readable line:
//   MEM_QUOTA total=T free=F refused=R
// Without SLUICE_QUOTA_MIB it only prints the line (no quota expected).
#include "driver.cuh"
#include <cstdlib>
#include <cstring>

int main()
{
    g_test_name = "mem_quota";
    const size_t mib = (size_t)1 << 20;
    long quota = 0;
    if (const char *q = std::getenv("SLUICE_QUOTA_MIB"))
        quota = std::atol(q);
    size_t free0 = 0, total = 0;
    CHECK(cudaMemGetInfo(&free0, &total));
    int refused = 0;
    if (quota > 0) {
        if (total != (size_t)quota * mib)
            FAIL("cudaMemGetInfo total %zu bytes, the quota is %ld MiB", total, quota);
        if (free0 > total)
            FAIL("free %zu > total %zu", free0, total);
        void *a = nullptr, *b = nullptr;
        size_t half = (size_t)quota / 2 * mib;
        CHECK(cudaMalloc(&a, half));
        size_t free1 = 0;
        CHECK(cudaMemGetInfo(&free1, &total));
        if (free1 + half > free0)
            FAIL("free %zu after allocating %zu of %zu free", free1, half, free0);
        cudaError_t err = cudaMalloc(&b, half + mib);
        if (err != cudaErrorMemoryAllocation)
            FAIL("an allocation past the quota gave %s, not cudaErrorMemoryAllocation",
                 cudaGetErrorName(err));
        refused++;
        (void)cudaGetLastError(); // not sticky: clear it
        CHECK(cudaGetLastError());
        CHECK(cudaFree(a));
        CHECK(cudaMalloc(&b, half + mib)); // fits again
        CHECK(cudaFree(b));

        size_t gran;
        CUmemAllocationProp prop = device0_alloc_prop(&gran);
        size_t big = (half + mib + gran - 1) / gran * gran; // more than half
        CHECK(cudaMalloc(&a, half));
        CUmemGenericAllocationHandle h = 0;
        CUresult r = cuMemCreate(&h, big, &prop, 0);
        if (r != CUDA_ERROR_OUT_OF_MEMORY)
            FAIL("cuMemCreate past the quota gave %d, not CUDA_ERROR_OUT_OF_MEMORY", (int)r);
        refused++;
        CHECK(cudaFree(a));
        CU(cuMemCreate(&h, big, &prop, 0)); // fits alone
        err = cudaMalloc(&b, half + mib);
        if (err != cudaErrorMemoryAllocation)
            FAIL("cudaMalloc past the quota while cuMemCreate memory is held gave %s",
                 cudaGetErrorName(err));
        refused++;
        (void)cudaGetLastError();
        CU(cuMemRelease(h));
        CHECK(cudaMalloc(&b, half + mib)); // released: fits again
        CHECK(cudaFree(b));

        cudaChannelFormatDesc f4 = cudaCreateChannelDesc<float4>(); // 16 bytes per element
        size_t rows = (half + mib) / (1024 * 16);                   // more than half
        cudaArray_t arr = nullptr;
        CHECK(cudaMalloc(&a, half));
        err = cudaMallocArray(&arr, &f4, 1024, rows);
        if (err != cudaErrorMemoryAllocation)
            FAIL("an array past the quota gave %s", cudaGetErrorName(err));
        refused++;
        (void)cudaGetLastError();
        CHECK(cudaFree(a));
        CHECK(cudaMallocArray(&arr, &f4, 1024, rows)); // fits alone
        err = cudaMalloc(&b, half + mib);
        if (err != cudaErrorMemoryAllocation)
            FAIL("cudaMalloc past the quota while an array is held gave %s", cudaGetErrorName(err));
        refused++;
        (void)cudaGetLastError();
        CHECK(cudaFreeArray(arr));
        CHECK(cudaMalloc(&b, half + mib)); // freed: fits again
        CHECK(cudaFree(b));

        CHECK(cudaMalloc(&a, half));
        cudaGraph_t g;
        CHECK(cudaGraphCreate(&g, 0));
        cudaMemAllocNodeParams ap;
        std::memset(&ap, 0, sizeof ap);
        ap.poolProps.allocType = cudaMemAllocationTypePinned;
        ap.poolProps.location.type = cudaMemLocationTypeDevice;
        ap.poolProps.location.id = 0;
        ap.bytesize = half + mib;
        cudaGraphNode_t node;
        err = cudaGraphAddMemAllocNode(&node, g, nullptr, 0, &ap);
        if (err != cudaErrorMemoryAllocation)
            FAIL("a graph memory node past the quota gave %s", cudaGetErrorName(err));
        refused++;
        (void)cudaGetLastError();
        CHECK(cudaGraphDestroy(g));

        void *m = nullptr; // managed memory counts like device memory
        err = cudaMallocManaged(&m, half + mib);
        if (err != cudaErrorMemoryAllocation)
            FAIL("managed memory past the quota gave %s", cudaGetErrorName(err));
        refused++;
        (void)cudaGetLastError();
        CHECK(cudaFree(a));
        CHECK(cudaMallocManaged(&m, half + mib)); // fits alone
        err = cudaMalloc(&b, half);
        if (err != cudaErrorMemoryAllocation)
            FAIL("cudaMalloc past the quota while managed memory is held gave %s",
                 cudaGetErrorName(err));
        refused++;
        (void)cudaGetLastError();
        CHECK(cudaFree(m));
    }
    std::printf("MEM_QUOTA total=%zu free=%zu refused=%d\n", total, free0, refused);
    pass();
    return 0;
}
