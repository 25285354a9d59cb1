/* cuGetExportTable: the private tables NVIDIA's cudart and libraries ask the driver for
 * (export-tables.md sections 1 and 5.A.3). Served locally, usable before cuInit. */
#ifndef SLUICE_FRONTEND_EXPORT_TABLES_H
#define SLUICE_FRONTEND_EXPORT_TABLES_H

#include <cuda.h>

#include <stdint.h>

/* The ids we serve, byte for byte (CUuuid.bytes). */
extern const uint8_t SL_FE_ET_ID_CUDART_INTERFACE[16];
extern const uint8_t SL_FE_ET_ID_TOOLS_RUNTIME_CALLBACK_HOOKS[16];
extern const uint8_t SL_FE_ET_ID_TOOLS_TLS[16];
extern const uint8_t SL_FE_ET_ID_CONTEXT_LOCAL_STORAGE[16];
extern const uint8_t SL_FE_ET_ID_CONTEXT_CHECKS[16];
extern const uint8_t SL_FE_ET_ID_INTEGRITY_CHECK[16];
extern const uint8_t SL_FE_ET_ID_CONTEXT_ID[16];
extern const uint8_t SL_FE_ET_ID_CLUSTER[16];
extern const uint8_t SL_FE_ET_ID_MODULE_FUNCTIONS[16];

/* NULL ppExportTable or pExportTableId: CUDA_ERROR_INVALID_VALUE, nothing written. An id we
 * do not serve (f8cff951... included): CUDA_ERROR_INVALID_VALUE and *ppExportTable = NULL. */
CUresult sl_fe_cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId);

#endif
