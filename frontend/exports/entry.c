/* The exported cuGetProcAddress, cuGetProcAddress_v2 and cuGetExportTable: thin wrappers of
 * the core (procaddr.c, export_tables.c). They work before cuInit and make no round trip. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "exports/export_tables.h"
#include "exports/procaddr.h"

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return sl_fe_cuGetProcAddress(symbol, pfn, cudaVersion, flags);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    return sl_fe_cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    return sl_fe_cuGetExportTable(ppExportTable, pExportTableId);
}
