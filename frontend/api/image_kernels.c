/* The kernels of a library, or the functions of a module, listed with its load
 * (backend/api/image_kernels.c; docs/remoting.md "Modules, libraries and launches"): each
 * becomes the memo's answer to cuLibraryGetKernel (cuModuleGetFunction) for its name, with its
 * layout, so that the question before a kernel's first launch (cudart's, or a JIT's) is
 * answered here. A name the list lacks is asked for (NOT_FOUND comes from the backend). */
#include <string.h>

#include "api/image_kernels.h"
#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

/* Whether the listing adds up: as many names, counts and handles, the counts' sum of offsets
 * and sizes, every name ended by its NUL. */
static int well_formed(const Sluice__Cuda__SlLoadImageReply *o)
{
    size_t n = o->n_kernel_handles, params = 0, names = 0;
    if (n > SL_WIRE_MAX_IMAGE_KERNELS || o->n_kernel_param_counts != n ||
        (n && !o->kernel_names.data))
        return 0;
    for (size_t i = 0; i < n; i++)
        params += o->kernel_param_counts[i];
    for (size_t i = 0; i < o->kernel_names.len; i++)
        names += o->kernel_names.data[i] == '\0';
    return params == o->n_kernel_param_offsets && params == o->n_kernel_param_sizes && names == n &&
           (!n || o->kernel_names.data[o->kernel_names.len - 1] == '\0');
}

/* The layout fields both get calls' replies carry (the table's `layout` flag). */
#define WITH_LAYOUT(out, k, offs, sizes)                                                           \
    do {                                                                                           \
        (out).param_layout = 1;                                                                    \
        (out).n_param_offsets = (out).n_param_sizes = (k);                                         \
        (out).param_offsets = (offs);                                                              \
        (out).param_sizes = (sizes);                                                               \
    } while (0)

/* The memo's answer to the get call for one listed name: cuLibraryGetKernel (library) or
 * cuModuleGetFunction (module), with the layout. */
static void seed(uint64_t image, int library, const char *name, uint64_t handle, uint32_t k,
                 uint64_t *offs, uint64_t *sizes)
{
    Sluice__Wire__Reply rep = SLUICE__WIRE__REPLY__INIT;
    Sluice__Wire__Call call;
    Sluice__Cuda__CuLibraryGetKernelRequest kreq =
        SLUICE__CUDA__CU_LIBRARY_GET_KERNEL_REQUEST__INIT;
    Sluice__Cuda__CuLibraryGetKernelReply kout = SLUICE__CUDA__CU_LIBRARY_GET_KERNEL_REPLY__INIT;
    Sluice__Cuda__CuModuleGetFunctionRequest freq =
        SLUICE__CUDA__CU_MODULE_GET_FUNCTION_REQUEST__INIT;
    Sluice__Cuda__CuModuleGetFunctionReply fout = SLUICE__CUDA__CU_MODULE_GET_FUNCTION_REPLY__INIT;
    if (library) {
        kreq.library = image;
        kreq.name = (char *)name;
        call = SL_FE_CALL(cuLibraryGetKernel, &kreq);
        kout.p_kernel = handle;
        WITH_LAYOUT(kout, k, offs, sizes);
        rep.out_case = SLUICE__WIRE__REPLY__OUT_CU_LIBRARY_GET_KERNEL;
        rep.cu_library_get_kernel = &kout;
    } else {
        freq.hmod = image;
        freq.name = (char *)name;
        call = SL_FE_CALL(cuModuleGetFunction, &freq);
        fout.hfunc = handle;
        WITH_LAYOUT(fout, k, offs, sizes);
        rep.out_case = SLUICE__WIRE__REPLY__OUT_CU_MODULE_GET_FUNCTION;
        rep.cu_module_get_function = &fout;
    }
    sl_fe_memo_seed(&call, &rep);
}

void sl_fe_image_kernels_keep(uint64_t image, int library, const Sluice__Cuda__SlLoadImageReply *o)
{
    if (!o || !o->n_kernel_handles || !well_formed(o))
        return;
    const char *name = (const char *)o->kernel_names.data;
    size_t at = 0;
    for (size_t i = 0; i < o->n_kernel_handles; i++) {
        uint32_t k = o->kernel_param_counts[i];
        uint64_t *offs = k ? o->kernel_param_offsets + at : NULL;
        uint64_t *sizes = k ? o->kernel_param_sizes + at : NULL;
        sl_fe_layout_seed(o->kernel_handles[i], 1, k, offs, k, sizes);
        seed(image, library, name, o->kernel_handles[i], k, offs, sizes);
        at += k;
        name += strlen(name) + 1;
    }
}
