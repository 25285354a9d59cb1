/* Modules, libraries and kernels: images recorded (not parsed), kernels found by mangled
 * name in kernels.c, globals, function attributes and names.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "core.h"

#include <elf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"

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

static CUresult image_load(struct dbl_image **out, const void *image, bool library)
{
    struct dbl_ctx *c = NULL;
    CUresult rc =
        library ? (dbl_initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED) : need_ctx(&c);
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

/* The function or kernel called name of image h; load: as cuModuleGetFunction and
 * cuLibraryGetKernel answer it, loaded (lazy loading: an enumerated function is not loaded
 * until it is asked for by name, as on the real driver). */
static CUresult get_func_as(struct dbl_func **out, void *h, bool library_only, const char *name,
                            bool load)
{
    if (!dbl_initialized())
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
        if (load)
            img->funcs[i]->loaded = true;
        *out = img->funcs[i];
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_FOUND;
}

static CUresult get_func(struct dbl_func **out, void *h, bool library_only, const char *name)
{
    return get_func_as(out, h, library_only, name, true);
}

EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    LOCKED(get_func((struct dbl_func **)hfunc, hmod, false, name));
}

/* A module's functions, or a library's kernels (library: the handle must be a library). */
static CUresult module_functions(unsigned *count, CUfunction *fns, unsigned cap, void *hmod,
                                 bool library)
{
    if (!dbl_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    struct dbl_image *img = obj_get(hmod, K_IMAGE);
    if (!img || (library && !img->library))
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
        CUresult rc =
            get_func_as((struct dbl_func **)&fns[i], img, library, dbl_kernels[k].name, library);
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
    LOCKED(module_functions(count, NULL, 0, mod, false));
}

EXPORT CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
                                           CUmodule mod)
{
    LOCKED(module_functions(NULL, functions, numFunctions, mod, false));
}

EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    LOCKED(get_func((struct dbl_func **)pKernel, library, true, name));
}

EXPORT CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(module_functions(count, NULL, 0, lib, true));
}

EXPORT CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib)
{
    LOCKED(module_functions(NULL, (CUfunction *)kernels, numKernels, lib, true));
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
    if (!dbl_initialized())
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

/* A function a module enumerated but nobody asked for by name is not loaded (lazy loading):
 * its attributes answer CUDA_ERROR_FUNCTION_NOT_LOADED, as on the H200 (run 27). */
static CUresult func_attr_loaded(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    struct dbl_func *f = obj_get(hfunc, K_FUNC);
    if (f && !f->loaded)
        return CUDA_ERROR_FUNCTION_NOT_LOADED;
    return func_attr(pi, attrib, hfunc);
}

EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    LOCKED(func_attr_loaded(pi, attrib, hfunc));
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
