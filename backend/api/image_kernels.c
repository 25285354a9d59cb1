/* The kernels of a library, with its load (slLoadImage; docs/remoting.md "Modules, libraries
 * and launches"). cudart loads a program's modules as libraries at their first use and then
 * asks cuLibraryGetKernel for the kernel it launches: one more round trip, while the GPU waits,
 * before the first launch of any kernel of a new module (run 27: 0.31-0.55 ms of GPU time, the
 * goal 0.3). For a small library the load's answer lists every kernel with its id and layout;
 * the frontend keeps them as cuLibraryGetKernel's answers (its memo) and launches without
 * asking. A layout loads its kernel into the current context (be_layout_get), so only small
 * libraries are listed: a framework's library of thousands of kernels is not loaded whole. */
#include <stdlib.h>
#include <string.h>

#include "api/image_kernels.h"
#include "api/launch.h"
#include "session/handles.h"
#include "session/streams.h"
#include "sluice/backend_hooks.h"
#include "sluice/wire.h"

struct listing {
    uint8_t *names;
    size_t names_len;
    uint64_t handles[SL_WIRE_MAX_IMAGE_KERNELS];
    uint32_t counts[SL_WIRE_MAX_IMAGE_KERNELS];
    uint64_t *offsets, *sizes;
    size_t nparams;
};

static int add_kernel(sl_be_session *s, struct listing *x, unsigned i, uint64_t lib_id, CUkernel k)
{
    const char *name = NULL;
    uint64_t id = 0;
    struct be_layout *l;
    void *native;
    if (s->api->cuKernelGetName(&name, k) != CUDA_SUCCESS || !name ||
        sl_be_handle_put(s, SL_H_KERNEL, k, lib_id, &id) != CUDA_SUCCESS ||
        be_layout_get(s, id, &l, &native) != CUDA_SUCCESS)
        return -1;
    size_t nl = strnlen(name, SL_WIRE_MAX_STRING - 1) + 1;
    uint8_t *names = realloc(x->names, x->names_len + nl);
    uint64_t *o = realloc(x->offsets, (x->nparams + l->count + 1) * sizeof *o);
    if (o)
        x->offsets = o;
    uint64_t *z = realloc(x->sizes, (x->nparams + l->count + 1) * sizeof *z);
    if (z)
        x->sizes = z;
    if (names)
        x->names = names;
    if (!names || !o || !z)
        return -1;
    memcpy(x->names + x->names_len, name, nl - 1);
    x->names[x->names_len + nl - 1] = '\0';
    x->names_len += nl;
    memcpy(x->offsets + x->nparams, l->offsets, l->count * sizeof *o);
    memcpy(x->sizes + x->nparams, l->sizes, l->count * sizeof *z);
    x->nparams += l->count;
    x->handles[i] = id;
    x->counts[i] = l->count;
    return 0;
}

void be_image_kernels_out(sl_be_session *s, uint64_t lib_id, CUlibrary lib,
                          Sluice__Cuda__SlLoadImageReply *rp)
{
    const struct sl_driver_api *api = s->api;
    CUcontext ctx = NULL;
    unsigned n = 0;
    if (!api->cuLibraryGetKernelCount || !api->cuLibraryEnumerateKernels || !api->cuKernelGetName ||
        !api->cuCtxGetCurrent || api->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
        return;
    CUkernel ks[SL_WIRE_MAX_IMAGE_KERNELS];
    struct listing x = {0};
    int ok = 0;
    /* the load may come inside the program's stream capture (module.c): not its calls */
    CUstreamCaptureMode mode = be_capture_relax(s);
    if (api->cuLibraryGetKernelCount(&n, lib) == CUDA_SUCCESS && n > 0 &&
        n <= SL_WIRE_MAX_IMAGE_KERNELS && api->cuLibraryEnumerateKernels(ks, n, lib) == 0) {
        ok = 1;
        for (unsigned i = 0; ok && i < n; i++)
            ok = add_kernel(s, &x, i, lib_id, ks[i]) == 0;
    }
    be_capture_restore(s, mode);
    uint64_t *handles = ok ? malloc(n * sizeof *handles) : NULL;
    uint32_t *counts = handles ? malloc(n * sizeof *counts) : NULL;
    if (!counts) {
        free(handles);
        free(x.names);
        free(x.offsets);
        free(x.sizes);
        return;
    }
    memcpy(handles, x.handles, n * sizeof *handles);
    memcpy(counts, x.counts, n * sizeof *counts);
    rp->kernel_names = (ProtobufCBinaryData){x.names_len, x.names};
    rp->n_kernel_handles = rp->n_kernel_param_counts = n;
    rp->kernel_handles = handles;
    rp->kernel_param_counts = counts;
    rp->n_kernel_param_offsets = rp->n_kernel_param_sizes = x.nparams;
    rp->kernel_param_offsets = x.offsets;
    rp->kernel_param_sizes = x.sizes;
}
