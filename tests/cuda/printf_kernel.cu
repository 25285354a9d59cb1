// printf_kernel: device printf of a fixed pattern; the harness checks that stdout holds every
// line "sluice-printf block B thread T value V" (B < 2, T < 4, V = 40 + B * 4 + T).
#include "common.cuh"

__global__ void hello(int base)
{
    printf("sluice-printf block %d thread %d value %d\n", (int)blockIdx.x, (int)threadIdx.x,
           base + (int)(blockIdx.x * blockDim.x + threadIdx.x));
}

int main()
{
    g_test_name = "printf_kernel";
    hello<<<2, 4>>>(40);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::fflush(stdout);
    pass();
    return 0;
}
