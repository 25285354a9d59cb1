// stream_attr: cudaStreamSetAttribute / cudaStreamGetAttribute (what simpleAttributes does): an
// access policy window on device memory read back as set, the synchronization policy, the
// priority of a stream made with one, a copy and a kernel on the stream afterwards, and a window
// on memory that is not the session's refused.
#include "common.cuh"
#include <cstdlib>
#include <vector>

__global__ void inc(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

int main()
{
    g_test_name = "stream_attr";
    const int n = 1 << 16;
    int *d;
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    int lo = 0, hi = 0;
    CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, hi));

    cudaStreamAttrValue v = {};
    v.accessPolicyWindow.base_ptr = d;
    v.accessPolicyWindow.num_bytes = n * sizeof(int);
    v.accessPolicyWindow.hitRatio = 0.5f;
    v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    CHECK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
    cudaStreamAttrValue back = {};
    CHECK(cudaStreamGetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &back));
    if (back.accessPolicyWindow.base_ptr != d || back.accessPolicyWindow.num_bytes == 0 ||
        back.accessPolicyWindow.hitProp != cudaAccessPropertyPersisting ||
        back.accessPolicyWindow.missProp != cudaAccessPropertyStreaming)
        FAIL("access policy window read back differs");

    v = {};
    v.syncPolicy = cudaSyncPolicyYield;
    CHECK(cudaStreamSetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &v));
    back = {};
    CHECK(cudaStreamGetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &back));
    if (back.syncPolicy != cudaSyncPolicyYield)
        FAIL("synchronization policy %d, expected %d", (int)back.syncPolicy, (int)cudaSyncPolicyYield);
    back = {};
    CHECK(cudaStreamGetAttribute(s, cudaStreamAttributePriority, &back));
    if (back.priority != hi)
        FAIL("priority attribute %d, expected %d", back.priority, hi);

    std::vector<int> h(n, 5);
    CHECK(cudaMemcpyAsync(d, h.data(), n * sizeof(int), cudaMemcpyHostToDevice, s));
    inc<<<(n + 255) / 256, 256, 0, s>>>(d, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; i++)
        if (h[i] != 6)
            FAIL("element %d is %d after the kernel, expected 6", i, h[i]);

    // clearing the window (num_bytes 0) is accepted
    v = {};
    CHECK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));

    const char *native = std::getenv("SLUICE_E2E_NATIVE");
    if (!native || native[0] != '1') {
        // a window on memory that is not the session's (Sluice's check)
        v = {};
        v.accessPolicyWindow.base_ptr = h.data();
        v.accessPolicyWindow.num_bytes = 4096;
        v.accessPolicyWindow.hitRatio = 1.0f;
        v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
        v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
        if (cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v) == cudaSuccess)
            FAIL("an access policy window on guest memory was accepted");
        (void)cudaGetLastError();
    }
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d));
    pass();
    return 0;
}
