/* Copies (copy.c): every memcpy with a host side, 1D, 2D, 3D and array copies. */
#ifndef SLUICE_FRONTEND_API_COPY_H
#define SLUICE_FRONTEND_API_COPY_H

#include <stddef.h>

/* The largest piece of a copy with a host side: one call each, bounding the backend's staging. */
#define SL_FE_MAX_COPY_CHUNK ((size_t)16 << 20)

#endif
