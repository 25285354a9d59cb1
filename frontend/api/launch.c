/* Kernel launches (docs/remoting.md "Modules, libraries and launches"): the parameter layout of
 * each function or kernel comes once from the backend (slParamLayout) and is cached by handle;
 * kernelParams are packed at their offsets into one buffer sent as bulk (or the `extra`
 * buffer as given). Launches are async: they ride in the pending CallFrame. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "api/launch.h"
#include "api/launch_check.h"
#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define BUCKETS   256
#define PARAM_MAX ((size_t)1 << 20)

struct layout_entry {
    struct layout_entry *next;
    uint64_t f;
    struct sl_fe_param_layout l;
};

static struct layout_entry *g_layouts[BUCKETS];
static pthread_mutex_t g_layout_lock = PTHREAD_MUTEX_INITIALIZER;

void sl_fe_layout_cache_clear(void)
{
    pthread_mutex_lock(&g_layout_lock);
    for (int b = 0; b < BUCKETS; b++) {
        struct layout_entry *e = g_layouts[b];
        while (e) {
            struct layout_entry *n = e->next;
            free(e->l.offsets);
            free(e->l.sizes);
            free(e);
            e = n;
        }
        g_layouts[b] = NULL;
    }
    pthread_mutex_unlock(&g_layout_lock);
}

static unsigned bucket_of(uint64_t f)
{
    return (unsigned)((f * 0x9e3779b97f4a7c15ull) >> 56) % BUCKETS;
}

static const struct sl_fe_param_layout *find_layout(uint64_t f)
{
    const struct sl_fe_param_layout *l = NULL;
    pthread_mutex_lock(&g_layout_lock);
    for (struct layout_entry *e = g_layouts[bucket_of(f)]; e; e = e->next)
        if (e->f == f)
            l = &e->l;
    pthread_mutex_unlock(&g_layout_lock);
    return l;
}

/* Checks n offsets and sizes (as the backend answers a layout) and keeps them for f, unless f
 * has one already; *out: the kept layout. CUDA_ERROR_UNKNOWN for a layout that does not check
 * out. */
static CUresult keep_layout(uint64_t f, size_t n_offsets, const uint64_t *offsets, size_t n_sizes,
                            const uint64_t *sizes, const struct sl_fe_param_layout **out)
{
    if (n_offsets != n_sizes || n_offsets > 4096 || (n_offsets && (!offsets || !sizes)))
        return CUDA_ERROR_UNKNOWN;
    struct layout_entry *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->f = f;
    e->l.count = (uint32_t)n_offsets;
    e->l.offsets = calloc(n_offsets ? n_offsets : 1, sizeof(size_t));
    e->l.sizes = calloc(n_offsets ? n_offsets : 1, sizeof(size_t));
    CUresult rc = e->l.offsets && e->l.sizes ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n_offsets; i++) {
        if (offsets[i] > PARAM_MAX || sizes[i] > PARAM_MAX) {
            rc = CUDA_ERROR_UNKNOWN;
            break;
        }
        e->l.offsets[i] = (size_t)offsets[i];
        e->l.sizes[i] = (size_t)sizes[i];
        if (e->l.offsets[i] + e->l.sizes[i] > e->l.total)
            e->l.total = e->l.offsets[i] + e->l.sizes[i];
    }
    if (rc != CUDA_SUCCESS) {
        free(e->l.offsets);
        free(e->l.sizes);
        free(e);
        return rc;
    }
    pthread_mutex_lock(&g_layout_lock);
    unsigned b = bucket_of(f);
    struct layout_entry *had = g_layouts[b];
    while (had && had->f != f)
        had = had->next;
    if (!had) {
        e->next = g_layouts[b];
        g_layouts[b] = e;
    }
    pthread_mutex_unlock(&g_layout_lock);
    if (had) { /* another thread kept it first: the same answer */
        free(e->l.offsets);
        free(e->l.sizes);
        free(e);
        e = had;
    }
    *out = &e->l;
    return CUDA_SUCCESS;
}

void sl_fe_layout_seed(uint64_t f, int given, size_t n_offsets, const uint64_t *offsets,
                       size_t n_sizes, const uint64_t *sizes)
{
    const struct sl_fe_param_layout *l;
    if (given && !find_layout(f))
        (void)keep_layout(f, n_offsets, offsets, n_sizes, sizes, &l); /* else: the launch asks */
}

static CUresult get_layout(uint64_t f, const struct sl_fe_param_layout **out)
{
    if ((*out = find_layout(f)))
        return CUDA_SUCCESS;
    Sluice__Cuda__SlParamLayoutRequest req = SLUICE__CUDA__SL_PARAM_LAYOUT_REQUEST__INIT;
    req.f = f;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(slParamLayout, &call, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    const Sluice__Cuda__SlParamLayoutReply *o = SL_FE_REPLY(slParamLayout, rep);
    if (rc == CUDA_SUCCESS && (!o || o->n_offsets != o->count))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        rc = keep_layout(f, o->n_offsets, o->offsets, o->n_sizes, o->sizes, out);
    sl_fe_reply_free(rep);
    return rc;
}

size_t sl_fe_pack_params(const struct sl_fe_param_layout *l, void **params, uint8_t *buf,
                         size_t cap)
{
    if (l->total > cap)
        return 0;
    memset(buf, 0, l->total);
    for (uint32_t i = 0; i < l->count; i++) {
        if (!l->sizes[i])
            continue;
        if (!params[i])
            return 0;
        memcpy(buf + l->offsets[i], params[i], l->sizes[i]);
    }
    return l->total;
}

int sl_fe_parse_extra(void **extra, const void **buf, size_t *len)
{
    const void *b = NULL;
    size_t n = 0;
    int have_size = 0;
    for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (i > 64)
            return -1;
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            b = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
            if (!extra[i + 1])
                return -1;
            n = *(size_t *)extra[i + 1];
            have_size = 1;
        } else
            return -1;
    }
    if (!have_size || (n && !b) || n > PARAM_MAX)
        return -1;
    *buf = b;
    *len = n;
    return 0;
}

/* The parameter bytes of a launch: packed kernelParams (into *heap if large) or extra. */
static CUresult param_bytes(uint64_t f, void **kernelParams, void **extra, uint8_t *stackbuf,
                            size_t stackcap, uint8_t **heap, const void **bytes, size_t *len,
                            int *is_extra)
{
    *heap = NULL;
    *bytes = NULL;
    *len = 0;
    *is_extra = 0;
    if (kernelParams) {
        const struct sl_fe_param_layout *l;
        CUresult rc = get_layout(f, &l);
        if (rc != CUDA_SUCCESS)
            return rc;
        uint8_t *buf = stackbuf;
        if (l->total > stackcap) {
            buf = *heap = malloc(l->total);
            if (!buf)
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        size_t n =
            sl_fe_pack_params(l, kernelParams, buf, l->total > stackcap ? l->total : stackcap);
        if (!n && l->total)
            return CUDA_ERROR_INVALID_VALUE;
        *bytes = buf;
        *len = n;
        return CUDA_SUCCESS;
    }
    if (extra) {
        if (sl_fe_parse_extra(extra, bytes, len))
            return CUDA_ERROR_INVALID_VALUE;
        *is_extra = 1;
    }
    return CUDA_SUCCESS;
}

static CUresult launch(bool ptsz, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shmem, CUstream s, void **kernelParams,
                       void **extra, int cooperative)
{
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (kernelParams && extra)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sl_fe_launch_check(gx, gy, gz, bx, by, bz, shmem);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint8_t stackbuf[4096];
    uint8_t *heap;
    const void *bytes;
    size_t len;
    int is_extra;
    uint64_t fid = (uint64_t)(uintptr_t)f;
    rc = param_bytes(fid, kernelParams, extra, stackbuf, sizeof stackbuf, &heap, &bytes, &len,
                     &is_extra);
    if (rc != CUDA_SUCCESS) {
        free(heap);
        return rc;
    }
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.per_thread_stream = ptsz;
    Sluice__Cuda__CuLaunchKernelRequest req = SLUICE__CUDA__CU_LAUNCH_KERNEL_REQUEST__INIT;
    Sluice__Cuda__CuLaunchCooperativeKernelRequest creq =
        SLUICE__CUDA__CU_LAUNCH_COOPERATIVE_KERNEL_REQUEST__INIT;
    if (cooperative) {
        creq.f = fid;
        creq.grid_dim_x = gx, creq.grid_dim_y = gy, creq.grid_dim_z = gz;
        creq.block_dim_x = bx, creq.block_dim_y = by, creq.block_dim_z = bz;
        creq.shared_mem_bytes = shmem;
        creq.h_stream = (uint64_t)(uintptr_t)s;
        creq.kernel_params = len;
        SL_FE_SET(cuLaunchCooperativeKernel, &call, &creq);
    } else {
        req.f = fid;
        req.grid_dim_x = gx, req.grid_dim_y = gy, req.grid_dim_z = gz;
        req.block_dim_x = bx, req.block_dim_y = by, req.block_dim_z = bz;
        req.shared_mem_bytes = shmem;
        req.h_stream = (uint64_t)(uintptr_t)s;
        if (is_extra)
            req.extra = len;
        else
            req.kernel_params = len;
        SL_FE_SET(cuLaunchKernel, &call, &req);
    }
    struct iovec iov = {(void *)bytes, len};
    rc = sl_fe_enqueue_async_bulk(&call, &iov, len ? 1 : 0);
    free(heap);
    return rc;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra)
{
    return launch(false, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  sharedMemBytes, hStream, kernelParams, extra, 0);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void **kernelParams, void **extra)
{
    return launch(true, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  sharedMemBytes, hStream, kernelParams, extra, 0);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams)
{
    return launch(false, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  sharedMemBytes, hStream, kernelParams, NULL, 1);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX,
                                        unsigned int blockDimY, unsigned int blockDimZ,
                                        unsigned int sharedMemBytes, CUstream hStream,
                                        void **kernelParams)
{
    return launch(true, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  sharedMemBytes, hStream, kernelParams, NULL, 1);
}

static CUresult launch_ex(bool ptsz, const CUlaunchConfig *config, CUfunction f,
                          void **kernelParams, void **extra)
{
    if (!config || !f)
        return CUDA_ERROR_INVALID_VALUE;
    if (config->numAttrs && !config->attrs)
        return CUDA_ERROR_INVALID_VALUE;
    if (config->numAttrs > 64)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sl_fe_launch_check_config(config);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint8_t stackbuf[4096];
    uint8_t *heap;
    const void *bytes;
    size_t len;
    int is_extra;
    uint64_t fid = (uint64_t)(uintptr_t)f;
    rc = param_bytes(fid, kernelParams, extra, stackbuf, sizeof stackbuf, &heap, &bytes, &len,
                     &is_extra);
    if (rc != CUDA_SUCCESS) {
        free(heap);
        return rc;
    }
    CUlaunchConfig cfg = *config;
    cfg.attrs = NULL; /* the attributes follow the parameter bytes in the bulk */
    Sluice__Cuda__CuLaunchKernelExRequest req = SLUICE__CUDA__CU_LAUNCH_KERNEL_EX_REQUEST__INIT;
    req.config.data = (uint8_t *)&cfg;
    req.config.len = sizeof cfg;
    req.f = fid;
    if (is_extra)
        req.extra = len;
    else
        req.kernel_params = len;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.per_thread_stream = ptsz;
    SL_FE_SET(cuLaunchKernelEx, &call, &req);
    struct iovec iov[2] = {{(void *)bytes, len},
                           {config->attrs, config->numAttrs * sizeof(CUlaunchAttribute)}};
    rc = sl_fe_enqueue_async_bulk(&call, iov, 2);
    free(heap);
    return rc;
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                          void **extra)
{
    return launch_ex(false, config, f, kernelParams, extra);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                               void **extra)
{
    return launch_ex(true, config, f, kernelParams, extra);
}

CUresult sl_fe_param_bytes(uint64_t f, void **kernelParams, void **extra, uint8_t *stackbuf,
                           size_t stackcap, uint8_t **heap, const void **bytes, size_t *len)
{
    int is_extra;
    return param_bytes(f, kernelParams, extra, stackbuf, stackcap, heap, bytes, len, &is_extra);
}
