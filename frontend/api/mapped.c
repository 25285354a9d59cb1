/* Mapped host memory in the guest (cuMemHostAlloc / cuMemHostRegister with DEVICEMAP): the
 * calls that give a range its twin in the backend and take it away. The GPU cannot see guest
 * memory, so each mapped range has a twin: page-locked memory of the session, mapped for the
 * device (backend/mapped.c); call/mapped_sync.c keeps the ranges and the twins coherent at call
 * boundaries (docs/remoting.md).
 *
 * The backend places its twin at the guest's address when it can, and an allocation the
 * frontend made itself moves to the twin's address when that is free here, so that the device
 * address equals the host pointer as under unified addressing. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdint.h>
#include <sys/mman.h>

#include "api/mapped.h"
#include "call/mapped_sync.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

static CUresult rpc_alloc(uint64_t address, uint64_t len, uint64_t *dptr)
{
    Sluice__Cuda__SlMappedAllocRequest req = SLUICE__CUDA__SL_MAPPED_ALLOC_REQUEST__INIT;
    req.address = address;
    req.bytesize = len;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(slMappedAlloc, &call, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS && SL_FE_REPLY(slMappedAlloc, rep))
            *dptr = rep->sl_mapped_alloc->dptr;
        else if (rc == CUDA_SUCCESS)
            rc = CUDA_ERROR_UNKNOWN;
        sl_fe_reply_free(rep);
    }
    return rc;
}

static void rpc_free(uint64_t dptr)
{
    Sluice__Cuda__SlMappedFreeRequest req = SLUICE__CUDA__SL_MAPPED_FREE_REQUEST__INIT;
    req.dptr = dptr;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(slMappedFree, &call, &req);
    sl_fe_enqueue_async(&call);
}

CUresult sl_fe_mapped_add(void **pp, size_t len, int movable, uint64_t *dptr)
{
    if (!sl_fe_mapped_room(len))
        return sl_fe_unsupported("mapped host memory beyond 1 GiB per process");
    struct sl_fe_mapping *m = sl_fe_mapping_new(len);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t d = 0;
    CUresult rc = rpc_alloc((uintptr_t)*pp, len, &d);
    if (rc != CUDA_SUCCESS) {
        sl_fe_mapping_free(m);
        return rc;
    }
    uint8_t *guest = *pp;
    if (movable && d != (uintptr_t)guest) { /* follow the twin to keep pointer == device address */
        void *at = mmap((void *)(uintptr_t)d, len, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (at == (void *)(uintptr_t)d) {
            munmap(guest, len);
            guest = at;
        } else if (at != MAP_FAILED) {
            munmap(at, len);
        }
    }
    sl_fe_mapped_track(m, guest, len, d);
    *pp = guest;
    *dptr = d;
    return CUDA_SUCCESS;
}

void sl_fe_mapped_remove(void *p)
{
    uint64_t dptr;
    if (sl_fe_mapped_untrack(p, &dptr))
        rpc_free(dptr);
}
