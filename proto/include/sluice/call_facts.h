/* Accessors of the parameters behind the table's per-call facts (generated into call_facts.c
 * from proto/api/cuda_driver.api). Each switches on the call id in generated code, so that
 * nothing hand-written has to: the accounting, the quota and the frontend's idle tracking ask
 * these. A missing or malformed request gives the "none" answer (0 / NULL). */
#ifndef SLUICE_CALL_FACTS_H
#define SLUICE_CALL_FACTS_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/wire.h"

/* The stream a call works on: its @handle=stream parameter, or the stream inside its @stream
 * pod (cuLaunchKernelEx's CUlaunchConfig). 1 and *stream (0 = the NULL stream), or 0 when the
 * call has none. */
int sl_call_stream(const Sluice__Wire__Call *c, uint64_t *stream);
/* fattr=get|set: the CUfunction_attribute the call asks or sets; 1 and *attrib, else 0. */
int sl_call_fattr(const Sluice__Wire__Call *c, uint32_t *attrib);
/* acct=copy: the bytes the copy moves (0 when unknown) and its direction. */
uint64_t sl_call_copy_bytes(const Sluice__Wire__Call *c, enum sl_call_dir *dir);
/* quota=alloc|array: the bytes the call asks (UINT64_MAX when that overflows 64 bits). */
uint64_t sl_call_quota_bytes(const Sluice__Wire__Call *c);
/* The event an idle=record|wait call names; the context a call names as a parameter (0: the
 * current one); the handle a call releases (@release). 0 when none. */
uint64_t sl_call_event(const Sluice__Wire__Call *c);
uint64_t sl_call_context_arg(const Sluice__Wire__Call *c);
uint64_t sl_call_released(const Sluice__Wire__Call *c);
/* The device address a call releases (@release devptr: cuMemFree_v2, cuMemFreeAsync); 0 when
 * none. */
uint64_t sl_call_released_devptr(const Sluice__Wire__Call *c);
/* The most device addresses sl_call_devptrs gives for one call. */
#define SL_CALL_DEVPTRS_MAX 4
/* The device addresses a call names as in-parameters: its @devptr parameters (a released one
 * too) and the device or unified sides of a CUDA_MEMCPY2D/3D parameter; how many, into out (0
 * for a call that names none). The frontend's allocation cache asks it (frontend/call/allocs.c). */
size_t sl_call_devptrs(const Sluice__Wire__Call *c, uint64_t out[SL_CALL_DEVPTRS_MAX]);
/* A quota call's reply: where its out device address / handle is (the quota layer may take
 * an allocation back); NULL when the reply carries none. */
uint64_t *sl_reply_out_devptr(Sluice__Wire__Reply *r);
uint64_t *sl_reply_out_handle(Sluice__Wire__Reply *r);

#endif
