// Driver calls answered as the driver answers them (issue 20): cuProfilerStart/Stop before
// cuInit, cuDeviceGetP2PAttribute with a NULL value pointer, a graph's edges
// (cuGraphGetEdges_v2 and v1, also after a node is destroyed and in a clone) and a kernel's
// parameter layout (cuKernelGetParamInfo, cuFuncGetParamInfo). Each case prints one line, the
// same natively and through Sluice.
#include "common.cuh"

#include <cstring>
#include <cuda.h>
#include <cudaProfiler.h>

__global__ void inc(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

static int g_bad = 0;

static void expect(const char *what, CUresult got, CUresult want)
{
    std::printf("driver_semantics: %s -> %d\n", what, (int)got);
    if (got != want) {
        std::printf("driver_semantics: %s: expected %d\n", what, (int)want);
        g_bad++;
    }
}

static void expect_n(const char *what, size_t got, size_t want)
{
    std::printf("driver_semantics: %s = %zu\n", what, got);
    if (got != want) {
        std::printf("driver_semantics: %s: expected %zu\n", what, want);
        g_bad++;
    }
}

// The index of node n in nodes, or -1.
static int index_of(const CUgraphNode *nodes, int count, CUgraphNode n)
{
    for (int i = 0; i < count; i++)
        if (nodes[i] == n)
            return i;
    return -1;
}

// Edges as "a>b" pairs of node indices, in the driver's order.
static void print_edges(const char *what, const CUgraphNode *nodes, int count,
                        const CUgraphNode *from, const CUgraphNode *to, size_t n)
{
    std::printf("driver_semantics: %s:", what);
    for (size_t i = 0; i < n; i++)
        std::printf(" %d>%d", index_of(nodes, count, from[i]), index_of(nodes, count, to[i]));
    std::printf("\n");
}

static void graph_edges(int *d, int n)
{
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    CUgraphNode nodes[4];
    cudaMemsetParams ms{};
    ms.dst = d;
    ms.elementSize = sizeof(int);
    ms.width = n;
    ms.height = 1;
    ms.value = 0;
    CHECK(cudaGraphAddMemsetNode(&nodes[0], g, nullptr, 0, &ms));
    void *args[] = {&d, &n};
    cudaKernelNodeParams kp{};
    kp.func = (void *)inc;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(n);
    kp.kernelParams = args;
    CHECK(cudaGraphAddKernelNode(&nodes[1], g, &nodes[0], 1, &kp));
    CHECK(cudaGraphAddKernelNode(&nodes[2], g, &nodes[0], 1, &kp));
    CHECK(cudaGraphAddEmptyNode(&nodes[3], g, &nodes[1], 2));
    CUgraph cg = (CUgraph)g;

    size_t count = 0;
    expect("cuGraphGetEdges_v2 count", cuGraphGetEdges_v2(cg, nullptr, nullptr, nullptr, &count),
           CUDA_SUCCESS);
    expect_n("edges", count, 4);
    CUgraphNode from[6], to[6];
    CUgraphEdgeData data[6];
    std::memset(data, 0xff, sizeof data);
    size_t want = 6;
    expect("cuGraphGetEdges_v2 with edge data", cuGraphGetEdges_v2(cg, from, to, data, &want),
           CUDA_SUCCESS);
    expect_n("edges returned of 6 asked for", want, 4);
    print_edges("edges", nodes, 4, from, to, want);
    bool zero = true;
    for (size_t i = 0; i < 6; i++)
        for (size_t b = 0; b < sizeof data[i]; b++)
            zero = zero && ((const unsigned char *)&data[i])[b] == 0;
    expect_n("edge data all default (1 yes)", zero ? 1 : 0, 1);
    expect_n("entries past the edges are NULL (1 yes)", !from[4] && !to[5] ? 1 : 0, 1);
    want = 2;
    expect("cuGraphGetEdges_v2 two of four", cuGraphGetEdges_v2(cg, from, to, nullptr, &want),
           CUDA_SUCCESS);
    expect_n("edges returned of 2 asked for", want, 2);
    // the v1 entry (cuda.h maps the name to _v2): what a program built before CUDA 12.3 calls
    typedef CUresult (*edges_v1)(CUgraph, CUgraphNode *, CUgraphNode *, size_t *);
    void *fn = nullptr;
    CUdriverProcAddressQueryResult q;
    expect("cuGetProcAddress cuGraphGetEdges 12000",
           cuGetProcAddress("cuGraphGetEdges", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q),
           CUDA_SUCCESS);
    want = 4;
    if (fn) {
        expect("cuGraphGetEdges (v1)", ((edges_v1)fn)(cg, from, to, &want), CUDA_SUCCESS);
        print_edges("v1 edges", nodes, 4, from, to, want);
    }
    expect("cuGraphGetEdges_v2 NULL count",
           cuGraphGetEdges_v2(cg, nullptr, nullptr, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
    expect("cuGraphGetEdges_v2 edge data without nodes",
           cuGraphGetEdges_v2(cg, nullptr, nullptr, data, &want), CUDA_ERROR_INVALID_VALUE);

    cudaGraph_t clone;
    CHECK(cudaGraphClone(&clone, g));
    CUgraphNode cn[4];
    for (int i = 0; i < 4; i++)
        CHECK(cudaGraphNodeFindInClone(&cn[i], nodes[i], clone));
    CHECK(cudaGraphDestroyNode(nodes[1]));
    count = 0;
    expect("after destroying a kernel node", cuGraphGetEdges_v2(cg, nullptr, nullptr, nullptr, &count),
           CUDA_SUCCESS);
    expect_n("edges", count, 2);
    count = 6;
    expect("the clone's edges", cuGraphGetEdges_v2((CUgraph)clone, from, to, nullptr, &count),
           CUDA_SUCCESS);
    print_edges("clone edges", cn, 4, from, to, count);
    CHECK(cudaGraphDestroy(clone));
    CHECK(cudaGraphDestroy(g));
}

static void param_info(void)
{
    CUfunction f = nullptr;
    CHECK(cudaGetFuncBySymbol((cudaFunction_t *)&f, (const void *)inc));
    size_t off = 99, size = 99;
    expect("cuFuncGetParamInfo 1", cuFuncGetParamInfo(f, 1, &off, &size), CUDA_SUCCESS);
    expect_n("offset", off, 8);
    expect_n("size", size, 4);
    expect("cuFuncGetParamInfo 2", cuFuncGetParamInfo(f, 2, &off, &size), CUDA_ERROR_INVALID_VALUE);
    cudaKernel_t k = nullptr;
    CHECK(cudaGetKernel(&k, inc));
    off = size = 99;
    expect("cuKernelGetParamInfo 0", cuKernelGetParamInfo((CUkernel)k, 0, &off, &size),
           CUDA_SUCCESS);
    expect_n("offset", off, 0);
    expect_n("size", size, 8);
    expect("cuKernelGetParamInfo 1, no size pointer",
           cuKernelGetParamInfo((CUkernel)k, 1, &off, nullptr), CUDA_SUCCESS);
    expect_n("offset", off, 8);
    expect("cuKernelGetParamInfo 2", cuKernelGetParamInfo((CUkernel)k, 2, &off, &size),
           CUDA_ERROR_INVALID_VALUE);
}

int main()
{
    g_test_name = "driver_semantics";
    // before anything initializes the driver (assumed to answer as the context calls until
    // tests/gpu/driver_facts.cu's value is recorded)
    expect("pre-init cuProfilerStart", cuProfilerStart(), CUDA_ERROR_NOT_INITIALIZED);
    expect("pre-init cuProfilerStop", cuProfilerStop(), CUDA_ERROR_NOT_INITIALIZED);

    const int n = 64;
    int *d = nullptr;
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    expect("cuProfilerStart", cuProfilerStart(), CUDA_SUCCESS);
    expect("cuProfilerStop", cuProfilerStop(), CUDA_SUCCESS);
    CUdevice dev;
    expect("cuCtxGetDevice", cuCtxGetDevice(&dev), CUDA_SUCCESS);
    expect("cuDeviceGetP2PAttribute NULL value",
           cuDeviceGetP2PAttribute(nullptr, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, dev, dev),
           CUDA_ERROR_INVALID_VALUE);
    int pi = 0;
    expect("cuDeviceGetP2PAttribute of a device with itself",
           cuDeviceGetP2PAttribute(&pi, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, dev, dev),
           CUDA_ERROR_INVALID_DEVICE);

    graph_edges(d, n);
    param_info();
    CHECK(cudaFree(d));
    if (g_bad)
        FAIL("%d answers differ from the driver's", g_bad);
    pass();
    return 0;
}
