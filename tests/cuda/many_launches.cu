// many_launches: 10 000 small kernel launches, one synchronization, result checked.
#include "common.cuh"
#include <vector>

__global__ void inc(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

int main()
{
    g_test_name = "many_launches";
    const int n = 64, launches = 10000;
    int *d;
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    CHECK(cudaMemset(d, 0, n * sizeof(int)));
    for (int k = 0; k < launches; k++) {
        inc<<<1, n>>>(d, n);
        CHECK(cudaGetLastError());
    }
    CHECK(cudaDeviceSynchronize());
    std::vector<int> h(n);
    CHECK(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (h[i] != launches)
            FAIL("p[%d] = %d, expected %d", i, h[i], launches);
    CHECK(cudaFree(d));
    pass();
    return 0;
}
