// mem_quota: the memory-quota check of Sluice's accounting (docs/accounting.md). With
// SLUICE_QUOTA_MIB=Q (the instance's quota, as the flavor's SLA sets it) it checks that
//   - cudaMemGetInfo reports total = Q MiB and free <= total,
//   - Q/2 MiB can be allocated, and then Q/2 + 1 MiB more is refused with
//     cudaErrorMemoryAllocation (the quota, not the device, is full),
//   - freeing makes room again, and cudaMemGetInfo's free follows the allocations.
// It prints one machine-readable line:
//   MEM_QUOTA total=T free=F refused=R
// Without SLUICE_QUOTA_MIB it only prints the line (no quota expected).
#include "common.cuh"
#include <cstdlib>

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
    }
    std::printf("MEM_QUOTA total=%zu free=%zu refused=%d\n", total, free0, refused);
    pass();
    return 0;
}
