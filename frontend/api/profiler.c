/* cudaProfiler.h: no profiler can be attached to a guest's work through Sluice, and the real
 * driver answers CUDA_SUCCESS to cuProfilerStart/Stop/Initialize when no profiler is attached
 * (cudaProfilerStart -> cuProfilerStart). Answered locally, never sent. As the driver answers
 * them (tests/gpu/driver_facts.cu, run 22: docs/measurements/2026-11-27-run22): before cuInit
 * CUDA_ERROR_NOT_INITIALIZED, after it without a current context CUDA_ERROR_INVALID_CONTEXT.
 * These names are not calls of cuda.h, so they are not in the API table: sl_fe_export_address()
 * finds them through sl_fe_local_export_address() (exports.c; cuGetProcAddress resolves them from
 * cudaProfilerTypedefs.h). Part of the runtime objects (not of sluice_frontend_core, whose
 * symbols --exclude-libs hides), so that libcuda.so.1 exports them. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>

#include "api/device.h"
#include "call/contexts.h"

CUresult cuProfilerInitialize(const char *configFile, const char *outputFile,
                              CUoutput_mode outputMode)
{
    (void)configFile;
    (void)outputFile;
    (void)outputMode;
    return CUDA_SUCCESS;
}

static CUresult profiler_answer(void)
{
    if (!sl_fe_init_done())
        return CUDA_ERROR_NOT_INITIALIZED;
    return sl_fe_current_context() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuProfilerStart(void)
{
    return profiler_answer();
}

CUresult cuProfilerStop(void)
{
    return profiler_answer();
}
