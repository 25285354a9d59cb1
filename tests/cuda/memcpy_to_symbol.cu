// memcpy_to_symbol: a __device__ table set with cudaMemcpyToSymbol, read by a kernel, and a
// __device__ counter the kernel writes, read back with cudaMemcpyFromSymbol.
#include "common.cuh"
#include <vector>

__device__ int d_table[16];
__device__ int d_count;

__global__ void lookup(int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = d_table[i % 16] * 2 + i;
    if (i == 0)
        d_count = n;
}

int main()
{
    g_test_name = "memcpy_to_symbol";
    const int n = 1000;
    int table[16];
    for (int i = 0; i < 16; i++)
        table[i] = 100 + 7 * i;
    CHECK(cudaMemcpyToSymbol(d_table, table, sizeof table));
    int zero = 0;
    CHECK(cudaMemcpyToSymbol(d_count, &zero, sizeof zero));
    int *dout;
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    lookup<<<(n + 127) / 128, 128>>>(dout, n);
    CHECK(cudaGetLastError());
    std::vector<int> out(n);
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (out[i] != table[i % 16] * 2 + i)
            FAIL("out[%d] = %d, expected %d", i, out[i], table[i % 16] * 2 + i);
    int count = -1, back[16];
    CHECK(cudaMemcpyFromSymbol(&count, d_count, sizeof count));
    CHECK(cudaMemcpyFromSymbol(back, d_table, sizeof back));
    if (count != n)
        FAIL("d_count = %d, expected %d", count, n);
    for (int i = 0; i < 16; i++)
        if (back[i] != table[i])
            FAIL("d_table[%d] = %d, expected %d", i, back[i], table[i]);
    CHECK(cudaFree(dout));
    pass();
    return 0;
}
