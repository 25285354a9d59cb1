/* Hooks the export tables and the resolver call into. The rest of the frontend (the call
 * layer, the context and device caches) implements them; unit tests provide doubles.
 * Every hook may be called before cuInit and from any thread, and must not call back into
 * cuGetProcAddress or cuGetExportTable. */
#ifndef SLUICE_FRONTEND_HOOKS_H
#define SLUICE_FRONTEND_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

/* The version our cuDriverGetVersion reports (>= the highest cudaVersion a guest passes,
 * 13000 for cudart 13.0). cuGetProcAddress refuses cudaVersion above it. */
int sl_fe_reported_driver_version(void);

/* The primary context handle of dev WITHOUT retaining or activating it (CUDART_INTERFACE[2]).
 * The handle must be stable: the same one cuDevicePrimaryCtxRetain returns later.
 * Returns CUDA_ERROR_INVALID_DEVICE (101) for a device that does not exist. */
CUresult sl_fe_primary_ctx_handle(CUdevice dev, CUcontext *pctx);

/* Loads a module image the way cuModuleLoadData does (the caller has already checked which
 * image form the slot accepts: a __fatBinC_Wrapper_t or a raw fatbin). */
CUresult sl_fe_module_load_image(CUmodule *module, const void *image);

/* The functions of a module as cuModuleGetFunctionCount and cuModuleEnumerateFunctions answer
 * them: *fns (malloc'd, the caller frees; NULL when none) and their number. */
CUresult sl_fe_module_functions(CUmodule module, CUfunction **fns, unsigned *count);

/* cuFuncGetName: a string that lives as long as the library (answers are kept per handle). */
CUresult sl_fe_function_name(CUfunction fn, const char **name);

/* cuStreamGetId of stream, with ctx current while asking when ctx is not NULL (the NULL,
 * legacy and per-thread streams are those of a context). */
CUresult sl_fe_stream_id(CUcontext ctx, CUstream stream, uint64_t *id);

/* The calling thread's current context, NULL when none. */
CUcontext sl_fe_current_context(void);

/* cuCtxGetId of a non-NULL context. */
CUresult sl_fe_context_id(CUcontext ctx, uint64_t *id);

/* Device facts as our cuDeviceGetCount, cuDeviceGetUuid and cuDeviceGetAttribute report them
 * (the integrity hash covers them, so they must be exactly those values). */
CUresult sl_fe_device_count(int *count);
CUresult sl_fe_device_uuid(CUdevice dev, CUuuid *uuid);
CUresult sl_fe_device_attribute(CUdevice dev, CUdevice_attribute attr, int *value);

/* One exported entry point of libcuda.so.1: its exact export name and its address. */
struct sl_fe_export {
    const char *name;
    const void *fn;
};

/* The library's export table, sorted by strcmp() of name (the library build generates it).
 * Sets *count. An unsorted table is detected once and searched linearly. */
const struct sl_fe_export *sl_fe_export_table(size_t *count);

#endif
