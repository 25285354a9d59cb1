/* libsluice-driver-double.so: a test double of the CUDA driver (libcuda.so.1) for the end-to-end
 * tests without a GPU. TEST DOUBLE, NEVER A GPU RESULT: "device" memory is host memory, kernels
 * are host implementations looked up by mangled name (kernels.c), execution is synchronous.
 * It exports the real ABI (cuda.h is included with __CUDA_API_VERSION_INTERNAL, so every
 * definition is checked against the real declaration of its versioned symbol) for the calls
 * sluice-backend needs to run tests/cuda/, one file per API family (README.md); everything else
 * is simply absent. Every handle and device pointer is checked against the double's own tables
 * first, so a bad one gives an error, never a crash. Environment: SLUICE_DOUBLE_MEM_MIB (device
 * memory, 4096).
 *
 * Here: those tables (every object it handed out, every allocation), its one lock and the
 * initialization cuInit asks for. */
#include "core.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static bool initialized;

static void **objs;

static size_t nobjs, capobjs;

static struct dbl_alloc *allocs;

static size_t nallocs, capallocs;

static size_t mem_total, mem_used;

void obj_add(void *o)
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

void obj_del(void *o)
{
    for (size_t i = 0; i < nobjs; i++)
        if (objs[i] == o) {
            objs[i] = objs[--nobjs];
            return;
        }
}

void *obj_get(const void *p, enum dbl_kind kind)
{
    if (!p)
        return NULL;
    for (size_t i = 0; i < nobjs; i++)
        if (objs[i] == p)
            return ((struct dbl_obj *)objs[i])->kind == kind ? objs[i] : NULL;
    return NULL;
}

struct dbl_alloc *alloc_find(uintptr_t p, size_t len)
{
    for (size_t i = 0; i < nallocs; i++) {
        struct dbl_alloc *a = &allocs[i];
        if (p >= a->base && p - a->base <= a->size && len <= a->size - (p - a->base))
            return a;
    }
    return NULL;
}

/* Managed memory: page-aligned pages in a region of their own, as a driver's addresses are,
 * since a Sluice guest maps the same address in its own process (frontend/call/managed.c). */
#define MANAGED_PAGES(n) (((n) + 4095) & ~(size_t)4095)
static uintptr_t managed_freed;  /* the last managed range freed: given again first, as a */
static size_t managed_freed_len; /* driver reuses its addresses */
/* len bytes of fresh memory exactly at hint, or NULL. */
static void *map_at(void *hint, size_t len)
{
    void *p = mmap(hint, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == hint)
        return p;
    if (p != MAP_FAILED)
        munmap(p, len);
    return NULL;
}

static void *managed_map(size_t size)
{
    static uintptr_t next = (uintptr_t)0x6f0000000000ull;
    size_t len = MANAGED_PAGES(size);
    void *p = managed_freed && len <= managed_freed_len ? map_at((void *)managed_freed, len) : NULL;
    managed_freed = 0;
    for (int tries = 0; tries < 64 && !p; tries++) {
        void *hint = (void *)next;
        next += (len + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
        p = map_at(hint, len);
    }
    return p;
}

/* Device memory lives at addresses of its own (from 48 TiB up), as a GPU's unified addresses
 * do: never where the guest's heap may be. Malloc'd device memory had the addresses of the
 * backend's heap, which a sanitized guest's heap shares (ASan's allocator regions), so the
 * frontend could not tell a device address from its own memory. */
#define DEV_BASE ((uintptr_t)0x300000000000ull)
static uintptr_t dev_next = DEV_BASE;

static size_t dev_span(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) & ~(pg - 1);
}

static void *dev_map(size_t n)
{
    void *p = mmap((void *)dev_next, dev_span(n), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if ((uintptr_t)p == dev_next)
        dev_next += dev_span(n) + dev_span(1); /* a guard page between allocations */
    return p;
}

void *dev_map_fd(size_t n, int fd)
{
    void *p = mmap((void *)dev_next, dev_span(n), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return NULL;
    if ((uintptr_t)p == dev_next)
        dev_next += dev_span(n) + dev_span(1);
    return p;
}

CUresult alloc_new(size_t size, enum alloc_kind kind, struct dbl_ctx *ctx, uintptr_t *out)
{
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t rounded = (size + 255) & ~(size_t)255;
    if (rounded < size)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (kind != A_HOST && rounded > mem_total - mem_used)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = kind == A_HOST      ? aligned_alloc(256, rounded)
              : kind == A_MANAGED ? managed_map(rounded)
                                  : dev_map(rounded);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, 0, rounded);
    if (nallocs == capallocs) {
        size_t cap = capallocs ? capallocs * 2 : 64;
        struct dbl_alloc *n = realloc(allocs, cap * sizeof *n);
        if (!n) {
            if (kind == A_HOST)
                free(p);
            else if (kind == A_MANAGED)
                munmap(p, MANAGED_PAGES(rounded));
            else
                munmap(p, dev_span(rounded));
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        allocs = n;
        capallocs = cap;
    }
    allocs[nallocs++] =
        (struct dbl_alloc){.base = (uintptr_t)p, .size = size, .kind = kind, .ctx = ctx};
    if (kind != A_HOST)
        mem_used += rounded;
    *out = (uintptr_t)p;
    return CUDA_SUCCESS;
}

void alloc_release(size_t i)
{
    if (allocs[i].kind != A_HOST && allocs[i].kind != A_REGISTERED && allocs[i].kind != A_IPC)
        mem_used -= (allocs[i].size + 255) & ~(size_t)255;
    if (allocs[i].ipc_fd1)
        close(allocs[i].ipc_fd1 - 1); /* no process opens it any more (those that did keep it) */
    if (allocs[i].kind == A_MANAGED) {
        managed_freed = allocs[i].base;
        managed_freed_len = MANAGED_PAGES((allocs[i].size + 255) & ~(size_t)255);
        munmap((void *)allocs[i].base, managed_freed_len);
    } else if (allocs[i].kind == A_HOST)
        free((void *)allocs[i].base);
    else if (allocs[i].kind != A_REGISTERED)
        munmap((void *)allocs[i].base, dev_span((allocs[i].size + 255) & ~(size_t)255));
    allocs[i] = allocs[--nallocs];
}

CUresult alloc_free(uintptr_t p, enum alloc_kind kind)
{
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].base == p && allocs[i].kind == kind) {
            alloc_release(i);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

void image_free(struct dbl_image *img)
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

void ctx_drop_resources(struct dbl_ctx *c)
{
    alloc_release_owner(c);
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

/* The non-host allocation with p inside it, or NULL (cuMemGetAddressRange). */
const struct dbl_alloc *alloc_containing(uintptr_t p)
{
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].kind != A_HOST && p >= allocs[i].base && p - allocs[i].base < allocs[i].size)
            return &allocs[i];
    return NULL;
}

/* An entry for memory that is not the double's own (registered host memory, VMM mappings). */
CUresult alloc_add(uintptr_t base, size_t size, enum alloc_kind kind, struct dbl_ctx *ctx)
{
    if (nallocs == capallocs) {
        size_t cap = capallocs ? capallocs * 2 : 64;
        struct dbl_alloc *na = realloc(allocs, cap * sizeof *na);
        if (!na)
            return CUDA_ERROR_OUT_OF_MEMORY;
        allocs = na;
        capallocs = cap;
    }
    allocs[nallocs++] = (struct dbl_alloc){.base = base, .size = size, .kind = kind, .ctx = ctx};
    return CUDA_SUCCESS;
}

/* Releases every allocation entry of owner ctx. */
void alloc_release_owner(struct dbl_ctx *ctx)
{
    for (size_t i = 0; i < nallocs;)
        if (allocs[i].ctx == ctx)
            alloc_release(i);
        else
            i++;
}

size_t obj_count(void)
{
    return nobjs;
}

void *obj_at(size_t i)
{
    return objs[i];
}

void dbl_lock(void)
{
    pthread_mutex_lock(&lock);
}

void dbl_unlock(void)
{
    pthread_mutex_unlock(&lock);
}

bool dbl_initialized(void)
{
    return initialized;
}

/* cuInit: the device memory bound (SLUICE_DOUBLE_MEM_MIB), once. */
void dbl_init(void)
{
    pthread_mutex_lock(&lock);
    if (!initialized) {
        const char *mib = getenv("SLUICE_DOUBLE_MEM_MIB");
        size_t m = mib ? strtoull(mib, NULL, 10) : 4096;
        mem_total = (m ? m : 4096) << 20;
        initialized = true;
    }
    pthread_mutex_unlock(&lock);
}

size_t dbl_mem_total(void)
{
    return mem_total;
}

size_t dbl_mem_used(void)
{
    return mem_used;
}

static const struct dbl_capture_hooks *capture_hooks;

void dbl_capture_hooks_set(const struct dbl_capture_hooks *h)
{
    capture_hooks = h;
}

struct dbl_capture *dbl_capture_of(CUstream s)
{
    return capture_hooks ? capture_hooks->of(s) : NULL;
}

CUresult dbl_capture_kernel(struct dbl_capture *c, const CUDA_KERNEL_NODE_PARAMS *kp)
{
    return capture_hooks ? capture_hooks->kernel(c, kp) : CUDA_ERROR_ILLEGAL_STATE;
}

void dbl_capture_state(const struct dbl_capture *c, CUgraph *graph, cuuint64_t *id,
                       const CUgraphNode **deps, size_t *n)
{
    if (capture_hooks)
        capture_hooks->state(c, graph, id, deps, n);
}

int dbl_capture_invalid(const struct dbl_capture *c)
{
    return capture_hooks && c && capture_hooks->invalid(c);
}

int dbl_capture_forbid_ctx_sync(void)
{
    return capture_hooks && capture_hooks->invalidate_all() > 0;
}
