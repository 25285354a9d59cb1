/* The context-id table 21318c60...: 93 slots on 580. cuBLASLt calls [4]; refusing the table
 * makes PyTorch's GEMM fail with CUBLAS_STATUS_NOT_SUPPORTED. cuBLAS keys its default
 * workspace by stream through [51] and [39]; without them every cuBLAS call of a handle with
 * no workspace of its own fails with CUBLAS_STATUS_INTERNAL_ERROR (cuSOLVER's getrs under
 * torch.linalg.solve, docs/pytorch.md). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "exports/et_context_id.h"
#include "api/context.h"

static struct sl_fe_et_site ctxid = {.table = "CONTEXT_ID(21318c60)"};

/* [4] (CUcontext, uint64_t *id): cuCtxGetId; a NULL context gives rc 0 and id 0 (580). */
static CUresult context_get_id(CUcontext ctx, uint64_t *id)
{
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx) {
        *id = 0;
        return CUDA_SUCCESS;
    }
    return sl_fe_context_id(ctx, id);
}

/* [51] (ctx, stream, &object, per_thread) and [39] (ctx, object, &id): the real driver
 * (tests/gpu/probe_private_tables.py) hands out one object per stream, the same on every call
 * (the NULL and the legacy stream share one), refuses the NULL, legacy and per-thread streams
 * without a context (400) and an invalid stream (400); [39] gives the object's
 * cuStreamGetId. Here an object is an entry of a list that lives as long as the library; its
 * id is asked once (an id never changes) and an invalid stream is refused there. */
struct stream_object {
    struct stream_object *next;
    CUcontext ctx;    /* NULL for a created stream: it has its own context */
    CUstream stream;  /* CU_STREAM_LEGACY for the NULL stream */
    pthread_t thread; /* the thread of a per-thread stream */
    int per_thread;
    int have_id;
    uint64_t id;
};
static struct stream_object *g_streams;
static pthread_mutex_t g_streams_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult stream_object(CUcontext ctx, CUstream stream, struct stream_object **out,
                              int per_thread)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t s = (uintptr_t)stream;
    if (s == 0 && per_thread)
        s = (uintptr_t)CU_STREAM_PER_THREAD;
    if (s == 0)
        s = (uintptr_t)CU_STREAM_LEGACY;
    int ctx_stream = s == (uintptr_t)CU_STREAM_LEGACY || s == (uintptr_t)CU_STREAM_PER_THREAD;
    if (ctx_stream && !ctx)
        return CUDA_ERROR_INVALID_HANDLE;
    struct stream_object key = {
        .ctx = ctx_stream ? ctx : NULL,
        .stream = (CUstream)s,
        .per_thread = s == (uintptr_t)CU_STREAM_PER_THREAD,
    };
    if (key.per_thread)
        key.thread = pthread_self();
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&g_streams_lock);
    struct stream_object *o = g_streams;
    while (o && !(o->ctx == key.ctx && o->stream == key.stream &&
                  (!key.per_thread || pthread_equal(o->thread, key.thread))))
        o = o->next;
    if (!o && (o = malloc(sizeof *o)) != NULL) {
        *o = key;
        o->next = g_streams;
        g_streams = o;
    }
    if (!o)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else
        *out = o;
    pthread_mutex_unlock(&g_streams_lock);
    return rc;
}

static CUresult stream_object_id(CUcontext ctx, struct stream_object *obj, uint64_t *id)
{
    (void)ctx; /* the object knows its context */
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_streams_lock);
    struct stream_object *o = g_streams;
    while (o && o != obj)
        o = o->next;
    int have = o && o->have_id;
    uint64_t v = have ? o->id : 0;
    pthread_mutex_unlock(&g_streams_lock);
    if (!o)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!have) {
        CUresult rc = sl_fe_stream_id(o->ctx, o->stream, &v);
        if (rc != CUDA_SUCCESS)
            return rc;
        pthread_mutex_lock(&g_streams_lock);
        o->id = v;
        o->have_id = 1;
        pthread_mutex_unlock(&g_streams_lock);
    }
    *id = v;
    return CUDA_SUCCESS;
}

/* Stubs 00..99 (unused ones are discarded); the slots not served use them. */
SL_FE_ET_STUB_DECADE(ctxid, 0)
SL_FE_ET_STUB_DECADE(ctxid, 1)
SL_FE_ET_STUB_DECADE(ctxid, 2)
SL_FE_ET_STUB_DECADE(ctxid, 3)
SL_FE_ET_STUB_DECADE(ctxid, 4)
SL_FE_ET_STUB_DECADE(ctxid, 5)
SL_FE_ET_STUB_DECADE(ctxid, 6)
SL_FE_ET_STUB_DECADE(ctxid, 7)
SL_FE_ET_STUB_DECADE(ctxid, 8)
SL_FE_ET_STUB_DECADE(ctxid, 9)

#define S(id)   SL_FE_ET_STUB_REF(ctxid, id)
#define REFS(d) SL_FE_ET_STUB_REFS(ctxid, d)

static const sl_fe_slot TABLE[93] = {
    SL_FE_ET_SIZE(93),
    S(01),
    S(02),
    S(03),
    SL_FE_ET_FN(context_get_id),
    S(05),
    S(06),
    S(07),
    S(08),
    S(09),
    REFS(1),
    REFS(2),
    S(30),
    S(31),
    S(32),
    S(33),
    S(34),
    S(35),
    S(36),
    S(37),
    S(38),
    SL_FE_ET_FN(stream_object_id),
    S(40),
    S(41),
    S(42),
    S(43),
    S(44),
    S(45),
    S(46),
    S(47),
    S(48),
    S(49),
    S(50),
    SL_FE_ET_FN(stream_object),
    S(52),
    S(53),
    S(54),
    S(55),
    S(56),
    S(57),
    S(58),
    S(59),
    REFS(6),
    REFS(7),
    REFS(8),
    S(90),
    S(91),
    S(92),
};

_Static_assert(sizeof TABLE == 93 * sizeof(void *), "21318c60 has 93 slots");

const sl_fe_slot *sl_fe_et_context_id(void)
{
    return TABLE;
}
