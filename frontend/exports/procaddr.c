#include "exports/procaddr.h"

#include <stdlib.h>
#include <string.h>

#include "api/device.h"
#include "exports/exports.h"
#include "exports/procaddr_table.h"
#include "sluice/log.h"

/* The flag bits cuGetProcAddress knows; any other bit is CUDA_ERROR_INVALID_VALUE (measured:
 * flags 4 gives 1). */
#define KNOWN_FLAGS                                                                                \
    ((cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |                                              \
                  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))

static int cmp_entry(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const struct sl_fe_proc_entry *)elem)->name);
}

static int has_per_thread(const struct sl_fe_proc_entry *e)
{
    for (unsigned i = 0; i < e->n_abis; i++) {
        if (e->abis[i].pt_export_name)
            return 1;
    }
    return 0;
}

enum sl_fe_proc_result sl_fe_procaddr_lookup(const char *symbol, int cuda_version, int per_thread,
                                             const char **export_name)
{
    if (!symbol || !export_name)
        return SL_FE_PROC_SYMBOL_NOT_FOUND;
    size_t n = 0;
    const struct sl_fe_proc_entry *table = sl_fe_proc_table(&n);
    const struct sl_fe_proc_entry *e = bsearch(symbol, table, n, sizeof *table, cmp_entry);
    if (!e)
        return SL_FE_PROC_SYMBOL_NOT_FOUND;
    const struct sl_fe_proc_abi *abi = NULL;
    for (unsigned i = 0; i < e->n_abis && e->abis[i].since <= cuda_version; i++)
        abi = &e->abis[i];
    if (!abi)
        return SL_FE_PROC_VERSION_NOT_SUFFICIENT;
    if (per_thread && has_per_thread(e)) {
        /* A call with per-thread entries, asked per-thread before its ABI had one: 580 says
         * VERSION_NOT_SUFFICIENT (cuMemcpyHtoD @6990 or @3020 flags 2). */
        if (!abi->pt_export_name || cuda_version < abi->pt_since)
            return SL_FE_PROC_VERSION_NOT_SUFFICIENT;
        *export_name = abi->pt_export_name;
        return SL_FE_PROC_FOUND;
    }
    *export_name = abi->export_name;
    return SL_FE_PROC_FOUND;
}

/* The checks and the lookup both versions share. Returns CUDA_SUCCESS with *result and *fn set,
 * or CUDA_ERROR_INVALID_VALUE (nothing written anywhere). */
static CUresult resolve(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                        enum sl_fe_proc_result *result, void **fn)
{
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~KNOWN_FLAGS)
        return CUDA_ERROR_INVALID_VALUE;
    if (cuda_version > sl_fe_reported_driver_version())
        return CUDA_ERROR_INVALID_VALUE;
    const char *name = NULL;
    int per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    *fn = NULL;
    *result = sl_fe_procaddr_lookup(symbol, cuda_version, per_thread, &name);
    if (*result != SL_FE_PROC_FOUND)
        return CUDA_SUCCESS;
    const void *addr = sl_fe_export_address(name);
    if (!addr) {
        /* A call of CUDA 13.0 that our library does not export: say so, never a stub. */
        if (sl_log_enabled(SL_LOG_DEBUG))
            sl_log(SL_LOG_DEBUG, "frontend", "cuGetProcAddress(%s, %d, %llu): %s not exported",
                   symbol, cuda_version, (unsigned long long)flags, name);
        *result = SL_FE_PROC_SYMBOL_NOT_FOUND;
        return CUDA_SUCCESS;
    }
    *fn = (void *)addr;
    return CUDA_SUCCESS;
}

CUresult sl_fe_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    enum sl_fe_proc_result result;
    void *fn = NULL;
    CUresult rc = resolve(symbol, pfn, cudaVersion, flags, &result, &fn);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (result != SL_FE_PROC_FOUND)
        return CUDA_ERROR_NOT_FOUND; /* v1 leaves *pfn alone */
    *pfn = fn;
    return CUDA_SUCCESS;
}

CUresult sl_fe_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                   cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    enum sl_fe_proc_result result;
    void *fn = NULL;
    CUresult rc = resolve(symbol, pfn, cudaVersion, flags, &result, &fn);
    if (rc != CUDA_SUCCESS)
        return rc;
    *pfn = fn;
    if (symbolStatus)
        *symbolStatus = (CUdriverProcAddressQueryResult)result;
    return CUDA_SUCCESS;
}
