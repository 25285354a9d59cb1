// mem_pool: stream-ordered allocation (cudaMallocAsync / cudaFreeAsync) from the device's
// default pool and from a pool of our own (cudaMemPoolCreate, cudaMallocFromPoolAsync), pool
// attributes, access and trimming; the allocations are used by copies, memsets and a kernel.
#include "common.cuh"
#include <cstdint>
#include <cstring>
#include <vector>

__global__ void scale(float *x, float f, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * f;
}

int main()
{
    g_test_name = "mem_pool";
    const int n = 1 << 16;
    const size_t bytes = n * sizeof(float);
    int supported = 0;
    CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 0));
    if (!supported)
        FAIL("memory pools are not supported");

    cudaMemPool_t def;
    CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
    uint64_t threshold = UINT64_MAX, got = 0;
    CHECK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &threshold));
    CHECK(cudaMemPoolGetAttribute(def, cudaMemPoolAttrReleaseThreshold, &got));
    if (got != threshold)
        FAIL("release threshold %llu, set %llu", (unsigned long long)got,
             (unsigned long long)threshold);
    int reuse = 0;
    CHECK(cudaMemPoolSetAttribute(def, cudaMemPoolReuseAllowOpportunistic, &reuse));
    reuse = 7;
    CHECK(cudaMemPoolGetAttribute(def, cudaMemPoolReuseAllowOpportunistic, &reuse));
    if (reuse != 0)
        FAIL("reuse flag %d, set 0", reuse);

    std::vector<float> h(n), out(n);
    for (int i = 0; i < n; i++)
        h[i] = (float)(i % 977);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    // default pool: copy in, scale, copy out, free in stream order
    float *d = nullptr;
    CHECK(cudaMallocAsync((void **)&d, bytes, s));
    CHECK(cudaMemcpyAsync(d, h.data(), bytes, cudaMemcpyHostToDevice, s));
    scale<<<(n + 255) / 256, 256, 0, s>>>(d, 3.0f, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(out.data(), d, bytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaFreeAsync(d, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; i++)
        if (out[i] != h[i] * 3.0f)
            FAIL("default pool: element %d is %f, expected %f", i, out[i], h[i] * 3.0f);

    // a pool of our own
    cudaMemPoolProps props;
    std::memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t mp;
    CHECK(cudaMemPoolCreate(&mp, &props));
    cudaMemLocation loc = {};
    loc.type = cudaMemLocationTypeDevice;
    loc.id = 0;
    cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
    CHECK(cudaMemPoolGetAccess(&flags, mp, &loc));
    if (flags != cudaMemAccessFlagsProtReadWrite)
        FAIL("the owning device's access to its pool is %d", (int)flags);
    unsigned char *p1 = nullptr, *p2 = nullptr;
    CHECK(cudaMallocFromPoolAsync((void **)&p1, bytes, mp, s));
    CHECK(cudaMallocAsync((void **)&p2, bytes, s));
    CHECK(cudaMemsetAsync(p1, 0x5a, bytes, s));
    CHECK(cudaMemcpyAsync(p2, p1, bytes, cudaMemcpyDeviceToDevice, s));
    std::vector<unsigned char> back(bytes);
    CHECK(cudaMemcpyAsync(back.data(), p2 + bytes / 2, bytes / 2, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (size_t i = 0; i < bytes / 2; i++)
        if (back[i] != 0x5a)
            FAIL("own pool: byte %zu is 0x%x", i, back[i]);
    uint64_t used = 0;
    CHECK(cudaMemPoolGetAttribute(mp, cudaMemPoolAttrUsedMemCurrent, &used));
    if (used < bytes)
        FAIL("pool reports %llu bytes in use, %zu allocated", (unsigned long long)used, bytes);
    CHECK(cudaFreeAsync(p1, s));
    CHECK(cudaFreeAsync(p2, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemPoolTrimTo(mp, 0));
    CHECK(cudaMemPoolDestroy(mp));
    CHECK(cudaStreamDestroy(s));
    pass();
    return 0;
}
