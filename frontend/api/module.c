/* Modules and libraries (docs/remoting.md "Modules, libraries and launches"): images are
 * measured, identified by SHA-256 and loaded with slLoadImage: without bytes when the backend
 * holds the image (its SessionAccept hints, call/image_hints.h), and a backend that turns out to
 * lack it answers CUDA_ERROR_FILE_NOT_FOUND and gets them as bulk; with them at once otherwise.
 * Handles are the backend's ids. An image whose cubin for the session's GPUs names its kernels
 * and their layouts (image_listing.c) loads without a reply instead (slLoadImageAs), under ids
 * chosen here. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <elf.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/image_kernels.h"
#include "api/image_listing.h"
#include "api/module.h"
#include "call/connection.h"
#include "call/contexts.h"
#include "call/env.h"
#include "call/image_hints.h"
#include "call/rpc.h"
#include "component.h"
#include "sluice/fe_calls.h"
#include "sluice/handle_kinds.h"
#include "sluice/log.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define WRAPPER_MAGIC 0x466243b1u
#define FATBIN_MAGIC  0xba55ed50u
#define PTX_MAX       ((size_t)1 << 30)
#define IMAGE_MAX     ((size_t)1 << 32)
/* An image the backend holds loads without a reply only when small: slLoadImageAs carries the
 * bytes again, a few microseconds for 64 KiB against the round trip it saves. */
#define SL_FE_LOAD_AS_HINTED_MAX ((size_t)64 << 10)

struct fatbin_header {
    uint32_t magic;
    uint16_t version;
    uint16_t header_size;
    uint64_t files_size;
};

struct fatbin_wrapper {
    uint32_t magic;
    uint32_t version;
    const void *data;
    const void *filename_or_fatbins;
};

static size_t elf_extent(const uint8_t *p)
{
    if (p[EI_CLASS] != ELFCLASS64)
        return 0;
    Elf64_Ehdr eh;
    memcpy(&eh, p, sizeof eh);
    if (eh.e_ehsize < sizeof eh)
        return 0;
    uint64_t end = sizeof eh;
    uint64_t sh_end = eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize;
    uint64_t ph_end = eh.e_phoff + (uint64_t)eh.e_phnum * eh.e_phentsize;
    if (eh.e_shnum && sh_end > end)
        end = sh_end;
    if (eh.e_phnum && ph_end > end)
        end = ph_end;
    if (end > IMAGE_MAX)
        return 0;
    if (eh.e_shnum && eh.e_shentsize >= sizeof(Elf64_Shdr)) {
        for (unsigned i = 0; i < eh.e_shnum; i++) {
            Elf64_Shdr sh;
            memcpy(&sh, p + eh.e_shoff + (uint64_t)i * eh.e_shentsize, sizeof sh);
            if (sh.sh_type != SHT_NOBITS && sh.sh_offset + sh.sh_size > end)
                end = sh.sh_offset + sh.sh_size;
        }
    }
    if (eh.e_phnum && eh.e_phentsize >= sizeof(Elf64_Phdr)) {
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            memcpy(&ph, p + eh.e_phoff + (uint64_t)i * eh.e_phentsize, sizeof ph);
            if (ph.p_offset + ph.p_filesz > end)
                end = ph.p_offset + ph.p_filesz;
        }
    }
    return end > IMAGE_MAX ? 0 : (size_t)end;
}

static int looks_like_ptx(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x09 || (c > 0x0d && c < 0x20) || c == 0x7f)
            return 0;
    }
    return memmem(s, n, ".version", 8) || memmem(s, n, ".target", 7) || memmem(s, n, ".entry", 6);
}

enum sl_fe_image_format sl_fe_image_measure(const void *image, const void **bytes, size_t *len)
{
    if (!image)
        return SL_FE_IMAGE_INVALID;
    const uint8_t *p = image;
    uint32_t magic;
    memcpy(&magic, p, 4);
    if (magic == WRAPPER_MAGIC) {
        struct fatbin_wrapper w;
        memcpy(&w, p, sizeof w);
        if (!w.data)
            return SL_FE_IMAGE_INVALID;
        struct fatbin_header h;
        memcpy(&h, w.data, sizeof h);
        if (h.magic != FATBIN_MAGIC || h.header_size < sizeof h || h.files_size > IMAGE_MAX)
            return SL_FE_IMAGE_INVALID;
        *bytes = w.data;
        *len = h.header_size + (size_t)h.files_size;
        return SL_FE_IMAGE_WRAPPER;
    }
    if (magic == FATBIN_MAGIC) {
        struct fatbin_header h;
        memcpy(&h, p, sizeof h);
        if (h.header_size < sizeof h || h.files_size > IMAGE_MAX)
            return SL_FE_IMAGE_INVALID;
        *bytes = p;
        *len = h.header_size + (size_t)h.files_size;
        return SL_FE_IMAGE_FATBIN;
    }
    if (memcmp(p, ELFMAG, SELFMAG) == 0) {
        size_t n = elf_extent(p);
        if (!n)
            return SL_FE_IMAGE_INVALID;
        *bytes = p;
        *len = n;
        return SL_FE_IMAGE_ELF;
    }
    size_t n = strnlen((const char *)p, PTX_MAX);
    if (n == 0 || n == PTX_MAX || !looks_like_ptx((const char *)p, n))
        return SL_FE_IMAGE_INVALID;
    *bytes = p;
    *len = n + 1;
    return SL_FE_IMAGE_PTX;
}

void sl_fe_sha256(const void *data, size_t len, uint8_t out[32])
{
    unsigned int n = 32;
    EVP_Digest(data, len, out, &n, EVP_sha256(), NULL);
}

/* The architectures (major * 10 + minor) of the session's GPUs: their number, 0 when unknown. */
static size_t session_sms(unsigned sms[SL_WIRE_MAX_DEVICES])
{
    int n = sl_fe_session_device_count();
    size_t k = 0;
    for (int i = 0; i < n && k < SL_WIRE_MAX_DEVICES; i++) {
        const struct sl_fe_device *d = sl_fe_session_device(i);
        if (!d || d->nattrs <= CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
            return 0;
        int major = d->attrs[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR];
        int minor = d->attrs[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR];
        if (major <= 0 || minor < 0 || minor > 9)
            return 0;
        sms[k++] = (unsigned)(major * 10 + minor);
    }
    return k;
}

/* A new id of kind chosen here (SL_WIRE_GUEST_ID; never reused in this process). */
static uint64_t guest_id(enum sl_handle_kind kind)
{
    static atomic_uint_fast64_t next = 1;
    uint64_t n = atomic_fetch_add(&next, 1) & (SL_WIRE_GUEST_ID - 1);
    return (uint64_t)kind << 56 | SL_WIRE_GUEST_ID | n;
}

static int load_as_enabled(void)
{
    static atomic_int on = -1;
    int v = atomic_load(&on);
    if (v < 0) {
        v = (int)sl_fe_env_uint("SLUICE_LOAD_AS", 1, 1);
        atomic_store(&on, v);
    }
    return v;
}

/* The load without a reply (slLoadImageAs): when a context is current and the image's kernels
 * can be read here (image_listing.c), the ids are chosen here, the listing becomes the memo's
 * answers as slLoadImage's would (image_kernels.c) and the call is queued with the bytes; the
 * first launch goes behind it in the same frame. Anything else: -1 (a CUresult), and the load
 * goes as slLoadImage. */
static CUresult load_unanswered(const Sluice__Cuda__SlLoadImageRequest *lr,
                                enum sl_fe_image_format fmt, const void *bytes, size_t len,
                                uint64_t *handle)
{
    unsigned sms[SL_WIRE_MAX_DEVICES];
    size_t nsm;
    struct sl_fe_image_listing l;
    if (!load_as_enabled() || !sl_fe_current_ctx_id() || !(nsm = session_sms(sms)) ||
        sl_fe_image_list(bytes, len, fmt, sms, nsm, &l) != 0)
        return (CUresult)-1;
    int library = lr->target == 2;
    uint64_t ids[SL_WIRE_MAX_IMAGE_KERNELS];
    for (size_t i = 0; i < l.n; i++)
        ids[i] = guest_id(library ? SL_H_KERNEL : SL_H_FUNCTION);
    Sluice__Cuda__SlLoadImageAsRequest req = SLUICE__CUDA__SL_LOAD_IMAGE_AS_REQUEST__INIT;
    req.sha256 = lr->sha256;
    req.size = lr->size;
    req.target = lr->target;
    req.format = lr->format;
    req.n_jit_options = lr->n_jit_options;
    req.jit_options = lr->jit_options;
    req.n_jit_values = lr->n_jit_values;
    req.jit_values = lr->jit_values;
    req.handle = guest_id(library ? SL_H_LIBRARY : SL_H_MODULE);
    req.kernel_names = (ProtobufCBinaryData){l.names_len, l.names};
    req.n_kernel_handles = l.n;
    req.kernel_handles = ids;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(slLoadImageAs, &call, &req);
    struct iovec iov = {(void *)bytes, len};
    CUresult rc = sl_fe_enqueue_async_bulk(&call, &iov, 1);
    if (rc == CUDA_SUCCESS) {
        Sluice__Cuda__SlLoadImageReply as = SLUICE__CUDA__SL_LOAD_IMAGE_REPLY__INIT;
        as.handle = req.handle;
        as.kernel_names = req.kernel_names;
        as.n_kernel_handles = as.n_kernel_param_counts = l.n;
        as.kernel_handles = ids;
        as.kernel_param_counts = l.counts;
        as.n_kernel_param_offsets = as.n_kernel_param_sizes = l.nparams;
        as.kernel_param_offsets = l.offsets;
        as.kernel_param_sizes = l.sizes;
        sl_fe_image_kernels_keep(req.handle, library, &as);
        *handle = req.handle;
    }
    sl_fe_image_listing_free(&l);
    return rc;
}

CUresult sl_fe_load_image(const void *image, uint32_t target, const uint32_t *jit_opts,
                          const uint64_t *jit_vals, size_t njit, uint64_t *handle)
{
    if (!image || !handle)
        return CUDA_ERROR_INVALID_VALUE;
    const void *bytes = NULL;
    size_t len = 0;
    enum sl_fe_image_format fmt = sl_fe_image_measure(image, &bytes, &len);
    if (fmt == SL_FE_IMAGE_INVALID)
        return CUDA_ERROR_INVALID_IMAGE;
    uint8_t digest[32];
    sl_fe_sha256(bytes, len, digest);
    Sluice__Cuda__SlLoadImageRequest req = SLUICE__CUDA__SL_LOAD_IMAGE_REQUEST__INIT;
    req.sha256.data = digest;
    req.sha256.len = 32;
    req.size = len;
    req.target = target;
    req.format = (uint32_t)fmt;
    req.n_jit_options = njit;
    req.jit_options = (uint32_t *)jit_opts;
    req.n_jit_values = njit;
    req.jit_values = (uint64_t *)jit_vals;
    CUresult rc = CUDA_ERROR_UNKNOWN;
    /* an image the backend has no hint of goes with its bytes at once (it would answer
     * FILE_NOT_FOUND); one it has, without them first */
    int with_bytes = !sl_fe_image_hinted(digest);
    if ((with_bytes || len <= SL_FE_LOAD_AS_HINTED_MAX) &&
        load_unanswered(&req, fmt, bytes, len, handle) == CUDA_SUCCESS) {
        sl_fe_image_hint_add(digest);
        return CUDA_SUCCESS;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
        SL_FE_SET(slLoadImage, &call, &req);
        struct iovec iov = {(void *)bytes, len};
        Sluice__Wire__Reply *rep = NULL;
        rc = sl_fe_call_bulk(&call, &iov, with_bytes ? 1 : 0, NULL, 0, NULL, &rep);
        if (!rep)
            return rc;
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            if (!SL_FE_REPLY(slLoadImage, rep)) {
                rc = CUDA_ERROR_UNKNOWN;
            } else {
                *handle = rep->sl_load_image->handle;
                /* a small image's kernels or functions: asked for no more */
                sl_fe_image_kernels_keep(*handle, target == 2, rep->sl_load_image);
            }
        }
        sl_fe_reply_free(rep);
        if (rc != CUDA_ERROR_FILE_NOT_FOUND || with_bytes)
            break;
        sl_log(SL_LOG_DEBUG, SL_FE_COMPONENT, "backend lacks the image (%zu bytes): sending it",
               len);
        with_bytes = 1;
    }
    if (rc == CUDA_SUCCESS && with_bytes)
        sl_fe_image_hint_add(digest); /* this process's next load of it goes without */
    return rc;
}

/* The scalar JIT options are forwarded; buffer options (logs) stay here: empty logs. */
static size_t jit_scalars(unsigned n, const CUjit_option *opts, void **vals, uint32_t *o,
                          uint64_t *v)
{
    size_t k = 0;
    for (unsigned i = 0; opts && vals && i < n && k < 32; i++) {
        switch (opts[i]) {
        case CU_JIT_MAX_REGISTERS:
        case CU_JIT_THREADS_PER_BLOCK:
        case CU_JIT_OPTIMIZATION_LEVEL:
        case CU_JIT_TARGET:
        case CU_JIT_FALLBACK_STRATEGY:
        case CU_JIT_GENERATE_DEBUG_INFO:
        case CU_JIT_LOG_VERBOSE:
        case CU_JIT_GENERATE_LINE_INFO:
        case CU_JIT_CACHE_MODE:
            o[k] = (uint32_t)opts[i];
            v[k++] = (uint64_t)(uintptr_t)vals[i];
            break;
        case CU_JIT_INFO_LOG_BUFFER:
        case CU_JIT_ERROR_LOG_BUFFER:
            if (vals[i])
                *(char *)vals[i] = '\0';
            break;
        default:
            break;
        }
    }
    return k;
}

static CUresult load_as(void *out, const void *image, uint32_t target, unsigned n,
                        CUjit_option *opts, void **vals)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    uint32_t o[32];
    uint64_t v[32];
    size_t k = jit_scalars(n, opts, vals, o, v);
    uint64_t h = 0;
    CUresult rc = sl_fe_load_image(image, target, o, v, k, &h);
    if (rc == CUDA_SUCCESS)
        *(uint64_t *)out = h;
    return rc;
}

CUresult sl_fe_module_load_image(CUmodule *module, const void *image)
{
    if (!module)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t h = 0;
    CUresult rc = sl_fe_load_image(image, 1, NULL, NULL, 0, &h);
    if (rc == CUDA_SUCCESS)
        *module = (CUmodule)(uintptr_t)h;
    return rc;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    return sl_fe_module_load_image(module, image);
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                            CUjit_option *options, void **optionValues)
{
    if (!module)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t h = 0;
    CUresult rc = load_as(&h, image, 1, numOptions, options, optionValues);
    if (rc == CUDA_SUCCESS)
        *module = (CUmodule)(uintptr_t)h;
    return rc;
}

CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    return sl_fe_module_load_image(module, fatCubin);
}

static void *read_file(const char *path, CUresult *rc)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) {
        *rc = CUDA_ERROR_FILE_NOT_FOUND;
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 && (size_t)n < IMAGE_MAX ? malloc((size_t)n + 1) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        *rc = CUDA_ERROR_FILE_NOT_FOUND;
        return NULL;
    }
    buf[n] = '\0';
    fclose(f);
    *rc = CUDA_SUCCESS;
    return buf;
}

CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    CUresult rc;
    void *img = read_file(fname, &rc);
    if (!img)
        return rc;
    rc = sl_fe_module_load_image(module, img);
    free(img);
    return rc;
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                           void **jitOptionsValues, unsigned int numJitOptions,
                           CUlibraryOption *libraryOptions, void **libraryOptionValues,
                           unsigned int numLibraryOptions)
{
    (void)libraryOptions;
    (void)libraryOptionValues;
    (void)numLibraryOptions; /* host tables and "binary is preserved": nothing to forward */
    if (!library)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t h = 0;
    CUresult rc = load_as(&h, code, 2, numJitOptions, jitOptions, jitOptionsValues);
    if (rc == CUDA_SUCCESS)
        *library = (CUlibrary)(uintptr_t)h;
    return rc;
}

CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                               void **jitOptionsValues, unsigned int numJitOptions,
                               CUlibraryOption *libraryOptions, void **libraryOptionValues,
                               unsigned int numLibraryOptions)
{
    CUresult rc;
    void *img = read_file(fileName, &rc);
    if (!img)
        return rc;
    rc = cuLibraryLoadData(library, img, jitOptions, jitOptionsValues, numJitOptions,
                           libraryOptions, libraryOptionValues, numLibraryOptions);
    free(img);
    return rc;
}

CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuModuleGetGlobalV2Request req =
        SLUICE__CUDA__CU_MODULE_GET_GLOBAL_V2_REQUEST__INIT;
    req.hmod = (uint64_t)(uintptr_t)hmod;
    req.name = (char *)name;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuModuleGetGlobal_v2, &call, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    if (rc == CUDA_SUCCESS && !SL_FE_REPLY(cuModuleGetGlobal_v2, rep))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS) {
        if (dptr)
            *dptr = (CUdeviceptr)rep->cu_module_get_global_v2->dptr;
        if (bytes)
            *bytes = (size_t)rep->cu_module_get_global_v2->bytes;
    }
    sl_fe_reply_free(rep);
    return rc;
}

CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    Sluice__Cuda__CuLibraryGetGlobalRequest req = SLUICE__CUDA__CU_LIBRARY_GET_GLOBAL_REQUEST__INIT;
    req.library = (uint64_t)(uintptr_t)library;
    req.name = (char *)name;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuLibraryGetGlobal, &call, &req);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (!rep)
        return rc;
    rc = (CUresult)rep->result;
    if (rc == CUDA_SUCCESS && !SL_FE_REPLY(cuLibraryGetGlobal, rep))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS) {
        if (dptr)
            *dptr = (CUdeviceptr)rep->cu_library_get_global->dptr;
        if (bytes)
            *bytes = (size_t)rep->cu_library_get_global->bytes;
    }
    sl_fe_reply_free(rep);
    return rc;
}

/* ------------------------------------------------------------------ names */
/* cuFuncGetName / cuKernelGetName hand out a string that lives as long as the function: the
 * backend's answer is kept per handle (ids are never reused), so a second query is local. */
struct fe_name {
    struct fe_name *next;
    uint64_t id;
    char *name;
};
static struct fe_name *g_names;
static pthread_mutex_t g_names_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *name_cached(uint64_t id)
{
    const char *n = NULL;
    pthread_mutex_lock(&g_names_lock);
    for (struct fe_name *e = g_names; e && !n; e = e->next)
        if (e->id == id)
            n = e->name;
    pthread_mutex_unlock(&g_names_lock);
    return n;
}

static const char *name_keep(uint64_t id, const char *name)
{
    const char *have = name_cached(id);
    if (have)
        return have;
    struct fe_name *e = malloc(sizeof *e);
    char *copy = strdup(name);
    if (!e || !copy) {
        free(e);
        free(copy);
        return NULL;
    }
    e->id = id;
    e->name = copy;
    pthread_mutex_lock(&g_names_lock);
    e->next = g_names;
    g_names = e;
    pthread_mutex_unlock(&g_names_lock);
    return copy;
}

static CUresult get_name(const char **name, uint64_t id, int kernel)
{
    if (!name || !id)
        return !name ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
    const char *have = name_cached(id);
    if (have) {
        *name = have;
        return CUDA_SUCCESS;
    }
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    Sluice__Cuda__CuFuncGetNameRequest fq = SLUICE__CUDA__CU_FUNC_GET_NAME_REQUEST__INIT;
    Sluice__Cuda__CuKernelGetNameRequest kq = SLUICE__CUDA__CU_KERNEL_GET_NAME_REQUEST__INIT;
    if (kernel) {
        kq.hfunc = id;
        SL_FE_SET(cuKernelGetName, &call, &kq);
    } else {
        fq.hfunc = id;
        SL_FE_SET(cuFuncGetName, &call, &fq);
    }
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS) {
            const char *n = NULL;
            if (kernel && SL_FE_REPLY(cuKernelGetName, rep))
                n = rep->cu_kernel_get_name->name;
            else if (!kernel && SL_FE_REPLY(cuFuncGetName, rep))
                n = rep->cu_func_get_name->name;
            if (!n)
                rc = CUDA_ERROR_UNKNOWN;
            else if (!(*name = name_keep(id, n)))
                rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
        sl_fe_reply_free(rep);
    }
    return rc;
}

/* A kernel id is accepted as a function (the backend asks cuKernelGetName for it). */
CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    return get_name(name, (uint64_t)(uintptr_t)hfunc, 0);
}

CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    return get_name(name, (uint64_t)(uintptr_t)hfunc, 1);
}

CUresult sl_fe_function_name(CUfunction fn, const char **name)
{
    return get_name(name, (uint64_t)(uintptr_t)fn, 0);
}

/* ------------------------------------------------------------------ a module's functions */
CUresult sl_fe_module_functions(CUmodule module, CUfunction **fns, unsigned *count)
{
    unsigned n = 0;
    *fns = NULL;
    *count = 0;
    CUresult rc = cuModuleGetFunctionCount(&n, module);
    if (rc != CUDA_SUCCESS || n == 0)
        return rc;
    CUfunction *out = calloc(n, sizeof *out);
    if (!out)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = cuModuleEnumerateFunctions(out, n, module);
    if (rc != CUDA_SUCCESS) {
        free(out);
        return rc;
    }
    *fns = out;
    *count = n;
    return CUDA_SUCCESS;
}
