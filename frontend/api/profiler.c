/* cudaProfiler.h: no profiler can be attached to a guest's work through Sluice, and the real
 * driver answers CUDA_SUCCESS to cuProfilerStart/Stop/Initialize when no profiler is attached
 * (cudaProfilerStart -> cuProfilerStart). Answered locally, never sent. These names are not
 * calls of cuda.h, so they are not in the API table: sl_fe_export_address() finds them through
 * sl_fe_local_export_address() (exports.c; cuGetProcAddress resolves them from
 * cudaProfilerTypedefs.h). Part of the runtime objects (not of sluice_frontend_core, whose
 * symbols --exclude-libs hides), so that libcuda.so.1 exports them. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>

CUresult cuProfilerInitialize(const char *configFile, const char *outputFile,
                              CUoutput_mode outputMode)
{
    (void)configFile;
    (void)outputFile;
    (void)outputMode;
    return CUDA_SUCCESS;
}

CUresult cuProfilerStart(void)
{
    return CUDA_SUCCESS;
}

CUresult cuProfilerStop(void)
{
    return CUDA_SUCCESS;
}
