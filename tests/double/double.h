/* The driver test double's kernel interface: what kernels.c and timing.c share with the API
 * files (core.h and the family files beside it).
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
};

/* The simulated duration of a launch of k (timing.c): nominal_us, or for kernels whose time
 * depends on their arguments (the spin kernel of gpu_time.cu) what those say. */
double dbl_kernel_duration_us(const struct dbl_kernel *k, const struct dbl_launch *launch);

/* A `__device__` variable the test programs declare: every loaded image gets its own copy. */
struct dbl_global {
    const char *name;
    size_t size;
};

extern const struct dbl_kernel dbl_kernels[];
extern const size_t dbl_kernel_count;
extern const struct dbl_global dbl_globals[];
extern const size_t dbl_global_count;

/* A device range as a host pointer, or NULL (and launch->status = CUDA_ERROR_ILLEGAL_ADDRESS)
 * when [ptr, ptr + len) is not inside one live allocation. */
void *dbl_dev(struct dbl_launch *launch, CUdeviceptr ptr, size_t len);
/* The launch's image's copy of global `name` (never NULL for a name of dbl_globals). */
void *dbl_global_ptr(struct dbl_launch *launch, const char *name);
/* The array behind texture/surface object obj (rows of *pitch bytes, *width elements of
 * *elem bytes, *height rows); NULL if obj is not an object on an array. */
unsigned char *dbl_object_array(unsigned long long obj, size_t *pitch, size_t *width,
                                size_t *height, size_t *elem);
/* Simulated device time (timing.c): per-stream clocks in CLOCK_MONOTONIC microseconds. ctx is
 * the current context (the NULL, legacy and per-thread streams are one clock per context).
 * Called under the double's lock, except dbl_time_sleep_until. */
double dbl_time_now_us(void);
/* Queues dur_us of work on the stream; returns when it ends. */
double dbl_time_work(const void *ctx, CUstream s, double dur_us);
/* The time the stream reaches this point (an event recorded now). */
double dbl_time_mark(const void *ctx, CUstream s);
/* The stream waits for time t_us (cuStreamWaitEvent). */
void dbl_time_wait_for(const void *ctx, CUstream s, double t_us);
/* When the stream's / every stream of ctx's queued work ends. */
double dbl_time_stream_end(const void *ctx, CUstream s);
double dbl_time_ctx_end(const void *ctx);
void dbl_time_sleep_until(double t_us);
/* Around the host computation of a result: that time is not device time. */
int64_t dbl_time_host_begin(void);
void dbl_time_host_end(int64_t begin);
/* The clock rate kernels' cycle counts are converted with (CU_DEVICE_ATTRIBUTE_CLOCK_RATE). */
#define DBL_CLOCK_RATE_KHZ 1755000

/* cudaGraphSetConditional(handle, value) in a kernel: sets a conditional handle of the graph
 * being launched (launch->status = CUDA_ERROR_ILLEGAL_ADDRESS for an unknown handle). */
void dbl_cond_set(struct dbl_launch *launch, unsigned long long handle, unsigned value);

/* Device printf: writes straight to fd 1 (the backend captures fd 1; no stdio buffering). */
void dbl_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
