/* Memory shared between processes through a memfd (ipc.c): CUDA IPC memory handles and pool
 * pointer export data. TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_IPC_H
#define SLUICE_DOUBLE_IPC_H

#include "core.h"

#define DBL_IPC_BYTES 64

/* The allocation based at dptr shared (its pages moved into a memfd): its description, tagged
 * magic, in out[DBL_IPC_BYTES]. Called with the double's lock held. */
CUresult dbl_ipc_export(CUdeviceptr dptr, const char magic[8], void *out);
/* Maps what in[DBL_IPC_BYTES] (tagged magic) describes into this process (an A_IPC allocation):
 * *out; CUDA_ERROR_INVALID_VALUE when it is not such a description or its exporter freed it or
 * ended, CUDA_ERROR_INVALID_CONTEXT in the exporting process. Called with the lock held. */
CUresult dbl_ipc_open(const void *in, const char magic[8], CUdeviceptr *out);

#endif
