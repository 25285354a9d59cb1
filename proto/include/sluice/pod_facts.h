/* What the generated accessors of sluice/call_facts.h need to read out of a struct parameter
 * (a pod): one function per struct type, named by the generator after it (a missing one is a
 * link error of sluice_wire). Hand-written, shared by the frontend and the backend. */
#ifndef SLUICE_POD_FACTS_H
#define SLUICE_POD_FACTS_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/wire_ids.h"

/* @stream: the stream a launch configuration names. */
int sl_pod_stream_CUlaunchConfig(const CUlaunchConfig *p, uint64_t *stream);
/* @bytes of a copy: bytes moved (width x height [x depth]) and the direction from the memory
 * types (host to device, device to host, or neither). */
uint64_t sl_pod_copy_CUDA_MEMCPY2D(const CUDA_MEMCPY2D *p, enum sl_call_dir *dir);
uint64_t sl_pod_copy_CUDA_MEMCPY3D(const CUDA_MEMCPY3D *p, enum sl_call_dir *dir);
/* The device addresses of a copy's device or unified sides (an array or host side has none):
 * how many (0, 1 or 2) into out. */
size_t sl_pod_devptrs_CUDA_MEMCPY2D(const CUDA_MEMCPY2D *p, uint64_t out[2]);
size_t sl_pod_devptrs_CUDA_MEMCPY3D(const CUDA_MEMCPY3D *p, uint64_t out[2]);
/* @quota of an array descriptor: the bytes the array holds (UINT64_MAX on overflow). */
uint64_t sl_pod_quota_CUDA_ARRAY_DESCRIPTOR(const CUDA_ARRAY_DESCRIPTOR *p);
uint64_t sl_pod_quota_CUDA_ARRAY3D_DESCRIPTOR(const CUDA_ARRAY3D_DESCRIPTOR *p);

/* Bytes of one channel element of an array format; 0 for formats it does not know. */
size_t sl_array_format_bytes(CUarray_format f);
/* Bytes an array of these dimensions holds (0 height/depth/channels count as 1; an unknown
 * format as 4 bytes); UINT64_MAX when that does not fit in 64 bits. */
uint64_t sl_array_bytes(uint64_t w, uint64_t h, uint64_t d, unsigned format, unsigned channels);

#endif
