// The spin kernel of the GPU-time programs (gpu_time, share_loop, share_mix): one thread spins
// `cycles` clock cycles and adds its own %globaltimer duration to *ns. The driver double knows
// it by its mangled name (tests/double/kernels.c).
#pragma once
#include "common.cuh"
#include <cstdlib>

__device__ __forceinline__ unsigned long long globaltimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void spin(long long cycles, unsigned long long *ns)
{
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    unsigned long long g0 = globaltimer();
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
    atomicAdd(ns, globaltimer() - g0);
}

// A number from the environment within [lo, hi], else def; anything else fails the program.
static inline double env_num(const char *name, double def, double lo, double hi)
{
    const char *s = std::getenv(name);
    if (!s)
        return def;
    char *end;
    double v = std::strtod(s, &end);
    if (*end || !(v >= lo && v <= hi))
        FAIL("%s=%s: must be %g..%g", name, s, lo, hi);
    return v;
}
