/* Page-locked host memory. cuMemAllocHost and cuMemHostAlloc hand out guest memory that the
 * frontend tracks (copies to and from it work as with any host memory; small allocations are
 * mapped, see SL_FE_IMPLICIT_MAX); cuMemHostRegister only records the range and succeeds. cudart 13
 * passes flags 0 for cudaMallocHost and cudaHostAlloc(Default) (measured through the e2e harness on
 * the double and on an H200 with UVA; SLUICE_LOG_LEVEL=debug logs the flags). Mapped memory
 * (CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTREGISTER_DEVICEMAP: cudaHostAllocMapped,
 * cudaHostRegisterMapped) gets a twin in the backend that the device can reach, kept coherent
 * at call boundaries (mapped.c); cuMemHostGetDevicePointer answers the twin's device address,
 * which equals the pointer whenever the address could be shared. cuPointerGetAttribute(s)
 * answers host pointers locally and asks the backend about the others. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "api/memory.h"
#include "call/managed.h"
#include "api/mapped.h"
#include "call/contexts.h"
#include "call/mapped_sync.h"
#include "call/rpc.h"
#include "component.h"
#include "sluice/fe_calls.h"
#include "sluice/log.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

struct range {
    struct range *next;
    uintptr_t base;
    size_t len;
    unsigned flags;
    int owned;     /* 1: cuMemAllocHost/HostAlloc (freed by cuMemFreeHost) */
    uint64_t dptr; /* mapped memory: the device address of base (0: not mapped) */
    int late;      /* the twin came with cuMemHostGetDevicePointer (memory of posix_memalign) */
};

/* Under unified addressing every allocation of cuMemAllocHost/cuMemHostAlloc is reachable by
 * kernels whatever its flags (the driver API's "Unified Addressing"), and some libraries hand
 * such pointers to kernels directly (MAGMA's small flag-0 buffers). Small ones get a mapped
 * twin as DEVICEMAP ones do, while their total stays within SL_FE_IMPLICIT_TOTAL: every call
 * compares mapped memory (mapped.c), so large page-locked buffers, which programs use for
 * copies, stay plain guest memory. */
#define SL_FE_IMPLICIT_MAX   ((size_t)4096)
#define SL_FE_IMPLICIT_TOTAL ((size_t)64 << 10)
static size_t g_implicit_bytes; /* g_lock */

static struct range *g_ranges;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static struct range *find_locked(uintptr_t p)
{
    for (struct range *r = g_ranges; r; r = r->next)
        if (p >= r->base && p - r->base < (r->len ? r->len : 1))
            return r;
    return NULL;
}

static int tracked(const void *p, struct range *out)
{
    pthread_mutex_lock(&g_lock);
    struct range *r = find_locked((uintptr_t)p);
    if (r && out)
        *out = *r;
    pthread_mutex_unlock(&g_lock);
    return r != NULL;
}

static CUresult add_mapped(void *p, size_t len, unsigned flags, int owned, uint64_t dptr)
{
    struct range *r = malloc(sizeof *r);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r->base = (uintptr_t)p;
    r->len = len;
    r->flags = flags;
    r->owned = owned;
    r->dptr = dptr;
    r->late = 0;
    pthread_mutex_lock(&g_lock);
    if (find_locked(r->base)) {
        pthread_mutex_unlock(&g_lock);
        free(r);
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
    r->next = g_ranges;
    g_ranges = r;
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

static void set_late(void *p, int late)
{
    pthread_mutex_lock(&g_lock);
    struct range *r = find_locked((uintptr_t)p);
    if (r)
        r->late = late;
    pthread_mutex_unlock(&g_lock);
}

static CUresult add(void *p, size_t len, unsigned flags, int owned)
{
    return add_mapped(p, len, flags, owned, 0);
}

/* Removes the range starting at p; returns 1 and the range if found. */
static int drop_range(void *p, struct range *out)
{
    int found = 0;
    pthread_mutex_lock(&g_lock);
    for (struct range **pp = &g_ranges; *pp; pp = &(*pp)->next) {
        if ((*pp)->base == (uintptr_t)p) {
            struct range *r = *pp;
            *pp = r->next;
            *out = *r;
            free(r);
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

/* cuMemHostAlloc with DEVICEMAP: an anonymous mapping with a mapped twin in the backend. */
static CUresult host_alloc_mapped(void **pp, size_t n, unsigned flags)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t dptr = 0;
    CUresult rc = sl_fe_mapped_add(&p, n, 1, &dptr);
    if (rc != CUDA_SUCCESS) {
        munmap(p, n);
        return rc;
    }
    rc = add_mapped(p, n, flags, 1, dptr);
    if (rc != CUDA_SUCCESS) {
        sl_fe_mapped_remove(p);
        munmap(p, n);
        return rc;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

int sl_fe_is_host_pointer(const void *p)
{
    if (!p)
        return 0;
    if (tracked(p, NULL))
        return 1;
    if (sl_fe_managed_find((uintptr_t)p, NULL, NULL))
        return 0; /* managed memory: the device's address (copies go device to device) */
    long pg = sysconf(_SC_PAGESIZE);
    void *page = (void *)((uintptr_t)p & ~((uintptr_t)pg - 1));
    unsigned char vec;
    return mincore(page, (size_t)pg, &vec) == 0 || errno != ENOMEM;
}

/* Counted in pages: each twin is at least one. */
static size_t implicit_cost(size_t n)
{
    return (n + 4095) & ~(size_t)4095;
}

static int implicit_take(size_t n)
{
    n = implicit_cost(n);
    pthread_mutex_lock(&g_lock);
    int ok = g_implicit_bytes + n <= SL_FE_IMPLICIT_TOTAL;
    if (ok)
        g_implicit_bytes += n;
    pthread_mutex_unlock(&g_lock);
    return ok;
}

static void implicit_give(size_t n)
{
    n = implicit_cost(n);
    pthread_mutex_lock(&g_lock);
    g_implicit_bytes -= n;
    pthread_mutex_unlock(&g_lock);
}

static CUresult host_alloc(const char *name, void **pp, size_t n, unsigned flags)
{
    if (sl_log_enabled(SL_LOG_DEBUG))
        sl_log(SL_LOG_DEBUG, SL_FE_COMPONENT, "%s(%zu bytes, flags 0x%x)", name, n, flags);
    if (!pp || n == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                            CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & CU_MEMHOSTALLOC_DEVICEMAP)
        return host_alloc_mapped(pp, n, flags);
    /* a twin only where the mapped bound has room: else plain memory, without the
     * "not supported" line an explicit mapping beyond the bound gets */
    if (n <= SL_FE_IMPLICIT_MAX && sl_fe_mapped_room(n) && implicit_take(n)) {
        CUresult rc = host_alloc_mapped(pp, n, flags);
        if (rc == CUDA_SUCCESS)
            return rc;
        implicit_give(n); /* no twin after all: plain memory, as a large one */
    }
    void *p = NULL;
    if (posix_memalign(&p, 4096, n))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = add(p, n, flags, 1);
    if (rc != CUDA_SUCCESS) {
        free(p);
        return rc;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return host_alloc("cuMemAllocHost_v2", pp, bytesize, 0);
}

CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
    return host_alloc("cuMemAllocHost", pp, bytesize, 0);
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    return host_alloc("cuMemHostAlloc", pp, bytesize, Flags);
}

CUresult cuMemFreeHost(void *p)
{
    if (!p)
        return CUDA_SUCCESS; /* free(NULL) semantics, as the driver has them */
    struct range r = {0};
    if (!drop_range(p, &r))
        return CUDA_ERROR_INVALID_VALUE;
    if (!r.owned) {
        add_mapped(p, r.len, r.flags, 0, r.dptr); /* registered, not ours to free */
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (r.dptr && r.late) {
        sl_fe_mapped_remove(p);
        free(p);
    } else if (r.dptr) {
        sl_fe_mapped_remove(p);
        munmap(p, r.len);
        if (!(r.flags & CU_MEMHOSTALLOC_DEVICEMAP))
            implicit_give(r.len);
    } else {
        free(p);
    }
    return CUDA_SUCCESS;
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    if (sl_log_enabled(SL_LOG_DEBUG))
        sl_log(SL_LOG_DEBUG, SL_FE_COMPONENT, "cuMemHostRegister_v2(%zu bytes, flags 0x%x)",
               bytesize, Flags);
    if (!p || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(Flags & CU_MEMHOSTREGISTER_DEVICEMAP))
        return add(p, bytesize, Flags, 0);
    if (tracked(p, NULL))
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    uint64_t dptr = 0;
    CUresult rc = sl_fe_mapped_add(&p, bytesize, 0, &dptr);
    if (rc == CUDA_SUCCESS && (rc = add_mapped(p, bytesize, Flags, 0, dptr)) != CUDA_SUCCESS)
        sl_fe_mapped_remove(p);
    return rc;
}

CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    return cuMemHostRegister_v2(p, bytesize, Flags);
}

CUresult cuMemHostUnregister(void *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE; /* as the driver answers NULL */
    struct range r = {0};
    if (!drop_range(p, &r))
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    if (r.owned) { /* cuMemHostUnregister on cuMemAllocHost memory: keep it tracked */
        add_mapped(p, r.len, r.flags, 1, r.dptr);
        set_late(p, r.late);
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    }
    if (r.dptr)
        sl_fe_mapped_remove(p);
    return CUDA_SUCCESS;
}

CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    struct range r = {0};
    if (!pFlags || !tracked(p, &r))
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = r.flags;
    return CUDA_SUCCESS;
}

/* Page-locked memory without a twin yet (cuMemAllocHost / cuMemHostAlloc without DEVICEMAP
 * beyond the small implicit ones, cuMemHostRegister without DEVICEMAP): under unified
 * addressing the driver maps all page-locked memory and answers its device pointer, so the
 * range gets its twin now (api/mapped.c), at the range's own address when that is free in the
 * worker. Its bytes reach the twin before the next call leaves (call/mapped_sync.c). */
static CUresult map_late(void *p)
{
    struct range r = {0};
    if (!tracked(p, &r) || r.dptr)
        return CUDA_ERROR_INVALID_VALUE; /* not page-locked here: as the driver answers */
    void *base = (void *)r.base;
    uint64_t d = 0;
    CUresult rc = sl_fe_mapped_add(&base, r.len, 0, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_lock);
    struct range *q = find_locked(r.base);
    if (q && !q->dptr) {
        q->dptr = d;
        q->late = q->owned;
        d = 0;
    }
    pthread_mutex_unlock(&g_lock);
    if (d) /* another thread gave it a twin meanwhile, or it went */
        sl_fe_mapped_remove(base);
    return CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    uint64_t d = 0;
    if (!pdptr || Flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sl_fe_mapped_dptr(p, 1, &d)) {
        CUresult rc = map_late(p);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (!sl_fe_mapped_dptr(p, 1, &d))
            return CUDA_ERROR_INVALID_VALUE;
    }
    *pdptr = (CUdeviceptr)d;
    return CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr, void *p, unsigned int Flags)
{
    CUdeviceptr d = 0;
    CUresult rc = cuMemHostGetDevicePointer_v2(&d, p, Flags);
    if (rc == CUDA_SUCCESS && d > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE; /* the 32-bit legacy ABI cannot hold it */
    if (rc == CUDA_SUCCESS)
        *pdptr = (CUdeviceptr_v1)d;
    return rc;
}

/* ------------------------------------------------------------------ pointer attributes */
static size_t attr_size(CUpointer_attribute a)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        return 4;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        return 8;
    default:
        return 0;
    }
}

/* A guest host range: answered here. */
static CUresult host_attr(const struct range *r, CUpointer_attribute a, void *data, uintptr_t p)
{
    uint64_t v64 = 0;
    uint32_t v32 = 0;
    switch (a) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        v32 = CU_MEMORYTYPE_HOST;
        break;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        v64 = sl_fe_current_ctx_id();
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        v64 = p;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        if (!r->dptr)
            return CUDA_ERROR_NOT_SUPPORTED; /* not device-visible under Sluice */
        v64 = r->dptr + (p - r->base);
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        v32 = r->dptr != 0;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        v64 = r->base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        v64 = r->len;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        v64 = r->base;
        break;
    default:
        break; /* IS_MANAGED, DEVICE_ORDINAL, MAPPED, ...: 0 */
    }
    if (attr_size(a) == 4)
        memcpy(data, &v32, 4);
    else
        memcpy(data, &v64, 8);
    return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    size_t sz = attr_size(attribute);
    if (!data || !sz)
        return CUDA_ERROR_INVALID_VALUE;
    struct range r = {0};
    if (tracked((void *)(uintptr_t)ptr, &r))
        return host_attr(&r, attribute, data, (uintptr_t)ptr);
    /* Anything else is asked of the backend, which knows the session's device memory: an
     * address mapped in this process may still be a device address (the guest has no driver
     * reserving the device's part of the address space). The backend refuses unregistered
     * host memory with INVALID_VALUE, as the driver does. */
    Sluice__Cuda__CuPointerGetAttributeRequest req =
        SLUICE__CUDA__CU_POINTER_GET_ATTRIBUTE_REQUEST__INIT;
    req.data = sz;
    req.attribute = (uint32_t)attribute;
    req.ptr = ptr;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuPointerGetAttribute, &call, &req);
    uint8_t buf[8] = {0};
    size_t got = 0;
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call_bulk(&call, NULL, 0, buf, sz, &got, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    if (rc == CUDA_SUCCESS && got != sz)
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        memcpy(data, buf, sz);
    return rc;
}

CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                void **data, CUdeviceptr ptr)
{
    if (!attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    struct range r = {0};
    int is_tracked = tracked((void *)(uintptr_t)ptr, &r);
    int unregistered = 0; /* host memory the backend does not know: the driver says all zero */
    for (unsigned i = 0; i < numAttributes; i++) {
        size_t sz = attr_size(attributes[i]);
        if (!data[i])
            continue;
        if (!sz)
            return CUDA_ERROR_INVALID_VALUE;
        if (unregistered) {
            memset(data[i], 0, sz);
            continue;
        }
        CUresult rc = is_tracked ? host_attr(&r, attributes[i], data[i], (uintptr_t)ptr)
                                 : cuPointerGetAttribute(data[i], attributes[i], ptr);
        if (rc == CUDA_ERROR_INVALID_VALUE && !is_tracked &&
            sl_fe_is_host_pointer((void *)(uintptr_t)ptr)) {
            unregistered = 1;
            memset(data[i], 0, sz);
            continue;
        }
        if (rc == CUDA_ERROR_NOT_SUPPORTED) {
            memset(data[i], 0, sz);
            continue;
        }
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}
