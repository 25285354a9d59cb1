/* Kernel launches: the host implementation of kernels.c runs on the calling thread.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "launch.h"

#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "copy.h"
#include "timing.h"

void *dbl_dev(struct dbl_launch *launch, CUdeviceptr ptr, size_t len)
{
    void *p = dev_range(DEVPTR(ptr), len);
    if (!p)
        launch->status = CUDA_ERROR_ILLEGAL_ADDRESS;
    return p;
}

void *dbl_global_ptr(struct dbl_launch *launch, const char *name)
{
    struct dbl_image *img = launch->image;
    for (size_t i = 0; i < dbl_global_count; i++)
        if (!strcmp(dbl_globals[i].name, name))
            return (void *)(uintptr_t)img->globals[i];
    abort(); /* a kernel of kernels.c names a global that dbl_globals lacks */
}

CUresult launch(void *h, const unsigned grid[3], const unsigned block[3], size_t shared, CUstream s,
                void **params, void **extra)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if ((rc = check_stream(s)))
        return rc;
    struct dbl_func *f = obj_get(h, K_FUNC);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    unsigned long long threads = (unsigned long long)block[0] * block[1] * block[2];
    if (!grid[0] || !grid[1] || !grid[2] || !threads || block[0] > 1024 || block[1] > 1024 ||
        block[2] > 64 || grid[1] > 65535 || grid[2] > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    if (threads > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (shared > 49152 + (size_t)f->max_dynamic_shared)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_capture *cap = dbl_capture_of(s);
    if (cap) { /* a kernel node of the capture's graph (capture.c) */
        CUDA_KERNEL_NODE_PARAMS kp = {.func = (CUfunction)h,
                                      .gridDimX = grid[0],
                                      .gridDimY = grid[1],
                                      .gridDimZ = grid[2],
                                      .blockDimX = block[0],
                                      .blockDimY = block[1],
                                      .blockDimZ = block[2],
                                      .sharedMemBytes = (unsigned)shared,
                                      .kernelParams = params,
                                      .extra = extra};
        return dbl_capture_kernel(cap, &kp);
    }
    const struct dbl_kernel *k = f->kernel;
    /* crash knob for the backend's worker-death test: this kernel aborts the process */
    const char *crash = getenv("SLUICE_DOUBLE_CRASH_KERNEL");
    if (crash && k && strcmp(crash, k->name) == 0)
        abort();
    void *argv[DBL_MAX_PARAMS];
    if (extra) {
        void *buf = NULL;
        size_t size = 0;
        for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                buf = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
                size = *(size_t *)extra[i + 1];
            else
                return CUDA_ERROR_INVALID_VALUE;
        }
        if (k->nparams &&
            (!buf || size < k->params[k->nparams - 1].offset + k->params[k->nparams - 1].size))
            return CUDA_ERROR_INVALID_VALUE;
        for (unsigned i = 0; i < k->nparams; i++)
            argv[i] = (char *)buf + k->params[i].offset;
        params = argv;
    } else if (k->nparams && !params) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct dbl_launch l = {{grid[0], grid[1], grid[2]},
                           {block[0], block[1], block[2]},
                           shared,
                           params,
                           f->image,
                           CUDA_SUCCESS};
    int64_t hb = dbl_time_host_begin(); /* the host's work is not device time (timing.c) */
    k->run(&l);
    dbl_time_host_end(hb);
    dbl_time_work(c, s, dbl_kernel_duration_us(k, &l)); /* simulated time (timing.c) */
    if (l.status != CUDA_SUCCESS) {
        c->sticky = l.status; /* as on a GPU: an illegal address poisons the context */
        return l.status;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                               unsigned int gridDimZ, unsigned int blockDimX,
                               unsigned int blockDimY, unsigned int blockDimZ,
                               unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
                               void **extra)
{
    unsigned grid[3] = {gridDimX, gridDimY, gridDimZ}, block[3] = {blockDimX, blockDimY, blockDimZ};
    LOCKED(launch(f, grid, block, sharedMemBytes, hStream, kernelParams, extra));
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                 void **extra)
{
    if (!config || (config->numAttrs && !config->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
    unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
    LOCKED(launch(f, grid, block, config->sharedMemBytes, config->hStream, kernelParams, extra));
}

EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                    unsigned int bx, unsigned int by, unsigned int bz,
                                    unsigned int shared, CUstream h, void **kernelParams,
                                    void **extra)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, h, kernelParams, extra);
}

EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                      void **kernelParams, void **extra)
{
    return cuLaunchKernelEx(config, f, kernelParams, extra);
}
