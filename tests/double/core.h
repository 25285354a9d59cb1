/* What the other files of the double use of core.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_CORE_H
#define SLUICE_DOUBLE_CORE_H

#include "double.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
    bool loaded; /* asked for by name (cuModuleGetFunction, cuLibraryGetKernel) */
};

enum alloc_kind {
    A_DEVICE = 1,
    A_HOST,
    A_GLOBAL,
    A_REGISTERED, /* not ours: never freed */
    A_MANAGED,    /* mapped pages of their own (managed_map) */
    A_IPC         /* another process's allocation, mapped by cuIpcOpenMemHandle (ipc.c) */
};

struct dbl_alloc {
    uintptr_t base;
    size_t size;
    enum alloc_kind kind;
    struct dbl_ctx *ctx;
    /* A_MANAGED: the advice given and the last prefetch (cuMemRangeGetAttribute answers them) */
    int read_mostly;
    CUmemLocation preferred, last_prefetch; /* type 0 (INVALID): none */
    unsigned accessed_by;                   /* bit 0: the host, bit 1: device 0 */
    int ipc_fd1; /* A_DEVICE exported by cuIpcGetMemHandle: 1 + its memfd (ipc.c); 0: none */
};

void obj_add(void *o);

void obj_del(void *o);

/* Never dereferences p unless it is one of ours. */
void *obj_get(const void *p, enum dbl_kind kind);

struct dbl_alloc *alloc_find(uintptr_t p, size_t len);

CUresult alloc_new(size_t size, enum alloc_kind kind, struct dbl_ctx *ctx, uintptr_t *out);

void alloc_release(size_t i);

CUresult alloc_free(uintptr_t p, enum alloc_kind kind);

/* Frees a loaded image: its functions, its globals' allocations, the image object. */
void image_free(struct dbl_image *img);
/* Frees everything a context owns (destroy, primary release/reset). */
void ctx_drop_resources(struct dbl_ctx *c);

#define LOCKED(expr)                                                                               \
    do {                                                                                           \
        dbl_lock();                                                                                \
        CUresult rc_ = (expr);                                                                     \
        dbl_unlock();                                                                              \
        return rc_;                                                                                \
    } while (0)

/* The synchronize calls sleep, outside the lock, until the simulated work ends (timing.c). */
#define LOCKED_THEN_SLEEP(expr, until)                                                             \
    do {                                                                                           \
        double until_ = 0;                                                                         \
        dbl_lock();                                                                                \
        CUresult rc_ = (expr);                                                                     \
        if (rc_ == CUDA_SUCCESS)                                                                   \
            until_ = (until);                                                                      \
        dbl_unlock();                                                                              \
        dbl_time_sleep_until(until_);                                                              \
        return rc_;                                                                                \
    } while (0)

const struct dbl_alloc *alloc_containing(uintptr_t p);
CUresult alloc_add(uintptr_t base, size_t size, enum alloc_kind kind, struct dbl_ctx *ctx);
/* Maps n bytes of the shared memory object fd where device allocations go (ipc.c); NULL or
 * the address. */
void *dev_map_fd(size_t n, int fd);
void alloc_release_owner(struct dbl_ctx *ctx);
/* The object table, for a walk over every object. */
size_t obj_count(void);
void *obj_at(size_t i);
/* The double's one lock: every entry point takes it (LOCKED) around its work. */
void dbl_lock(void);
void dbl_unlock(void);
bool dbl_initialized(void);
void dbl_init(void);
size_t dbl_mem_total(void);
size_t dbl_mem_used(void);

/* Stream capture, reached through the hooks capture.c installs when a capture begins: capture.c
 * builds on the graphs, and the graphs, copies and launches reach back to the capture, so they
 * go through core instead of including capture.h (no include circle: tests/style). Without a
 * capture begun, no stream is capturing. */
struct dbl_capture;
struct dbl_capture_hooks {
    struct dbl_capture *(*of)(CUstream s);
    CUresult (*kernel)(struct dbl_capture *c, const CUDA_KERNEL_NODE_PARAMS *kp);
    void (*state)(const struct dbl_capture *c, CUgraph *graph, cuuint64_t *id,
                  const CUgraphNode **deps, size_t *n);
    int (*invalid)(const struct dbl_capture *c);
    int (*invalidate_all)(void);
};
void dbl_capture_hooks_set(const struct dbl_capture_hooks *h);
struct dbl_capture *dbl_capture_of(CUstream s);
CUresult dbl_capture_kernel(struct dbl_capture *c, const CUDA_KERNEL_NODE_PARAMS *kp);
void dbl_capture_state(const struct dbl_capture *c, CUgraph *graph, cuuint64_t *id,
                       const CUgraphNode **deps, size_t *n);
int dbl_capture_invalid(const struct dbl_capture *c);
/* 1 (and every capture invalidated, as the driver does) when a capture runs: a context-wide
 * synchronization is prohibited then. */
int dbl_capture_forbid_ctx_sync(void);

#endif
