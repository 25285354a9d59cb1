// A second translation unit of sluice-bench-datapath: its kernel lives in a module of its
// own, which the runtime loads at the kernel's first launch.
#include <cuda_runtime.h>

__global__ void other_module_kernel(int *p)
{
    if (p)
        *p += 2;
}

void launch_in_other_module(cudaStream_t s, int *p) { other_module_kernel<<<1, 1, 0, s>>>(p); }
