/* Managed memory's API (managed.c) as the other API files need it. */
#ifndef SLUICE_FRONTEND_API_MANAGED_H
#define SLUICE_FRONTEND_API_MANAGED_H

#include <cuda.h>

/* cuMemFree_v2 of dptr when it is the base of a managed allocation: 1 and *rc (the backend's
 * answer; the guest's pages are unmapped once it freed); 0 when dptr is no managed base. */
int sl_fe_managed_free(CUdeviceptr dptr, CUresult *rc);

#endif
