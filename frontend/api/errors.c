/* cuGetErrorName / cuGetErrorString, answered locally with the real driver's own names and
 * strings, recorded on the GPU machine (frontend/gen/driver_errors.jsonl, gen_errors.py). An
 * unknown code is CUDA_ERROR_INVALID_VALUE with *pStr = NULL. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdlib.h>

#include <cuda.h>

#include "api/errors.h"

static int cmp_code(const void *key, const void *elem)
{
    int k = *(const int *)key, c = ((const struct sl_fe_error *)elem)->code;
    return (k > c) - (k < c);
}

const struct sl_fe_error *sl_fe_error_lookup(int code)
{
    return bsearch(&code, sl_fe_error_table, sl_fe_error_count, sizeof *sl_fe_error_table,
                   cmp_code);
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sl_fe_error *e = sl_fe_error_lookup((int)error);
    *pStr = e ? e->name : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sl_fe_error *e = sl_fe_error_lookup((int)error);
    *pStr = e ? e->string : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
