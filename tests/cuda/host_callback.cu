// host_callback: cudaLaunchHostFunc between two kernels on one stream. Each callback must run
// once, in stream order: after the work before it (whose result it sees) and before the work
// after it.
#include "common.cuh"
#include <cstring>

__global__ void fill(int *p, int v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = p[i] * 10 + v;
}

struct probe {
    const int *host; // copied from the device before the callback in the same stream
    int seen[2];
    int calls;
    char order[8];
};

static void CUDART_CB callback(void *arg)
{
    probe *p = static_cast<probe *>(arg);
    if (p->calls < 2)
        p->seen[p->calls] = p->host[0];
    p->order[std::strlen(p->order)] = (char)('A' + p->calls);
    p->calls++;
}

int main()
{
    g_test_name = "host_callback";
    const int n = 256;
    int host[n];
    probe pr = {host, {-1, -1}, 0, {0}};
    int *d;
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    CHECK(cudaMemsetAsync(d, 0, n * sizeof(int), s));
    fill<<<1, n, 0, s>>>(d, 1, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(host, d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaLaunchHostFunc(s, callback, &pr));
    fill<<<1, n, 0, s>>>(d, 2, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(host, d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaLaunchHostFunc(s, callback, &pr));
    CHECK(cudaStreamSynchronize(s));
    if (pr.calls != 2)
        FAIL("callbacks ran %d times, expected 2", pr.calls);
    if (std::strcmp(pr.order, "AB") != 0)
        FAIL("callback order '%s', expected 'AB'", pr.order);
    if (pr.seen[0] != 1 || pr.seen[1] != 12)
        FAIL("callbacks saw %d and %d, expected 1 and 12", pr.seen[0], pr.seen[1]);
    for (int i = 0; i < n; i++)
        if (host[i] != 12)
            FAIL("host[%d] = %d, expected 12", i, host[i]);
    CHECK(cudaFree(d));
    CHECK(cudaStreamDestroy(s));
    pass();
    return 0;
}
