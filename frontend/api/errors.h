/* The CUresult names and strings, generated at build time from cuda.h (frontend/gen/gen_errors.py).
 * Internal. */
#ifndef SLUICE_FRONTEND_ERRORS_H
#define SLUICE_FRONTEND_ERRORS_H

#include <stddef.h>

struct sl_fe_error {
    int code;
    const char *name;   /* "CUDA_ERROR_INVALID_VALUE" */
    const char *string; /* the doxygen text of the enumerator in cuda.h */
};

/* Sorted by code. */
extern const struct sl_fe_error sl_fe_error_table[];
extern const size_t sl_fe_error_count;

/* The entry of code, NULL when cuda.h has no such CUresult. */
const struct sl_fe_error *sl_fe_error_lookup(int code);

#endif
