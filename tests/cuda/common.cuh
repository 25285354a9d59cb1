// Shared by the end-to-end CUDA test programs: every CUDA return code is checked.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

static const char *g_test_name = "?";

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        std::printf("FAIL %s: ", g_test_name);                                                    \
        std::printf(__VA_ARGS__);                                                                  \
        std::printf("\n");                                                                         \
        std::fflush(stdout);                                                                       \
        std::exit(1);                                                                              \
    } while (0)

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess)                                                                   \
            FAIL("%s:%d: %s -> %s (%s)", __FILE__, __LINE__, #call, cudaGetErrorName(err_),        \
                 cudaGetErrorString(err_));                                                        \
    } while (0)

static inline void pass(void)
{
    std::printf("PASS %s\n", g_test_name);
    std::fflush(stdout);
}
