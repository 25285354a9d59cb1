/* cudaProfiler.h: no profiler can be attached to a guest's work through Sluice, and the real
 * driver answers CUDA_SUCCESS to cuProfilerStart/Stop/Initialize when no profiler is attached
 * (cudaProfilerStart -> cuProfilerStart). Answered locally, never sent. Before cuInit,
 * cuProfilerStart/Stop answer CUDA_ERROR_NOT_INITIALIZED as the context calls do (an assumption
 * until tests/gpu/driver_facts.cu's "pre-init cuProfilerStart" is recorded on the GPU machine).
 * These names are not calls of cuda.h, so they are not in the API table: sl_fe_export_address()
 * finds them through sl_fe_local_export_address() (exports.c; cuGetProcAddress resolves them from
 * cudaProfilerTypedefs.h). Part of the runtime objects (not of sluice_frontend_core, whose
 * symbols --exclude-libs hides), so that libcuda.so.1 exports them. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>

#include "call/rpc_session.h"

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
    return sl_fe_rpc_initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult cuProfilerStop(void)
{
    return sl_fe_rpc_initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}
