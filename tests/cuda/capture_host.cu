// capture_host: stream capture of work on guest host memory (docs/remoting.md, "Graphs and
// guest memory"; issue 20: simpleCudaGraphs, conjugateGradientCudaGraphs, graphMemoryNodes).
// A host-to-device copy, a kernel, a device-to-host copy and a host function captured on one
// stream (page-locked memory), and the same across a fork and a join of two streams on
// pageable memory with cudaMemcpyDefault; each graph is launched several times with new
// inputs. Checks what the driver does: capture runs nothing, every launch reads the host
// input as it is when the graph runs and writes the output before the stream is seen
// complete, and the host function sees the device-to-host bytes.
#include "common.cuh"
#include <cuda.h>
#include <cstdlib>
#include <cstring>

__global__ void scale(float *x, float f, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * f;
}

static int g_calls;
static float g_seen;

static void CUDART_CB host_fn(void *user)
{
    g_seen = static_cast<float *>(user)[0]; // after the device-to-host copy of the same launch
    g_calls++;
}

static void expect(const float *out, const float *in, int n, float f, const char *what)
{
    for (int i = 0; i < n; i++)
        if (out[i] != in[i] * f)
            FAIL("%s: element %d is %g, expected %g", what, i, out[i], in[i] * f);
}

static void not_capturing(cudaStream_t s, const char *what)
{
    cudaStreamCaptureStatus st;
    CHECK(cudaStreamIsCapturing(s, &st));
    if (st != cudaStreamCaptureStatusNone)
        FAIL("%s: the stream still captures (%d)", what, (int)st);
}

// one stream, page-locked memory, explicit directions, a host function
static void one_stream(int n)
{
    const size_t bytes = n * sizeof(float);
    float *in, *out, *d;
    CHECK(cudaMallocHost(&in, bytes));
    CHECK(cudaMallocHost(&out, bytes));
    CHECK(cudaMalloc(&d, bytes));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i < n; i++)
        in[i] = (float)i, out[i] = -1.0f;
    float f = 3.0f;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMemcpyAsync(d, in, bytes, cudaMemcpyHostToDevice, s));
    scale<<<(n + 255) / 256, 256, 0, s>>>(d, f, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(out, d, bytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaLaunchHostFunc(s, host_fn, out));
    cudaGraph_t g;
    CHECK(cudaStreamEndCapture(s, &g));
    not_capturing(s, "one stream");
    if (out[0] != -1.0f || g_calls)
        FAIL("one stream: capture ran work (out[0] %g, %d host calls)", out[0], g_calls);
    size_t nodes = 0;
    CHECK(cudaGraphGetNodes(g, nullptr, &nodes));
    if (nodes != 4)
        FAIL("one stream: the captured graph has %zu nodes, expected 4", nodes);
    cudaGraphExec_t e;
    CHECK(cudaGraphInstantiate(&e, g, 0));
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < n; i++)
            in[i] = (float)(i + 100 * k);
        CHECK(cudaGraphLaunch(e, s));
        CHECK(cudaStreamSynchronize(s));
        expect(out, in, n, f, "one stream");
        if (g_calls != k + 1 || g_seen != in[0] * f)
            FAIL("one stream, launch %d: %d host calls, the host function saw %g (expected %g)", k,
                 g_calls, g_seen, in[0] * f);
    }
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d));
    CHECK(cudaFreeHost(in));
    CHECK(cudaFreeHost(out));
}

// two streams (fork and join through events), pageable memory, cudaMemcpyDefault, and a
// one-float result read by the host after each launch (conjugateGradientCudaGraphs' residual)
static void fork_join(int n)
{
    const size_t bytes = n * sizeof(float);
    float *in = static_cast<float *>(std::malloc(bytes));
    float *out = static_cast<float *>(std::malloc(bytes));
    float first = -1.0f;
    float *d;
    CHECK(cudaMalloc(&d, bytes));
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t forked, joined;
    CHECK(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
    float f = 0.5f;
    CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CHECK(cudaMemcpyAsync(d, in, bytes, cudaMemcpyDefault, s1));
    CHECK(cudaEventRecord(forked, s1));
    CHECK(cudaStreamWaitEvent(s2, forked, 0));
    scale<<<(n + 255) / 256, 256, 0, s2>>>(d, f, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(out, d, bytes, cudaMemcpyDefault, s2));
    CHECK(cudaEventRecord(joined, s2));
    CHECK(cudaStreamWaitEvent(s1, joined, 0));
    CHECK(cudaMemcpyAsync(&first, d, sizeof first, cudaMemcpyDeviceToHost, s1));
    cudaGraph_t g;
    CHECK(cudaStreamEndCapture(s1, &g));
    not_capturing(s1, "fork/join");
    not_capturing(s2, "fork/join (the forked stream)");
    cudaGraphExec_t e;
    CHECK(cudaGraphInstantiate(&e, g, 0));
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < n; i++)
            in[i] = (float)(2 * i + k);
        CHECK(cudaGraphLaunch(e, s1));
        CHECK(cudaStreamSynchronize(s1));
        expect(out, in, n, f, "fork/join");
        if (first != in[0] * f)
            FAIL("fork/join, launch %d: the one-float result is %g, expected %g", k, first,
                 in[0] * f);
    }
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaEventDestroy(forked));
    CHECK(cudaEventDestroy(joined));
    CHECK(cudaStreamDestroy(s1));
    CHECK(cudaStreamDestroy(s2));
    CHECK(cudaFree(d));
    std::free(in);
    std::free(out);
}

// A small synchronous device-to-host copy on the legacy stream while a non-blocking stream
// captures in global mode: the driver allows it (sluice-driver-facts, run 22), and the capture
// ends well. Through Sluice the copy's own work (a page-locked staging buffer allocated at the
// first such copy, its poll and synchronization) must not invalidate the capture either.
static void copy_beside_capture()
{
    float *d;
    CHECK(cudaMalloc(&d, sizeof(float)));
    CHECK(cudaMemset(d, 0, sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    scale<<<1, 1, 0, s>>>(d, 2.0f, 1);
    float v = -1.0f;
    CUresult r = cuMemcpyDtoH(&v, (CUdeviceptr)d, sizeof v);
    if (r != CUDA_SUCCESS || v != 0.0f)
        FAIL("copy beside a capture: cuMemcpyDtoH -> %d, value %g", (int)r, v);
    cudaGraph_t g;
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d));
}

int main()
{
    g_test_name = "capture_host";
    copy_beside_capture(); // first: the context's first small copy
    one_stream(1000);
    fork_join(4096);
    std::printf("capture_host: %d host function calls, 6 launches checked\n", g_calls);
    pass();
    return 0;
}
