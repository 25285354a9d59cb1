/* Kernel launches: parameter layouts and packing (launch.c). */
#ifndef SLUICE_FRONTEND_API_LAUNCH_H
#define SLUICE_FRONTEND_API_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

struct sl_fe_param_layout {
    uint32_t count;
    size_t *offsets, *sizes;
    size_t total; /* max(offset + size) */
};
/* Packs params[i] at their offsets into buf (capacity cap); returns bytes used or 0 and sets
 * *rc on failure. */
size_t sl_fe_pack_params(const struct sl_fe_param_layout *l, void **params, uint8_t *buf,
                         size_t cap);
/* The extra-array buffer (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE); 0 on success. */
int sl_fe_parse_extra(void **extra, const void **buf, size_t *len);
/* Test helper: drops the layout cache. */
void sl_fe_layout_cache_clear(void);
/* The parameter bytes of function/kernel id f as a launch packs them: kernelParams packed at
 * the layout's offsets (into stackbuf, or *heap when larger: the caller frees it), or the extra
 * buffer as given (same layout). */
CUresult sl_fe_param_bytes(uint64_t f, void **kernelParams, void **extra, uint8_t *stackbuf,
                           size_t stackcap, uint8_t **heap, const void **bytes, size_t *len);

#endif
