/* Kernel parameter layouts (launch.c), which graph kernel nodes use too. */
#ifndef SLUICE_BE_API_LAUNCH_H
#define SLUICE_BE_API_LAUNCH_H

#include <cuda.h>
#include <stdint.h>

#include "session/handles.h"
#include "session/state.h"

/* The parameter layout of a function or kernel id (cached in its handle). */
CUresult be_layout_get(sl_be_session *s, uint64_t fid, struct be_layout **out, void **native);
/* Builds kernelParams for buf against layout: params[i] = buf + offsets[i]. */
CUresult be_params_rebuild(const struct be_layout *l, const uint8_t *buf, uint64_t len,
                           void **params);

#endif
