/* The JIT linker (cuLinkCreate, cuLinkAddData, cuLinkAddFile, cuLinkComplete, cuLinkDestroy
 * and their _v2 names): the link runs in the backend's driver (backend/link.c); inputs and the
 * linked image stay opaque here. The options travel as bulk (CUjit_option values, then 8-byte
 * values); the log buffers stay the guest's: every reply brings what the backend's buffers hold
 * and the frontend copies it into the guest's buffers, sets the *_SIZE_BYTES option values to
 * the bytes written and CU_JIT_WALL_TIME to the time, as the driver does (the option arrays must
 * live as long as the link state, as CUDA requires). A failed call's error log comes as the
 * reply's detail. cuLinkAddFile reads the file in the guest and sends its bytes. The linked
 * image is kept here until cuLinkDestroy; cuModuleLoadData ships it like any image. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call/rpc.h"
#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define MAX_OPTIONS 64u
#define LOG_BULK    (((size_t)2 << 20) + 64)
#define MAX_IMAGE   ((size_t)32 << 20)

struct trailer {
    uint64_t info_len, error_len;
    float wall_ms;
    uint32_t zero;
};

struct link {
    struct link *next;
    uint64_t id;
    unsigned n;
    CUjit_option *opts; /* the guest's arrays */
    void **vals;
    size_t info_cap, error_cap; /* the guest's log buffers' sizes, as given at create */
    void *image;
};

static struct link *g_links;
static pthread_mutex_t g_links_lock = PTHREAD_MUTEX_INITIALIZER;

static struct link *find(uint64_t id)
{
    struct link *l = g_links;
    while (l && l->id != id)
        l = l->next;
    return l;
}

/* Options -> bulk (n CUjit_option, n 8-byte values); the log buffers' addresses stay here. */
static CUresult options_out(unsigned n, const CUjit_option *opts, void **vals, uint8_t **out,
                            size_t *len)
{
    *out = NULL;
    *len = 0;
    if (n > MAX_OPTIONS || (n && (!opts || !vals)))
        return CUDA_ERROR_INVALID_VALUE;
    if (!n)
        return CUDA_SUCCESS;
    uint8_t *b = malloc((size_t)n * 12);
    if (!b)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned i = 0; i < n; i++) {
        uint32_t o = (uint32_t)opts[i];
        uint64_t v = (uint64_t)(uintptr_t)vals[i];
        if (opts[i] == CU_JIT_INFO_LOG_BUFFER || opts[i] == CU_JIT_ERROR_LOG_BUFFER ||
            opts[i] == CU_JIT_WALL_TIME)
            v = 0;
        else if (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
                 opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            v = (unsigned)(uintptr_t)vals[i];
        memcpy(b + 4 * (size_t)i, &o, 4);
        memcpy(b + 4 * (size_t)n + 8 * (size_t)i, &v, 8);
    }
    *out = b;
    *len = (size_t)n * 12;
    return CUDA_SUCCESS;
}

/* Copies text into the guest's log buffer of option `buf_opt` and sets its size option to the
 * bytes written (the buffer's size is the one given at create). */
static void log_in(const struct link *l, CUjit_option buf_opt, CUjit_option size_opt,
                   const char *text, size_t len)
{
    char *buf = NULL;
    size_t cap = buf_opt == CU_JIT_INFO_LOG_BUFFER ? l->info_cap : l->error_cap;
    long size_idx = -1;
    for (unsigned i = 0; i < l->n; i++) {
        if (l->opts[i] == buf_opt)
            buf = l->vals[i];
        else if (l->opts[i] == size_opt)
            size_idx = i;
    }
    if (!buf || !cap)
        return;
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(buf, text, n);
    buf[n] = '\0';
    if (size_idx >= 0)
        l->vals[size_idx] = (void *)(uintptr_t)(n + 1);
}

/* The logs of a reply's bulk (after `skip` bytes of image). */
static void logs_in(const struct link *l, const uint8_t *bulk, size_t got, size_t skip)
{
    struct trailer t;
    if (got < skip + sizeof t)
        return;
    memcpy(&t, bulk + skip, sizeof t);
    size_t rest = got - skip - sizeof t;
    if (t.info_len > rest || t.error_len > rest - t.info_len)
        return;
    const char *p = (const char *)bulk + skip + sizeof t;
    log_in(l, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, p, t.info_len);
    log_in(l, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, p + t.info_len,
           t.error_len);
    for (unsigned i = 0; i < l->n; i++)
        if (l->opts[i] == CU_JIT_WALL_TIME)
            memcpy(&l->vals[i], &t.wall_ms, sizeof t.wall_ms);
}

static void failed_in(const struct link *l, const Sluice__Wire__Reply *rep)
{
    if (rep->result != CUDA_SUCCESS && rep->detail && *rep->detail)
        log_in(l, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, rep->detail,
               strlen(rep->detail));
}

CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                         CUlinkState *stateOut)
{
    if (!stateOut)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t *ob = NULL;
    size_t olen = 0;
    CUresult rc = options_out(numOptions, options, optionValues, &ob, &olen);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct link *l = calloc(1, sizeof *l);
    uint8_t *bulk = l ? malloc(LOG_BULK) : NULL;
    if (!bulk) {
        free(l);
        free(ob);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    l->n = numOptions;
    l->opts = options;
    l->vals = optionValues;
    for (unsigned i = 0; i < numOptions; i++) {
        if (options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
            l->info_cap = (unsigned)(uintptr_t)optionValues[i];
        else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            l->error_cap = (unsigned)(uintptr_t)optionValues[i];
    }
    Sluice__Cuda__CuLinkCreateV2Request rq = SLUICE__CUDA__CU_LINK_CREATE_V2_REQUEST__INIT;
    rq.num_options = numOptions;
    rq.option_values = olen;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuLinkCreate_v2, &call, &rq);
    struct iovec iov = {ob, olen};
    Sluice__Wire__Reply *rep = NULL;
    size_t got = 0;
    rc = sl_fe_call_bulk(&call, &iov, olen ? 1 : 0, bulk, LOG_BULK, &got, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS &&
            (!SL_FE_REPLY(cuLinkCreate_v2, rep) || !rep->cu_link_create_v2->state_out))
            rc = CUDA_ERROR_UNKNOWN;
        if (rc == CUDA_SUCCESS) {
            l->id = rep->cu_link_create_v2->state_out;
            logs_in(l, bulk, got, 0);
            pthread_mutex_lock(&g_links_lock);
            l->next = g_links;
            g_links = l;
            pthread_mutex_unlock(&g_links_lock);
            *stateOut = (CUlinkState)(uintptr_t)l->id;
            l = NULL;
        } else {
            failed_in(l, rep);
        }
        sl_fe_reply_free(rep);
    }
    free(l);
    free(bulk);
    free(ob);
    return rc;
}

CUresult cuLinkCreate(unsigned int numOptions, CUjit_option *options, void **optionValues,
                      CUlinkState *stateOut)
{
    return cuLinkCreate_v2(numOptions, options, optionValues, stateOut);
}

static CUresult add_data(CUlinkState state, CUjitInputType type, const void *data, size_t size,
                         const char *name, unsigned n, CUjit_option *opts, void **vals)
{
    uint64_t id = (uint64_t)(uintptr_t)state;
    if (!data || !size || size > MAX_IMAGE)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_links_lock);
    struct link *l = find(id);
    struct link copy = l ? *l : (struct link){0};
    pthread_mutex_unlock(&g_links_lock);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    uint8_t *ob = NULL;
    size_t olen = 0;
    CUresult rc = options_out(n, opts, vals, &ob, &olen);
    uint8_t *bulk = rc == CUDA_SUCCESS ? malloc(LOG_BULK) : NULL;
    if (rc == CUDA_SUCCESS && !bulk)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) {
        free(ob);
        return rc;
    }
    Sluice__Cuda__CuLinkAddDataV2Request rq = SLUICE__CUDA__CU_LINK_ADD_DATA_V2_REQUEST__INIT;
    rq.state = id;
    rq.type = (uint32_t)type;
    rq.data = size;
    rq.size = size;
    rq.name = (char *)(name ? name : "");
    rq.num_options = n;
    rq.option_values = olen;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuLinkAddData_v2, &call, &rq);
    struct iovec iov[2] = {{(void *)data, size}, {ob, olen}};
    Sluice__Wire__Reply *rep = NULL;
    size_t got = 0;
    rc = sl_fe_call_bulk(&call, iov, olen ? 2 : 1, bulk, LOG_BULK, &got, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        if (rc == CUDA_SUCCESS)
            logs_in(&copy, bulk, got, 0);
        else
            failed_in(&copy, rep);
        sl_fe_reply_free(rep);
    }
    free(bulk);
    free(ob);
    return rc;
}

CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                          const char *name, unsigned int numOptions, CUjit_option *options,
                          void **optionValues)
{
    return add_data(state, type, data, size, name, numOptions, options, optionValues);
}

CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size,
                       const char *name, unsigned int numOptions, CUjit_option *options,
                       void **optionValues)
{
    return add_data(state, type, data, size, name, numOptions, options, optionValues);
}

/* The file's bytes (PTX gets its terminating NUL); NULL and *rc on failure. */
static void *read_file(const char *path, CUjitInputType type, size_t *len, CUresult *rc)
{
    *rc = CUDA_ERROR_FILE_NOT_FOUND;
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f)
        return NULL;
    uint8_t *b = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            if (cap > MAX_IMAGE + 1) {
                *rc = CUDA_ERROR_INVALID_VALUE;
                break;
            }
            uint8_t *nb = realloc(b, cap);
            if (!nb) {
                *rc = CUDA_ERROR_OUT_OF_MEMORY;
                break;
            }
            b = nb;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            *rc = ferror(f) ? CUDA_ERROR_FILE_NOT_FOUND : CUDA_SUCCESS;
            break;
        }
    }
    fclose(f);
    if (*rc == CUDA_SUCCESS && type == CU_JIT_INPUT_PTX && (n == 0 || b[n - 1] != 0)) {
        if (n == cap) {
            uint8_t *nb = realloc(b, n + 1);
            if (!nb)
                *rc = CUDA_ERROR_OUT_OF_MEMORY;
            else
                b = nb;
        }
        if (*rc == CUDA_SUCCESS)
            b[n++] = 0;
    }
    if (*rc != CUDA_SUCCESS || !n) {
        if (*rc == CUDA_SUCCESS)
            *rc = CUDA_ERROR_INVALID_VALUE;
        free(b);
        return NULL;
    }
    *len = n;
    return b;
}

static CUresult add_file(CUlinkState state, CUjitInputType type, const char *path, unsigned n,
                         CUjit_option *opts, void **vals)
{
    size_t len = 0;
    CUresult rc;
    void *data = read_file(path, type, &len, &rc);
    if (!data)
        return rc;
    rc = add_data(state, type, data, len, path, n, opts, vals);
    free(data);
    return rc;
}

CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                          unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    return add_file(state, type, path, numOptions, options, optionValues);
}

CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path,
                       unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    return add_file(state, type, path, numOptions, options, optionValues);
}

CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    uint64_t id = (uint64_t)(uintptr_t)state;
    if (!cubinOut || !sizeOut)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_links_lock);
    struct link *l = find(id);
    struct link copy = l ? *l : (struct link){0};
    pthread_mutex_unlock(&g_links_lock);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    size_t cap = MAX_IMAGE + LOG_BULK; /* untouched pages cost nothing */
    uint8_t *bulk = malloc(cap);
    if (!bulk)
        return CUDA_ERROR_OUT_OF_MEMORY;
    Sluice__Cuda__CuLinkCompleteRequest rq = SLUICE__CUDA__CU_LINK_COMPLETE_REQUEST__INIT;
    rq.state = id;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuLinkComplete, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    size_t got = 0;
    CUresult rc = sl_fe_call_bulk(&call, NULL, 0, bulk, cap, &got, &rep);
    void *image = NULL;
    if (rep) {
        rc = (CUresult)rep->result;
        size_t size =
            SL_FE_REPLY(cuLinkComplete, rep) ? (size_t)rep->cu_link_complete->size_out : 0;
        if (rc == CUDA_SUCCESS && (!size || size > got || size > MAX_IMAGE))
            rc = CUDA_ERROR_UNKNOWN;
        if (rc == CUDA_SUCCESS) {
            logs_in(&copy, bulk, got, size);
            image = malloc(size);
            if (!image)
                rc = CUDA_ERROR_OUT_OF_MEMORY;
            else
                memcpy(image, bulk, size);
        } else {
            failed_in(&copy, rep);
        }
        if (rc == CUDA_SUCCESS) {
            pthread_mutex_lock(&g_links_lock);
            l = find(id);
            if (l) {
                free(l->image);
                l->image = image;
                *cubinOut = image;
                *sizeOut = size;
                image = NULL;
            } else {
                rc = CUDA_ERROR_INVALID_HANDLE;
            }
            pthread_mutex_unlock(&g_links_lock);
        }
        sl_fe_reply_free(rep);
    }
    free(image);
    free(bulk);
    return rc;
}

CUresult cuLinkDestroy(CUlinkState state)
{
    uint64_t id = (uint64_t)(uintptr_t)state;
    Sluice__Cuda__CuLinkDestroyRequest rq = SLUICE__CUDA__CU_LINK_DESTROY_REQUEST__INIT;
    rq.state = id;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    SL_FE_SET(cuLinkDestroy, &call, &rq);
    Sluice__Wire__Reply *rep = NULL;
    CUresult rc = sl_fe_call(&call, &rep);
    if (rep) {
        rc = (CUresult)rep->result;
        sl_fe_reply_free(rep);
    }
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_links_lock);
    for (struct link **p = &g_links; *p; p = &(*p)->next)
        if ((*p)->id == id) {
            struct link *l = *p;
            *p = l->next;
            free(l->image);
            free(l);
            break;
        }
    pthread_mutex_unlock(&g_links_lock);
    return CUDA_SUCCESS;
}
