/* What the generated backend handlers (backend_dispatch.c) need from the backend session.
 *
 * Every handle, device ordinal and device pointer that arrives from the wire is translated or
 * checked by these functions before it reaches the driver; objects the driver creates are
 * registered through them before their ids go back on the wire. The backend implements them
 * (backend/session/); tests provide doubles. All return CUDA_SUCCESS or the CUresult to answer,
 * typically CUDA_ERROR_INVALID_HANDLE / CUDA_ERROR_INVALID_VALUE / CUDA_ERROR_INVALID_DEVICE. */
#ifndef SLUICE_BACKEND_HOOKS_H
#define SLUICE_BACKEND_HOOKS_H

#include <cuda.h>
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/handle_kinds.h"

typedef struct sl_be_session sl_be_session;

/* id -> native object of that kind owned by this session. How id 0 is treated (NULL stream,
 * current context...) is the session's decision per kind. */
CUresult sl_be_handle_get(sl_be_session *s, enum sl_handle_kind kind, uint64_t id, void **native);
/* A native object the driver just created -> a new id for the guest. Integer-valued handles
 * (texture objects, generic allocation handles) travel through the same void *. parent: the
 * module or library id a function, kernel, texture or surface reference came from (0: none). */
CUresult sl_be_handle_put(sl_be_session *s, enum sl_handle_kind kind, void *native, uint64_t parent,
                          uint64_t *id);
/* The same with the id the guest chose for it (slLoadImageAs: its kind, SL_WIRE_GUEST_ID set,
 * new to the session); CUDA_ERROR_INVALID_VALUE for any other. */
CUresult sl_be_handle_put_guest(sl_be_session *s, enum sl_handle_kind kind, void *native,
                                uint64_t parent, uint64_t id);
/* The call that destroyed the object behind id succeeded: forget it. */
void sl_be_handle_drop(sl_be_session *s, enum sl_handle_kind kind, uint64_t id);

/* Guest device ordinal <-> host CUdevice. */
CUresult sl_be_device_get(sl_be_session *s, int32_t ordinal, CUdevice *dev);
CUresult sl_be_device_put(sl_be_session *s, CUdevice dev, int32_t *ordinal);

/* ptr (and len bytes after it, len 0 = unknown) must lie in memory this session may use. */
CUresult sl_be_devptr_check(sl_be_session *s, uint64_t ptr, uint64_t len);
/* The driver returned a new device address (call_id says which call; len 0 = unknown). */
CUresult sl_be_devptr_add(sl_be_session *s, uint32_t call_id, uint64_t ptr, uint64_t len);
/* The allocation at ptr was freed. */
void sl_be_devptr_release(sl_be_session *s, uint64_t ptr);

/* A `layout` call answered function or kernel id: its parameter layout into the reply's fields
 * (n offsets and sizes, malloc'd; *given 1), as slParamLayout answers it. When the layout can
 * not be had now (no context current for a kernel, the driver refuses) *given stays 0 and the
 * first launch asks slParamLayout: never an error of the call. */
void sl_be_layout_out(sl_be_session *s, uint64_t id, size_t *n_offsets, uint64_t **offsets,
                      size_t *n_sizes, uint64_t **sizes, protobuf_c_boolean *given);

#endif
