// streams_events: two streams with async copies and kernels, events, elapsed time, and a stream
// that waits on the other's event before using its result.
#include "common.cuh"
#include <vector>

__global__ void vadd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

__global__ void scale(float *x, float f, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * f;
}

int main()
{
    g_test_name = "streams_events";
    const int n = 1 << 16;
    const size_t bytes = n * sizeof(float);
    std::vector<float> a(n), b(n), out(n);
    for (int i = 0; i < n; i++) {
        a[i] = (float)(i % 1000);
        b[i] = 2.0f;
    }
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t start, produced, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&produced));
    CHECK(cudaEventCreate(&stop));
    float *da, *db, *dc;
    CHECK(cudaMalloc(&da, bytes));
    CHECK(cudaMalloc(&db, bytes));
    CHECK(cudaMalloc(&dc, bytes));

    CHECK(cudaEventRecord(start, s1));
    CHECK(cudaMemcpyAsync(da, a.data(), bytes, cudaMemcpyHostToDevice, s1));
    CHECK(cudaMemcpyAsync(db, b.data(), bytes, cudaMemcpyHostToDevice, s2));
    CHECK(cudaStreamSynchronize(s2)); // db is ready before s1 uses it
    vadd<<<(n + 255) / 256, 256, 0, s1>>>(da, db, dc, n);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(produced, s1));
    CHECK(cudaStreamWaitEvent(s2, produced, 0)); // s2 scales what s1 produced
    scale<<<(n + 255) / 256, 256, 0, s2>>>(dc, 3.0f, n);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(stop, s2));
    CHECK(cudaMemcpyAsync(out.data(), dc, bytes, cudaMemcpyDeviceToHost, s2));
    CHECK(cudaStreamSynchronize(s2));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaEventQuery(stop));
    CHECK(cudaStreamQuery(s1));

    float ms = -1.0f;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (!(ms >= 0.0f))
        FAIL("elapsed time %f ms < 0", ms);
    for (int i = 0; i < n; i++)
        if (out[i] != (a[i] + b[i]) * 3.0f)
            FAIL("out[%d] = %f, expected %f", i, out[i], (a[i] + b[i]) * 3.0f);
    int prio = 1;
    CHECK(cudaStreamGetPriority(s1, &prio));
    std::printf("streams_events: elapsed %.3f ms, priority %d\n", ms, prio);
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(produced));
    CHECK(cudaEventDestroy(stop));
    CHECK(cudaStreamDestroy(s1));
    CHECK(cudaStreamDestroy(s2));
    pass();
    return 0;
}
