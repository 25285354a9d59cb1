// Kernels whose parameter layouts test_image_listing.c knows (the C ABI of each signature):
// built with nvcc into a fatbin and a relocatable cubin (tests/unit/frontend/CMakeLists.txt).
struct S {
    char c;
    double d;
    int x[3];
}; // 32 bytes, 8-aligned

__device__ __noinline__ int helper(int x) { return x * 3 + 1; } // not a kernel

extern "C" __global__ void k_none() {}

extern "C" __global__ void k_mixed(float *a, int n, S s, char c, double d)
{
    if (threadIdx.x == 0)
        a[0] = (float)(n + s.d + s.x[2] + c + d);
}

extern "C" __global__ void k_char(char c, int *out)
{
    out[0] = helper(c);
}

template <typename T> __global__ void k_tmpl(T *p, T v) { p[0] = v; }
template __global__ void k_tmpl<short>(short *, short);
