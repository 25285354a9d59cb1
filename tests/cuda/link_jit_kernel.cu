// The kernel link_jit links at run time: compiled alone to PTX with `nvcc -ptx` (see
// CMakeLists.txt) and embedded with bin2c. The double's table has it (_Z5scalePffi).
__global__ void scale(float *x, float f, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * f;
}
