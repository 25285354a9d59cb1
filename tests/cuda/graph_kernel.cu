// graph_kernel: a CUDA graph built by hand (memset node -> two kernel nodes), instantiated and
// launched repeatedly; the parameters of a kernel node changed in the instantiated graph
// (cudaGraphExecKernelNodeSetParams) and in the graph (cudaGraphKernelNodeSetParams, which must
// not change the instantiated one).
#include "common.cuh"
#include <cstring>
#include <vector>

__global__ void inc(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

static void expect(const int *d, int n, int v, const char *what)
{
    std::vector<int> h(n);
    CHECK(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (h[i] != v)
            FAIL("%s: element %d is %d, expected %d", what, i, h[i], v);
}

int main()
{
    g_test_name = "graph_kernel";
    // The capture mode goes to the driver and comes back (PyTorch relaxes it around
    // cudaMalloc during a capture): the call's argument is read, not only written.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    if (mode != cudaStreamCaptureModeGlobal)
        FAIL("the first exchange returned mode %d, expected global", (int)mode);
    CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    if (mode != cudaStreamCaptureModeRelaxed)
        FAIL("the mode set was not kept: %d", (int)mode);
    const int n = 1024;
    int *a, *b;
    CHECK(cudaMalloc(&a, n * sizeof(int)));
    CHECK(cudaMalloc(&b, n * sizeof(int)));
    CHECK(cudaMemset(b, 0, n * sizeof(int)));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));

    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaMemsetParams ms;
    std::memset(&ms, 0, sizeof ms);
    ms.dst = a;
    ms.value = 0;
    ms.elementSize = sizeof(int);
    ms.width = n;
    ms.height = 1;
    cudaGraphNode_t mnode, k1, k2;
    CHECK(cudaGraphAddMemsetNode(&mnode, g, nullptr, 0, &ms));

    int nn = n;
    void *args_a[] = {&a, &nn};
    cudaKernelNodeParams kp{};
    kp.func = (void *)inc;
    kp.gridDim = dim3((n + 255) / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = args_a;
    CHECK(cudaGraphAddKernelNode(&k1, g, &mnode, 1, &kp));
    CHECK(cudaGraphAddKernelNode(&k2, g, &k1, 1, &kp));

    size_t count = 0;
    CHECK(cudaGraphGetNodes(g, nullptr, &count));
    if (count != 3)
        FAIL("the graph has %zu nodes, 3 were added", count);
    cudaGraphNode_t got[5];
    count = 5;
    CHECK(cudaGraphGetNodes(g, got, &count));
    bool seen[3] = {false, false, false};
    for (size_t i = 0; i < count; i++)
        for (int j = 0; j < 3; j++)
            if (got[i] == (j == 0 ? mnode : j == 1 ? k1 : k2))
                seen[j] = true;
    if (count != 3 || !seen[0] || !seen[1] || !seen[2] || got[3] != nullptr)
        FAIL("cudaGraphGetNodes gave %zu nodes, not the 3 added", count);

    cudaGraphExec_t e;
    CHECK(cudaGraphInstantiate(&e, g, 0));
    for (int i = 0; i < 3; i++)
        CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaStreamSynchronize(s));
    expect(a, n, 2, "memset then two increments");

    // the second node now increments b, in the instantiated graph only
    void *args_b[] = {&b, &nn};
    kp.kernelParams = args_b;
    CHECK(cudaGraphExecKernelNodeSetParams(e, k2, &kp));
    CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaStreamSynchronize(s));
    expect(a, n, 1, "exec node changed: a");
    expect(b, n, 2, "exec node changed: b");

    // changing the graph's node does not change the instantiated graph
    kp.kernelParams = args_a;
    CHECK(cudaGraphKernelNodeSetParams(k2, &kp));
    CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaStreamSynchronize(s));
    expect(b, n, 3, "graph node changed after instantiation: b");
    cudaGraphExec_t e2;
    CHECK(cudaGraphInstantiate(&e2, g, 0));
    CHECK(cudaGraphLaunch(e2, s));
    CHECK(cudaStreamSynchronize(s));
    expect(a, n, 2, "graph instantiated again");

    CHECK(cudaGraphExecDestroy(e2));
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    pass();
    return 0;
}
