// vmm: virtual memory management as vectorAddMMAP and cudaCompressibleMemory use it. Allocation
// granularity, an address range reserved, two physical allocations mapped side by side, access
// set, a copy and a kernel across both mappings, allocation properties and access read back;
// then: a copy into the range after it is unmapped, cuMemCreate and cuMemExportToShareableHandle
// with the fabric handle type refused (Sluice), everything released.
#include "driver.cuh"
#include <cstdlib>
#include <cstring>
#include <vector>

__global__ void inc(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

int main()
{
    g_test_name = "vmm";
    CHECK(cudaFree(0));
    size_t gran;
    CUmemAllocationProp prop = device0_alloc_prop(&gran);
    CUdeviceptr base;
    CU(cuMemAddressReserve(&base, 2 * gran, 0, 0, 0));
    CUmemGenericAllocationHandle h[2];
    for (int i = 0; i < 2; i++) {
        CU(cuMemCreate(&h[i], gran, &prop, 0));
        CU(cuMemMap(base + i * gran, gran, 0, h[i], 0));
    }
    CUmemAccessDesc acc;
    std::memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(base, 2 * gran, &acc, 1));
    unsigned long long flags = 0;
    CU(cuMemGetAccess(&flags, &prop.location, base + gran));
    if (flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        FAIL("access flags %llu", flags);
    CUmemAllocationProp back;
    CU(cuMemGetAllocationPropertiesFromHandle(&back, h[1]));
    if (back.type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        back.location.type != CU_MEM_LOCATION_TYPE_DEVICE || back.location.id != 0)
        FAIL("allocation properties read back differ");
    // the physical allocations go; the mappings keep the memory
    CU(cuMemRelease(h[0]));
    CU(cuMemRelease(h[1]));

    // a copy and a kernel across the boundary of the two mappings
    const int n = (int)(gran / sizeof(int)); // half of each mapping
    int *p = (int *)(base + gran / 2);
    std::vector<int> v(n);
    for (int i = 0; i < n; i++)
        v[i] = i;
    CU(cuMemcpyHtoD((CUdeviceptr)p, v.data(), n * sizeof(int)));
    inc<<<(n + 255) / 256, 256>>>(p, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(v.data(), p, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (v[i] != i + 1)
            FAIL("element %d is %d, expected %d", i, v[i], i + 1);

    CU(cuMemUnmap(base, 2 * gran));
    const char *native = std::getenv("SLUICE_E2E_NATIVE");
    if (!native || native[0] != '1') {
        // Sluice's checks: the unmapped range is no longer the session's memory; shareable
        // handles other than POSIX file descriptors are refused (those travel as tokens:
        // shareable_ipc.cu)
        if (cuMemcpyHtoD(base, v.data(), 64) == CUDA_SUCCESS)
            FAIL("a copy into an unmapped range was accepted");
        CUmemAllocationProp sh = prop;
        sh.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
        CUmemGenericAllocationHandle x;
        if (cuMemCreate(&x, gran, &sh, 0) != CUDA_ERROR_NOT_SUPPORTED)
            FAIL("cuMemCreate with the fabric handle type was not refused");
        CUmemFabricHandle fh;
        if (cuMemExportToShareableHandle(&fh, h[0], CU_MEM_HANDLE_TYPE_FABRIC, 0) !=
            CUDA_ERROR_NOT_SUPPORTED)
            FAIL("cuMemExportToShareableHandle of the fabric type was not refused");
    }
    CU(cuMemAddressFree(base, 2 * gran));
    pass();
    return 0;
}
