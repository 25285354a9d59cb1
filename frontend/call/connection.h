/* The session: lazy connect, the device facts of SessionAccept, the close at unload
 * (connection.c). */
#ifndef SLUICE_FRONTEND_CALL_CONNECTION_H
#define SLUICE_FRONTEND_CALL_CONNECTION_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

struct sl_fe_device {
    int ordinal;
    char name[256];
    CUuuid uuid;
    int has_uuid;
    uint64_t total_mem;
    int *attrs;
    size_t nattrs;
    unsigned char luid[8];
    int has_luid;
    unsigned luid_mask;
    uint64_t primary_context;
};

/* Connects and opens the session once (thread-safe); later calls return the first outcome.
 * CUDA_SUCCESS, CUDA_ERROR_NO_DEVICE (no config, nothing reachable) or
 * CUDA_ERROR_DEVICE_UNAVAILABLE (the session was lost). */
CUresult sl_fe_ensure_session(void);
/* The driver version the backend reported (>= 13000), 0 before a session exists. */
int sl_fe_session_driver_version(void);
int sl_fe_session_device_count(void);
const struct sl_fe_device *sl_fe_session_device(int ordinal);

#endif
