// graph_cond: conditional graph nodes (cudaGraphConditionalHandleCreate, cudaGraphAddNode of
// type conditional) whose handle a kernel sets with cudaGraphSetConditional: IF with and
// without an else body, WHILE with a default value assigned at every launch, SWITCH; bodies
// filled with cudaGraphAddNode of kernel nodes; and cudaStreamGetCaptureInfo of a stream that is
// not capturing.
#include "common.cuh"
#include <cstring>
#include <vector>

__global__ void inc(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

__global__ void set_cond(cudaGraphConditionalHandle h, const int *flag)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        cudaGraphSetConditional(h, (unsigned)*flag);
}

__global__ void count_down(cudaGraphConditionalHandle h, int *counter)
{
    if (blockIdx.x == 0 && threadIdx.x == 0 && --*counter <= 0)
        cudaGraphSetConditional(h, 0);
}

static int *g_p, g_n = 1024;

static cudaGraphNode_t add_kernel(cudaGraph_t g, const cudaGraphNode_t *dep, void *fn, void **args,
                                  int blocks)
{
    cudaGraphNodeParams np = {cudaGraphNodeTypeKernel};
    np.kernel.func = fn;
    np.kernel.gridDim = dim3(blocks);
    np.kernel.blockDim = dim3(blocks == 1 ? 1 : 256);
    np.kernel.kernelParams = args;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddNode(&node, g, dep, nullptr, dep ? 1 : 0, &np));
    return node;
}

static void add_inc(cudaGraph_t body, int times)
{
    static void *args[] = {&g_p, &g_n};
    cudaGraphNode_t prev = nullptr;
    for (int i = 0; i < times; i++)
        prev = add_kernel(body, prev ? &prev : nullptr, (void *)inc, args, (g_n + 255) / 256);
}

static int value(void)
{
    std::vector<int> h(g_n);
    CHECK(cudaMemcpy(h.data(), g_p, g_n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 1; i < g_n; i++)
        if (h[i] != h[0])
            FAIL("elements 0 and %d differ: %d, %d", i, h[0], h[i]);
    return h[0];
}

static cudaGraphNode_t add_cond(cudaGraph_t g, const cudaGraphNode_t *dep,
                                cudaGraphConditionalHandle h, cudaGraphConditionalNodeType type,
                                unsigned size, cudaGraph_t **bodies)
{
    cudaGraphNodeParams np = {cudaGraphNodeTypeConditional};
    np.conditional.handle = h;
    np.conditional.type = type;
    np.conditional.size = size;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddNode(&node, g, dep, nullptr, dep ? 1 : 0, &np));
    *bodies = np.conditional.phGraph_out;
    if (!*bodies)
        FAIL("the conditional node gave no body graphs");
    return node;
}

int main()
{
    g_test_name = "graph_cond";
    int *flag, *counter;
    CHECK(cudaMalloc(&g_p, g_n * sizeof(int)));
    CHECK(cudaMalloc(&flag, sizeof(int)));
    CHECK(cudaMalloc(&counter, sizeof(int)));
    CHECK(cudaMemset(g_p, 0, g_n * sizeof(int)));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));

    // IF / else: set_cond(flag) -> if (flag) +1 else +2
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle h;
    CHECK(cudaGraphConditionalHandleCreate(&h, g));
    void *set_args[] = {&h, &flag};
    cudaGraphNode_t k = add_kernel(g, nullptr, (void *)set_cond, set_args, 1);
    cudaGraph_t *bodies;
    add_cond(g, &k, h, cudaGraphCondTypeIf, 2, &bodies);
    add_inc(bodies[0], 1);
    add_inc(bodies[1], 2);
    cudaGraphExec_t e;
    CHECK(cudaGraphInstantiate(&e, g, 0));
    int one = 1, zero = 0;
    CHECK(cudaMemcpy(flag, &one, sizeof one, cudaMemcpyHostToDevice));
    CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaStreamSynchronize(s));
    if (value() != 1)
        FAIL("IF taken: %d, expected 1", value());
    CHECK(cudaMemcpy(flag, &zero, sizeof zero, cudaMemcpyHostToDevice));
    CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaStreamSynchronize(s));
    if (value() != 3)
        FAIL("IF not taken (else body): %d, expected 3", value());
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));

    // WHILE: default 1 assigned at every launch; the body increments and counts down from 4
    CHECK(cudaGraphCreate(&g, 0));
    CHECK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
    add_cond(g, nullptr, h, cudaGraphCondTypeWhile, 1, &bodies);
    add_inc(bodies[0], 1);
    cudaGraphNode_t nodes[4];
    size_t count = 4;
    CHECK(cudaGraphGetNodes(bodies[0], nodes, &count));
    if (count != 1)
        FAIL("the WHILE body has %zu nodes, expected 1", count);
    void *cd_args[] = {&h, &counter};
    add_kernel(bodies[0], &nodes[0], (void *)count_down, cd_args, 1);
    CHECK(cudaGraphInstantiate(&e, g, 0));
    for (int round = 0; round < 2; round++) {
        int four = 4;
        CHECK(cudaMemcpy(counter, &four, sizeof four, cudaMemcpyHostToDevice));
        CHECK(cudaGraphLaunch(e, s));
        CHECK(cudaStreamSynchronize(s));
        if (value() != 3 + 4 * (round + 1))
            FAIL("WHILE round %d: %d, expected %d", round, value(), 3 + 4 * (round + 1));
    }
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));

    // SWITCH over three bodies: value 2 runs the third (+3)
    CHECK(cudaGraphCreate(&g, 0));
    CHECK(cudaGraphConditionalHandleCreate(&h, g));
    k = add_kernel(g, nullptr, (void *)set_cond, set_args, 1);
    add_cond(g, &k, h, cudaGraphCondTypeSwitch, 3, &bodies);
    for (int b = 0; b < 3; b++)
        add_inc(bodies[b], b + 1);
    CHECK(cudaGraphInstantiate(&e, g, 0));
    int two = 2;
    CHECK(cudaMemcpy(flag, &two, sizeof two, cudaMemcpyHostToDevice));
    CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaStreamSynchronize(s));
    if (value() != 14)
        FAIL("SWITCH: %d, expected 14", value());
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));

    cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
    CHECK(cudaStreamGetCaptureInfo(s, &st));
    if (st != cudaStreamCaptureStatusNone)
        FAIL("capture status %d of a stream that does not capture", (int)st);

    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(g_p));
    CHECK(cudaFree(flag));
    CHECK(cudaFree(counter));
    pass();
    return 0;
}
