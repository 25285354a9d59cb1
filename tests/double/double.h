/* The driver test double's kernel interface (types only): launches, kernels and globals as
 * kernels.c implements them and the API files use them. The functions kernels.c calls are in the
 * headers of the files that define them: launch.h, texture.h, graph_cond.h, timing.h.
 * TEST DOUBLE: host memory and host implementations of the test programs' kernels; never a GPU
 * result. See README.md. */
#ifndef SLUICE_DRIVER_DOUBLE_H
#define SLUICE_DRIVER_DOUBLE_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#define DBL_MAX_PARAMS 8

/* One launch as a kernel implementation sees it. */
struct dbl_launch {
    unsigned grid[3];
    unsigned block[3];
    size_t shared;
    void **params;   /* params[i] points at parameter i, as kernelParams does */
    void *image;     /* struct dbl_image *: the module the kernel came from (for its globals) */
    CUresult status; /* set by dbl_dev on a bad address */
};

struct dbl_param {
    size_t offset;
    size_t size;
};

/* A host implementation of one test kernel, found by its mangled name. */
struct dbl_kernel {
    const char *name;
    unsigned nparams;
    struct dbl_param params[DBL_MAX_PARAMS];
    double nominal_us; /* simulated duration, for event timing */
    void (*run)(struct dbl_launch *launch);
    /* kernels whose time depends on their arguments (the spin kernel of gpu_time.cu): what those
     * say; NULL: nominal_us */
    double (*duration_us)(const struct dbl_launch *launch);
};

/* The simulated duration of a launch of k (timing.c). */
static inline double dbl_kernel_duration_us(const struct dbl_kernel *k,
                                            const struct dbl_launch *launch)
{
    return k->duration_us ? k->duration_us(launch) : k->nominal_us;
}

/* A `__device__` variable the test programs declare: every loaded image gets its own copy. */
struct dbl_global {
    const char *name;
    size_t size;
};

extern const struct dbl_kernel dbl_kernels[];
extern const size_t dbl_kernel_count;
extern const struct dbl_global dbl_globals[];
extern const size_t dbl_global_count;

/* The clock rate kernels' cycle counts are converted with (CU_DEVICE_ATTRIBUTE_CLOCK_RATE). */
#define DBL_CLOCK_RATE_KHZ 1755000

#endif
