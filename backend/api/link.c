/* The JIT linker (cuLinkCreate_v2, cuLinkAddData_v2, cuLinkComplete, cuLinkDestroy): the link
 * runs in the backend's driver, images stay opaque to the guest.
 *
 * Options travel as the call's bulk: numOptions CUjit_option values (4 bytes each), then
 * numOptions values (8 bytes each); for cuLinkAddData_v2 the input's bytes come first. Scalar
 * options pass as they are; the two log buffers are the backend's own, of the sizes the guest
 * asked for (at most 1 MiB each), and every reply of a link call carries what they hold then,
 * after the linked image for cuLinkComplete: a trailer {uint64 info_len, error_len; float
 * wall_ms; uint32 0} and the two logs' bytes. A failed call has no bulk: its reply's detail is
 * the error log. Options that name other guest memory (symbol
 * tables, kernel and variable names) are refused. cuLinkAddFile_v2 never reaches the backend:
 * the frontend reads the file in the guest and sends its bytes with cuLinkAddData_v2.
 * The link state's options live as long as the state: the driver writes into them. */
#include <stdlib.h>
#include <string.h>

#include "api/link.h"
#include "api/module.h"
#include "api/reply.h"
#include "bounds.h"
#include "session/handles.h"
#include "session/state.h"
#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"

#define LINK_MAX_OPTIONS 64u
#define LINK_MAX_LOG     ((uint64_t)1 << 20)

struct be_link {
    CUlinkState st;
    unsigned n;
    CUjit_option *opts;
    void **vals;
    char *info, *err;
    size_t info_sz, err_sz;
    long wall; /* index of CU_JIT_WALL_TIME, -1 if none */
};

struct link_trailer {
    uint64_t info_len, error_len;
    float wall_ms;
    uint32_t zero;
};

static void link_free(struct be_link *l)
{
    if (!l)
        return;
    free(l->opts);
    free(l->vals);
    free(l->info);
    free(l->err);
    free(l);
}

void be_link_release(sl_be_session *s)
{
    for (size_t i = 0; i < s->h.cap; i++) {
        struct be_handle *h = &s->h.slot[i];
        if (be_id_kind(h->id) == SL_H_LINKER && be_handles_find(&s->h, SL_H_LINKER, h->id) == h) {
            link_free(h->native);
            be_handles_del(&s->h, h->id);
        }
    }
}

static int option_ok(uint32_t o, int at_create)
{
    switch (o) {
    case CU_JIT_MAX_REGISTERS:
    case CU_JIT_THREADS_PER_BLOCK:
    case CU_JIT_OPTIMIZATION_LEVEL:
    case CU_JIT_TARGET_FROM_CUCONTEXT:
    case CU_JIT_TARGET:
    case CU_JIT_FALLBACK_STRATEGY:
    case CU_JIT_GENERATE_DEBUG_INFO:
    case CU_JIT_LOG_VERBOSE:
    case CU_JIT_GENERATE_LINE_INFO:
    case CU_JIT_CACHE_MODE:
    case CU_JIT_POSITION_INDEPENDENT_CODE:
    case CU_JIT_MIN_CTA_PER_SM:
    case CU_JIT_MAX_THREADS_PER_BLOCK:
    case CU_JIT_OVERRIDE_DIRECTIVE_VALUES:
    case CU_JIT_SPLIT_COMPILE:
        return 1;
    case CU_JIT_WALL_TIME:
    case CU_JIT_INFO_LOG_BUFFER:
    case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
    case CU_JIT_ERROR_LOG_BUFFER:
    case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
        return at_create;
    default:
        return 0;
    }
}

/* Options from bulk bytes at p (n options, 12 * n bytes). */
static CUresult options_in(Sluice__Wire__Reply *reply, const uint8_t *p, uint64_t len, unsigned n,
                           int at_create, CUjit_option **opts, void ***vals)
{
    *opts = NULL;
    *vals = NULL;
    if (n > LINK_MAX_OPTIONS || len != (uint64_t)n * 12) {
        sl_be_detail(reply, "%u JIT options in %llu bytes", n, (unsigned long long)len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!n)
        return CUDA_SUCCESS;
    *opts = calloc(n, sizeof **opts);
    *vals = calloc(n, sizeof **vals);
    if (!*opts || !*vals)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned i = 0; i < n; i++) {
        uint32_t o;
        uint64_t v;
        memcpy(&o, p + 4 * (size_t)i, 4);
        memcpy(&v, p + 4 * (size_t)n + 8 * (size_t)i, 8);
        if (!option_ok(o, at_create)) {
            sl_be_detail(reply, "JIT option %u is not supported through Sluice", o);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        (*opts)[i] = (CUjit_option)o;
        (*vals)[i] = (void *)(uintptr_t)v;
    }
    return CUDA_SUCCESS;
}

/* The reply's bulk: `head` bytes (the image) then the trailer and the logs. */
static CUresult logs_out(struct sl_be_call *c, const struct be_link *l, const void *head,
                         uint64_t head_len)
{
    struct link_trailer t = {0, 0, 0.0f, 0};
    t.info_len = l->info ? strnlen(l->info, l->info_sz) : 0;
    t.error_len = l->err ? strnlen(l->err, l->err_sz) : 0;
    if (l->wall >= 0)
        memcpy(&t.wall_ms, &l->vals[l->wall], sizeof t.wall_ms);
    uint64_t total = head_len + sizeof t + t.info_len + t.error_len;
    if (total > BE_MAX_BULK_PER_CALL)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t *b = malloc(total);
    if (!b)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (head_len)
        memcpy(b, head, head_len);
    memcpy(b + head_len, &t, sizeof t);
    if (t.info_len)
        memcpy(b + head_len + sizeof t, l->info, t.info_len);
    if (t.error_len)
        memcpy(b + head_len + sizeof t + t.info_len, l->err, t.error_len);
    free(c->out);
    c->out = b;
    c->out_len = total;
    return CUDA_SUCCESS;
}

/* A failed call's reply has no bulk: the error log goes back as the reply's detail. */
static CUresult failed(Sluice__Wire__Reply *reply, const struct be_link *l, CUresult rc)
{
    size_t n = l->err ? strnlen(l->err, l->err_sz) : 0;
    if (n) {
        char *d = strndup(l->err, n);
        if (d) {
            if (reply->detail && reply->detail != protobuf_c_empty_string)
                free(reply->detail);
            reply->detail = d;
        }
    }
    return rc;
}

static CUresult link_get(sl_be_session *s, uint64_t id, struct be_link **l)
{
    void *n = NULL;
    CUresult rc = id ? sl_be_handle_get(s, SL_H_LINKER, id, &n) : CUDA_ERROR_INVALID_HANDLE;
    *l = n;
    return rc;
}

CUresult be_h_cuLinkCreate_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuLinkCreateV2Request *rq = call->cu_link_create_v2;
    if (!api->cuLinkCreate_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (rq->option_values != c->in_len) {
        sl_be_detail(reply, "options of %llu bytes with %llu bulk bytes",
                     (unsigned long long)rq->option_values, (unsigned long long)c->in_len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct be_link *l = calloc(1, sizeof *l);
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    l->wall = -1;
    l->n = rq->num_options;
    CUresult rc = options_in(reply, c->in, c->in_len, l->n, 1, &l->opts, &l->vals);
    /* the log buffers are ours, of the sizes asked for */
    for (unsigned i = 0; rc == CUDA_SUCCESS && i < l->n; i++) {
        uint64_t v = (uint64_t)(uintptr_t)l->vals[i];
        if (l->opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
            l->opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
            if (v > LINK_MAX_LOG) {
                v = LINK_MAX_LOG;
                l->vals[i] = (void *)(uintptr_t)v;
            }
            if (l->opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
                l->info_sz = v;
            else
                l->err_sz = v;
        } else if (l->opts[i] == CU_JIT_WALL_TIME) {
            l->wall = i;
            l->vals[i] = NULL;
        }
    }
    for (unsigned i = 0; rc == CUDA_SUCCESS && i < l->n; i++) {
        if (l->opts[i] == CU_JIT_INFO_LOG_BUFFER) {
            l->info = calloc(1, l->info_sz + 1);
            l->vals[i] = l->info;
            if (!l->info)
                rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else if (l->opts[i] == CU_JIT_ERROR_LOG_BUFFER) {
            l->err = calloc(1, l->err_sz + 1);
            l->vals[i] = l->err;
            if (!l->err)
                rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    Sluice__Cuda__CuLinkCreateV2Reply *rp = NULL;
    if (rc == CUDA_SUCCESS) {
        rp = BE_REPLY(reply, cu_link_create_v2, SLUICE__WIRE__REPLY__OUT_CU_LINK_CREATE_V2,
                      Sluice__Cuda__CuLinkCreateV2Reply,
                      sluice__cuda__cu_link_create_v2_reply__init);
        if (!rp)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS)
        rc = api->cuLinkCreate_v2(l->n, l->opts, l->vals, &l->st);
    if (rc == CUDA_SUCCESS) {
        rc = sl_be_handle_put(s, SL_H_LINKER, l, 0, &rp->state_out);
        if (rc != CUDA_SUCCESS && api->cuLinkDestroy)
            api->cuLinkDestroy(l->st);
    }
    if (rc == CUDA_SUCCESS)
        rc = logs_out(c, l, NULL, 0);
    if (rc != CUDA_SUCCESS && !(rp && rp->state_out))
        link_free(l);
    return rc;
}

CUresult be_h_cuLinkAddData_v2(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__CuLinkAddDataV2Request *rq = call->cu_link_add_data_v2;
    if (!api->cuLinkAddData_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct be_link *l;
    CUresult rc = link_get(s, rq->state, &l);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (rq->data != rq->size || !rq->size || rq->data > c->in_len ||
        c->in_len - rq->data != rq->option_values) {
        sl_be_detail(reply, "input of %llu bytes, options of %llu, with %llu bulk bytes",
                     (unsigned long long)rq->size, (unsigned long long)rq->option_values,
                     (unsigned long long)c->in_len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* the bounds checks of module images (docs/security.md), for every input type */
    rc = be_link_input_validate(c->in, rq->size, rq->type);
    if (rc != CUDA_SUCCESS) {
        static const char *const names[] = {"cubin", "PTX", "fatbin", "object", "library", "NVVM"};
        sl_be_detail(reply, "cuLinkAddData_v2: the %s input of %llu bytes %s",
                     rq->type < 6 ? names[rq->type] : "unknown", (unsigned long long)rq->size,
                     rc == CUDA_ERROR_NOT_SUPPORTED
                         ? "is NVVM IR, which cannot be checked before the driver parses it: "
                           "not supported through Sluice"
                     : rc == CUDA_ERROR_INVALID_VALUE
                         ? "has an unknown input type"
                         : "fails the image checks (bounds, headers, NUL-terminated PTX)");
        return rc == CUDA_ERROR_INVALID_IMAGE && rq->type == CU_JIT_INPUT_PTX
                   ? CUDA_ERROR_INVALID_VALUE /* as before: a PTX string without its NUL */
                   : rc;
    }
    CUjit_option *opts;
    void **vals;
    rc = options_in(reply, c->in + rq->data, rq->option_values, rq->num_options, 0, &opts, &vals);
    void *data = rc == CUDA_SUCCESS ? malloc(rq->size) : NULL;
    if (rc == CUDA_SUCCESS && !data)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        memcpy(data, c->in, rq->size);
        rc = api->cuLinkAddData_v2(l->st, (CUjitInputType)rq->type, data, (size_t)rq->size,
                                   rq->name && *rq->name ? rq->name : NULL, rq->num_options, opts,
                                   vals);
        rc = rc == CUDA_SUCCESS ? logs_out(c, l, NULL, 0) : failed(reply, l, rc);
    }
    free(data);
    free(opts);
    free(vals);
    return rc;
}

CUresult be_h_cuLinkComplete(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    if (!api->cuLinkComplete)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct be_link *l;
    CUresult rc = link_get(s, call->cu_link_complete->state, &l);
    if (rc != CUDA_SUCCESS)
        return rc;
    Sluice__Cuda__CuLinkCompleteReply *rp =
        BE_REPLY(reply, cu_link_complete, SLUICE__WIRE__REPLY__OUT_CU_LINK_COMPLETE,
                 Sluice__Cuda__CuLinkCompleteReply, sluice__cuda__cu_link_complete_reply__init);
    if (!rp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *cubin = NULL;
    size_t size = 0;
    rc = api->cuLinkComplete(l->st, &cubin, &size);
    if (rc == CUDA_SUCCESS && (!cubin || !size || size > BE_MAX_BULK_PER_CALL / 2)) {
        sl_be_detail(reply, "linked image of %zu bytes", size);
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (rc != CUDA_SUCCESS)
        return failed(reply, l, rc);
    rp->cubin_out = size;
    rp->size_out = size;
    return logs_out(c, l, cubin, size);
}

CUresult be_h_cuLinkDestroy(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    uint64_t id = call->cu_link_destroy->state;
    struct be_link *l;
    CUresult rc = link_get(s, id, &l);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api->cuLinkDestroy)
        return CUDA_ERROR_NOT_SUPPORTED;
    rc = api->cuLinkDestroy(l->st);
    if (rc != CUDA_SUCCESS)
        return rc;
    sl_be_handle_drop(s, SL_H_LINKER, id);
    link_free(l);
    return CUDA_SUCCESS;
}
