/* Modules and libraries: slLoadImage (call 10002) with a bounded in-process cache of images by
 * SHA-256 in front of the tenant's image store on disk (image_store.c: a program started again
 * sends no image, though each session has a worker process of its own), image bounds validation
 * (the driver never reads past the bytes we hold), a rebuilt __fatBinC_Wrapper_t for wrapper
 * images, scalar JIT options only; cuModuleGetGlobal / cuLibraryGetGlobal register the global's
 * range with the session (owned by the module or library, dropped when it is unloaded); function
 * and kernel names. */
#include <elf.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "api/image_kernels.h"
#include "api/module.h"
#include "api/reply.h"
#include "bounds.h"
#include "session/contexts.h"
#include "session/handles.h"
#include "session/image_cache.h"
#include "session/streams.h"
#include "session/image_store.h"
#include "session/image_writer.h"
#include "session/ranges.h"
#include "session/spin.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"
#include "sluice/log.h"

#define FATBIN_MAGIC 0xba55ed50u
/* ---------------------------------------------------------------- image bounds */

static int elf_ok(const uint8_t *p, uint64_t len)
{
    if (len < sizeof(Elf64_Ehdr) || p[EI_CLASS] != ELFCLASS64)
        return 0;
    Elf64_Ehdr eh;
    memcpy(&eh, p, sizeof eh);
    uint64_t end;
    if (eh.e_shnum) {
        if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > len ||
            __builtin_mul_overflow((uint64_t)eh.e_shnum, sizeof(Elf64_Shdr), &end) ||
            end > len - eh.e_shoff)
            return 0;
        for (unsigned i = 0; i < eh.e_shnum; i++) {
            Elf64_Shdr sh;
            memcpy(&sh, p + eh.e_shoff + (uint64_t)i * sizeof sh, sizeof sh);
            if (sh.sh_type != SHT_NOBITS && (sh.sh_offset > len || sh.sh_size > len - sh.sh_offset))
                return 0;
        }
        if (eh.e_shstrndx >= eh.e_shnum && eh.e_shstrndx != SHN_UNDEF)
            return 0;
    }
    if (eh.e_phnum) {
        if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > len ||
            __builtin_mul_overflow((uint64_t)eh.e_phnum, sizeof(Elf64_Phdr), &end) ||
            end > len - eh.e_phoff)
            return 0;
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            memcpy(&ph, p + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
            if (ph.p_offset > len || ph.p_filesz > len - ph.p_offset)
                return 0;
        }
    }
    return 1;
}

CUresult be_image_validate(const uint8_t *p, uint64_t len, uint32_t format)
{
    if (!p || len == 0)
        return CUDA_ERROR_INVALID_IMAGE;
    switch (format) {
    case 1:
    case 2: {
        if (len < 16)
            return CUDA_ERROR_INVALID_IMAGE;
        uint32_t magic;
        uint16_t hs;
        uint64_t fs;
        memcpy(&magic, p, 4);
        memcpy(&hs, p + 6, 2);
        memcpy(&fs, p + 8, 8);
        if (magic != FATBIN_MAGIC || hs < 16 || fs > len || hs + fs != len)
            return CUDA_ERROR_INVALID_IMAGE;
        return CUDA_SUCCESS;
    }
    case 3:
        return len >= SELFMAG && memcmp(p, ELFMAG, SELFMAG) == 0 && elf_ok(p, len)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_IMAGE;
    case 4:
        return p[len - 1] == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_IMAGE;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* An ar archive (a device library for the JIT linker): "!<arch>\n", then members, each a
 * 60-byte header (its size in decimal at 48, "`\n" at 58) and its bytes padded to an even
 * offset; every member is an ELF object that passes elf_ok, but for the archive's own tables
 * (names starting with '/'). */
static int ar_ok(const uint8_t *p, uint64_t len)
{
    static const char magic[] = "!<arch>\n";
    if (len < 8 || memcmp(p, magic, 8) != 0)
        return 0;
    uint64_t off = 8;
    while (off < len) {
        if (len - off < 60 || p[off + 58] != '`' || p[off + 59] != '\n')
            return 0;
        uint64_t size = 0;
        int digits = 0;
        for (int i = 48; i < 58 && p[off + i] != ' '; i++, digits++) {
            if (p[off + i] < '0' || p[off + i] > '9')
                return 0;
            size = size * 10 + (uint64_t)(p[off + i] - '0');
        }
        const uint8_t *m = p + off + 60;
        if (!digits || size > len - off - 60)
            return 0;
        if (p[off] != '/' &&
            !(size >= SELFMAG && memcmp(m, ELFMAG, SELFMAG) == 0 && elf_ok(m, size)))
            return 0;
        off += 60 + size + (size & 1);
    }
    return 1;
}

CUresult be_link_input_validate(const uint8_t *p, uint64_t len, uint32_t type)
{
    switch (type) {
    case CU_JIT_INPUT_CUBIN:
    case CU_JIT_INPUT_OBJECT: /* a host object file: an ELF that carries the device code */
        return be_image_validate(p, len, 3);
    case CU_JIT_INPUT_PTX:
        return be_image_validate(p, len, 4);
    case CU_JIT_INPUT_FATBINARY:
        return be_image_validate(p, len, 2);
    case CU_JIT_INPUT_LIBRARY:
        return p && ar_ok(p, len) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_IMAGE;
    case CU_JIT_INPUT_NVVM: /* LTO IR: no format Sluice can check before the driver parses it */
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* ---------------------------------------------------------------- slLoadImage */

static int jit_option_ok(uint32_t o)
{
    switch (o) {
    case CU_JIT_INFO_LOG_BUFFER:
    case CU_JIT_ERROR_LOG_BUFFER:
    case CU_JIT_GLOBAL_SYMBOL_NAMES:
    case CU_JIT_GLOBAL_SYMBOL_ADDRESSES:
    case CU_JIT_REFERENCED_KERNEL_NAMES:
    case CU_JIT_REFERENCED_VARIABLE_NAMES:
    case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: /* meaningless without the buffers */
    case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
        return 0;
    default:
        return o < CU_JIT_NUM_OPTIONS;
    }
}

/* The scalar JIT options of a load in the driver's form: CUDA_ERROR_INVALID_VALUE for unpaired
 * or too many, CUDA_ERROR_NOT_SUPPORTED for a buffer option. */
static CUresult image_jit(Sluice__Wire__Reply *reply, const char *call, size_t n_opts,
                          const uint32_t *in_opts, size_t n_vals, const uint64_t *in_vals,
                          CUjit_option opts[BE_IMAGE_JIT_MAX], void *vals[BE_IMAGE_JIT_MAX])
{
    if (n_opts != n_vals || n_opts > BE_IMAGE_JIT_MAX) {
        sl_be_detail(reply, "%s: jit options and values differ in number or are too many", call);
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < n_opts; i++) {
        if (!jit_option_ok(in_opts[i])) {
            sl_be_detail(reply, "%s: JIT option %u is not a scalar option", call, in_opts[i]);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        opts[i] = (CUjit_option)in_opts[i];
        vals[i] = (void *)(uintptr_t)in_vals[i];
    }
    return CUDA_SUCCESS;
}

/* The image a load names (a reference in *out): the call's bulk, checked against sha and its
 * format and kept (cache, and the tenant's store later), or without bulk the copy the worker or
 * the store holds (CUDA_ERROR_FILE_NOT_FOUND when neither does). */
static CUresult image_take(struct sl_be_call *c, const char *call, const ProtobufCBinaryData *sha,
                           uint64_t size, uint32_t target, uint32_t format, struct be_image **out)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    if (sha->len != 32 || size == 0 || size > BE_MAX_BULK_PER_CALL ||
        (target != 1 && target != 2) || format < 1 || format > 4) {
        sl_be_detail(reply, "%s: bad sha256/size/target/format", call);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct be_image *img = NULL;
    if (c->in_len) {
        if (c->in_len != size || !c->in) {
            sl_be_detail(reply, "%s: %llu bulk bytes for an image of %llu", call,
                         (unsigned long long)c->in_len, (unsigned long long)size);
            return CUDA_ERROR_INVALID_VALUE;
        }
        uint8_t md[32];
        unsigned mdlen = 0;
        if (!EVP_Digest(c->in, size, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32 ||
            memcmp(md, sha->data, 32) != 0) {
            sl_be_detail(reply, "%s: the image does not match its sha256", call);
            return CUDA_ERROR_INVALID_VALUE;
        }
        CUresult rc = be_image_validate(c->in, size, format);
        if (rc != CUDA_SUCCESS) {
            sl_be_detail(reply, "%s: image of format %u is malformed or truncated", call, format);
            return rc;
        }
        s->st.img_sent++;
        s->st.img_sent_bytes += size;
        img = be_image_cache_get(md, size);
        if (!img) {
            be_image_store_put_later(md, c->in, size); /* for the sessions after this one */
            uint8_t *copy = malloc(size);
            if (!copy)
                return CUDA_ERROR_OUT_OF_MEMORY;
            memcpy(copy, c->in, size);
            img = be_image_cache_put(md, copy, size);
            if (!img)
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
    } else {
        img = be_image_cache_get(sha->data, size);
        if (!img) {
            uint8_t *stored = be_image_store_get(sha->data, size);
            if (!stored) {
                s->st.img_asked++;
                return CUDA_ERROR_FILE_NOT_FOUND; /* send it again with the bytes */
            }
            img = be_image_cache_put(sha->data, stored, size);
            if (!img)
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (be_image_validate(img->bytes, img->size, format) != CUDA_SUCCESS) {
            be_image_unref(img);
            return CUDA_ERROR_INVALID_IMAGE;
        }
        s->st.img_kept++;
    }
    *out = img;
    return CUDA_SUCCESS;
}

/* Loads img as a module (target 1) or library (2) with the driver: *native. */
static CUresult image_load(sl_be_session *s, const struct be_image *img, uint32_t target,
                           uint32_t format, unsigned n, CUjit_option *opts, void **vals,
                           void **native)
{
    const struct sl_driver_api *api = s->api;
    const void *code = format == 1 ? (const void *)&img->wrapper : (const void *)img->bytes;
    CUresult rc;
    *native = NULL;
    if (target == 1) {
        CUmodule m = NULL;
        rc = api->cuModuleLoadDataEx
                 ? api->cuModuleLoadDataEx(&m, code, n, n ? opts : NULL, n ? vals : NULL)
                 : CUDA_ERROR_NOT_SUPPORTED;
        *native = m;
    } else {
        CUlibrary l = NULL;
        /* cudart loaded it at its start; the frontend ships it at its first use, which may be
         * inside the program's stream capture: the load is not the program's call there */
        CUstreamCaptureMode mode = be_capture_relax(s);
        rc = api->cuLibraryLoadData ? api->cuLibraryLoadData(&l, code, n ? opts : NULL,
                                                             n ? vals : NULL, n, NULL, NULL, 0)
                                    : CUDA_ERROR_NOT_SUPPORTED;
        be_capture_restore(s, mode);
        *native = l;
    }
    return rc;
}

void be_image_unload(sl_be_session *s, uint32_t target, void *native)
{
    const struct sl_driver_api *api = s->api;
    if (target == 1 && api->cuModuleUnload)
        api->cuModuleUnload((CUmodule)native);
    else if (target == 2 && api->cuLibraryUnload)
        api->cuLibraryUnload((CUlibrary)native);
}

CUresult be_image_load_request(struct sl_be_call *c, const struct be_image_request *r,
                               struct be_image **img, void **native, uint64_t *t_stored)
{
    CUjit_option opts[BE_IMAGE_JIT_MAX];
    void *vals[BE_IMAGE_JIT_MAX];
    CUresult rc = image_jit(c->reply, r->call, r->n_jit, r->jit_options, r->n_jit_values,
                            r->jit_values, opts, vals);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = image_take(c, r->call, r->sha256, r->size, r->target, r->format, img);
    if (rc != CUDA_SUCCESS)
        return rc;
    *t_stored = be_now_ns();
    rc = image_load(c->s, *img, r->target, r->format, (unsigned)r->n_jit, opts, vals, native);
    if (rc != CUDA_SUCCESS)
        be_image_unref(*img);
    return rc;
}

CUresult be_h_slLoadImage(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__SlLoadImageRequest *rq = c->call->sl_load_image;
    struct be_image_request r = {"slLoadImage",   &rq->sha256,      rq->size,
                                 rq->target,      rq->format,       rq->n_jit_options,
                                 rq->jit_options, rq->n_jit_values, rq->jit_values};
    uint64_t t0 = be_now_ns(), t_stored = 0; /* the debug line's phases */
    struct be_image *img = NULL;
    void *native = NULL;
    CUresult rc = be_image_load_request(c, &r, &img, &native, &t_stored);
    if (rc != CUDA_SUCCESS)
        return rc;
    enum sl_handle_kind kind = rq->target == 1 ? SL_H_MODULE : SL_H_LIBRARY;
    uint64_t t_loaded = be_now_ns();
    Sluice__Cuda__SlLoadImageReply *rp =
        BE_REPLY(reply, sl_load_image, SLUICE__WIRE__REPLY__OUT_SL_LOAD_IMAGE,
                 Sluice__Cuda__SlLoadImageReply, sluice__cuda__sl_load_image_reply__init);
    uint64_t id = 0;
    rc = rp ? sl_be_handle_put(s, kind, native, 0, &id) : CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) {
        be_image_unload(s, rq->target, native);
        be_image_unref(img);
        return rc;
    }
    be_handles_find(&s->h, kind, id)->image = img; /* kept while it is loaded */
    rp->handle = id;
    /* its kernels or functions, when few: the guest asks nothing more for them */
    be_image_kernels_out(s, id, native, kind == SL_H_LIBRARY, rp);
    uint64_t t_listed = be_now_ns();
    sl_log(SL_LOG_DEBUG, BE_COMPONENT,
           "session %llu: %s of %llu bytes (format %u%s) loaded as %llx, %zu kernels listed: "
           "checked and kept %.1f us, loaded by the driver %.1f us, listed %.1f us",
           (unsigned long long)s->id, kind == SL_H_MODULE ? "module" : "library",
           (unsigned long long)rq->size, rq->format, c->in_len ? ", sent" : ", by its hash",
           (unsigned long long)id, rp->n_kernel_handles, (double)(t_stored - t0) / 1e3,
           (double)(t_loaded - t_stored) / 1e3, (double)(t_listed - t_loaded) / 1e3);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- globals */

static CUresult global_common(sl_be_session *s, uint64_t owner, CUdeviceptr d, size_t bytes,
                              Sluice__Wire__Reply *reply, uint64_t *out_d, uint64_t *out_b)
{
    if (d && bytes) {
        CUresult rc = be_mem_add(&s->mem, d, bytes, BE_R_GLOBAL,
                                 s->cur_ctx == UINT64_MAX ? 0 : s->cur_ctx, owner);
        if (rc != CUDA_SUCCESS) {
            sl_be_detail(reply, "cannot register the global's range");
            return rc;
        }
    }
    *out_d = d;
    *out_b = bytes;
    return CUDA_SUCCESS;
}

CUresult be_h_cuModuleGetGlobal_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuModuleGetGlobalV2Request *rq = call->cu_module_get_global_v2;
    void *m = NULL;
    CUresult rc = sl_be_handle_get(s, SL_H_MODULE, rq->hmod, &m);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!rq->name || !api->cuModuleGetGlobal_v2)
        return !rq->name ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
    CUdeviceptr d = 0;
    size_t bytes = 0;
    if ((rc = api->cuModuleGetGlobal_v2(&d, &bytes, (CUmodule)m, rq->name)) != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuModuleGetGlobalV2Reply *rp = BE_REPLY(
        reply, cu_module_get_global_v2, SLUICE__WIRE__REPLY__OUT_CU_MODULE_GET_GLOBAL_V2,
        Sluice__Cuda__CuModuleGetGlobalV2Reply, sluice__cuda__cu_module_get_global_v2_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return global_common(s, rq->hmod, d, bytes, reply, &rp->dptr, &rp->bytes);
}

CUresult be_h_cuLibraryGetGlobal(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuLibraryGetGlobalRequest *rq = call->cu_library_get_global;
    void *l = NULL;
    CUresult rc = sl_be_handle_get(s, SL_H_LIBRARY, rq->library, &l);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!rq->name || !api->cuLibraryGetGlobal)
        return !rq->name ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
    CUdeviceptr d = 0;
    size_t bytes = 0;
    if ((rc = api->cuLibraryGetGlobal(&d, &bytes, (CUlibrary)l, rq->name)) != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuLibraryGetGlobalReply *rp = BE_REPLY(
        reply, cu_library_get_global, SLUICE__WIRE__REPLY__OUT_CU_LIBRARY_GET_GLOBAL,
        Sluice__Cuda__CuLibraryGetGlobalReply, sluice__cuda__cu_library_get_global_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return global_common(s, rq->library, d, bytes, reply, &rp->dptr, &rp->bytes);
}

/* ---------------------------------------------------------------- names */

CUresult be_h_cuFuncGetName(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    void *f = NULL;
    CUresult rc = sl_be_handle_get(s, SL_H_FUNCTION, call->cu_func_get_name->hfunc, &f);
    if (rc != CUDA_SUCCESS)
        return rc;
    const char *name = NULL;
    if (be_id_kind(call->cu_func_get_name->hfunc) == SL_H_KERNEL)
        rc = api->cuKernelGetName ? api->cuKernelGetName(&name, (CUkernel)f)
                                  : CUDA_ERROR_NOT_SUPPORTED;
    else
        rc = api->cuFuncGetName ? api->cuFuncGetName(&name, (CUfunction)f)
                                : CUDA_ERROR_NOT_SUPPORTED;
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuFuncGetNameReply *rp =
        BE_REPLY(reply, cu_func_get_name, SLUICE__WIRE__REPLY__OUT_CU_FUNC_GET_NAME,
                 Sluice__Cuda__CuFuncGetNameReply, sluice__cuda__cu_func_get_name_reply__init);
    if (!rp || !(rp->name = strndup(name ? name : "", SL_WIRE_MAX_STRING - 1)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

CUresult be_h_cuKernelGetName(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    void *k = NULL;
    CUresult rc = sl_be_handle_get(s, SL_H_KERNEL, call->cu_kernel_get_name->hfunc, &k);
    if (rc != CUDA_SUCCESS)
        return rc;
    const char *name = NULL;
    rc = api->cuKernelGetName ? api->cuKernelGetName(&name, (CUkernel)k) : CUDA_ERROR_NOT_SUPPORTED;
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuKernelGetNameReply *rp =
        BE_REPLY(reply, cu_kernel_get_name, SLUICE__WIRE__REPLY__OUT_CU_KERNEL_GET_NAME,
                 Sluice__Cuda__CuKernelGetNameReply, sluice__cuda__cu_kernel_get_name_reply__init);
    if (!rp || !(rp->name = strndup(name ? name : "", SL_WIRE_MAX_STRING - 1)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}
