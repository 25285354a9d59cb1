/* The kernels of a library, or the functions of a module, with its load (slLoadImage;
 * docs/remoting.md "Modules, libraries and launches"). cudart loads a program's modules as
 * libraries at their first use and then asks cuLibraryGetKernel for the kernel it launches; a
 * program of the driver API (a JIT: NVRTC, Triton) loads a module and asks cuModuleGetFunction:
 * one more round trip, while the GPU waits, before the first launch of any kernel of a new
 * module (run 27: 0.31-0.55 ms of GPU time, the goal 0.3). For a small image the load's answer
 * lists every kernel or function with its id and layout; the frontend keeps them as those
 * calls' answers (its memo) and launches without asking. A kernel's layout loads it into the
 * current context (be_layout_get), so only small images are listed: a framework's library of
 * thousands of kernels is not loaded whole. */
#include <stdlib.h>
#include <string.h>

#include "api/image_kernels.h"
#include "api/launch.h"
#include "session/handles.h"
#include "session/streams.h"
#include "sluice/backend_hooks.h"
#include "sluice/wire.h"

/* What the reply's kernel_* fields get (malloc'd: the reply frees them). */
struct listing {
    uint8_t *names;
    size_t names_len;
    uint64_t *handles;
    uint32_t *counts;
    uint64_t *offsets, *sizes;
    size_t nparams;
};

/* One listed kernel or function: its name, then what the get call answers for that name (an
 * enumerated function may be one lazy loading has not loaded: CUDA_ERROR_FUNCTION_NOT_LOADED
 * from cuFuncGetAttribute on the H200, run 27; cuModuleGetFunction loads it) registered as that
 * call registers it, and its layout. */
static int add_one(sl_be_session *s, struct listing *x, unsigned i, uint64_t parent, void *image,
                   void *listed, int library)
{
    const struct sl_driver_api *api = s->api;
    const char *name = NULL;
    void *got = NULL;
    uint64_t id = 0;
    struct be_layout *l;
    void *h;
    CUresult rc = library ? api->cuKernelGetName(&name, (CUkernel)listed)
                          : api->cuFuncGetName(&name, (CUfunction)listed);
    if (rc == CUDA_SUCCESS && name)
        rc = library ? api->cuLibraryGetKernel((CUkernel *)&got, (CUlibrary)image, name)
                     : api->cuModuleGetFunction((CUfunction *)&got, (CUmodule)image, name);
    if (rc != CUDA_SUCCESS || !name || !got ||
        sl_be_handle_put(s, library ? SL_H_KERNEL : SL_H_FUNCTION, got, parent, &id) !=
            CUDA_SUCCESS ||
        be_layout_get(s, id, &l, &h) != CUDA_SUCCESS)
        return -1;
    size_t nl = strnlen(name, SL_WIRE_MAX_STRING - 1) + 1;
    uint8_t *names = realloc(x->names, x->names_len + nl);
    if (names)
        x->names = names;
    uint64_t *o = realloc(x->offsets, (x->nparams + l->count + 1) * sizeof *o);
    if (o)
        x->offsets = o;
    uint64_t *z = realloc(x->sizes, (x->nparams + l->count + 1) * sizeof *z);
    if (z)
        x->sizes = z;
    if (!names || !o || !z)
        return -1;
    memcpy(x->names + x->names_len, name, nl - 1);
    x->names[x->names_len + nl - 1] = '\0';
    x->names_len += nl;
    if (l->count) { /* a kernel without parameters has no arrays to copy */
        memcpy(x->offsets + x->nparams, l->offsets, l->count * sizeof *o);
        memcpy(x->sizes + x->nparams, l->sizes, l->count * sizeof *z);
    }
    x->nparams += l->count;
    x->handles[i] = id;
    x->counts[i] = l->count;
    return 0;
}

/* The image's kernels (library) or functions (module): 1 when all n of them are in x. */
static int list_all(sl_be_session *s, struct listing *x, uint64_t id, void *native, int library,
                    unsigned *n)
{
    const struct sl_driver_api *api = s->api;
    void *all[SL_WIRE_MAX_IMAGE_KERNELS];
    CUresult rc = library ? api->cuLibraryGetKernelCount(n, (CUlibrary)native)
                          : api->cuModuleGetFunctionCount(n, (CUmodule)native);
    if (rc != CUDA_SUCCESS || *n == 0 || *n > SL_WIRE_MAX_IMAGE_KERNELS ||
        !(x->handles = malloc(*n * sizeof *x->handles)) ||
        !(x->counts = malloc(*n * sizeof *x->counts)))
        return 0;
    rc = library ? api->cuLibraryEnumerateKernels((CUkernel *)all, *n, (CUlibrary)native)
                 : api->cuModuleEnumerateFunctions((CUfunction *)all, *n, (CUmodule)native);
    for (unsigned i = 0; rc == CUDA_SUCCESS && i < *n; i++)
        if (add_one(s, x, i, id, native, all[i], library) != 0)
            return 0;
    return rc == CUDA_SUCCESS;
}

void be_image_kernels_out(sl_be_session *s, uint64_t id, void *native, int library,
                          Sluice__Cuda__SlLoadImageReply *rp)
{
    const struct sl_driver_api *api = s->api;
    CUcontext ctx = NULL;
    unsigned n = 0;
    int can = library ? api->cuLibraryGetKernelCount && api->cuLibraryEnumerateKernels &&
                            api->cuKernelGetName && api->cuLibraryGetKernel
                      : api->cuModuleGetFunctionCount && api->cuModuleEnumerateFunctions &&
                            api->cuFuncGetName && api->cuModuleGetFunction;
    if (!can || !api->cuCtxGetCurrent || api->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
        return;
    struct listing x = {0};
    /* the load may come inside the program's stream capture (module.c): not its calls */
    CUstreamCaptureMode mode = be_capture_relax(s);
    int ok = list_all(s, &x, id, native, library, &n);
    be_capture_restore(s, mode);
    if (!ok) {
        free(x.names);
        free(x.handles);
        free(x.counts);
        free(x.offsets);
        free(x.sizes);
        return;
    }
    rp->kernel_names = (ProtobufCBinaryData){x.names_len, x.names};
    rp->n_kernel_handles = rp->n_kernel_param_counts = n;
    rp->kernel_handles = x.handles;
    rp->kernel_param_counts = x.counts;
    rp->n_kernel_param_offsets = rp->n_kernel_param_sizes = x.nparams;
    rp->kernel_param_offsets = x.offsets;
    rp->kernel_param_sizes = x.sizes;
}
