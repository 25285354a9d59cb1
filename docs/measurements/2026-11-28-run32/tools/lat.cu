// ad hoc: launch + cuStreamSynchronize (mode 0), or kernel + 4 B DtoH + sync (mode 1), or 64 B HtoD
// (mode 2), n times; prints the median in us.
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
__global__ void tiny(int *p) { *p = 42; }
static double now_us() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char **argv)
{
    int mode = argc > 1 ? atoi(argv[1]) : 0, n = argc > 2 ? atoi(argv[2]) : 20000;
    int *dev; cudaStream_t s; cudaMalloc(&dev, 64 << 10); cudaStreamCreate(&s);
    for (int i = 0; i < 100; i++) tiny<<<1, 1, 0, s>>>(dev);
    cudaStreamSynchronize(s);
    std::vector<double> t(n); int value = 0; char host[64] = {1};
    for (int i = 0; i < n; i++) {
        double a = now_us();
        if (mode == 0) { tiny<<<1, 1, 0, s>>>(dev); cuStreamSynchronize((CUstream)s); }
        else if (mode == 1) { tiny<<<1, 1, 0, s>>>(dev); cuMemcpyDtoHAsync(&value, (CUdeviceptr)dev, 4, (CUstream)s); cuStreamSynchronize((CUstream)s); }
        else cuMemcpyHtoD((CUdeviceptr)dev, host, 64);
        t[i] = now_us() - a;
    }
    std::sort(t.begin(), t.end());
    printf("mode %d: median %.1f us, p10 %.1f, p90 %.1f over %d\n", mode, t[n / 2], t[n / 10], t[n * 9 / 10], n);
    return 0;
}
