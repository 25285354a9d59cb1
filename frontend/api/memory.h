/* Host memory and pointer queries (memory.c). */
#ifndef SLUICE_FRONTEND_API_MEMORY_H
#define SLUICE_FRONTEND_API_MEMORY_H

/* 1 if [p, p+len) lies in guest host memory we know of (cuMemAllocHost/HostAlloc/Register)
 * or is mapped in this process; used by cuMemcpy with unified addresses. */
int sl_fe_is_host_pointer(const void *p);

#endif
