/* The JIT linker: inputs recorded, linked into a bare ELF header.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Inputs are recorded, not compiled: PTX must be NUL-terminated text with a ".entry" (else the
 * error log says so), other input types are accepted as they are. The linked image is a bare
 * 64-bit ELF header (cuModuleLoadData accepts it; kernels are found by name in kernels.c as for
 * any image). The info log, when asked for, says how many inputs were linked; CU_JIT_WALL_TIME
 * reads 0.25 ms. */
struct dbl_link {
    struct dbl_link *next;
    unsigned n;
    CUjit_option *opts;
    void **vals;
    unsigned inputs;
    unsigned char image[64];
};

static struct dbl_link *links;

static struct dbl_link *link_of(CUlinkState s)
{
    struct dbl_link *l = links;
    while (l && (void *)l != (void *)s)
        l = l->next;
    return l;
}

/* Writes text into the log buffer of option buf_opt (its size option says how large). */
static void link_log(struct dbl_link *l, CUjit_option buf_opt, CUjit_option size_opt,
                     const char *text)
{
    char *buf = NULL;
    size_t cap = 0;
    for (unsigned i = 0; i < l->n; i++) {
        if (l->opts[i] == buf_opt)
            buf = l->vals[i];
        else if (l->opts[i] == size_opt)
            cap = (unsigned)(uintptr_t)l->vals[i];
    }
    if (!buf || !cap)
        return;
    snprintf(buf, cap, "%s", text);
    for (unsigned i = 0; i < l->n; i++)
        if (l->opts[i] == size_opt)
            l->vals[i] = (void *)(uintptr_t)(strlen(buf) + 1);
}

static CUresult link_create(unsigned n, CUjit_option *opts, void **vals, CUlinkState *out)
{
    if (!out || (n && (!opts || !vals)))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_link *l = calloc(1, sizeof *l);
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    l->n = n;
    l->opts = opts;
    l->vals = vals;
    l->next = links;
    links = l;
    *out = (CUlinkState)l;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                CUlinkState *stateOut)
{
    LOCKED(link_create(numOptions, options, optionValues, stateOut));
}

static CUresult link_add(CUlinkState s, CUjitInputType type, void *data, size_t size)
{
    struct dbl_link *l = link_of(s);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!data || !size)
        return CUDA_ERROR_INVALID_VALUE;
    if (type == CU_JIT_INPUT_PTX &&
        (((const char *)data)[size - 1] != 0 || !strstr((const char *)data, ".entry"))) {
        link_log(l, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                 "sluice-double: PTX input has no .entry");
        return CUDA_ERROR_INVALID_PTX;
    }
    l->inputs++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                 const char *name, unsigned int numOptions, CUjit_option *options,
                                 void **optionValues)
{
    (void)name, (void)numOptions, (void)options, (void)optionValues;
    LOCKED(link_add(state, type, data, size));
}

static CUresult link_complete(CUlinkState s, void **cubin, size_t *size)
{
    struct dbl_link *l = link_of(s);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!cubin || !size || !l->inputs)
        return CUDA_ERROR_INVALID_VALUE;
    memset(l->image, 0, sizeof l->image);
    memcpy(l->image,
           "\x7f"
           "ELF\x02\x01\x01",
           7);
    uint16_t ehsize = 64;
    memcpy(l->image + 52, &ehsize, 2);
    char text[96];
    snprintf(text, sizeof text, "sluice-double: linked %u input(s)", l->inputs);
    link_log(l, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, text);
    for (unsigned i = 0; i < l->n; i++)
        if (l->opts[i] == CU_JIT_WALL_TIME) {
            float ms = 0.25f;
            memcpy(&l->vals[i], &ms, sizeof ms);
        }
    *cubin = l->image;
    *size = sizeof l->image;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    LOCKED(link_complete(state, cubinOut, sizeOut));
}

static CUresult link_destroy(CUlinkState s)
{
    for (struct dbl_link **p = &links; *p; p = &(*p)->next)
        if ((void *)*p == (void *)s) {
            struct dbl_link *l = *p;
            *p = l->next;
            free(l);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuLinkDestroy(CUlinkState state)
{
    LOCKED(link_destroy(state));
}
