/* The version-aware cuGetProcAddress of the frontend (export-tables.md section 3).
 * The library exports cuGetProcAddress / cuGetProcAddress_v2 as thin wrappers of these. */
#ifndef SLUICE_FRONTEND_PROCADDR_H
#define SLUICE_FRONTEND_PROCADDR_H

#include <cuda.h>

enum sl_fe_proc_result {
    SL_FE_PROC_FOUND = 0,                  /* = CU_GET_PROC_ADDRESS_SUCCESS */
    SL_FE_PROC_SYMBOL_NOT_FOUND = 1,       /* = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    SL_FE_PROC_VERSION_NOT_SUFFICIENT = 2, /* = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT */
};

/* The export name that answers (symbol, cudaVersion, per_thread), from the generated table
 * only (no address lookup, no driver-version check). Sets *export_name on FOUND. */
enum sl_fe_proc_result sl_fe_procaddr_lookup(const char *symbol, int cuda_version, int per_thread,
                                             const char **export_name);

/* cuGetProcAddress (v1, CUDA 11.3 ABI): errors are return codes (500 for not found). */
CUresult sl_fe_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

/* cuGetProcAddress_v2 (CUDA 12.0 ABI): not found is CUDA_SUCCESS plus *symbolStatus. */
CUresult sl_fe_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                   cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus);

#endif
