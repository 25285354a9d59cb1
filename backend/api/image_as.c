/* slLoadImageAs (call 10011): a module or library load the guest does not wait for. The guest
 * read the image's kernels and their parameter layouts from its cubin (frontend/api/
 * image_listing.c) and chose the ids of the library and of each kernel, so cudart's lazy load
 * at a kernel's first launch and the launch itself travel in one frame, and the GPU does not
 * wait a round trip between them (docs/remoting.md "Modules, libraries and launches"). Here: the
 * load as slLoadImage does it, then each named kernel (function) as cuLibraryGetKernel
 * (cuModuleGetFunction) answers it, under the guest's ids. All or nothing: a failure undoes
 * what was done and is the next synchronizing call's error. Layouts are asked of the driver at
 * the first launch (api/launch.c), as for any kernel. */
#include <string.h>

#include "api/module.h"
#include "bounds.h"
#include "session/handles.h"
#include "session/image_cache.h"
#include "session/spin.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"
#include "sluice/log.h"

/* The request's names: n of them, each non-empty and ended by its NUL, nothing after the last. */
static int names_ok(const ProtobufCBinaryData *names, size_t n)
{
    if (n == 0)
        return names->len == 0;
    if (!names->data || names->len == 0 || names->data[names->len - 1] != '\0')
        return 0;
    size_t count = 0;
    for (size_t i = 0; i < names->len; i++) {
        if (names->data[i] != '\0')
            continue;
        if (i == 0 || names->data[i - 1] == '\0')
            return 0; /* an empty name */
        count++;
    }
    return count == n;
}

/* Registers every named kernel (function) of the loaded image under its guest id, its parent the
 * image's (dropping the image drops them). */
static CUresult put_kernels(sl_be_session *s, const Sluice__Cuda__SlLoadImageAsRequest *rq,
                            void *native)
{
    const struct sl_driver_api *api = s->api;
    int library = rq->target == 2;
    enum sl_handle_kind each = library ? SL_H_KERNEL : SL_H_FUNCTION;
    const char *name = (const char *)rq->kernel_names.data;
    CUresult rc = CUDA_SUCCESS;
    for (size_t i = 0; i < rq->n_kernel_handles && rc == CUDA_SUCCESS; i++) {
        void *got = NULL;
        if (library)
            rc = api->cuLibraryGetKernel
                     ? api->cuLibraryGetKernel((CUkernel *)&got, (CUlibrary)native, name)
                     : CUDA_ERROR_NOT_SUPPORTED;
        else
            rc = api->cuModuleGetFunction
                     ? api->cuModuleGetFunction((CUfunction *)&got, (CUmodule)native, name)
                     : CUDA_ERROR_NOT_SUPPORTED;
        if (rc == CUDA_SUCCESS)
            rc = sl_be_handle_put_guest(s, each, got, rq->handle, rq->kernel_handles[i]);
        name += strlen(name) + 1;
    }
    return rc;
}

CUresult be_h_slLoadImageAs(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__SlLoadImageAsRequest *rq = c->call->sl_load_image_as;
    if (!c->in_len) {
        sl_be_detail(reply, "slLoadImageAs: the image's bytes must come with it");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (rq->n_kernel_handles > SL_WIRE_MAX_IMAGE_KERNELS ||
        !names_ok(&rq->kernel_names, rq->n_kernel_handles)) {
        sl_be_detail(reply, "slLoadImageAs: kernel_names does not hold %zu names",
                     rq->n_kernel_handles);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct be_image_request r = {"slLoadImageAs", &rq->sha256,      rq->size,
                                 rq->target,      rq->format,       rq->n_jit_options,
                                 rq->jit_options, rq->n_jit_values, rq->jit_values};
    uint64_t t0 = be_now_ns(), t_stored = 0;
    struct be_image *img = NULL;
    void *native = NULL;
    CUresult rc = be_image_load_request(c, &r, &img, &native, &t_stored);
    if (rc != CUDA_SUCCESS)
        return rc;
    enum sl_handle_kind kind = rq->target == 1 ? SL_H_MODULE : SL_H_LIBRARY;
    rc = sl_be_handle_put_guest(s, kind, native, 0, rq->handle);
    if (rc != CUDA_SUCCESS) {
        sl_be_detail(reply, "slLoadImageAs: handle %llx is not a new guest id of its kind",
                     (unsigned long long)rq->handle);
        be_image_unload(s, rq->target, native);
        be_image_unref(img);
        return rc;
    }
    be_handles_find(&s->h, kind, rq->handle)->image = img; /* kept while it is loaded */
    uint64_t t_loaded = be_now_ns();
    rc = put_kernels(s, rq, native);
    if (rc != CUDA_SUCCESS) {
        sl_be_handle_drop(s, kind, rq->handle); /* its image and the kernels put */
        be_image_unload(s, rq->target, native);
        return rc;
    }
    sl_log(SL_LOG_DEBUG, BE_COMPONENT,
           "session %llu: %s of %llu bytes (format %u) loaded as %llx without a reply, %zu "
           "kernels named: checked and kept %.1f us, loaded by the driver %.1f us, named %.1f us",
           (unsigned long long)s->id, kind == SL_H_MODULE ? "module" : "library",
           (unsigned long long)rq->size, rq->format, (unsigned long long)rq->handle,
           rq->n_kernel_handles, (double)(t_stored - t0) / 1e3, (double)(t_loaded - t_stored) / 1e3,
           (double)(be_now_ns() - t_loaded) / 1e3);
    return CUDA_SUCCESS;
}
