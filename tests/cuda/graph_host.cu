// graph_host: CUDA graphs whose nodes touch guest host memory (docs/remoting.md, "Graphs and
// guest memory"): host-to-device and device-to-host memcpy nodes (pinned and pageable memory,
// a 2D rectangle with pitch, nodes larger than 32 MiB), a host node that must see the
// device-to-host bytes, launches with new inputs, a clone, an instantiated graph's memcpy node
// pointed elsewhere, cudaGraphExecUpdate, the node parameter getters, and a memcpy node on
// memory that is not the session's refused.
#include "common.cuh"
#include <cstring>
#include <vector>

__global__ void scale(float *x, float f, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * f;
}

static int g_host_calls;
static float *g_seen;
static float g_first;

static void CUDART_CB host_node(void *user)
{
    // runs after the device-to-host node: the bytes are already in guest memory
    g_first = static_cast<float *>(user)[0];
    g_seen = static_cast<float *>(user);
    g_host_calls++;
}

static cudaMemcpy3DParms copy1d(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    cudaMemcpy3DParms p;
    std::memset(&p, 0, sizeof p);
    p.srcPtr = make_cudaPitchedPtr(const_cast<void *>(src), bytes, bytes, 1);
    p.dstPtr = make_cudaPitchedPtr(dst, bytes, bytes, 1);
    p.extent = make_cudaExtent(bytes, 1, 1);
    p.kind = kind;
    return p;
}

struct graph {
    cudaGraph_t g;
    cudaGraphNode_t h2d, kern, d2h, host;
};

// h2d (in -> d) -> scale(d, f) -> d2h (d -> out) -> host node(out)
static graph build(float *in, float *d, float *out, int n, float *f, int *nn)
{
    graph r;
    CHECK(cudaGraphCreate(&r.g, 0));
    cudaMemcpy3DParms p = copy1d(d, in, n * sizeof(float), cudaMemcpyHostToDevice);
    CHECK(cudaGraphAddMemcpyNode(&r.h2d, r.g, nullptr, 0, &p));
    void *args[] = {&d, f, nn};
    cudaKernelNodeParams kp{};
    kp.func = (void *)scale;
    kp.gridDim = dim3((n + 255) / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = args;
    CHECK(cudaGraphAddKernelNode(&r.kern, r.g, &r.h2d, 1, &kp));
    p = copy1d(out, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    CHECK(cudaGraphAddMemcpyNode(&r.d2h, r.g, &r.kern, 1, &p));
    cudaHostNodeParams hp{};
    hp.fn = host_node;
    hp.userData = out;
    CHECK(cudaGraphAddHostNode(&r.host, r.g, &r.d2h, 1, &hp));
    return r;
}

static void expect(const float *out, const float *in, int n, float f, const char *what)
{
    for (int i = 0; i < n; i++)
        if (out[i] != in[i] * f)
            FAIL("%s: element %d is %g, expected %g", what, i, out[i], in[i] * f);
}

static void big_nodes(cudaStream_t s)
{
    // 40 MiB each way: bytes travel before the launch (slGraphHostPut) and are fetched after
    // it (slGraphHostGet)
    const size_t n = (size_t)40 << 20;
    std::vector<unsigned char> in(n), out(n, 0);
    for (size_t i = 0; i < n; i++)
        in[i] = (unsigned char)(i * 7 + 3);
    unsigned char *d;
    CHECK(cudaMalloc(&d, n));
    cudaGraph_t g;
    cudaGraphNode_t a, b;
    CHECK(cudaGraphCreate(&g, 0));
    cudaMemcpy3DParms p = copy1d(d, in.data(), n, cudaMemcpyHostToDevice);
    CHECK(cudaGraphAddMemcpyNode(&a, g, nullptr, 0, &p));
    p = copy1d(out.data(), d, n, cudaMemcpyDeviceToHost);
    CHECK(cudaGraphAddMemcpyNode(&b, g, &a, 1, &p));
    cudaGraphExec_t e;
    CHECK(cudaGraphInstantiate(&e, g, 0));
    CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaStreamSynchronize(s));
    if (std::memcmp(in.data(), out.data(), n) != 0)
        FAIL("40 MiB through two memcpy nodes differs");
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaFree(d));
}

static void rectangle(cudaStream_t s)
{
    // a 4 x 10 float rectangle at (x 2, y 1) of a host matrix with a pitch of 20 floats, to a
    // device matrix and back into another host matrix at (x 5, y 3)
    const int W = 20, H = 8, w = 10, h = 4;
    std::vector<float> src(W * H), dst(W * H, -1.0f);
    for (int i = 0; i < W * H; i++)
        src[i] = (float)i;
    float *d;
    size_t dpitch;
    CHECK(cudaMallocPitch(&d, &dpitch, w * sizeof(float), h));
    cudaGraph_t g;
    cudaGraphNode_t a, b;
    CHECK(cudaGraphCreate(&g, 0));
    cudaMemcpy3DParms p;
    std::memset(&p, 0, sizeof p);
    p.srcPtr = make_cudaPitchedPtr(src.data(), W * sizeof(float), W, H);
    p.srcPos = make_cudaPos(2 * sizeof(float), 1, 0);
    p.dstPtr = make_cudaPitchedPtr(d, dpitch, w, h);
    p.extent = make_cudaExtent(w * sizeof(float), h, 1);
    p.kind = cudaMemcpyHostToDevice;
    CHECK(cudaGraphAddMemcpyNode(&a, g, nullptr, 0, &p));
    std::memset(&p, 0, sizeof p);
    p.srcPtr = make_cudaPitchedPtr(d, dpitch, w, h);
    p.dstPtr = make_cudaPitchedPtr(dst.data(), W * sizeof(float), W, H);
    p.dstPos = make_cudaPos(5 * sizeof(float), 3, 0);
    p.extent = make_cudaExtent(w * sizeof(float), h, 1);
    p.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaGraphAddMemcpyNode(&b, g, &a, 1, &p));
    cudaGraphExec_t e;
    CHECK(cudaGraphInstantiate(&e, g, 0));
    CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaStreamSynchronize(s));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            bool inside = y >= 3 && y < 3 + h && x >= 5 && x < 5 + w;
            float want = inside ? src[(y - 3 + 1) * W + (x - 5 + 2)] : -1.0f;
            if (dst[y * W + x] != want)
                FAIL("rectangle: (%d, %d) is %g, expected %g", x, y, dst[y * W + x], want);
        }
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaFree(d));
}

int main()
{
    g_test_name = "graph_host";
    const int n = 4096;
    float *in, *d;
    CHECK(cudaMallocHost(&in, n * sizeof(float))); // pinned source
    std::vector<float> out(n, 0.0f), out2(n, 0.0f);  // pageable destinations
    CHECK(cudaMalloc(&d, n * sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));

    float f = 2.0f;
    int nn = n;
    graph gr = build(in, d, out.data(), n, &f, &nn);
    cudaGraphExec_t e;
    CHECK(cudaGraphInstantiate(&e, gr.g, 0));
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < n; i++)
            in[i] = (float)(i + 100 * round); // a new input every launch
        CHECK(cudaGraphLaunch(e, s));
        CHECK(cudaStreamSynchronize(s));
        expect(out.data(), in, n, 2.0f, "launch");
        if (g_host_calls != round + 1 || g_seen != out.data() || g_first != in[0] * 2.0f)
            FAIL("host node: %d calls, saw %g, expected %g", g_host_calls, g_first, in[0] * 2.0f);
    }

    // the node parameter getters
    cudaKernelNodeParams kp{};
    CHECK(cudaGraphKernelNodeGetParams(gr.kern, &kp));
    if (kp.gridDim.x != (unsigned)(n + 255) / 256 || kp.blockDim.x != 256 || !kp.kernelParams ||
        *(float **)kp.kernelParams[0] != d || *(float *)kp.kernelParams[1] != 2.0f ||
        *(int *)kp.kernelParams[2] != n)
        FAIL("cudaGraphKernelNodeGetParams gave other parameters");
    cudaMemcpy3DParms mp{};
    CHECK(cudaGraphMemcpyNodeGetParams(gr.h2d, &mp));
    if (mp.srcPtr.ptr != in || mp.dstPtr.ptr != d || mp.extent.width != n * sizeof(float))
        FAIL("cudaGraphMemcpyNodeGetParams gave other parameters");
    cudaHostNodeParams hp{};
    CHECK(cudaGraphHostNodeGetParams(gr.host, &hp));
    if (hp.fn != host_node || hp.userData != out.data())
        FAIL("cudaGraphHostNodeGetParams gave other parameters");

    // a clone has its own nodes on the same guest memory
    cudaGraph_t c;
    CHECK(cudaGraphClone(&c, gr.g));
    cudaGraphNode_t ck;
    CHECK(cudaGraphNodeFindInClone(&ck, gr.kern, c));
    cudaGraphNodeType t;
    CHECK(cudaGraphNodeGetType(ck, &t));
    if (t != cudaGraphNodeTypeKernel)
        FAIL("the clone's kernel node has type %d", (int)t);
    cudaGraphExec_t ce;
    CHECK(cudaGraphInstantiate(&ce, c, 0));
    for (int i = 0; i < n; i++)
        in[i] = (float)(3 * i);
    std::memset(out.data(), 0, n * sizeof(float));
    CHECK(cudaGraphLaunch(ce, s));
    CHECK(cudaStreamSynchronize(s));
    expect(out.data(), in, n, 2.0f, "clone");

    // the instantiated graph's device-to-host node now writes out2; the graph is unchanged
    cudaMemcpy3DParms p = copy1d(out2.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost);
    CHECK(cudaGraphExecMemcpyNodeSetParams(e, gr.d2h, &p));
    std::memset(out.data(), 0, n * sizeof(float));
    CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaStreamSynchronize(s));
    expect(out2.data(), in, n, 2.0f, "exec memcpy node changed");
    if (out[0] != 0.0f || out[n - 1] != 0.0f)
        FAIL("the old destination was written");

    // update from a graph of the same shape that multiplies by 3 into out
    float f3 = 3.0f;
    graph g3 = build(in, d, out.data(), n, &f3, &nn);
    cudaGraphExecUpdateResultInfo info;
    CHECK(cudaGraphExecUpdate(e, g3.g, &info));
    if (info.result != cudaGraphExecUpdateSuccess)
        FAIL("cudaGraphExecUpdate: result %d", (int)info.result);
    CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaStreamSynchronize(s));
    expect(out.data(), in, n, 3.0f, "after cudaGraphExecUpdate");

    rectangle(s);
    big_nodes(s);

    // a memcpy node on memory that is not the session's is refused when it is made (Sluice's
    // check: a native driver accepts the node and faults later)
    const char *native = std::getenv("SLUICE_E2E_NATIVE");
    cudaGraph_t bad;
    cudaGraphNode_t bn;
    CHECK(cudaGraphCreate(&bad, 0));
    p = copy1d((void *)((char *)d + (64 << 20)), in, 256, cudaMemcpyHostToDevice);
    cudaError_t err = native && native[0] == '1'
                          ? cudaErrorInvalidValue
                          : cudaGraphAddMemcpyNode(&bn, bad, nullptr, 0, &p);
    if (err == cudaSuccess)
        FAIL("a memcpy node outside the session's memory was accepted");
    (void)cudaGetLastError();
    CHECK(cudaGraphDestroy(bad));

    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphExecDestroy(ce));
    CHECK(cudaGraphDestroy(gr.g));
    CHECK(cudaGraphDestroy(g3.g));
    CHECK(cudaGraphDestroy(c));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d));
    CHECK(cudaFreeHost(in));
    std::printf("graph_host: %d host node calls\n", g_host_calls);
    pass();
    return 0;
}
