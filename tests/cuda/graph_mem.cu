// graph_mem: graph memory nodes. An allocation node (made with cudaGraphAddMemAllocNode and
// with the generic cudaGraphAddNode) whose address the graph's memset, kernel and memcpy nodes
// use, a free node, the device's graph memory attributes and trim, an allocation that outlives
// its graph and is used and freed by the guest's own calls, and the allocation node's
// parameters read back.
#include "common.cuh"
#include <cstring>
#include <vector>

__global__ void fill(int *p, int v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = p[i] * 10 + v;
}

static cudaMemAllocNodeParams alloc_params(size_t bytes)
{
    cudaMemAllocNodeParams p;
    std::memset(&p, 0, sizeof p);
    p.poolProps.allocType = cudaMemAllocationTypePinned;
    p.poolProps.location.type = cudaMemLocationTypeDevice;
    p.poolProps.location.id = 0;
    p.bytesize = bytes;
    return p;
}

// alloc -> memset 0 -> fill(v) -> copy to host -> [free]
static cudaGraph_t build(int **dptr, int *host, int n, int *v, int *nn, bool with_free,
                         bool generic)
{
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t a, m, k, c, f;
    cudaMemAllocNodeParams ap = alloc_params(n * sizeof(int));
    if (generic) {
        cudaGraphNodeParams np = {cudaGraphNodeTypeMemAlloc};
        np.alloc.poolProps = ap.poolProps;
        np.alloc.bytesize = ap.bytesize;
        CHECK(cudaGraphAddNode(&a, g, nullptr, nullptr, 0, &np));
        *dptr = (int *)np.alloc.dptr;
    } else {
        CHECK(cudaGraphAddMemAllocNode(&a, g, nullptr, 0, &ap));
        *dptr = (int *)ap.dptr;
    }
    if (!*dptr)
        FAIL("the allocation node gave no address");
    cudaMemsetParams ms;
    std::memset(&ms, 0, sizeof ms);
    ms.dst = *dptr;
    ms.elementSize = sizeof(int);
    ms.width = n;
    ms.height = 1;
    CHECK(cudaGraphAddMemsetNode(&m, g, &a, 1, &ms));
    void *args[] = {dptr, v, nn};
    cudaKernelNodeParams kp{};
    kp.func = (void *)fill;
    kp.gridDim = dim3((n + 255) / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = args;
    CHECK(cudaGraphAddKernelNode(&k, g, &m, 1, &kp));
    CHECK(cudaGraphAddMemcpyNode1D(&c, g, &k, 1, host, *dptr, n * sizeof(int),
                                   cudaMemcpyDeviceToHost));
    if (with_free)
        CHECK(cudaGraphAddMemFreeNode(&f, g, &c, 1, *dptr));
    return g;
}

static void expect(const int *h, int n, int v, const char *what)
{
    for (int i = 0; i < n; i++)
        if (h[i] != v)
            FAIL("%s: element %d is %d, expected %d", what, i, h[i], v);
}

int main()
{
    g_test_name = "graph_mem";
    const int n = 8192;
    int nn = n, v = 7;
    std::vector<int> host(n, -1);
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));

    int *d = nullptr;
    cudaGraph_t g = build(&d, host.data(), n, &v, &nn, true, false);
    cudaGraphExec_t e;
    CHECK(cudaGraphInstantiate(&e, g, 0));
    for (int round = 0; round < 2; round++) {
        v = 7 + round; // parameters were copied when the node was made: stays 7
        std::fill(host.begin(), host.end(), -1);
        CHECK(cudaGraphLaunch(e, s));
        CHECK(cudaStreamSynchronize(s));
        expect(host.data(), n, 7, "allocate, set, fill, copy, free");
    }
    unsigned long long high = 0, used = 0;
    CHECK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &high));
    CHECK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used));
    if (high < n * sizeof(int))
        FAIL("graph memory high watermark %llu below %zu", (unsigned long long)high,
             n * sizeof(int));
    unsigned long long zero = 0;
    CHECK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero));
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaDeviceGraphMemTrim(0));

    // without a free node the allocation outlives the launch, the instance and the graph
    v = 3;
    int *d2 = nullptr;
    cudaGraph_t g2 = build(&d2, host.data(), n, &v, &nn, false, true);
    cudaGraphNode_t nodes[8];
    size_t count = 8;
    CHECK(cudaGraphGetRootNodes(g2, nodes, &count));
    if (count != 1)
        FAIL("%zu root nodes, expected the allocation node", count);
    cudaMemAllocNodeParams back;
    CHECK(cudaGraphMemAllocNodeGetParams(nodes[0], &back));
    if (back.bytesize != n * sizeof(int) || back.dptr != d2 ||
        back.poolProps.location.type != cudaMemLocationTypeDevice ||
        back.poolProps.location.id != 0)
        FAIL("cudaGraphMemAllocNodeGetParams gave other parameters");
    cudaGraphExec_t e2;
    CHECK(cudaGraphInstantiate(&e2, g2, 0));
    CHECK(cudaGraphLaunch(e2, s));
    CHECK(cudaStreamSynchronize(s));
    expect(host.data(), n, 3, "graph allocation without a free node");
    CHECK(cudaGraphExecDestroy(e2));
    CHECK(cudaGraphDestroy(g2));
    std::vector<int> again(n, 0);
    CHECK(cudaMemcpy(again.data(), d2, n * sizeof(int), cudaMemcpyDeviceToHost));
    expect(again.data(), n, 3, "the allocation read after its graph is gone");
    CHECK(cudaMemset(d2, 0, n * sizeof(int)));
    CHECK(cudaFree(d2));

    // freed outside the graph, then by a free node of another graph made after that free: the
    // address stays the graph's (NVIDIA's graphMemoryNodes, "freed in a different graph")
    v = 5;
    int *d3 = nullptr;
    cudaGraph_t g3 = build(&d3, host.data(), n, &v, &nn, false, false);
    cudaGraphExec_t e3;
    CHECK(cudaGraphInstantiate(&e3, g3, 0));
    CHECK(cudaGraphDestroy(g3)); // only the instance knows the allocation now
    CHECK(cudaGraphLaunch(e3, s));
    CHECK(cudaFreeAsync(d3, s));
    CHECK(cudaStreamSynchronize(s));
    cudaGraph_t gf;
    cudaGraphNode_t fnode;
    CHECK(cudaGraphCreate(&gf, 0));
    CHECK(cudaGraphAddMemFreeNode(&fnode, gf, nullptr, 0, d3));
    cudaGraphExec_t ef;
    CHECK(cudaGraphInstantiate(&ef, gf, 0));
    CHECK(cudaGraphDestroy(gf));
    std::fill(host.begin(), host.end(), -1);
    CHECK(cudaGraphLaunch(e3, s));
    CHECK(cudaGraphLaunch(ef, s));
    CHECK(cudaStreamSynchronize(s));
    expect(host.data(), n, 5, "an allocation freed by another graph's free node");
    CHECK(cudaGraphExecDestroy(e3));
    CHECK(cudaGraphExecDestroy(ef));

    CHECK(cudaStreamDestroy(s));
    pass();
    return 0;
}
