// Shared by the test programs that call the driver API directly (link them with -lcuda).
#pragma once
#include "common.cuh"
#include <cstring>
#include <cuda.h>

#define CU(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            const char *n_ = "?";                                                                  \
            cuGetErrorName(r_, &n_);                                                               \
            FAIL("%s:%d: %s -> %d (%s)", __FILE__, __LINE__, #call, (int)r_, n_);                  \
        }                                                                                          \
    } while (0)

// Pinned device memory of device 0 for cuMemCreate, and its minimum granularity in *gran.
static inline CUmemAllocationProp device0_alloc_prop(size_t *gran)
{
    CUmemAllocationProp prop;
    std::memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    *gran = 0;
    CU(cuMemGetAllocationGranularity(gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (!*gran)
        FAIL("granularity 0");
    return prop;
}
