/* libsluice-driver-double.so: a test double of the CUDA driver (libcuda.so.1) for the end-to-end
 * tests without a GPU. TEST DOUBLE, NEVER A GPU RESULT: "device" memory is host memory, kernels
 * are host implementations looked up by mangled name (kernels.c), execution is synchronous.
 * It exports the real ABI (cuda.h is included with __CUDA_API_VERSION_INTERNAL, so every
 * definition below is checked against the real declaration of its versioned symbol) for the
 * calls sluice-backend needs to run tests/cuda/; everything else is simply absent.
 * Every handle and device pointer is checked against the double's own tables first, so a bad
 * one gives an error, never a crash. Environment: SLUICE_DOUBLE_MEM_MIB (device memory, 4096). */
#include "double.h"

#include <elf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum dbl_kind {
    K_CTX = 1,
    K_STREAM,
    K_EVENT,
    K_IMAGE,
    K_FUNC,
    K_POOL,
    K_GRAPH,
    K_GNODE,
    K_GEXEC,
    K_ARRAY
};

struct dbl_obj {
    enum dbl_kind kind;
    struct dbl_ctx *ctx; /* owner; NULL for libraries (context-independent) */
};

struct dbl_ctx {
    struct dbl_obj hdr;
    CUdevice dev;
    unsigned flags;
    unsigned long long id;
    bool primary;
    CUresult sticky;
};

struct dbl_stream {
    struct dbl_obj hdr;
    unsigned flags;
    int priority;
    unsigned long long id;
};

struct dbl_event {
    struct dbl_obj hdr;
    unsigned flags;
    bool recorded;
    double t_us;
};

struct dbl_func;
struct dbl_image {
    struct dbl_obj hdr;
    bool library;
    size_t size;
    CUdeviceptr *globals;    /* one allocation per dbl_globals entry */
    struct dbl_func **funcs; /* per dbl_kernels entry, made on first lookup */
    bool *present;           /* per dbl_kernels entry: its name is in the image's bytes */
};

struct dbl_func {
    struct dbl_obj hdr;
    struct dbl_image *image;
    const struct dbl_kernel *kernel;
    int max_dynamic_shared;
    int carveout;
};

enum alloc_kind { A_DEVICE = 1, A_HOST, A_GLOBAL, A_REGISTERED /* not ours: never freed */ };
struct dbl_alloc {
    uintptr_t base;
    size_t size;
    enum alloc_kind kind;
    struct dbl_ctx *ctx;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool initialized;
static void **objs;
static size_t nobjs, capobjs;
static struct dbl_alloc *allocs;
static size_t nallocs, capallocs;
static size_t mem_total, mem_used;
static unsigned long long next_ctx_id = 1;
static unsigned long long next_stream_id = 1000;
static struct dbl_ctx primary_ctx;
static unsigned primary_refs;

static __thread struct dbl_ctx *ctx_stack[32];
static __thread int ctx_depth;

/* ---------- tables ---------- */

static void obj_add(void *o)
{
    if (nobjs == capobjs) {
        size_t cap = capobjs ? capobjs * 2 : 64;
        void **n = realloc(objs, cap * sizeof *n);
        if (!n)
            abort();
        objs = n;
        capobjs = cap;
    }
    objs[nobjs++] = o;
}

static void obj_del(void *o)
{
    for (size_t i = 0; i < nobjs; i++)
        if (objs[i] == o) {
            objs[i] = objs[--nobjs];
            return;
        }
}

/* Never dereferences p unless it is one of ours. */
static void *obj_get(const void *p, enum dbl_kind kind)
{
    if (!p)
        return NULL;
    for (size_t i = 0; i < nobjs; i++)
        if (objs[i] == p)
            return ((struct dbl_obj *)objs[i])->kind == kind ? objs[i] : NULL;
    return NULL;
}

static struct dbl_alloc *alloc_find(uintptr_t p, size_t len)
{
    for (size_t i = 0; i < nallocs; i++) {
        struct dbl_alloc *a = &allocs[i];
        if (p >= a->base && p - a->base <= a->size && len <= a->size - (p - a->base))
            return a;
    }
    return NULL;
}

static CUresult alloc_new(size_t size, enum alloc_kind kind, struct dbl_ctx *ctx, uintptr_t *out)
{
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t rounded = (size + 255) & ~(size_t)255;
    if (rounded < size)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (kind != A_HOST && rounded > mem_total - mem_used)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = aligned_alloc(256, rounded);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, 0, rounded);
    if (nallocs == capallocs) {
        size_t cap = capallocs ? capallocs * 2 : 64;
        struct dbl_alloc *n = realloc(allocs, cap * sizeof *n);
        if (!n) {
            free(p);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        allocs = n;
        capallocs = cap;
    }
    allocs[nallocs++] = (struct dbl_alloc){(uintptr_t)p, size, kind, ctx};
    if (kind != A_HOST)
        mem_used += rounded;
    *out = (uintptr_t)p;
    return CUDA_SUCCESS;
}

static void alloc_release(size_t i)
{
    if (allocs[i].kind != A_HOST && allocs[i].kind != A_REGISTERED)
        mem_used -= (allocs[i].size + 255) & ~(size_t)255;
    if (allocs[i].kind != A_REGISTERED)
        free((void *)allocs[i].base);
    allocs[i] = allocs[--nallocs];
}

static CUresult alloc_free(uintptr_t p, enum alloc_kind kind)
{
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].base == p && allocs[i].kind == kind) {
            alloc_release(i);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---------- contexts ---------- */

static struct dbl_ctx *cur(void)
{
    return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
}

/* The current context, checked; under the lock. */
static CUresult need_ctx(struct dbl_ctx **out)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct dbl_ctx *c = cur();
    if (!c || !obj_get(c, K_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (c->sticky != CUDA_SUCCESS)
        return c->sticky;
    *out = c;
    return CUDA_SUCCESS;
}

static void image_free(struct dbl_image *img);

/* Frees everything a context owns (destroy, primary release/reset). */
static void ctx_drop_resources(struct dbl_ctx *c)
{
    for (size_t i = 0; i < nallocs;)
        if (allocs[i].ctx == c)
            alloc_release(i);
        else
            i++;
    for (size_t i = 0; i < nobjs;) {
        struct dbl_obj *o = objs[i];
        if (o != (void *)c && o->ctx == c && o->kind != K_FUNC) {
            if (o->kind == K_IMAGE)
                image_free((struct dbl_image *)o);
            else {
                obj_del(o);
                free(o);
            }
            i = 0;
        } else {
            i++;
        }
    }
    c->sticky = CUDA_SUCCESS;
}

#define LOCKED(expr)                                                                               \
    do {                                                                                           \
        pthread_mutex_lock(&lock);                                                                 \
        CUresult rc_ = (expr);                                                                     \
        pthread_mutex_unlock(&lock);                                                               \
        return rc_;                                                                                \
    } while (0)

/* ---------- errors ---------- */

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT",
     "context already current"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == error) {
            *pStr = errors[i].name;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == error) {
            *pStr = errors[i].text;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---------- init and device ---------- */

#define DEVICE_NAME "Sluice driver test double (no GPU)"

EXPORT CUresult cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (!initialized) {
        const char *mib = getenv("SLUICE_DOUBLE_MEM_MIB");
        size_t m = mib ? strtoull(mib, NULL, 10) : 4096;
        mem_total = (m ? m : 4096) << 20;
        primary_ctx.hdr.kind = K_CTX;
        primary_ctx.primary = true;
        initialized = true;
    }
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = 13000;
    return CUDA_SUCCESS;
}

static CUresult check_dev(CUdevice dev)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = 1;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult rc = check_dev(dev);
    if (rc)
        return rc;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", DEVICE_NAME);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    static const unsigned char id[16] = {0x51, 0x75, 0x1c, 0xe0, 0xd0, 0x0b, 0x4e, 0x1e,
                                         0x8a, 0x5e, 0x70, 0x75, 0x62, 0x6c, 0x65, 0x00};
    CUresult rc = check_dev(dev);
    if (rc)
        return rc;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(uuid->bytes, id, sizeof id);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetLuid(char *luid, unsigned int *deviceNodeMask, CUdevice dev)
{
    (void)luid;
    (void)deviceNodeMask;
    CUresult rc = check_dev(dev);
    return rc ? rc : CUDA_ERROR_NOT_SUPPORTED;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult rc = check_dev(dev);
    if (rc)
        return rc;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = mem_total;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    CUresult rc = check_dev(dev);
    if (rc)
        return rc;
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(pciBusId, (size_t)len, "0000:5e:00.0");
    return CUDA_SUCCESS;
}

/* A plausible sm_90 part with 4 SMs; anything not listed is 0 (feature absent). */
static int attribute(CUdevice_attribute a)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
        return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
        return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
        return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
        return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
        return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
        return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
        return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
        return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
        return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
        return DBL_CLOCK_RATE_KHZ; /* kernels' cycle counts are timed with it (timing.c) */
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
        return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
        return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        return 4;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT:
        return 0;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
        return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
        return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
        return CU_COMPUTEMODE_DEFAULT;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH:
        return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH:
        return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT:
        return 65536;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH:
        return 16384;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT:
        return 16384;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH:
        return 16384;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT:
        return 512;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
        return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        return 0x5e;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
        return 0;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
        return 0;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
        return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
        return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
        return 52428800;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
        return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
        return 2;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
        return 0;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
        return 32;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
        return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
        return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
        return 0;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD:
        return 0;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
        return 0;
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO:
        return 2;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
        return 0;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
        return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
        return 232448;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
        return 32;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
        return 32505856;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE:
        return 134213632;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT:
        return 4;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
        return 1;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID:
        return -1;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
        return -1;
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID:
        return 0x233010de;
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID:
        return 0x16c110de;
    default:
        return 0;
    }
}

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult rc = check_dev(dev);
    if (rc)
        return rc;
    if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = attribute(attrib);
    return CUDA_SUCCESS;
}

/* ---------- contexts ---------- */

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult rc = check_dev(dev);
    if (rc)
        return rc;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->hdr.kind = K_CTX;
    c->dev = dev;
    c->flags = flags;
    c->id = next_ctx_id++;
    obj_add(c);
    if (ctx_depth < (int)(sizeof ctx_stack / sizeof ctx_stack[0]))
        ctx_stack[ctx_depth++] = c; /* a new context is pushed on the calling thread */
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    LOCKED(ctx_create(pctx, flags, dev));
}

EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                               unsigned int flags, CUdevice dev)
{
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(ctx_create(pctx, flags, dev));
}

EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                               unsigned int flags, CUdevice dev)
{
    if (ctxCreateParams && (ctxCreateParams->numExecAffinityParams || ctxCreateParams->cigParams))
        return CUDA_ERROR_NOT_SUPPORTED;
    LOCKED(ctx_create(pctx, flags, dev));
}

static CUresult ctx_destroy(CUcontext ctx)
{
    struct dbl_ctx *c = obj_get(ctx, K_CTX);
    if (!c || c->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_drop_resources(c);
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] == c) {
            memmove(&ctx_stack[i], &ctx_stack[i + 1],
                    (size_t)(ctx_depth - i - 1) * sizeof ctx_stack[0]);
            ctx_depth--;
            i--;
        }
    obj_del(c);
    free(c);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    LOCKED(ctx_destroy(ctx));
}

static CUresult ctx_valid_or_null(CUcontext ctx)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    return (!ctx || obj_get(ctx, K_CTX)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult set_current(CUcontext ctx)
{
    CUresult rc = ctx_valid_or_null(ctx);
    if (rc)
        return rc;
    if (ctx_depth == 0) {
        if (ctx)
            ctx_stack[ctx_depth++] = (struct dbl_ctx *)ctx;
    } else if (ctx) {
        ctx_stack[ctx_depth - 1] = (struct dbl_ctx *)ctx;
    } else {
        ctx_depth--;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    LOCKED(set_current(ctx));
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)cur();
    return CUDA_SUCCESS;
}

static CUresult push_current(CUcontext ctx)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!obj_get(ctx, K_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth >= (int)(sizeof ctx_stack / sizeof ctx_stack[0]))
        return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = (struct dbl_ctx *)ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    LOCKED(push_current(ctx));
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct dbl_ctx *c = ctx_stack[--ctx_depth];
    if (pctx)
        *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

static CUresult ctx_get_device(CUdevice *device)
{
    struct dbl_ctx *c;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = need_ctx(&c);
    if (rc && rc != CUDA_ERROR_ILLEGAL_ADDRESS)
        return rc;
    *device = cur()->dev;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    LOCKED(ctx_get_device(device));
}

static CUresult ctx_sync(void)
{
    struct dbl_ctx *c;
    return need_ctx(&c);
}

/* The synchronize calls sleep, outside the lock, until the simulated work ends (timing.c). */
#define LOCKED_THEN_SLEEP(expr, until)                                                             \
    do {                                                                                           \
        double until_ = 0;                                                                         \
        pthread_mutex_lock(&lock);                                                                 \
        CUresult rc_ = (expr);                                                                     \
        if (rc_ == CUDA_SUCCESS)                                                                   \
            until_ = (until);                                                                      \
        pthread_mutex_unlock(&lock);                                                               \
        dbl_time_sleep_until(until_);                                                              \
        return rc_;                                                                                \
    } while (0)

EXPORT CUresult cuCtxSynchronize(void)
{
    LOCKED_THEN_SLEEP(ctx_sync(), dbl_time_ctx_end(cur()));
}

static CUresult ctx_sync_v2(CUcontext ctx)
{
    if (!ctx)
        return ctx_sync();
    struct dbl_ctx *c = obj_get(ctx, K_CTX);
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    return c->sticky;
}

EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    LOCKED_THEN_SLEEP(ctx_sync_v2(ctx), dbl_time_ctx_end(ctx ? (const void *)ctx : cur()));
}

static CUresult ctx_get_id(CUcontext ctx, unsigned long long *ctxId)
{
    if (!ctxId)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_ctx *c = ctx ? obj_get(ctx, K_CTX) : cur();
    if (!c || (!ctx && !obj_get(c, K_CTX)))
        return CUDA_ERROR_INVALID_CONTEXT;
    *ctxId = c->id;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    LOCKED(ctx_get_id(ctx, ctxId));
}

static CUresult ctx_get_flags(unsigned int *flags)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = c->flags;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetFlags(unsigned int *flags)
{
    LOCKED(ctx_get_flags(flags));
}

EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    (void)ctx;
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 3020;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return CUDA_SUCCESS;
}

static CUresult primary_retain(CUcontext *pctx, CUdevice dev)
{
    CUresult rc = check_dev(dev);
    if (rc)
        return rc;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (primary_refs++ == 0) {
        primary_ctx.id = next_ctx_id++;
        if (!obj_get(&primary_ctx, K_CTX))
            obj_add(&primary_ctx);
    }
    *pctx = (CUcontext)&primary_ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    LOCKED(primary_retain(pctx, dev));
}

static CUresult primary_release(CUdevice dev, bool reset)
{
    CUresult rc = check_dev(dev);
    if (rc)
        return rc;
    if (!reset && primary_refs == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (reset || --primary_refs == 0) {
        ctx_drop_resources(&primary_ctx);
        if (!reset)
            obj_del(&primary_ctx);
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    LOCKED(primary_release(dev, false));
}

EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    LOCKED(primary_release(dev, true));
}

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult rc = check_dev(dev);
    if (rc)
        return rc;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = primary_ctx.flags;
    *active = primary_refs > 0;
    return CUDA_SUCCESS;
}

/* ---------- memory ---------- */

EXPORT CUresult cuMemGetInfo_v2(size_t *free_, size_t *total)
{
    struct dbl_ctx *c;
    pthread_mutex_lock(&lock);
    CUresult rc = need_ctx(&c);
    if (!rc && (!free_ || !total))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        *free_ = mem_total - mem_used;
        *total = mem_total;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static CUresult mem_alloc(uintptr_t *out, size_t size, enum alloc_kind kind)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_new(size, kind, c, out);
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    LOCKED(mem_alloc((uintptr_t *)dptr, bytesize, A_DEVICE));
}

static CUresult mem_free(uintptr_t p, enum alloc_kind kind)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if (!p)
        return CUDA_SUCCESS;
    return alloc_free(p, kind);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    LOCKED(mem_free(dptr, A_DEVICE));
}

/* Registered host memory (the backend's twins of a guest's mapped memory): host kernels reach
 * it directly, so its device address is its host address, as under unified addressing. */
static CUresult host_register(void *p, size_t n)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if (!p || !n)
        return CUDA_ERROR_INVALID_VALUE;
    if (alloc_find((uintptr_t)p, 1))
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    if (nallocs == capallocs) {
        size_t cap = capallocs ? capallocs * 2 : 64;
        struct dbl_alloc *na = realloc(allocs, cap * sizeof *na);
        if (!na)
            return CUDA_ERROR_OUT_OF_MEMORY;
        allocs = na;
        capallocs = cap;
    }
    allocs[nallocs++] = (struct dbl_alloc){(uintptr_t)p, n, A_REGISTERED, c};
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    (void)Flags;
    LOCKED(host_register(p, bytesize));
}

static CUresult host_unregister(void *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].base == (uintptr_t)p && allocs[i].kind == A_REGISTERED) {
            alloc_release(i);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
    LOCKED(host_unregister(p));
}

static CUresult host_device_pointer(CUdeviceptr *pd, void *p, unsigned flags)
{
    struct dbl_alloc *a = alloc_find((uintptr_t)p, 0);
    if (!pd || flags || !a || a->kind != A_REGISTERED)
        return CUDA_ERROR_INVALID_VALUE;
    *pd = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    LOCKED(host_device_pointer(pdptr, p, Flags));
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    LOCKED(mem_alloc((uintptr_t *)pp, bytesize, A_HOST));
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    (void)Flags;
    LOCKED(mem_alloc((uintptr_t *)pp, bytesize, A_HOST));
}

EXPORT CUresult cuMemFreeHost(void *p)
{
    LOCKED(mem_free((uintptr_t)p, A_HOST));
}

/* A device-side range: device allocations, module globals, and pinned host memory (which is
 * device-accessible under unified addressing). */
static void *dev_range(CUdeviceptr p, size_t n)
{
    struct dbl_alloc *a = alloc_find(p, n);
    return a ? (void *)(uintptr_t)p : NULL;
}

static CUresult check_stream(CUstream s)
{
    if ((uintptr_t)s <= 2) /* 0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD */
        return CUDA_SUCCESS;
    return obj_get(s, K_STREAM) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Simulated time of a copy or memset on stream s (timing.c): 2 us + 20 GB/s. */
static void advance_copy(struct dbl_ctx *c, CUstream s, size_t n)
{
    dbl_time_work(c, s, 2.0 + (double)n / 20000.0);
}

static CUresult copy(void *dst, const void *src, size_t n, CUdeviceptr ddst, CUdeviceptr dsrc,
                     CUstream s)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if ((rc = check_stream(s)))
        return rc;
    if (ddst && !(dst = dev_range(ddst, n)))
        return CUDA_ERROR_INVALID_VALUE;
    if (dsrc && !(src = dev_range(dsrc, n)))
        return CUDA_ERROR_INVALID_VALUE;
    if (!dst || !src)
        return CUDA_ERROR_INVALID_VALUE;
    int64_t h = dbl_time_host_begin(); /* not device time (timing.c) */
    if (n)
        memmove(dst, src, n);
    dbl_time_host_end(h);
    advance_copy(c, s, n);
    return CUDA_SUCCESS;
}

/* A NULL CUdeviceptr is never a valid device range: passing 1 as "none" makes copy() reject it. */
#define DEVPTR(p) ((p) ? (p) : (CUdeviceptr)1)

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    LOCKED(copy(NULL, srcHost, ByteCount, DEVPTR(dstDevice), 0, 0));
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    LOCKED(copy(dstHost, NULL, ByteCount, 0, DEVPTR(srcDevice), 0));
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    LOCKED(copy(NULL, NULL, ByteCount, DEVPTR(dstDevice), DEVPTR(srcDevice), 0));
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                     CUstream hStream)
{
    LOCKED(copy(NULL, srcHost, ByteCount, DEVPTR(dstDevice), 0, hStream));
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                     CUstream hStream)
{
    LOCKED(copy(dstHost, NULL, ByteCount, 0, DEVPTR(srcDevice), hStream));
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                     CUstream hStream)
{
    LOCKED(copy(NULL, NULL, ByteCount, DEVPTR(dstDevice), DEVPTR(srcDevice), hStream));
}

static CUresult memset_n(CUdeviceptr dst, unsigned v, size_t width, size_t n, CUstream s)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if ((rc = check_stream(s)))
        return rc;
    if (n > SIZE_MAX / width || (dst & (width - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned char *p = dev_range(DEVPTR(dst), n * width);
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    int64_t hb = dbl_time_host_begin(); /* not device time (timing.c) */
    for (size_t i = 0; i < n; i++) {
        if (width == 1)
            p[i] = (unsigned char)v;
        else if (width == 2) {
            uint16_t x = (uint16_t)v;
            memcpy(p + 2 * i, &x, 2);
        } else {
            uint32_t x = v;
            memcpy(p + 4 * i, &x, 4);
        }
    }
    dbl_time_host_end(hb);
    advance_copy(c, s, n * width);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    LOCKED(memset_n(dstDevice, uc, 1, N, 0));
}

EXPORT CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    LOCKED(memset_n(dstDevice, us, 2, N, 0));
}

EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    LOCKED(memset_n(dstDevice, ui, 4, N, 0));
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream s)
{
    LOCKED(memset_n(dstDevice, uc, 1, N, s));
}

EXPORT CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream s)
{
    LOCKED(memset_n(dstDevice, us, 2, N, s));
}

EXPORT CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream s)
{
    LOCKED(memset_n(dstDevice, ui, 4, N, s));
}

/* One side of a 2D copy as a host pointer to its first byte, or NULL. */
static unsigned char *side2d(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x,
                             size_t y, size_t pitch, size_t width, size_t height)
{
    if (height == 0 || width == 0)
        return (unsigned char *)(uintptr_t)1; /* nothing to touch */
    if (pitch < width + x && height > 1)
        return NULL;
    size_t off = y * pitch + x;
    size_t extent = (height - 1) * pitch + width;
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        return host ? (unsigned char *)host + off : NULL;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
        return dev_range(DEVPTR(dev + off), extent);
    default:
        return NULL;
    }
}

static CUresult array_side(CUmemorytype *type, const void **host, CUarray arr, size_t x, size_t y,
                           size_t *pitch, size_t w, size_t h, size_t z);

static CUresult copy2d(const CUDA_MEMCPY2D *pin, CUstream s)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if ((rc = check_stream(s)))
        return rc;
    if (!pin)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY2D q = *pin, *p = &q;
    if (q.srcMemoryType == CU_MEMORYTYPE_ARRAY &&
        (rc = array_side(&q.srcMemoryType, &q.srcHost, q.srcArray, q.srcXInBytes, q.srcY,
                         &q.srcPitch, q.WidthInBytes, q.Height, 0)))
        return rc;
    if (q.dstMemoryType == CU_MEMORYTYPE_ARRAY &&
        (rc = array_side(&q.dstMemoryType, (const void **)&q.dstHost, q.dstArray, q.dstXInBytes,
                         q.dstY, &q.dstPitch, q.WidthInBytes, q.Height, 0)))
        return rc;
    size_t w = p->WidthInBytes, h = p->Height;
    size_t sp = p->srcPitch ? p->srcPitch : w, dp = p->dstPitch ? p->dstPitch : w;
    unsigned char *src =
        side2d(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, sp, w, h);
    unsigned char *dst =
        side2d(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, dp, w, h);
    if (!src || !dst)
        return CUDA_ERROR_INVALID_VALUE;
    int64_t hb = dbl_time_host_begin(); /* not device time (timing.c) */
    for (size_t r = 0; r < h; r++)
        memmove(dst + r * dp, src + r * sp, w);
    dbl_time_host_end(hb);
    advance_copy(c, s, w * h);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    LOCKED(copy2d(pCopy, 0));
}

EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
    LOCKED(copy2d(pCopy, 0));
}

EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    LOCKED(copy2d(pCopy, hStream));
}

static CUresult pointer_attr(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_alloc *a = alloc_find(ptr, 0);
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = (CUcontext)a->ctx;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = a->kind == A_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (a->kind != A_HOST)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)ptr;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = a->kind == A_HOST ? 1 : 0;
        if (attribute == CU_POINTER_ATTRIBUTE_IS_MANAGED)
            *(int *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = a->base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = a->size;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = (unsigned long long)a->base;
        break;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    LOCKED(pointer_attr(data, attribute, ptr));
}

static CUresult address_range(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].kind != A_HOST && dptr >= allocs[i].base &&
            dptr - allocs[i].base < allocs[i].size) {
            if (pbase)
                *pbase = allocs[i].base;
            if (psize)
                *psize = allocs[i].size;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    LOCKED(address_range(pbase, psize, dptr));
}

/* ---------- streams and events ---------- */

static CUresult stream_create(CUstream *ph, unsigned flags, int priority)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_stream *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->hdr = (struct dbl_obj){K_STREAM, c};
    s->flags = flags;
    s->priority = priority > 0 ? 0 : (priority < -5 ? -5 : priority);
    s->id = next_stream_id++;
    obj_add(s);
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    LOCKED(stream_create(phStream, Flags, 0));
}

EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    LOCKED(stream_create(phStream, flags, priority));
}

static CUresult stream_destroy(CUstream h)
{
    struct dbl_stream *s = obj_get(h, K_STREAM);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    obj_del(s);
    free(s);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
    LOCKED(stream_destroy(hStream));
}

static CUresult stream_sync(CUstream h)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    return rc ? rc : check_stream(h);
}

EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    LOCKED_THEN_SLEEP(stream_sync(hStream), dbl_time_stream_end(cur(), hStream));
}

/* Not ready while the stream's simulated work runs (timing.c). */
static CUresult stream_query(CUstream h)
{
    CUresult rc = stream_sync(h);
    if (rc == CUDA_SUCCESS && dbl_time_stream_end(cur(), h) > dbl_time_now_us())
        rc = CUDA_ERROR_NOT_READY;
    return rc;
}

EXPORT CUresult cuStreamQuery(CUstream hStream)
{
    LOCKED(stream_query(hStream));
}

static CUresult stream_wait_event(CUstream h, CUevent e, unsigned flags)
{
    CUresult rc = stream_sync(h);
    if (rc)
        return rc;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_event *ev = obj_get(e, K_EVENT);
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    if (ev->recorded) /* later work on h starts after the event's time (timing.c) */
        dbl_time_wait_for(cur(), h, ev->t_us);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    LOCKED(stream_wait_event(hStream, hEvent, Flags));
}

static CUresult stream_get(CUstream h, int *prio, unsigned *flags)
{
    CUresult rc = stream_sync(h);
    if (rc)
        return rc;
    struct dbl_stream *s = obj_get(h, K_STREAM);
    if (prio)
        *prio = s ? s->priority : 0;
    if (flags)
        *flags = s ? s->flags : 0;
    return CUDA_SUCCESS;
}

/* A created stream's id is its own; the NULL/legacy and the per-thread stream have one per
 * context (the double does not tell threads apart). */
static CUresult stream_id(CUstream h, unsigned long long *id)
{
    CUresult rc = stream_sync(h);
    if (rc)
        return rc;
    struct dbl_stream *s = obj_get(h, K_STREAM);
    uintptr_t kind = (uintptr_t)h == (uintptr_t)CU_STREAM_PER_THREAD ? 2 : 1;
    *id = s ? s->id : (cur()->id << 8 | kind);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
    if (!streamId)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(stream_id(hStream, streamId));
}

EXPORT CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{
    if (!priority)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(stream_get(hStream, priority, NULL));
}

EXPORT CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(stream_get(hStream, NULL, flags));
}

EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    pthread_mutex_lock(&lock);
    CUresult rc = stream_sync(hStream);
    if (!rc && !fn)
        rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    if (rc)
        return rc;
    fn(userData); /* synchronous execution: the stream has reached this point */
    return CUDA_SUCCESS;
}

static CUresult event_create(CUevent *ph, unsigned flags)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if (!ph || (flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                    CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_event *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->hdr = (struct dbl_obj){K_EVENT, c};
    e->flags = flags;
    obj_add(e);
    *ph = (CUevent)e;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    LOCKED(event_create(phEvent, Flags));
}

static CUresult event_record(CUevent h, CUstream s)
{
    CUresult rc = stream_sync(s);
    if (rc)
        return rc;
    struct dbl_event *e = obj_get(h, K_EVENT);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    e->recorded = true;
    e->t_us = dbl_time_mark(cur(), s); /* when the stream reaches it (timing.c) */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    LOCKED(event_record(hEvent, hStream));
}

EXPORT CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    (void)flags;
    LOCKED(event_record(hEvent, hStream));
}

/* *until: the simulated time the event completes (0 if never recorded). */
static CUresult event_sync(CUevent h, double *until)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct dbl_event *e = obj_get(h, K_EVENT);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    *until = e->recorded ? e->t_us : 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
    double t = 0;
    LOCKED_THEN_SLEEP(event_sync(hEvent, &t), t);
}

static CUresult event_query(CUevent h)
{
    double t = 0;
    CUresult rc = event_sync(h, &t);
    return rc == CUDA_SUCCESS && t > dbl_time_now_us() ? CUDA_ERROR_NOT_READY : rc;
}

EXPORT CUresult cuEventQuery(CUevent hEvent)
{
    LOCKED(event_query(hEvent));
}

static CUresult event_elapsed(float *ms, CUevent start, CUevent end)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_event *a = obj_get(start, K_EVENT), *b = obj_get(end, K_EVENT);
    if (!a || !b)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING || !a->recorded || !b->recorded)
        return CUDA_ERROR_INVALID_HANDLE;
    double now = dbl_time_now_us();
    if (a->t_us > now || b->t_us > now)
        return CUDA_ERROR_NOT_READY; /* as the driver: not completed yet */
    *ms = (float)((b->t_us - a->t_us) / 1000.0);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    LOCKED(event_elapsed(pMilliseconds, hStart, hEnd));
}

EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    LOCKED(event_elapsed(pMilliseconds, hStart, hEnd));
}

static CUresult event_destroy(CUevent h)
{
    struct dbl_event *e = obj_get(h, K_EVENT);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    obj_del(e);
    free(e);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent hEvent)
{
    LOCKED(event_destroy(hEvent));
}

/* ---------- modules, libraries, kernels ---------- */

/* The length of an image in any of the forms the driver accepts, or 0 if it is none of them. */
static size_t image_size(const void *image)
{
    const unsigned char *p = image;
    uint32_t magic;
    memcpy(&magic, p, 4);
    if (magic == 0x466243b1u) { /* __fatBinC_Wrapper_t */
        const void *data;
        memcpy(&data, p + 8, sizeof data);
        return data ? image_size(data) : 0;
    }
    if (magic == 0xba55ed50u) { /* fatbin header */
        uint16_t hs;
        uint64_t fs;
        memcpy(&hs, p + 6, 2);
        memcpy(&fs, p + 8, 8);
        return hs + fs;
    }
    if (!memcmp(p,
                "\x7f"
                "ELF",
                4))
        return 64; /* not parsed further: a cubin is accepted as is */
    if (strstr((const char *)p, ".version") || strstr((const char *)p, ".target"))
        return strlen((const char *)p) + 1;
    return 0;
}

/* The bytes of an image as far as the double can tell where they end (an ELF cubin: up to its
 * section headers). */
static size_t image_span(const void *image, const unsigned char **bytes)
{
    const unsigned char *p = image;
    uint32_t magic;
    memcpy(&magic, p, 4);
    if (magic == 0x466243b1u) {
        const void *data;
        memcpy(&data, p + 8, sizeof data);
        return data ? image_span(data, bytes) : 0;
    }
    *bytes = p;
    if (!memcmp(p,
                "\x7f"
                "ELF",
                4)) {
        Elf64_Ehdr eh;
        memcpy(&eh, p, sizeof eh);
        return (size_t)eh.e_shoff + (size_t)eh.e_shnum * eh.e_shentsize;
    }
    return image_size(image);
}

/* Which test kernels the image holds: their mangled names appear NUL-terminated in its string
 * tables (as an entry of their own or after a section prefix such as ".text."). */
static void image_find_kernels(struct dbl_image *img, const void *image)
{
    const unsigned char *b = NULL;
    size_t n = image_span(image, &b);
    for (size_t k = 0; k < dbl_kernel_count; k++) {
        const char *name = dbl_kernels[k].name;
        size_t len = strlen(name) + 1;
        for (size_t i = 0; b && !img->present[k] && i + len <= n; i++)
            if ((i == 0 || b[i - 1] == 0 || b[i - 1] == '.') && !memcmp(b + i, name, len))
                img->present[k] = true;
    }
}

static void image_free(struct dbl_image *img)
{
    for (size_t i = 0; i < dbl_global_count; i++)
        if (img->globals[i])
            alloc_free(img->globals[i], A_GLOBAL);
    for (size_t i = 0; i < dbl_kernel_count; i++)
        if (img->funcs[i]) {
            obj_del(img->funcs[i]);
            free(img->funcs[i]);
        }
    free(img->globals);
    free(img->funcs);
    free(img->present);
    obj_del(img);
    free(img);
}

static CUresult image_load(struct dbl_image **out, const void *image, bool library)
{
    struct dbl_ctx *c = NULL;
    CUresult rc =
        library ? (initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED) : need_ctx(&c);
    if (rc)
        return rc;
    if (!out || !image)
        return CUDA_ERROR_INVALID_VALUE;
    size_t size = image_size(image);
    if (size == 0)
        return CUDA_ERROR_INVALID_IMAGE;
    struct dbl_image *img = calloc(1, sizeof *img);
    if (!img)
        return CUDA_ERROR_OUT_OF_MEMORY;
    img->hdr = (struct dbl_obj){K_IMAGE, c};
    img->library = library;
    img->size = size;
    img->globals = calloc(dbl_global_count, sizeof *img->globals);
    img->funcs = calloc(dbl_kernel_count, sizeof *img->funcs);
    img->present = calloc(dbl_kernel_count, sizeof *img->present);
    obj_add(img);
    if (!img->globals || !img->funcs || !img->present) {
        image_free(img);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    image_find_kernels(img, image);
    for (size_t i = 0; i < dbl_global_count; i++) {
        uintptr_t p;
        if ((rc = alloc_new(dbl_globals[i].size, A_GLOBAL, c, &p))) {
            image_free(img);
            return rc;
        }
        img->globals[i] = p;
    }
    *out = img;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    LOCKED(image_load((struct dbl_image **)module, image, false));
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                   CUjit_option *options, void **optionValues)
{
    (void)options;
    (void)optionValues;
    (void)numOptions;
    LOCKED(image_load((struct dbl_image **)module, image, false));
}

EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    LOCKED(image_load((struct dbl_image **)module, fatCubin, false));
}

EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                  void **jitOptionsValues, unsigned int numJitOptions,
                                  CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                  unsigned int numLibraryOptions)
{
    (void)jitOptions;
    (void)jitOptionsValues;
    (void)numJitOptions;
    (void)libraryOptions;
    (void)libraryOptionValues;
    (void)numLibraryOptions;
    LOCKED(image_load((struct dbl_image **)library, code, true));
}

static CUresult image_unload(void *h, bool library)
{
    struct dbl_image *img = obj_get(h, K_IMAGE);
    if (!img || img->library != library)
        return CUDA_ERROR_INVALID_HANDLE;
    image_free(img);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    LOCKED(image_unload(hmod, false));
}

EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
    LOCKED(image_unload(library, true));
}

EXPORT CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    *mode = CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

static CUresult get_func(struct dbl_func **out, void *h, bool library_only, const char *name)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct dbl_image *img = obj_get(h, K_IMAGE);
    if (!img || (library_only && !img->library))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!out || !name)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < dbl_kernel_count; i++) {
        if (strcmp(dbl_kernels[i].name, name))
            continue;
        if (!img->funcs[i]) {
            struct dbl_func *f = calloc(1, sizeof *f);
            if (!f)
                return CUDA_ERROR_OUT_OF_MEMORY;
            f->hdr = (struct dbl_obj){K_FUNC, img->hdr.ctx};
            f->image = img;
            f->kernel = &dbl_kernels[i];
            f->carveout = -1;
            obj_add(f);
            img->funcs[i] = f;
        }
        *out = img->funcs[i];
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    LOCKED(get_func((struct dbl_func **)hfunc, hmod, false, name));
}

static CUresult module_functions(unsigned *count, CUfunction *fns, unsigned cap, CUmodule hmod)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct dbl_image *img = obj_get(hmod, K_IMAGE);
    if (!img)
        return CUDA_ERROR_INVALID_HANDLE;
    unsigned n = 0;
    for (size_t k = 0; k < dbl_kernel_count; k++)
        if (img->present[k])
            n++;
    if (count) {
        *count = n;
        return CUDA_SUCCESS;
    }
    if (!fns || cap == 0)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned i = 0;
    for (size_t k = 0; k < dbl_kernel_count && i < cap; k++) {
        if (!img->present[k])
            continue;
        CUresult rc = get_func((struct dbl_func **)&fns[i], img, false, dbl_kernels[k].name);
        if (rc)
            return rc;
        i++;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(module_functions(count, NULL, 0, mod));
}

EXPORT CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
                                           CUmodule mod)
{
    LOCKED(module_functions(NULL, functions, numFunctions, mod));
}

EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    LOCKED(get_func((struct dbl_func **)pKernel, library, true, name));
}

static CUresult library_get_module(CUmodule *pMod, CUlibrary library)
{
    struct dbl_image *img = obj_get(library, K_IMAGE);
    if (!img || !img->library)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!pMod)
        return CUDA_ERROR_INVALID_VALUE;
    *pMod = (CUmodule)img; /* the same object serves as the library's module */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    LOCKED(library_get_module(pMod, library));
}

static CUresult kernel_get_function(CUfunction *pFunc, CUkernel kernel)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if (!obj_get(kernel, K_FUNC))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    *pFunc = (CUfunction)kernel; /* one object is both */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    LOCKED(kernel_get_function(pFunc, kernel));
}

static CUresult get_global(CUdeviceptr *dptr, size_t *bytes, void *h, bool library_only,
                           const char *name)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct dbl_image *img = obj_get(h, K_IMAGE);
    if (!img || (library_only && !img->library))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < dbl_global_count; i++)
        if (!strcmp(dbl_globals[i].name, name)) {
            if (dptr)
                *dptr = img->globals[i];
            if (bytes)
                *bytes = dbl_globals[i].size;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
                                     const char *name)
{
    LOCKED(get_global(dptr, bytes, hmod, false, name));
}

EXPORT CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
                                   const char *name)
{
    LOCKED(get_global(dptr, bytes, library, true, name));
}

static CUresult param_info(void *h, size_t i, size_t *off, size_t *size)
{
    struct dbl_func *f = obj_get(h, K_FUNC);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (i >= f->kernel->nparams || (!off && !size))
        return CUDA_ERROR_INVALID_VALUE;
    if (off)
        *off = f->kernel->params[i].offset;
    if (size)
        *size = f->kernel->params[i].size;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                   size_t *paramSize)
{
    LOCKED(param_info(func, paramIndex, paramOffset, paramSize));
}

EXPORT CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                     size_t *paramSize)
{
    LOCKED(param_info(kernel, paramIndex, paramOffset, paramSize));
}

static CUresult func_attr(int *pi, CUfunction_attribute a, void *h)
{
    struct dbl_func *f = obj_get(h, K_FUNC);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *pi = 1024;
        break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
        *pi = 0;
        break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
        *pi = 0;
        break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
        *pi = 0;
        break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
        *pi = 16;
        break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
        *pi = 90;
        break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
        *pi = 90;
        break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
        *pi = 0;
        break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *pi = f->max_dynamic_shared;
        break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        *pi = f->carveout;
        break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
        *pi = 0;
        break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
        *pi = 0;
        break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
        *pi = 1;
        break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        *pi = 0;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    LOCKED(func_attr(pi, attrib, hfunc));
}

EXPORT CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
                                     CUdevice dev)
{
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    LOCKED(func_attr(pi, attrib, kernel));
}

static CUresult func_set_attr(void *h, CUfunction_attribute a, int v)
{
    struct dbl_func *f = obj_get(h, K_FUNC);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
        if (v < 0 || v > 232448)
            return CUDA_ERROR_INVALID_VALUE;
        f->max_dynamic_shared = v;
    } else if (a == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) {
        if (v < -1 || v > 100)
            return CUDA_ERROR_INVALID_VALUE;
        f->carveout = v;
    } else {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    LOCKED(func_set_attr(hfunc, attrib, value));
}

EXPORT CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                                     CUdevice dev)
{
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    LOCKED(func_set_attr(kernel, attrib, val));
}

static CUresult func_name(const char **name, void *h)
{
    struct dbl_func *f = obj_get(h, K_FUNC);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    *name = f->kernel->name;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    LOCKED(func_name(name, hfunc));
}

EXPORT CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    LOCKED(func_name(name, hfunc));
}

/* The double's occupancy model: 2048 threads, 32 blocks and 228 KiB of shared memory per SM. */
#define DBL_SM_THREADS 2048
#define DBL_SM_BLOCKS  32
#define DBL_SM_SHARED  (228 * 1024)

static CUresult occupancy(int *numBlocks, CUfunction func, int blockSize, size_t smem)
{
    pthread_mutex_lock(&lock);
    CUresult rc = obj_get(func, K_FUNC) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_unlock(&lock);
    if (rc)
        return rc;
    if (!numBlocks || blockSize <= 0 || blockSize > 1024 || smem > DBL_SM_SHARED)
        return CUDA_ERROR_INVALID_VALUE;
    int n = DBL_SM_THREADS / blockSize;
    if (smem && (int)(DBL_SM_SHARED / smem) < n)
        n = (int)(DBL_SM_SHARED / smem);
    *numBlocks = n > DBL_SM_BLOCKS ? DBL_SM_BLOCKS : n;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                            int blockSize, size_t dynamicSMemSize)
{
    return occupancy(numBlocks, func, blockSize, dynamicSMemSize);
}

EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks,
                                                                     CUfunction func, int blockSize,
                                                                     size_t dynamicSMemSize,
                                                                     unsigned int flags)
{
    if (flags & ~(unsigned)CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)
        return CUDA_ERROR_INVALID_VALUE;
    return occupancy(numBlocks, func, blockSize, dynamicSMemSize);
}

/* Largest block size (multiple of 32 up to the limit) with the most resident threads. */
static CUresult potential(int *minGridSize, int *blockSize, CUfunction func, CUoccupancyB2DSize cb,
                          size_t smem, int limit)
{
    if (!minGridSize || !blockSize || limit < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (limit == 0 || limit > 1024)
        limit = 1024;
    int best = 0, best_n = 0;
    for (int b = (limit + 31) / 32 * 32; b > 0; b -= 32) {
        int bs = b < limit ? b : limit, n = 0;
        CUresult rc = occupancy(&n, func, bs, cb ? cb(bs) : smem);
        if (rc)
            return rc;
        if (bs * n > best * best_n) {
            best = bs;
            best_n = n;
        }
    }
    *minGridSize = best_n * 4; /* 4 SMs */
    *blockSize = best;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                                 CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                 size_t dynamicSMemSize, int blockSizeLimit)
{
    return potential(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                     blockSizeLimit);
}

EXPORT CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(
    int *minGridSize, int *blockSize, CUfunction func,
    CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit,
    unsigned int flags)
{
    if (flags & ~(unsigned)CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)
        return CUDA_ERROR_INVALID_VALUE;
    return potential(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                     blockSizeLimit);
}

/* Clusters: at most 8 blocks per cluster (16 with the non-portable attribute, not modelled);
 * active clusters = resident blocks of the 4 SMs / the cluster size the config asks. */
static CUresult cluster_dim(const CUlaunchConfig *config, unsigned *dim)
{
    if (!config || (config->numAttrs && !config->attrs) || config->blockDimX == 0)
        return CUDA_ERROR_INVALID_VALUE;
    *dim = 1;
    for (unsigned i = 0; i < config->numAttrs; i++)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            *dim = config->attrs[i].value.clusterDim.x * config->attrs[i].value.clusterDim.y *
                   config->attrs[i].value.clusterDim.z;
    return *dim == 0 || *dim > 8 ? CUDA_ERROR_INVALID_CLUSTER_SIZE : CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func,
                                                   const CUlaunchConfig *config)
{
    unsigned dim;
    int n = 0;
    CUresult rc = cluster_dim(config, &dim);
    if (!rc)
        rc = occupancy(&n, func, (int)(config->blockDimX * config->blockDimY * config->blockDimZ),
                       config->sharedMemBytes);
    if (rc)
        return rc;
    if (!clusterSize)
        return CUDA_ERROR_INVALID_VALUE;
    *clusterSize = n * 4 < 8 ? n * 4 : 8;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func,
                                             const CUlaunchConfig *config)
{
    unsigned dim;
    int n = 0;
    CUresult rc = cluster_dim(config, &dim);
    if (!rc)
        rc = occupancy(&n, func, (int)(config->blockDimX * config->blockDimY * config->blockDimZ),
                       config->sharedMemBytes);
    if (rc)
        return rc;
    if (!numClusters)
        return CUDA_ERROR_INVALID_VALUE;
    *numClusters = n * 4 / (int)dim;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func,
                                                        int numBlocks, int blockSize)
{
    int n = 0;
    CUresult rc = occupancy(&n, func, blockSize, 0);
    if (rc)
        return rc;
    if (!dynamicSmemSize || numBlocks <= 0 || numBlocks > n)
        return CUDA_ERROR_INVALID_VALUE;
    *dynamicSmemSize = DBL_SM_SHARED / (size_t)numBlocks;
    return CUDA_SUCCESS;
}

/* ---------- launches ---------- */

void *dbl_dev(struct dbl_launch *launch, CUdeviceptr ptr, size_t len)
{
    void *p = dev_range(DEVPTR(ptr), len);
    if (!p)
        launch->status = CUDA_ERROR_ILLEGAL_ADDRESS;
    return p;
}

void *dbl_global_ptr(struct dbl_launch *launch, const char *name)
{
    struct dbl_image *img = launch->image;
    for (size_t i = 0; i < dbl_global_count; i++)
        if (!strcmp(dbl_globals[i].name, name))
            return (void *)(uintptr_t)img->globals[i];
    abort(); /* a kernel of kernels.c names a global that dbl_globals lacks */
}

static CUresult launch(void *h, const unsigned grid[3], const unsigned block[3], size_t shared,
                       CUstream s, void **params, void **extra)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if ((rc = check_stream(s)))
        return rc;
    struct dbl_func *f = obj_get(h, K_FUNC);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    unsigned long long threads = (unsigned long long)block[0] * block[1] * block[2];
    if (!grid[0] || !grid[1] || !grid[2] || !threads || block[0] > 1024 || block[1] > 1024 ||
        block[2] > 64 || grid[1] > 65535 || grid[2] > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    if (threads > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (shared > 49152 + (size_t)f->max_dynamic_shared)
        return CUDA_ERROR_INVALID_VALUE;
    const struct dbl_kernel *k = f->kernel;
    /* crash knob for the backend's worker-death test: this kernel aborts the process */
    const char *crash = getenv("SLUICE_DOUBLE_CRASH_KERNEL");
    if (crash && k && strcmp(crash, k->name) == 0)
        abort();
    void *argv[DBL_MAX_PARAMS];
    if (extra) {
        void *buf = NULL;
        size_t size = 0;
        for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                buf = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
                size = *(size_t *)extra[i + 1];
            else
                return CUDA_ERROR_INVALID_VALUE;
        }
        if (k->nparams &&
            (!buf || size < k->params[k->nparams - 1].offset + k->params[k->nparams - 1].size))
            return CUDA_ERROR_INVALID_VALUE;
        for (unsigned i = 0; i < k->nparams; i++)
            argv[i] = (char *)buf + k->params[i].offset;
        params = argv;
    } else if (k->nparams && !params) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct dbl_launch l = {{grid[0], grid[1], grid[2]},
                           {block[0], block[1], block[2]},
                           shared,
                           params,
                           f->image,
                           CUDA_SUCCESS};
    int64_t hb = dbl_time_host_begin(); /* the host's work is not device time (timing.c) */
    k->run(&l);
    dbl_time_host_end(hb);
    dbl_time_work(c, s, dbl_kernel_duration_us(k, &l)); /* simulated time (timing.c) */
    if (l.status != CUDA_SUCCESS) {
        c->sticky = l.status; /* as on a GPU: an illegal address poisons the context */
        return l.status;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                               unsigned int gridDimZ, unsigned int blockDimX,
                               unsigned int blockDimY, unsigned int blockDimZ,
                               unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
                               void **extra)
{
    unsigned grid[3] = {gridDimX, gridDimY, gridDimZ}, block[3] = {blockDimX, blockDimY, blockDimZ};
    LOCKED(launch(f, grid, block, sharedMemBytes, hStream, kernelParams, extra));
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                 void **extra)
{
    if (!config || (config->numAttrs && !config->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
    unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
    LOCKED(launch(f, grid, block, config->sharedMemBytes, config->hStream, kernelParams, extra));
}

/* ---------- per-thread default stream variants: identical here (execution is synchronous)
 * ---------- */

EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *s, size_t n)
{
    return cuMemcpyHtoD_v2(d, s, n);
}

EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *d, CUdeviceptr s, size_t n)
{
    return cuMemcpyDtoH_v2(d, s, n);
}

EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n)
{
    return cuMemcpyDtoD_v2(d, s, n);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream h)
{
    return cuMemcpyHtoDAsync_v2(d, s, n, h);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *d, CUdeviceptr s, size_t n, CUstream h)
{
    return cuMemcpyDtoHAsync_v2(d, s, n, h);
}

EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{
    return cuMemcpyDtoDAsync_v2(d, s, n, h);
}

EXPORT CUresult cuStreamSynchronize_ptsz(CUstream h)
{
    return cuStreamSynchronize(h);
}

EXPORT CUresult cuStreamQuery_ptsz(CUstream h)
{
    return cuStreamQuery(h);
}

EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags)
{
    return cuStreamWaitEvent(h, e, flags);
}

EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream h)
{
    return cuEventRecord(e, h);
}

EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void *userData)
{
    return cuLaunchHostFunc(h, fn, userData);
}

EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                    unsigned int bx, unsigned int by, unsigned int bz,
                                    unsigned int shared, CUstream h, void **kernelParams,
                                    void **extra)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, h, kernelParams, extra);
}

EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                      void **kernelParams, void **extra)
{
    return cuLaunchKernelEx(config, f, kernelParams, extra);
}

/* ---------- memory pools and stream-ordered allocation ----------
 * A pool is bookkeeping: its allocations are ordinary allocations (execution is synchronous,
 * so "stream order" is call order). Attributes are stored and answered back; the used-memory
 * counters follow the pool's allocations. */
struct dbl_pool {
    struct dbl_obj hdr;
    cuuint64_t threshold, used, used_high;
    int reuse[3];
};
static struct dbl_pool default_pool, *current_pool;
static bool default_pool_made;

static struct dbl_pool *pool_default(void)
{
    if (!default_pool_made) {
        default_pool.hdr.kind = K_POOL;
        default_pool.reuse[0] = default_pool.reuse[1] = default_pool.reuse[2] = 1;
        obj_add(&default_pool);
        default_pool_made = true;
    }
    return &default_pool;
}

/* Which pool an allocation came from (base -> pool), so frees update the counters. */
struct dbl_pool_alloc {
    uintptr_t base;
    size_t size;
    struct dbl_pool *pool;
};
static struct dbl_pool_alloc *pallocs;
static size_t npallocs, cappallocs;

static CUresult dev_check(CUdevice dev)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    pthread_mutex_lock(&lock);
    CUresult rc = dev_check(dev);
    if (!rc && !pool_out)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *pool_out = (CUmemoryPool)pool_default();
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    pthread_mutex_lock(&lock);
    CUresult rc = dev_check(dev);
    if (!rc && !pool)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *pool = (CUmemoryPool)(current_pool ? current_pool : pool_default());
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    pthread_mutex_lock(&lock);
    CUresult rc = dev_check(dev);
    if (!rc && !obj_get(pool, K_POOL))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc)
        current_pool = (struct dbl_pool *)pool;
    pthread_mutex_unlock(&lock);
    return rc;
}

static CUresult pool_create(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->location.id != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_pool *p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->hdr.kind = K_POOL;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    obj_add(p);
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    LOCKED(pool_create(pool, poolProps));
}

static CUresult pool_destroy(CUmemoryPool pool)
{
    struct dbl_pool *p = obj_get(pool, K_POOL);
    if (!p || p == &default_pool)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < npallocs;) /* the driver frees what is left in it */
        if (pallocs[i].pool == p) {
            alloc_free(pallocs[i].base, A_DEVICE);
            pallocs[i] = pallocs[--npallocs];
        } else {
            i++;
        }
    if (current_pool == p)
        current_pool = NULL;
    obj_del(p);
    free(p);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    LOCKED(pool_destroy(pool));
}

EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    (void)minBytesToKeep;
    LOCKED(obj_get(pool, K_POOL) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

static CUresult pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value, int set)
{
    struct dbl_pool *p = obj_get(pool, K_POOL);
    if (!p || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: {
        int *r = &p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
        if (set)
            *r = *(int *)value != 0;
        else
            *(int *)value = *r;
        return CUDA_SUCCESS;
    }
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        if (set)
            p->threshold = *(cuuint64_t *)value;
        else
            *(cuuint64_t *)value = p->threshold;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
        if (set)
            return CUDA_ERROR_INVALID_VALUE;
        *(cuuint64_t *)value = p->used;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (set) { /* only 0 may be set: resets the high watermark */
            if (*(cuuint64_t *)value != 0)
                return CUDA_ERROR_INVALID_VALUE;
            p->used_high = p->used;
        } else {
            *(cuuint64_t *)value = p->used_high;
        }
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    LOCKED(pool_attr(pool, attr, value, 1));
}

EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    LOCKED(pool_attr(pool, attr, value, 0));
}

EXPORT CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool,
                                   CUmemLocation *location)
{
    pthread_mutex_lock(&lock);
    CUresult rc = obj_get(memPool, K_POOL) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (!rc &&
        (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE || location->id != 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    pthread_mutex_unlock(&lock);
    return rc;
}

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t size, struct dbl_pool *p, CUstream s)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if ((rc = check_stream(s)))
        return rc;
    if (!dptr || !p)
        return CUDA_ERROR_INVALID_VALUE;
    if (npallocs == cappallocs) {
        size_t cap = cappallocs ? cappallocs * 2 : 64;
        struct dbl_pool_alloc *n = realloc(pallocs, cap * sizeof *n);
        if (!n)
            return CUDA_ERROR_OUT_OF_MEMORY;
        pallocs = n;
        cappallocs = cap;
    }
    uintptr_t out;
    if ((rc = alloc_new(size, A_DEVICE, c, &out)))
        return rc;
    pallocs[npallocs++] = (struct dbl_pool_alloc){out, size, p};
    p->used += size;
    if (p->used > p->used_high)
        p->used_high = p->used;
    *dptr = (CUdeviceptr)out;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    pthread_mutex_lock(&lock);
    struct dbl_pool *p = initialized ? (current_pool ? current_pool : pool_default()) : NULL;
    CUresult rc = p ? alloc_from_pool(dptr, bytesize, p, hStream) : CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream hStream)
{
    pthread_mutex_lock(&lock);
    struct dbl_pool *p = obj_get(pool, K_POOL);
    CUresult rc = p ? alloc_from_pool(dptr, bytesize, p, hStream) : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    return rc;
}

static CUresult free_async(CUdeviceptr dptr, CUstream s)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    if ((rc = check_stream(s)))
        return rc;
    for (size_t i = 0; i < npallocs; i++)
        if (pallocs[i].base == (uintptr_t)dptr) {
            pallocs[i].pool->used -= pallocs[i].size;
            pallocs[i] = pallocs[--npallocs];
            break;
        }
    return alloc_free((uintptr_t)dptr, A_DEVICE);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    LOCKED(free_async(dptr, hStream));
}

/* ---------- graphs ----------
 * A graph is its nodes in the order they were added (dependencies are always earlier nodes, so
 * that order is a valid execution order); launching runs them one after the other on the
 * calling thread. Node types: kernel, memset, memcpy (any sides copy3d accepts), host (the
 * function runs at that point), empty, memory allocation (the memory is allocated when the node
 * is made and stays: a launch marks it in use, a free node not, for the graph memory
 * attributes), memory free, and conditional (IF / WHILE / SWITCH over body graphs the node
 * owns, on a handle kernels set through dbl_cond_set). A kernel node keeps a copy of its
 * parameters (as the driver does); an instantiated graph keeps a deep copy of its graph, so
 * changing or destroying the graph later does not change it. Graphs are context-independent
 * bookkeeping here (hdr.ctx NULL). No stream capture. */
#define DBL_NODE_PARAM_BYTES 512
#define DBL_MAX_WHILE        1000000
enum { N_KERNEL = 1, N_MEMSET, N_MEMCPY, N_HOST, N_EMPTY, N_ALLOC, N_FREE, N_COND };
struct dbl_graph;
struct dbl_cond {
    struct dbl_cond *next;
    struct dbl_graph *graph;
    unsigned value, def, flags;
};
struct dbl_galloc {
    struct dbl_galloc *next;
    CUdeviceptr dptr;
    size_t size;
    bool live;
};
struct dbl_gnode {
    struct dbl_obj hdr;
    struct dbl_graph *graph;
    const struct dbl_gnode *origin; /* the node this one was copied from (clone, instance) */
    int type;
    size_t ndeps;
    void *func; /* struct dbl_func * */
    unsigned grid[3], block[3];
    size_t shared;
    unsigned char params[DBL_NODE_PARAM_BYTES];
    void *argv[DBL_MAX_PARAMS];
    CUDA_MEMSET_NODE_PARAMS memset;
    CUDA_MEMCPY3D memcpy;
    CUDA_HOST_NODE_PARAMS host;
    struct dbl_galloc *alloc; /* alloc and free nodes */
    CUDA_MEM_ALLOC_NODE_PARAMS allocp;
    struct dbl_cond *cond;
    unsigned ctype, csize;
    struct dbl_graph **bodies;
};
struct dbl_graph {
    struct dbl_obj hdr;
    struct dbl_gnode **nodes;
    size_t n, cap;
    bool registered; /* an object the caller may name (not an instance's private copy) */
};
struct dbl_gexec {
    struct dbl_obj hdr;
    struct dbl_graph *snap;  /* the instance's own copy of the graph */
    struct dbl_graph *graph; /* the graph it was made from (conditional handles' defaults) */
};

static struct dbl_cond *conds;
static struct dbl_galloc *gallocs;
static size_t graph_mem_used, graph_mem_high;

static CUresult copy3d(const CUDA_MEMCPY3D *p, CUstream s);

static struct dbl_graph *graph_new(bool registered)
{
    struct dbl_graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->hdr.kind = K_GRAPH;
    g->registered = registered;
    if (registered)
        obj_add(g);
    return g;
}

static void graph_free(struct dbl_graph *g);

static void node_free(struct dbl_gnode *n)
{
    for (unsigned i = 0; n->bodies && i < n->csize; i++)
        graph_free(n->bodies[i]);
    free(n->bodies);
    obj_del(n);
    free(n);
}

static void graph_free(struct dbl_graph *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++)
        node_free(g->nodes[i]);
    free(g->nodes);
    /* conditional handles stay (instances may still use them) */
    obj_del(g);
    free(g);
}

EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    if (!phGraph || flags)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    struct dbl_graph *g = graph_new(true);
    pthread_mutex_unlock(&lock);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

static bool owned_body(const struct dbl_graph *g)
{
    for (size_t i = 0; i < nobjs; i++) {
        const struct dbl_gnode *n = objs[i];
        if (n->hdr.kind == K_GNODE && n->bodies)
            for (unsigned j = 0; j < n->csize; j++)
                if (n->bodies[j] == g)
                    return true;
    }
    return false;
}

static CUresult graph_destroy(CUgraph h)
{
    struct dbl_graph *g = obj_get(h, K_GRAPH);
    if (!g || owned_body(g))
        return CUDA_ERROR_INVALID_VALUE;
    graph_free(g);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    LOCKED(graph_destroy(hGraph));
}

/* Fills a kernel node from the params (kernelParams or the extra buffer). */
static CUresult knode_set(struct dbl_gnode *n, const CUDA_KERNEL_NODE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_func *f = obj_get(p->func ? (void *)p->func : (void *)p->kern, K_FUNC);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    const struct dbl_kernel *k = f->kernel;
    unsigned char buf[DBL_NODE_PARAM_BYTES];
    memset(buf, 0, sizeof buf);
    if (k && k->nparams) {
        size_t end = 0;
        for (unsigned i = 0; i < k->nparams; i++)
            if (k->params[i].offset + k->params[i].size > end)
                end = k->params[i].offset + k->params[i].size;
        if (end > sizeof buf)
            return CUDA_ERROR_INVALID_VALUE;
        if (p->kernelParams) {
            for (unsigned i = 0; i < k->nparams; i++)
                memcpy(buf + k->params[i].offset, p->kernelParams[i], k->params[i].size);
        } else if (p->extra) {
            void *eb = NULL;
            size_t es = 0;
            for (size_t i = 0; p->extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
                if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                    eb = p->extra[i + 1];
                else if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                    es = *(size_t *)p->extra[i + 1];
            }
            if (!eb || es != end)
                return CUDA_ERROR_INVALID_VALUE;
            memcpy(buf, eb, end);
        } else {
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    n->type = N_KERNEL;
    n->func = f;
    n->grid[0] = p->gridDimX;
    n->grid[1] = p->gridDimY;
    n->grid[2] = p->gridDimZ;
    n->block[0] = p->blockDimX;
    n->block[1] = p->blockDimY;
    n->block[2] = p->blockDimZ;
    n->shared = p->sharedMemBytes;
    memcpy(n->params, buf, sizeof buf);
    return CUDA_SUCCESS;
}

static CUresult node_add(CUgraphNode *ph, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                         struct dbl_gnode *proto)
{
    struct dbl_graph *g = obj_get(hGraph, K_GRAPH);
    if (!g || !ph || (ndeps && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ndeps; i++) {
        struct dbl_gnode *d = obj_get(deps[i], K_GNODE);
        if (!d || d->graph != g)
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 8;
        struct dbl_gnode **nn = realloc(g->nodes, cap * sizeof *nn);
        if (!nn)
            return CUDA_ERROR_OUT_OF_MEMORY;
        g->nodes = nn;
        g->cap = cap;
    }
    struct dbl_gnode *n = malloc(sizeof *n);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *n = *proto;
    n->hdr.kind = K_GNODE;
    n->hdr.ctx = NULL;
    n->graph = g;
    n->ndeps = ndeps;
    g->nodes[g->n++] = n;
    obj_add(n);
    *ph = (CUgraphNode)n;
    return CUDA_SUCCESS;
}

static CUresult add_kernel(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                           const CUDA_KERNEL_NODE_PARAMS *p)
{
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    CUresult rc = knode_set(&proto, p);
    return rc ? rc : node_add(ph, g, deps, nd, &proto);
}

EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                        const CUgraphNode *dependencies, size_t numDependencies,
                                        const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    LOCKED(add_kernel(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

static struct dbl_gnode *node_of(CUgraphNode h, int type)
{
    struct dbl_gnode *n = obj_get(h, K_GNODE);
    return n && (!type || n->type == type) ? n : NULL;
}

static CUresult set_kernel(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS *p)
{
    struct dbl_gnode *n = node_of(h, N_KERNEL);
    return n ? knode_set(n, p) : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
                                              const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    LOCKED(set_kernel(hNode, nodeParams));
}

static CUresult get_kernel(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS *p)
{
    struct dbl_gnode *n = node_of(h, N_KERNEL);
    if (!n || !p)
        return CUDA_ERROR_INVALID_VALUE;
    const struct dbl_kernel *k = ((struct dbl_func *)n->func)->kernel;
    for (unsigned j = 0; k && j < k->nparams; j++)
        n->argv[j] = n->params + k->params[j].offset;
    memset(p, 0, sizeof *p);
    p->func = (CUfunction)n->func;
    p->gridDimX = n->grid[0];
    p->gridDimY = n->grid[1];
    p->gridDimZ = n->grid[2];
    p->blockDimX = n->block[0];
    p->blockDimY = n->block[1];
    p->blockDimZ = n->block[2];
    p->sharedMemBytes = (unsigned)n->shared;
    p->kernelParams = n->argv;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode,
                                              CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    LOCKED(get_kernel(hNode, nodeParams));
}

static CUresult memset_check(const CUDA_MEMSET_NODE_PARAMS *p)
{
    if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || !p->width ||
        !p->height || (p->height > 1 && p->pitch < p->width * p->elementSize))
        return CUDA_ERROR_INVALID_VALUE;
    size_t span = (p->height - 1) * p->pitch + p->width * p->elementSize;
    return dev_range(DEVPTR(p->dst), span) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult add_memset(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                           const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
    (void)ctx;
    CUresult rc = memset_check(p);
    if (rc)
        return rc;
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_MEMSET;
    proto.memset = *p;
    return node_add(ph, g, deps, nd, &proto);
}

EXPORT CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                     const CUgraphNode *dependencies, size_t numDependencies,
                                     const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    LOCKED(add_memset(phGraphNode, hGraph, dependencies, numDependencies, memsetParams, ctx));
}

static CUresult memset_params(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS *get,
                              const CUDA_MEMSET_NODE_PARAMS *set)
{
    struct dbl_gnode *n = node_of(h, N_MEMSET);
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    if (get) {
        *get = n->memset;
        return CUDA_SUCCESS;
    }
    CUresult rc = memset_check(set);
    if (!rc)
        n->memset = *set;
    return rc;
}

EXPORT CUresult cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(memset_params(hNode, nodeParams, NULL));
}

EXPORT CUresult cuGraphMemsetNodeSetParams(CUgraphNode hNode,
                                           const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    LOCKED(memset_params(hNode, NULL, nodeParams));
}

/* memcpy nodes: the parameters are checked when the node runs (copy3d) */
static CUresult add_memcpy(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                           const CUDA_MEMCPY3D *p)
{
    if (!p || !p->WidthInBytes || !p->Height)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_MEMCPY;
    proto.memcpy = *p;
    return node_add(ph, g, deps, nd, &proto);
}

EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                     const CUgraphNode *dependencies, size_t numDependencies,
                                     const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    (void)ctx;
    LOCKED(add_memcpy(phGraphNode, hGraph, dependencies, numDependencies, copyParams));
}

static CUresult memcpy_params(CUgraphNode h, CUDA_MEMCPY3D *get, const CUDA_MEMCPY3D *set)
{
    struct dbl_gnode *n = node_of(h, N_MEMCPY);
    if (!n || (!get && (!set || !set->WidthInBytes || !set->Height)))
        return CUDA_ERROR_INVALID_VALUE;
    if (get)
        *get = n->memcpy;
    else
        n->memcpy = *set;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(memcpy_params(hNode, nodeParams, NULL));
}

EXPORT CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
    LOCKED(memcpy_params(hNode, NULL, nodeParams));
}

static CUresult add_host(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                         const CUDA_HOST_NODE_PARAMS *p)
{
    if (!p || !p->fn)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_HOST;
    proto.host = *p;
    return node_add(ph, g, deps, nd, &proto);
}

EXPORT CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                   const CUgraphNode *dependencies, size_t numDependencies,
                                   const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    LOCKED(add_host(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

static CUresult host_params(CUgraphNode h, CUDA_HOST_NODE_PARAMS *get,
                            const CUDA_HOST_NODE_PARAMS *set)
{
    struct dbl_gnode *n = node_of(h, N_HOST);
    if (!n || (!get && (!set || !set->fn)))
        return CUDA_ERROR_INVALID_VALUE;
    if (get)
        *get = n->host;
    else
        n->host = *set;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(host_params(hNode, nodeParams, NULL));
}

EXPORT CUresult cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    LOCKED(host_params(hNode, NULL, nodeParams));
}

static CUresult add_empty(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd)
{
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_EMPTY;
    return node_add(ph, g, deps, nd, &proto);
}

EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                    const CUgraphNode *dependencies, size_t numDependencies)
{
    LOCKED(add_empty(phGraphNode, hGraph, dependencies, numDependencies));
}

/* memory nodes: the allocation is made with the node, at a fixed address */
static CUresult add_alloc(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                          CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    if (!p || !p->bytesize || p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        check_dev(p->poolProps.location.id) || p->poolProps.handleTypes ||
        (p->accessDescCount && !p->accessDescs))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_galloc *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t base;
    CUresult rc = alloc_new(p->bytesize, A_DEVICE, NULL, &base);
    if (rc) {
        free(a);
        return rc;
    }
    a->dptr = base;
    a->size = p->bytesize;
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_ALLOC;
    proto.alloc = a;
    proto.allocp = *p;
    proto.allocp.accessDescs = NULL;
    proto.allocp.accessDescCount = 0;
    proto.allocp.dptr = base;
    rc = node_add(ph, g, deps, nd, &proto);
    if (rc) {
        alloc_free(base, A_DEVICE);
        free(a);
        return rc;
    }
    a->next = gallocs;
    gallocs = a;
    p->dptr = base;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                       const CUgraphNode *dependencies, size_t numDependencies,
                                       CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    LOCKED(add_alloc(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

static CUresult alloc_params(CUgraphNode h, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    struct dbl_gnode *n = node_of(h, N_ALLOC);
    if (!n || !p)
        return CUDA_ERROR_INVALID_VALUE;
    *p = n->allocp;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode,
                                             CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    LOCKED(alloc_params(hNode, params_out));
}

static CUresult add_free(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                         CUdeviceptr dptr)
{
    struct dbl_galloc *a = gallocs;
    while (a && a->dptr != dptr)
        a = a->next;
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_FREE;
    proto.alloc = a;
    return node_add(ph, g, deps, nd, &proto);
}

EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      CUdeviceptr dptr)
{
    LOCKED(add_free(phGraphNode, hGraph, dependencies, numDependencies, dptr));
}

static CUresult graph_mem_attr(CUdevice dev, CUgraphMem_attribute attr, void *value, int set)
{
    if (check_dev(dev) || !value)
        return CUDA_ERROR_INVALID_VALUE;
    cuuint64_t *v = value;
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
        if (set)
            return CUDA_ERROR_INVALID_VALUE;
        *v = graph_mem_used;
        return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
        if (set) {
            if (*v)
                return CUDA_ERROR_INVALID_VALUE;
            graph_mem_high = graph_mem_used;
        } else {
            *v = graph_mem_high;
        }
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                             void *value)
{
    LOCKED(graph_mem_attr(device, attr, value, 0));
}

EXPORT CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                             void *value)
{
    LOCKED(graph_mem_attr(device, attr, value, 1));
}

EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    return check_dev(device) ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

/* conditional handles and nodes */
static CUresult cond_create(CUgraphConditionalHandle *h, CUgraph hGraph, unsigned def,
                            unsigned flags)
{
    struct dbl_graph *g = obj_get(hGraph, K_GRAPH);
    if (!g || !h || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_cond *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->graph = g;
    c->value = c->def = def;
    c->flags = flags;
    c->next = conds;
    conds = c;
    *h = (CUgraphConditionalHandle)(uintptr_t)c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out,
                                               CUgraph hGraph, CUcontext ctx,
                                               unsigned int defaultLaunchValue, unsigned int flags)
{
    (void)ctx;
    LOCKED(cond_create(pHandle_out, hGraph, defaultLaunchValue, flags));
}

static struct dbl_cond *cond_of(unsigned long long h)
{
    for (struct dbl_cond *c = conds; c; c = c->next)
        if ((uintptr_t)c == h)
            return c;
    return NULL;
}

/* kernels.c: cudaGraphSetConditional(handle, value) (called with the lock held by the launch) */
void dbl_cond_set(struct dbl_launch *l, unsigned long long handle, unsigned value)
{
    struct dbl_cond *c = cond_of(handle);
    if (c)
        c->value = value;
    else
        l->status = CUDA_ERROR_ILLEGAL_ADDRESS;
}

static CUresult add_node_v2(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                            CUgraphNodeParams *p)
{
    if (!p || p->type != CU_GRAPH_NODE_TYPE_CONDITIONAL)
        return CUDA_ERROR_NOT_SUPPORTED; /* the backend sends the other types their own way */
    CUDA_CONDITIONAL_NODE_PARAMS *c = &p->conditional;
    struct dbl_cond *cond = cond_of((unsigned long long)c->handle);
    unsigned max = c->type == CU_GRAPH_COND_TYPE_IF      ? 2
                   : c->type == CU_GRAPH_COND_TYPE_WHILE ? 1
                                                         : 64;
    if (!cond || c->type > CU_GRAPH_COND_TYPE_SWITCH || !c->size || c->size > max)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_COND;
    proto.cond = cond;
    proto.ctype = c->type;
    proto.csize = c->size;
    proto.bodies = calloc(c->size, sizeof *proto.bodies);
    if (!proto.bodies)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned i = 0; i < c->size; i++)
        if (!(proto.bodies[i] = graph_new(true))) {
            for (unsigned j = 0; j < i; j++)
                graph_free(proto.bodies[j]);
            free(proto.bodies);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    CUresult rc = node_add(ph, g, deps, nd, &proto);
    if (rc) {
        for (unsigned i = 0; i < c->size; i++)
            graph_free(proto.bodies[i]);
        free(proto.bodies);
        return rc;
    }
    c->phGraph_out = (CUgraph *)((struct dbl_gnode *)*ph)->bodies;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                  const CUgraphNode *dependencies,
                                  const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                  CUgraphNodeParams *nodeParams)
{
    if (dependencyData)
        return CUDA_ERROR_NOT_SUPPORTED;
    LOCKED(add_node_v2(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

/* node queries */
static CUresult node_type(CUgraphNode h, CUgraphNodeType *t)
{
    static const CUgraphNodeType types[] = {
        [N_KERNEL] = CU_GRAPH_NODE_TYPE_KERNEL, [N_MEMSET] = CU_GRAPH_NODE_TYPE_MEMSET,
        [N_MEMCPY] = CU_GRAPH_NODE_TYPE_MEMCPY, [N_HOST] = CU_GRAPH_NODE_TYPE_HOST,
        [N_EMPTY] = CU_GRAPH_NODE_TYPE_EMPTY,   [N_ALLOC] = CU_GRAPH_NODE_TYPE_MEM_ALLOC,
        [N_FREE] = CU_GRAPH_NODE_TYPE_MEM_FREE, [N_COND] = CU_GRAPH_NODE_TYPE_CONDITIONAL};
    struct dbl_gnode *n = node_of(h, 0);
    if (!n || !t)
        return CUDA_ERROR_INVALID_VALUE;
    *t = types[n->type];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    LOCKED(node_type(hNode, type));
}

static CUresult root_nodes(CUgraph h, CUgraphNode *nodes, size_t *num)
{
    struct dbl_graph *g = obj_get(h, K_GRAPH);
    if (!g || !num)
        return CUDA_ERROR_INVALID_VALUE;
    size_t k = 0;
    for (size_t i = 0; i < g->n; i++)
        if (!g->nodes[i]->ndeps) {
            if (nodes && k < *num)
                nodes[k] = (CUgraphNode)g->nodes[i];
            k++;
        }
    if (nodes)
        for (size_t i = k; i < *num; i++)
            nodes[i] = NULL;
    if (!nodes || k < *num)
        *num = k;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
    LOCKED(root_nodes(hGraph, rootNodes, numRootNodes));
}

static CUresult destroy_node(CUgraphNode h)
{
    struct dbl_gnode *n = node_of(h, 0);
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_graph *g = n->graph;
    for (size_t i = 0; i < g->n; i++)
        if (g->nodes[i] == n) {
            memmove(&g->nodes[i], &g->nodes[i + 1], (g->n - i - 1) * sizeof *g->nodes);
            g->n--;
            break;
        }
    node_free(n);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroyNode(CUgraphNode hNode)
{
    LOCKED(destroy_node(hNode));
}

/* Deep copy of g (bodies too); registered: the copy's graphs and nodes are objects. */
static struct dbl_graph *graph_copy(const struct dbl_graph *g, bool registered)
{
    struct dbl_graph *c = graph_new(registered);
    if (!c)
        return NULL;
    c->nodes = g->n ? calloc(g->n, sizeof *c->nodes) : NULL;
    if (g->n && !c->nodes) {
        graph_free(c);
        return NULL;
    }
    for (size_t i = 0; i < g->n; i++) {
        struct dbl_gnode *n = malloc(sizeof *n);
        if (!n) {
            graph_free(c);
            return NULL;
        }
        *n = *g->nodes[i];
        n->graph = c;
        n->origin = g->nodes[i];
        n->bodies = NULL;
        c->nodes[c->n++] = n;
        if (registered)
            obj_add(n);
        if (g->nodes[i]->bodies) {
            n->bodies = calloc(n->csize, sizeof *n->bodies);
            for (unsigned j = 0; n->bodies && j < n->csize; j++)
                if (!(n->bodies[j] = graph_copy(g->nodes[i]->bodies[j], registered))) {
                    graph_free(c);
                    return NULL;
                }
            if (!n->bodies) {
                n->csize = 0;
                graph_free(c);
                return NULL;
            }
        }
    }
    c->cap = c->n;
    return c;
}

static CUresult graph_clone(CUgraph *out, CUgraph h)
{
    struct dbl_graph *g = obj_get(h, K_GRAPH);
    if (!g || !out)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_graph *c = graph_copy(g, true);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = (CUgraph)c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
    LOCKED(graph_clone(phGraphClone, originalGraph));
}

static struct dbl_gnode *find_origin(const struct dbl_graph *g, const void *orig)
{
    for (size_t i = 0; g && i < g->n; i++) {
        if (g->nodes[i]->origin == orig)
            return g->nodes[i];
        for (unsigned j = 0; g->nodes[i]->bodies && j < g->nodes[i]->csize; j++) {
            struct dbl_gnode *n = find_origin(g->nodes[i]->bodies[j], orig);
            if (n)
                return n;
        }
    }
    return NULL;
}

static CUresult find_in_clone(CUgraphNode *out, CUgraphNode orig, CUgraph hClone)
{
    struct dbl_graph *g = obj_get(hClone, K_GRAPH);
    if (!g || !out || !orig)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_gnode *n = find_origin(g, orig);
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode,
                                       CUgraph hClonedGraph)
{
    LOCKED(find_in_clone(phNode, hOriginalNode, hClonedGraph));
}

/* instances */
static CUresult instantiate(CUgraphExec *ph, CUgraph h)
{
    struct dbl_graph *g = obj_get(h, K_GRAPH);
    if (!g || !ph)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_gexec *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->hdr.kind = K_GEXEC;
    e->graph = g;
    if (!(e->snap = graph_copy(g, false))) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    obj_add(e);
    *ph = (CUgraphExec)e;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                            unsigned long long flags)
{
    (void)flags;
    LOCKED(instantiate(phGraphExec, hGraph));
}

EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    if (!instantiateParams)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    CUresult rc = instantiate(phGraphExec, hGraph);
    pthread_mutex_unlock(&lock);
    instantiateParams->hErrNode_out = NULL;
    instantiateParams->result_out =
        rc ? CUDA_GRAPH_INSTANTIATE_ERROR : CUDA_GRAPH_INSTANTIATE_SUCCESS;
    return rc;
}

/* The instance's copy of node (made from the graph's node `node`). */
static struct dbl_gnode *exec_node(CUgraphExec h, CUgraphNode node, int type)
{
    struct dbl_gexec *e = obj_get(h, K_GEXEC);
    struct dbl_gnode *n = e && node ? find_origin(e->snap, node) : NULL;
    return n && n->type == type ? n : NULL;
}

static CUresult exec_set_kernel(CUgraphExec h, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p)
{
    struct dbl_gnode *n = exec_node(h, node, N_KERNEL);
    return n ? knode_set(n, p) : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                  const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    LOCKED(exec_set_kernel(hGraphExec, hNode, nodeParams));
}

static CUresult exec_set_memset(CUgraphExec h, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p)
{
    struct dbl_gnode *n = exec_node(h, node, N_MEMSET);
    CUresult rc = n ? memset_check(p) : CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        n->memset = *p;
    return rc;
}

EXPORT CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                               const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                               CUcontext ctx)
{
    (void)ctx;
    LOCKED(exec_set_memset(hGraphExec, hNode, memsetParams));
}

static CUresult exec_set_memcpy(CUgraphExec h, CUgraphNode node, const CUDA_MEMCPY3D *p)
{
    struct dbl_gnode *n = exec_node(h, node, N_MEMCPY);
    if (!n || !p || !p->WidthInBytes || !p->Height)
        return CUDA_ERROR_INVALID_VALUE;
    n->memcpy = *p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                               const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    (void)ctx;
    LOCKED(exec_set_memcpy(hGraphExec, hNode, copyParams));
}

static CUresult exec_set_host(CUgraphExec h, CUgraphNode node, const CUDA_HOST_NODE_PARAMS *p)
{
    struct dbl_gnode *n = exec_node(h, node, N_HOST);
    if (!n || !p || !p->fn)
        return CUDA_ERROR_INVALID_VALUE;
    n->host = *p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                             const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    LOCKED(exec_set_host(hGraphExec, hNode, nodeParams));
}

/* Update: the graph must have the instance's shape (node count and types, in order); the
 * instance takes the graph's parameters and keeps its own node identities. */
static CUresult exec_update(CUgraphExec h, CUgraph hGraph, CUgraphExecUpdateResultInfo *info)
{
    struct dbl_gexec *e = obj_get(h, K_GEXEC);
    struct dbl_graph *g = obj_get(hGraph, K_GRAPH);
    if (!e || !g || !info)
        return CUDA_ERROR_INVALID_VALUE;
    memset(info, 0, sizeof *info);
    struct dbl_graph *s = e->snap;
    if (s->n != g->n) {
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    for (size_t i = 0; i < g->n; i++)
        if (s->nodes[i]->type != g->nodes[i]->type || g->nodes[i]->type == N_COND ||
            g->nodes[i]->type == N_ALLOC || g->nodes[i]->type == N_FREE) {
            info->result = s->nodes[i]->type != g->nodes[i]->type
                               ? CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED
                               : CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
            info->errorNode = (CUgraphNode)g->nodes[i];
            return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
        }
    for (size_t i = 0; i < g->n; i++) {
        struct dbl_gnode *d = s->nodes[i];
        const void *origin = d->origin;
        struct dbl_graph *graph = d->graph;
        *d = *g->nodes[i];
        d->origin = origin;
        d->graph = graph;
        d->bodies = NULL;
        d->csize = 0;
    }
    info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                     CUgraphExecUpdateResultInfo *resultInfo)
{
    LOCKED(exec_update(hGraphExec, hGraph, resultInfo));
}

static CUresult run_graph(const struct dbl_graph *g, CUstream s, int depth);

static CUresult run_node(const struct dbl_gnode *n, CUstream s, int depth)
{
    switch (n->type) {
    case N_KERNEL: {
        void *ptrs[DBL_MAX_PARAMS];
        const struct dbl_kernel *k = ((struct dbl_func *)n->func)->kernel;
        for (unsigned j = 0; k && j < k->nparams; j++)
            ptrs[j] = (void *)(n->params + k->params[j].offset);
        return launch(n->func, n->grid, n->block, n->shared, s, ptrs, NULL);
    }
    case N_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS *m = &n->memset;
        CUresult rc = CUDA_SUCCESS;
        for (size_t r = 0; r < m->height && !rc; r++)
            rc = memset_n(m->dst + r * m->pitch, m->value, m->elementSize, m->width, s);
        return rc;
    }
    case N_MEMCPY:
        return copy3d(&n->memcpy, s);
    case N_HOST:
        n->host.fn(n->host.userData); /* the stream has reached this point */
        return CUDA_SUCCESS;
    case N_ALLOC:
        if (!n->alloc->live) {
            n->alloc->live = true;
            graph_mem_used += n->alloc->size;
            if (graph_mem_used > graph_mem_high)
                graph_mem_high = graph_mem_used;
        }
        return CUDA_SUCCESS;
    case N_FREE:
        if (n->alloc->live) {
            n->alloc->live = false;
            graph_mem_used -= n->alloc->size;
        }
        return CUDA_SUCCESS;
    case N_COND: {
        struct dbl_cond *c = n->cond;
        if (depth > 8)
            return CUDA_ERROR_INVALID_VALUE;
        if (n->ctype == CU_GRAPH_COND_TYPE_IF)
            return c->value        ? run_graph(n->bodies[0], s, depth + 1)
                   : n->csize == 2 ? run_graph(n->bodies[1], s, depth + 1)
                                   : CUDA_SUCCESS;
        if (n->ctype == CU_GRAPH_COND_TYPE_SWITCH)
            return c->value < n->csize ? run_graph(n->bodies[c->value], s, depth + 1)
                                       : CUDA_SUCCESS;
        for (long i = 0; c->value; i++) {
            if (i == DBL_MAX_WHILE)
                return CUDA_ERROR_LAUNCH_TIMEOUT;
            CUresult rc = run_graph(n->bodies[0], s, depth + 1);
            if (rc)
                return rc;
        }
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_SUCCESS;
    }
}

static CUresult run_graph(const struct dbl_graph *g, CUstream s, int depth)
{
    for (size_t i = 0; i < g->n; i++) {
        CUresult rc = run_node(g->nodes[i], s, depth);
        if (rc)
            return rc;
    }
    return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec h, CUstream s)
{
    struct dbl_gexec *e = obj_get(h, K_GEXEC);
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_stream(s);
    if (rc)
        return rc;
    for (struct dbl_cond *c = conds; c; c = c->next)
        if (c->graph == e->graph && (c->flags & CU_GRAPH_COND_ASSIGN_DEFAULT))
            c->value = c->def;
    return run_graph(e->snap, s, 0);
}

EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    LOCKED(graph_launch(hGraphExec, hStream));
}

EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    LOCKED(graph_launch(hGraphExec, hStream));
}

static CUresult exec_destroy(CUgraphExec h)
{
    struct dbl_gexec *e = obj_get(h, K_GEXEC);
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    graph_free(e->snap);
    obj_del(e);
    free(e);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    LOCKED(exec_destroy(hGraphExec));
}

static CUresult capture_info(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *n)
{
    CUresult rc = check_stream(s);
    if (rc || !status)
        return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    *status = CU_STREAM_CAPTURE_STATUS_NONE; /* the double never captures */
    if (id)
        *id = 0;
    if (graph)
        *graph = NULL;
    if (deps)
        *deps = NULL;
    if (edges)
        *edges = NULL;
    if (n)
        *n = 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream hStream,
                                          CUstreamCaptureStatus *captureStatus_out,
                                          cuuint64_t *id_out, CUgraph *graph_out,
                                          const CUgraphNode **dependencies_out,
                                          const CUgraphEdgeData **edgeData_out,
                                          size_t *numDependencies_out)
{
    LOCKED(capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out));
}

EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    LOCKED(capture_info(hStream, captureStatus, NULL, NULL, NULL, NULL, NULL));
}

/* The calling thread's capture mode: global until the thread exchanges it. */
static _Thread_local CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = capture_mode;
    capture_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* ---------- arrays, texture and surface objects ----------
 * An array is host memory of width * element size * height * depth bytes (rows packed). 2D/3D
 * copies reach it as host memory after a bounds check. Texture and surface objects are numbers
 * handed out from a counter and remembered, so destroying an unknown one fails. */
struct dbl_array {
    struct dbl_obj hdr;
    CUDA_ARRAY3D_DESCRIPTOR d;
    size_t pitch, height, depth;
    unsigned char *data;
};

static size_t fmt_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 0;
    }
}

static CUresult array_side(CUmemorytype *type, const void **host, CUarray arr, size_t x, size_t y,
                           size_t *pitch, size_t w, size_t h, size_t z)
{
    struct dbl_array *a = obj_get(arr, K_ARRAY);
    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    if (x > a->pitch || w > a->pitch - x || y > a->height || h > a->height - y || z >= a->depth)
        return CUDA_ERROR_INVALID_VALUE;
    *type = CU_MEMORYTYPE_HOST;
    *host = a->data + z * a->pitch * a->height;
    *pitch = a->pitch;
    return CUDA_SUCCESS;
}

static CUresult array_create(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    size_t eb = d ? fmt_bytes(d->Format) : 0;
    if (!out || !eb || !d->Width || !d->NumChannels || d->NumChannels > 4 || d->NumChannels == 3)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_array *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* no owner context: a context drop would free only the struct, not the data */
    a->hdr = (struct dbl_obj){K_ARRAY, NULL};
    a->d = *d;
    a->pitch = d->Width * eb * d->NumChannels;
    a->height = d->Height ? d->Height : 1;
    a->depth = d->Depth ? d->Depth : 1;
    a->data = calloc(a->depth * a->height, a->pitch);
    if (!a->data) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    obj_add(a);
    *out = (CUarray)a;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = {p->Width, p->Height, 0, p->Format, p->NumChannels, 0};
    LOCKED(array_create(pHandle, &d));
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *p)
{
    LOCKED(array_create(pHandle, p));
}

static CUresult array_destroy(CUarray h)
{
    struct dbl_array *a = obj_get(h, K_ARRAY);
    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    obj_del(a);
    free(a->data);
    free(a);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    LOCKED(array_destroy(hArray));
}

static CUresult array_desc(CUDA_ARRAY3D_DESCRIPTOR *out, CUarray h)
{
    struct dbl_array *a = obj_get(h, K_ARRAY);
    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = a->d;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *p, CUarray hArray)
{
    LOCKED(array_desc(p, hArray));
}

EXPORT CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *p, CUarray hArray)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    pthread_mutex_lock(&lock);
    CUresult rc = p ? array_desc(&d, hArray) : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    if (!rc)
        *p = (CUDA_ARRAY_DESCRIPTOR){d.Width, d.Height, d.Format, d.NumChannels};
    return rc;
}

/* 3D copies: slice by slice as 2D copies (host and device sides step by pitch * height). */
static CUresult copy3d(const CUDA_MEMCPY3D *p, CUstream s)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    size_t depth = p->Depth ? p->Depth : 1;
    for (size_t z = 0; z < depth; z++) {
        CUDA_MEMCPY2D q;
        memset(&q, 0, sizeof q);
        q.WidthInBytes = p->WidthInBytes;
        q.Height = p->Height;
        q.srcMemoryType = p->srcMemoryType;
        q.srcXInBytes = p->srcXInBytes;
        q.srcY = p->srcY;
        q.srcPitch = p->srcPitch;
        size_t sstep = (p->srcPitch ? p->srcPitch : p->WidthInBytes) *
                       (p->srcHeight ? p->srcHeight : p->Height) * (p->srcZ + z);
        size_t dstep = (p->dstPitch ? p->dstPitch : p->WidthInBytes) *
                       (p->dstHeight ? p->dstHeight : p->Height) * (p->dstZ + z);
        q.srcHost = p->srcHost ? (const char *)p->srcHost + sstep : NULL;
        q.srcDevice = p->srcDevice ? p->srcDevice + sstep : 0;
        q.dstMemoryType = p->dstMemoryType;
        q.dstXInBytes = p->dstXInBytes;
        q.dstY = p->dstY;
        q.dstPitch = p->dstPitch;
        q.dstHost = p->dstHost ? (char *)p->dstHost + dstep : NULL;
        q.dstDevice = p->dstDevice ? p->dstDevice + dstep : 0;
        CUresult rc;
        if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY &&
            (rc = array_side(&q.srcMemoryType, &q.srcHost, p->srcArray, p->srcXInBytes, p->srcY,
                             &q.srcPitch, p->WidthInBytes, p->Height, p->srcZ + z)))
            return rc;
        if (p->dstMemoryType == CU_MEMORYTYPE_ARRAY &&
            (rc = array_side(&q.dstMemoryType, (const void **)&q.dstHost, p->dstArray,
                             p->dstXInBytes, p->dstY, &q.dstPitch, p->WidthInBytes, p->Height,
                             p->dstZ + z)))
            return rc;
        if ((rc = copy2d(&q, s)))
            return rc;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
    LOCKED(copy3d(pCopy, 0));
}

EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    LOCKED(copy3d(pCopy, hStream));
}

static unsigned long long objvals[256], next_objval = 0x1000;
static CUDA_TEXTURE_DESC objtex[256];
static CUDA_RESOURCE_DESC objres[256];
static size_t nobjvals;

static CUresult resource_ok(const CUDA_RESOURCE_DESC *r)
{
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    switch (r->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
        return obj_get(r->res.array.hArray, K_ARRAY) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    case CU_RESOURCE_TYPE_LINEAR:
        return dev_range(DEVPTR(r->res.linear.devPtr), r->res.linear.sizeInBytes)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    case CU_RESOURCE_TYPE_PITCH2D:
        return dev_range(DEVPTR(r->res.pitch2D.devPtr),
                         r->res.pitch2D.pitchInBytes * r->res.pitch2D.height)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

static CUresult objval_new(unsigned long long *out, const CUDA_RESOURCE_DESC *r)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = resource_ok(r);
    if (rc)
        return rc;
    if (!out || nobjvals == sizeof objvals / sizeof objvals[0])
        return CUDA_ERROR_INVALID_VALUE;
    memset(&objtex[nobjvals], 0, sizeof objtex[0]);
    objres[nobjvals] = *r;
    objvals[nobjvals++] = *out = next_objval++;
    return CUDA_SUCCESS;
}

static CUresult objval_del(unsigned long long v)
{
    for (size_t i = 0; i < nobjvals; i++)
        if (objvals[i] == v) {
            objvals[i] = objvals[--nobjvals];
            objtex[i] = objtex[nobjvals];
            objres[i] = objres[nobjvals];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                                  const CUDA_TEXTURE_DESC *pTexDesc,
                                  const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
    (void)pResViewDesc;
    if (!pTexDesc)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    CUresult rc = objval_new(pTexObject, pResDesc);
    if (!rc)
        objtex[nobjvals - 1] = *pTexDesc;
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuTexObjectDestroy(CUtexObject texObject)
{
    LOCKED(objval_del(texObject));
}

EXPORT CUresult cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
    if (!pResDesc || pResDesc->resType != CU_RESOURCE_TYPE_ARRAY)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(objval_new(pSurfObject, pResDesc));
}

EXPORT CUresult cuSurfObjectDestroy(CUsurfObject surfObject)
{
    LOCKED(objval_del(surfObject));
}

/* Pitched allocations: rows padded to 512 bytes. */
static CUresult alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t w, size_t h, unsigned es)
{
    if (!dptr || !pitch || !w || !h || (es != 4 && es != 8 && es != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (w + 511) & ~(size_t)511;
    if (p < w || h > SIZE_MAX / p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = mem_alloc((uintptr_t *)dptr, p * h, A_DEVICE);
    if (!rc)
        *pitch = p;
    return rc;
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                   size_t Height, unsigned int ElementSizeBytes)
{
    LOCKED(alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
}

static CUresult tex_desc(CUDA_TEXTURE_DESC *out, CUtexObject t)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nobjvals; i++)
        if (objvals[i] == t) {
            *out = objtex[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject)
{
    LOCKED(tex_desc(pTexDesc, texObject));
}

static CUresult res_desc(CUDA_RESOURCE_DESC *out, unsigned long long v)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nobjvals; i++)
        if (objvals[i] == v) {
            *out = objres[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject)
{
    LOCKED(res_desc(pResDesc, texObject));
}

EXPORT CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUsurfObject surfObject)
{
    LOCKED(res_desc(pResDesc, surfObject));
}

static CUresult array_bytes(CUarray h, size_t off, size_t n, unsigned char **p)
{
    struct dbl_array *a = obj_get(h, K_ARRAY);
    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    size_t total = a->pitch * a->height * a->depth;
    if (off > total || n > total - off)
        return CUDA_ERROR_INVALID_VALUE;
    *p = a->data + off;
    return CUDA_SUCCESS;
}

static CUresult htoa(CUarray h, size_t off, const void *src, size_t n)
{
    unsigned char *p;
    CUresult rc = array_bytes(h, off, n, &p);
    if (!rc && n && !src)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && n)
        memcpy(p, src, n);
    return rc;
}

static CUresult atoh(void *dst, CUarray h, size_t off, size_t n)
{
    unsigned char *p;
    CUresult rc = array_bytes(h, off, n, &p);
    if (!rc && n && !dst)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && n)
        memcpy(dst, p, n);
    return rc;
}

EXPORT CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost,
                                size_t ByteCount)
{
    LOCKED(htoa(dstArray, dstOffset, srcHost, ByteCount));
}

EXPORT CUresult cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
    LOCKED(atoh(dstHost, srcArray, srcOffset, ByteCount));
}

unsigned char *dbl_object_array(unsigned long long obj, size_t *pitch, size_t *width,
                                size_t *height, size_t *elem)
{
    for (size_t i = 0; i < nobjvals; i++)
        if (objvals[i] == obj && objres[i].resType == CU_RESOURCE_TYPE_ARRAY) {
            struct dbl_array *a = obj_get(objres[i].res.array.hArray, K_ARRAY);
            if (!a)
                return NULL;
            *pitch = a->pitch;
            *width = a->d.Width;
            *height = a->height;
            *elem = fmt_bytes(a->d.Format) * a->d.NumChannels;
            return a->data;
        }
    return NULL;
}

static CUresult graph_nodes(CUgraph h, CUgraphNode *nodes, size_t *num)
{
    struct dbl_graph *g = obj_get(h, K_GRAPH);
    if (!g || !num)
        return CUDA_ERROR_INVALID_VALUE;
    if (!nodes) {
        *num = g->n;
        return CUDA_SUCCESS;
    }
    for (size_t i = 0; i < *num; i++)
        nodes[i] = i < g->n ? (CUgraphNode)g->nodes[i] : NULL;
    if (*num > g->n)
        *num = g->n;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    LOCKED(graph_nodes(hGraph, nodes, numNodes));
}

/* ---------- stream attributes ----------
 * Stored per stream (the legacy and per-thread streams included) and answered back; the
 * priority attribute is the stream's priority. An access policy window must lie in device
 * memory. */
struct dbl_sattr {
    struct dbl_sattr *next;
    CUstream s;
    CUaccessPolicyWindow window;
    CUsynchronizationPolicy sync;
    CUlaunchMemSyncDomainMap map;
    CUlaunchMemSyncDomain domain;
};
static struct dbl_sattr *sattrs;

static struct dbl_sattr *sattr_of(CUstream s)
{
    struct dbl_sattr *a = sattrs;
    while (a && a->s != s)
        a = a->next;
    if (!a && (a = calloc(1, sizeof *a))) {
        a->s = s;
        a->sync = CU_SYNC_POLICY_AUTO;
        a->next = sattrs;
        sattrs = a;
    }
    return a;
}

static CUresult stream_attr(CUstream s, CUstreamAttrID id, CUstreamAttrValue *get,
                            const CUstreamAttrValue *set)
{
    CUresult rc = check_stream(s);
    if (rc)
        return rc;
    struct dbl_sattr *a = sattr_of(s);
    if (!a || (!get && !set))
        return a ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
    switch (id) {
    case CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW:
        if (set) {
            const CUaccessPolicyWindow *w = &set->accessPolicyWindow;
            if (w->num_bytes && !dev_range((CUdeviceptr)(uintptr_t)w->base_ptr, w->num_bytes))
                return CUDA_ERROR_INVALID_VALUE;
            if (w->hitRatio < 0.0f || w->hitRatio > 1.0f)
                return CUDA_ERROR_INVALID_VALUE;
            a->window = *w;
        } else {
            get->accessPolicyWindow = a->window;
        }
        return CUDA_SUCCESS;
    case CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        if (set)
            a->sync = set->syncPolicy;
        else
            get->syncPolicy = a->sync;
        return CUDA_SUCCESS;
    case CU_STREAM_ATTRIBUTE_PRIORITY: {
        struct dbl_stream *st = (uintptr_t)s > 2 ? obj_get(s, K_STREAM) : NULL;
        if (set) {
            if (st)
                st->priority = set->priority;
        } else {
            get->priority = st ? st->priority : 0;
        }
        return CUDA_SUCCESS;
    }
    case CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        if (set)
            a->map = set->memSyncDomainMap;
        else
            get->memSyncDomainMap = a->map;
        return CUDA_SUCCESS;
    case CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN:
        if (set)
            a->domain = set->memSyncDomain;
        else
            get->memSyncDomain = a->domain;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr,
                                     const CUstreamAttrValue *value)
{
    LOCKED(stream_attr(hStream, attr, NULL, value));
}

EXPORT CUresult cuStreamGetAttribute(CUstream hStream, CUstreamAttrID attr,
                                     CUstreamAttrValue *value_out)
{
    LOCKED(stream_attr(hStream, attr, value_out, NULL));
}

/* ---------- JIT linker ----------
 * Inputs are recorded, not compiled: PTX must be NUL-terminated text with a ".entry" (else the
 * error log says so), other input types are accepted as they are. The linked image is a bare
 * 64-bit ELF header (cuModuleLoadData accepts it; kernels are found by name in kernels.c as for
 * any image). The info log, when asked for, says how many inputs were linked; CU_JIT_WALL_TIME
 * reads 0.25 ms. */
struct dbl_link {
    struct dbl_link *next;
    unsigned n;
    CUjit_option *opts;
    void **vals;
    unsigned inputs;
    unsigned char image[64];
};
static struct dbl_link *links;

static struct dbl_link *link_of(CUlinkState s)
{
    struct dbl_link *l = links;
    while (l && (void *)l != (void *)s)
        l = l->next;
    return l;
}

/* Writes text into the log buffer of option buf_opt (its size option says how large). */
static void link_log(struct dbl_link *l, CUjit_option buf_opt, CUjit_option size_opt,
                     const char *text)
{
    char *buf = NULL;
    size_t cap = 0;
    for (unsigned i = 0; i < l->n; i++) {
        if (l->opts[i] == buf_opt)
            buf = l->vals[i];
        else if (l->opts[i] == size_opt)
            cap = (unsigned)(uintptr_t)l->vals[i];
    }
    if (!buf || !cap)
        return;
    snprintf(buf, cap, "%s", text);
    for (unsigned i = 0; i < l->n; i++)
        if (l->opts[i] == size_opt)
            l->vals[i] = (void *)(uintptr_t)(strlen(buf) + 1);
}

static CUresult link_create(unsigned n, CUjit_option *opts, void **vals, CUlinkState *out)
{
    if (!out || (n && (!opts || !vals)))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_link *l = calloc(1, sizeof *l);
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    l->n = n;
    l->opts = opts;
    l->vals = vals;
    l->next = links;
    links = l;
    *out = (CUlinkState)l;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                CUlinkState *stateOut)
{
    LOCKED(link_create(numOptions, options, optionValues, stateOut));
}

static CUresult link_add(CUlinkState s, CUjitInputType type, void *data, size_t size)
{
    struct dbl_link *l = link_of(s);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!data || !size)
        return CUDA_ERROR_INVALID_VALUE;
    if (type == CU_JIT_INPUT_PTX &&
        (((const char *)data)[size - 1] != 0 || !strstr((const char *)data, ".entry"))) {
        link_log(l, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                 "sluice-double: PTX input has no .entry");
        return CUDA_ERROR_INVALID_PTX;
    }
    l->inputs++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                 const char *name, unsigned int numOptions, CUjit_option *options,
                                 void **optionValues)
{
    (void)name, (void)numOptions, (void)options, (void)optionValues;
    LOCKED(link_add(state, type, data, size));
}

static CUresult link_complete(CUlinkState s, void **cubin, size_t *size)
{
    struct dbl_link *l = link_of(s);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!cubin || !size || !l->inputs)
        return CUDA_ERROR_INVALID_VALUE;
    memset(l->image, 0, sizeof l->image);
    memcpy(l->image,
           "\x7f"
           "ELF\x02\x01\x01",
           7);
    uint16_t ehsize = 64;
    memcpy(l->image + 52, &ehsize, 2);
    char text[96];
    snprintf(text, sizeof text, "sluice-double: linked %u input(s)", l->inputs);
    link_log(l, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, text);
    for (unsigned i = 0; i < l->n; i++)
        if (l->opts[i] == CU_JIT_WALL_TIME) {
            float ms = 0.25f;
            memcpy(&l->vals[i], &ms, sizeof ms);
        }
    *cubin = l->image;
    *size = sizeof l->image;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    LOCKED(link_complete(state, cubinOut, sizeOut));
}

static CUresult link_destroy(CUlinkState s)
{
    for (struct dbl_link **p = &links; *p; p = &(*p)->next)
        if ((void *)*p == (void *)s) {
            struct dbl_link *l = *p;
            *p = l->next;
            free(l);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuLinkDestroy(CUlinkState state)
{
    LOCKED(link_destroy(state));
}

/* ---------- virtual memory management ----------
 * Real virtual memory: a reservation is an inaccessible mapping of the double's process, a
 * physical allocation a memfd, cuMemMap maps the memfd over the reservation, cuMemUnmap makes it
 * inaccessible again. Mapped ranges are device memory for copies and kernels (allocations of
 * kind A_REGISTERED, which the double never frees itself; adjacent mappings are one range).
 * Granularity: 2 MiB. */
#define DBL_VMM_GRAN ((size_t)2 << 20)
struct dbl_vres {
    struct dbl_vres *next;
    uintptr_t base;
    size_t size;
};
struct dbl_vmem {
    struct dbl_vmem *next;
    int fd;
    size_t size;
    CUmemAllocationProp prop;
};
struct dbl_vmap {
    struct dbl_vmap *next;
    uintptr_t base;
    size_t size;
};
static struct dbl_vres *vres;
static struct dbl_vmem *vmems;
static struct dbl_vmap *vmaps;
static struct dbl_ctx vmm_owner; /* marks the allocation entries of mapped ranges */

static CUresult vmm_prop(const CUmemAllocationProp *p)
{
    if (!p || p->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->location.type != CU_MEM_LOCATION_TYPE_DEVICE || check_dev(p->location.id))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option)
{
    (void)option;
    if (!granularity || vmm_prop(prop))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = DBL_VMM_GRAN;
    return CUDA_SUCCESS;
}

static CUresult vmm_reserve(CUdeviceptr *ptr, size_t size, size_t align)
{
    if (!ptr || !size || size % DBL_VMM_GRAN || (align && align % DBL_VMM_GRAN))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_vres *r = calloc(1, sizeof *r);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->base = (uintptr_t)p;
    r->size = size;
    r->next = vres;
    vres = r;
    *ptr = (CUdeviceptr)r->base;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags)
{
    (void)addr, (void)flags;
    LOCKED(vmm_reserve(ptr, size, alignment));
}

static struct dbl_vres *vres_of(uintptr_t p, size_t n)
{
    for (struct dbl_vres *r = vres; r; r = r->next)
        if (p >= r->base && p - r->base <= r->size && n <= r->size - (p - r->base))
            return r;
    return NULL;
}

/* The allocation entries of the mapped ranges: adjacent mappings are one range (a copy or a
 * kernel may cross from one into the next). */
static CUresult vmm_sync(void)
{
    for (size_t i = 0; i < nallocs;)
        if (allocs[i].ctx == &vmm_owner)
            alloc_release(i);
        else
            i++;
    for (struct dbl_vmap *m = vmaps; m; m = m->next) {
        bool starts = true;
        for (struct dbl_vmap *o = vmaps; o; o = o->next)
            if (o->base + o->size == m->base)
                starts = false;
        if (!starts)
            continue;
        size_t size = m->size;
        for (bool grew = true; grew;) {
            grew = false;
            for (struct dbl_vmap *o = vmaps; o; o = o->next)
                if (o->base == m->base + size) {
                    size += o->size;
                    grew = true;
                }
        }
        if (nallocs == capallocs) {
            size_t cap = capallocs ? capallocs * 2 : 64;
            struct dbl_alloc *na = realloc(allocs, cap * sizeof *na);
            if (!na)
                return CUDA_ERROR_OUT_OF_MEMORY;
            allocs = na;
            capallocs = cap;
        }
        allocs[nallocs++] = (struct dbl_alloc){m->base, size, A_REGISTERED, &vmm_owner};
    }
    return CUDA_SUCCESS;
}

/* Forgets the mappings inside [p, p + n). */
static CUresult vmm_forget(uintptr_t p, size_t n)
{
    for (struct dbl_vmap **pp = &vmaps; *pp;) {
        if ((*pp)->base >= p && (*pp)->base - p < n) {
            struct dbl_vmap *m = *pp;
            *pp = m->next;
            free(m);
        } else {
            pp = &(*pp)->next;
        }
    }
    return vmm_sync();
}

static CUresult vmm_free(CUdeviceptr ptr, size_t size)
{
    for (struct dbl_vres **pp = &vres; *pp; pp = &(*pp)->next)
        if ((*pp)->base == ptr && (*pp)->size == size) {
            struct dbl_vres *r = *pp;
            (void)vmm_forget(r->base, r->size);
            munmap((void *)r->base, r->size);
            *pp = r->next;
            free(r);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    LOCKED(vmm_free(ptr, size));
}

static CUresult vmm_create(CUmemGenericAllocationHandle *h, size_t size,
                           const CUmemAllocationProp *prop)
{
    if (!h || !size || size % DBL_VMM_GRAN || vmm_prop(prop))
        return CUDA_ERROR_INVALID_VALUE;
    if (size > mem_total - mem_used)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct dbl_vmem *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->fd = memfd_create("sluice-double-vmm", MFD_CLOEXEC);
    if (m->fd < 0 || ftruncate(m->fd, (off_t)size) != 0) {
        if (m->fd >= 0)
            close(m->fd);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->size = size;
    m->prop = *prop;
    m->next = vmems;
    vmems = m;
    *h = (CUmemGenericAllocationHandle)(uintptr_t)m;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(vmm_create(handle, size, prop));
}

static struct dbl_vmem *vmem_of(CUmemGenericAllocationHandle h)
{
    for (struct dbl_vmem *m = vmems; m; m = m->next)
        if ((uintptr_t)m == h)
            return m;
    return NULL;
}

static CUresult vmm_release(CUmemGenericAllocationHandle h)
{
    for (struct dbl_vmem **pp = &vmems; *pp; pp = &(*pp)->next)
        if ((uintptr_t)*pp == h) {
            struct dbl_vmem *m = *pp;
            close(m->fd); /* mappings keep the memory */
            *pp = m->next;
            free(m);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    LOCKED(vmm_release(handle));
}

static CUresult vmm_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h)
{
    struct dbl_vmem *m = vmem_of(h);
    if (!m || !size || size % DBL_VMM_GRAN || offset % DBL_VMM_GRAN || offset > m->size ||
        size > m->size - offset || !vres_of(ptr, size) || alloc_find(ptr, 1) ||
        alloc_find(ptr + size - 1, 1))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_vmap *v = calloc(1, sizeof *v);
    if (!v)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                   m->fd, (off_t)offset);
    if (p == MAP_FAILED) {
        free(v);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    v->base = ptr;
    v->size = size;
    v->next = vmaps;
    vmaps = v;
    return vmm_sync();
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(vmm_map(ptr, size, offset, handle));
}

static CUresult vmm_unmap(CUdeviceptr ptr, size_t size)
{
    if (!size || !vres_of(ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = vmm_forget(ptr, size);
    if (rc)
        return rc;
    void *p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return p == MAP_FAILED ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    LOCKED(vmm_unmap(ptr, size));
}

static CUresult vmm_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *d, size_t n)
{
    if (!d || !n || !vres_of(ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++)
        if (d[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || check_dev(d[i].location.id))
            return CUDA_ERROR_INVALID_DEVICE;
    for (size_t off = 0; off < size; off += DBL_VMM_GRAN)
        if (!alloc_find(ptr + off, 1))
            return CUDA_ERROR_INVALID_VALUE; /* not mapped */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                               size_t count)
{
    LOCKED(vmm_set_access(ptr, size, desc, count));
}

static CUresult vmm_get_access(unsigned long long *flags, const CUmemLocation *loc, CUdeviceptr ptr)
{
    if (!flags || !loc || loc->type != CU_MEM_LOCATION_TYPE_DEVICE || check_dev(loc->id) ||
        !vres_of(ptr, 1))
        return CUDA_ERROR_INVALID_VALUE;
    *flags =
        alloc_find(ptr, 1) ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                               CUdeviceptr ptr)
{
    LOCKED(vmm_get_access(flags, location, ptr));
}

static CUresult vmm_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h)
{
    struct dbl_vmem *m = vmem_of(h);
    if (!m || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    *prop = m->prop;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                       CUmemGenericAllocationHandle handle)
{
    LOCKED(vmm_props(prop, handle));
}
