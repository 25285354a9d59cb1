// The kernel driver_api loads as a module image: compiled alone with `nvcc -fatbin` (see
// CMakeLists.txt) and embedded with bin2c. driver_api.cu includes it too, so the runtime API
// knows the same kernel (the double's table has it: _Z5scalePffi).
// (compiled alone for the fatbin and included by driver_api.cu: no include guard needed)
__global__ void scale(float *x, float f, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * f;
}
