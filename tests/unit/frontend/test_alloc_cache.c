/* The allocation cache and the frees without a round trip (frontend/call/allocs.c,
 * api/alloc.c) against an in-process fake backend that keeps a device's allocation table and a
 * memory quota and answers as the driver does: cuMemGetInfo and the pointer queries must see
 * what the program freed as freed, a second free must fail, a refusal for memory is retried
 * once after the cache is given back, the bounds hold, and what the cache gives up is freed
 * in order before the calls that could observe it. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "call/allocs.h"
#include "call/contexts.h"
#include "call/rpc.h"
#include "call/rpc_session.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"

#define MIB  ((uint64_t)1 << 20)
#define QMAX 16
#define AMAX 64

/* ------------------------------------------------------------------ the fake backend */
static struct {
    uint8_t *q[QMAX];
    size_t qlen[QMAX];
    uint64_t qbulk[QMAX]; /* 8 bytes of bulk after the message, when qbulk_len */
    size_t qbulk_len[QMAX];
    int qn, qhead;
    uint8_t *cur;
    uint64_t cur_bulk;
    /* the device */
    struct {
        uint64_t base, size;
    } a[AMAX];
    int na;
    uint64_t next_base, quota, used;
    /* what the frontend sent */
    int frames, calls;
    uint32_t ids[256];
    int nowait[256]; /* ids[i] was sent with no_reply */
    int allocs, sync_frees, nowait_frees, failed_nowait, async_memset_failed;
} F;

static void queue(Sluice__Wire__Reply *r, const void *bulk, size_t blen)
{
    Sluice__Wire__Reply *rs[1] = {r};
    Sluice__Wire__ReplyFrame f = SLUICE__WIRE__REPLY_FRAME__INIT;
    f.n_replies = 1;
    f.replies = rs;
    r->bulk_length = blen;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES;
    m.replies = &f;
    sl_error e;
    assert_true(F.qn < QMAX);
    assert_int_equal(sl_wire_encode_server(&m, NULL, &F.q[F.qn], &F.qlen[F.qn], &e), SL_OK);
    F.qbulk_len[F.qn] = blen;
    if (blen)
        memcpy(&F.qbulk[F.qn], bulk, blen);
    F.qn++;
}

/* The allocation holding p: its index, or -1. */
static int find(uint64_t p)
{
    for (int i = 0; i < F.na; i++)
        if (p >= F.a[i].base && p - F.a[i].base < F.a[i].size)
            return i;
    return -1;
}

/* Runs c on the fake device: its result; *dptr / *out set where the call answers one. */
static CUresult run(const Sluice__Wire__Call *c, uint64_t *dptr, uint64_t out[2])
{
    int i;
    switch (c->call_id) {
    case SL_CALL_cuMemAlloc_v2: {
        uint64_t n = c->cu_mem_alloc_v2->bytesize;
        F.allocs++;
        if (!n)
            return CUDA_ERROR_INVALID_VALUE;
        if (F.used + n > F.quota || F.na == AMAX)
            return CUDA_ERROR_OUT_OF_MEMORY;
        F.a[F.na].base = F.next_base;
        F.a[F.na++].size = n;
        *dptr = F.next_base;
        F.next_base += (n + 2 * MIB - 1) / (2 * MIB) * (2 * MIB);
        F.used += n;
        return CUDA_SUCCESS;
    }
    case SL_CALL_cuMemFree_v2:
        if ((i = find(c->cu_mem_free_v2->dptr)) < 0 || F.a[i].base != c->cu_mem_free_v2->dptr)
            return CUDA_ERROR_INVALID_VALUE;
        F.used -= F.a[i].size;
        F.a[i] = F.a[--F.na];
        return CUDA_SUCCESS;
    case SL_CALL_cuMemGetInfo_v2:
        out[0] = F.quota - F.used;
        out[1] = F.quota;
        return CUDA_SUCCESS;
    case SL_CALL_cuMemGetAddressRange_v2:
        if ((i = find(c->cu_mem_get_address_range_v2->dptr)) < 0)
            return CUDA_ERROR_NOT_FOUND;
        out[0] = F.a[i].base;
        out[1] = F.a[i].size;
        return CUDA_SUCCESS;
    case SL_CALL_cuPointerGetAttribute:
        if (find(c->cu_pointer_get_attribute->ptr) < 0)
            return CUDA_ERROR_INVALID_VALUE;
        out[0] = CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    /* the copies and memsets: every device address must lie in a live allocation */
    case SL_CALL_cuMemcpyHtoD_v2:
        return find(c->cu_memcpy_hto_d_v2->dst_device) < 0 ? CUDA_ERROR_INVALID_VALUE
                                                           : CUDA_SUCCESS;
    case SL_CALL_cuMemcpyDtoH_v2:
        return find(c->cu_memcpy_dto_h_v2->src_device) < 0 ? CUDA_ERROR_INVALID_VALUE
                                                           : CUDA_SUCCESS;
    case SL_CALL_cuMemcpyDtoD_v2:
        return find(c->cu_memcpy_dto_d_v2->dst_device) < 0 ||
                       find(c->cu_memcpy_dto_d_v2->src_device) < 0
                   ? CUDA_ERROR_INVALID_VALUE
                   : CUDA_SUCCESS;
    case SL_CALL_cuMemsetD8_v2:
        return find(c->cu_memset_d8_v2->dst_device) < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    case SL_CALL_cuMemcpy2D_v2: {
        CUDA_MEMCPY2D m;
        if (c->cu_memcpy2_d_v2->p_copy.len != sizeof m)
            return CUDA_ERROR_INVALID_VALUE;
        memcpy(&m, c->cu_memcpy2_d_v2->p_copy.data, sizeof m);
        if ((m.srcMemoryType == CU_MEMORYTYPE_DEVICE && find(m.srcDevice) < 0) ||
            (m.dstMemoryType == CU_MEMORYTYPE_DEVICE && find(m.dstDevice) < 0))
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_SUCCESS;
    }
}

static void answer(const Sluice__Wire__Call *c)
{
    uint64_t dptr = 0, out[2] = {0, 0};
    Sluice__Wire__Reply r = SLUICE__WIRE__REPLY__INIT;
    r.seq = c->seq;
    r.call_id = c->call_id;
    r.result = run(c, &dptr, out);
    Sluice__Cuda__CuMemAllocV2Reply alloc = SLUICE__CUDA__CU_MEM_ALLOC_V2_REPLY__INIT;
    Sluice__Cuda__CuMemGetInfoV2Reply info = SLUICE__CUDA__CU_MEM_GET_INFO_V2_REPLY__INIT;
    Sluice__Cuda__CuMemGetAddressRangeV2Reply range =
        SLUICE__CUDA__CU_MEM_GET_ADDRESS_RANGE_V2_REPLY__INIT;
    if (r.result == CUDA_ERROR_OUT_OF_MEMORY)
        r.detail = "the session's memory quota is used up";
    if (r.result == CUDA_SUCCESS && c->call_id == SL_CALL_cuMemAlloc_v2) {
        alloc.dptr = dptr;
        r.out_case = SLUICE__WIRE__REPLY__OUT_CU_MEM_ALLOC_V2;
        r.cu_mem_alloc_v2 = &alloc;
    } else if (r.result == CUDA_SUCCESS && c->call_id == SL_CALL_cuMemGetInfo_v2) {
        info.free = out[0];
        info.total = out[1];
        r.out_case = SLUICE__WIRE__REPLY__OUT_CU_MEM_GET_INFO_V2;
        r.cu_mem_get_info_v2 = &info;
    } else if (r.result == CUDA_SUCCESS && c->call_id == SL_CALL_cuMemGetAddressRange_v2) {
        range.pbase = out[0];
        range.psize = out[1];
        r.out_case = SLUICE__WIRE__REPLY__OUT_CU_MEM_GET_ADDRESS_RANGE_V2;
        r.cu_mem_get_address_range_v2 = &range;
    }
    size_t bulk = r.result == CUDA_SUCCESS && c->call_id == SL_CALL_cuPointerGetAttribute ? 4 : 0;
    if (r.result == CUDA_SUCCESS && c->call_id == SL_CALL_cuMemcpyDtoH_v2) {
        assert_true(c->cu_memcpy_dto_h_v2->byte_count <= sizeof out);
        bulk = c->cu_memcpy_dto_h_v2->byte_count;
    }
    if (c->no_reply) { /* a free sent without waiting: no reply, a failure is deferred */
        F.failed_nowait += r.result != CUDA_SUCCESS;
        return;
    }
    queue(&r, out, bulk); /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE: 4 bytes; a DtoH copy's bytes */
}

static sl_code fake_send(void *t, const void *msg, size_t len, const struct iovec *bulk, size_t n,
                         sl_error *e)
{
    (void)t;
    (void)bulk;
    (void)n;
    Sluice__Wire__ClientMessage *m = NULL;
    if (sl_wire_decode_client(msg, len, NULL, &m, e))
        return e->code;
    if (m->kind_case == SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS) {
        F.frames++;
        for (size_t i = 0; i < m->calls->n_calls; i++) {
            const Sluice__Wire__Call *c = m->calls->calls[i];
            if (F.calls < 256) {
                F.ids[F.calls] = c->call_id;
                F.nowait[F.calls] = c->no_reply;
            }
            F.calls++;
            if (c->call_id == SL_CALL_cuMemFree_v2)
                c->no_reply ? F.nowait_frees++ : F.sync_frees++;
            if (c->call_id == SL_CALL_cuMemsetD8Async) /* queued: its error would be deferred */
                F.async_memset_failed += find(c->cu_memset_d8_async->dst_device) < 0;
            if (!sl_call_is_async(sl_call_lookup(c->call_id), c) || c->no_reply)
                answer(c);
        }
    }
    sl_wire_free_client(m);
    return SL_OK;
}

static sl_code fake_recv(void *t, const void **msg, size_t *len, uint64_t *bulk_len, int timeout_ms,
                         sl_error *e)
{
    (void)t;
    (void)timeout_ms;
    free(F.cur);
    F.cur = NULL;
    if (F.qhead == F.qn)
        return sl_fail(e, SL_ERR_PEER_LOST, "fake backend has nothing to say");
    F.cur = F.q[F.qhead];
    *msg = F.cur;
    *len = F.qlen[F.qhead];
    *bulk_len = F.qbulk_len[F.qhead];
    F.cur_bulk = F.qbulk[F.qhead++];
    if (F.qhead == F.qn)
        F.qhead = F.qn = 0;
    return SL_OK;
}

static sl_code fake_recv_bulk(void *t, void *dst, size_t len, sl_error *e)
{
    (void)t;
    if (len > sizeof F.cur_bulk)
        return sl_fail(e, SL_ERR_PROTOCOL, "more bulk than the fake has");
    memcpy(dst, &F.cur_bulk, len);
    return SL_OK;
}

static int setup(void **state)
{
    (void)state;
    free(F.cur);
    memset(&F, 0, sizeof F);
    F.next_base = 0x7f0000000000ull;
    F.quota = 64 * MIB;
    sl_fe_rpc_reset();
    struct sl_fe_transport tr = {fake_send, fake_recv, fake_recv_bulk, NULL, NULL, NULL};
    sl_fe_rpc_attach(&tr);
    struct sl_fe_rpc_limits l = {256, (size_t)4 << 20, 4096, (uint64_t)256 << 20, 0, 0, 0, 0, 0};
    sl_fe_rpc_set_limits(&l);
    sl_fe_allocs_configure(1, 8 * MIB, 4);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(F.cur);
    F.cur = NULL;
    return 0;
}

static struct sl_fe_allocs_counts counts(void)
{
    return sl_fe_allocs_counts();
}

/* ------------------------------------------------------------------ tests */
/* cuMemAlloc + cuMemFree of one size: one round trip for the first allocation, none after. */
static void pairs_need_no_round_trip(void **state)
{
    (void)state;
    CUdeviceptr p = 0, first = 0;
    assert_int_equal(cuMemAlloc_v2(&first, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(first), CUDA_SUCCESS);
    int frames = F.frames;
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
        assert_int_equal(p, first);
        assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    }
    assert_int_equal(F.frames, frames);
    assert_int_equal(F.allocs, 1);
    assert_int_equal(counts().cached, 1);
    assert_int_equal(F.used, MIB); /* still held, counted against the quota */
    /* another size is asked of the backend; the cached one stays */
    assert_int_equal(cuMemAlloc_v2(&p, 2 * MIB), CUDA_SUCCESS);
    assert_int_not_equal(p, first);
    assert_int_equal(F.allocs, 2);
}

/* An allocation device work may have touched goes without waiting, not into the cache. */
static void touched_allocation_is_freed(void **state)
{
    (void)state;
    CUdeviceptr p = 0;
    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(p, 1, MIB, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(counts().cached, 0);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(F.nowait_frees, 1);
    assert_int_equal(F.sync_frees, 0);
    assert_int_equal(F.used, 0);
}

/* cuMemGetInfo sees memory freed into the cache as free, as natively. */
static void meminfo_sees_freed_memory(void **state)
{
    (void)state;
    size_t f0 = 0, f1 = 0, f2 = 0, total = 0;
    CUdeviceptr p = 0;
    assert_int_equal(cuMemGetInfo_v2(&f0, &total), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&p, 3 * MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemGetInfo_v2(&f1, &total), CUDA_SUCCESS);
    assert_int_equal(f1 + 3 * MIB, f0);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(counts().cached, 1);
    assert_int_equal(cuMemGetInfo_v2(&f2, &total), CUDA_SUCCESS);
    assert_int_equal(f2, f0);
    assert_int_equal(counts().cached, 0);
    assert_int_equal(F.nowait_frees, 1);
    assert_int_equal(F.ids[F.calls - 2], SL_CALL_cuMemFree_v2); /* in the frame, before it */
    assert_int_equal(F.ids[F.calls - 1], SL_CALL_cuMemGetInfo_v2);
}

/* The pointer queries answer for a freed address as for one never allocated, and for a reused
 * one as for a new allocation of its size. */
static void pointer_queries_see_freed_and_reused(void **state)
{
    (void)state;
    CUdeviceptr p = 0, q = 0, base = 0;
    size_t size = 0;
    unsigned type = 0;
    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(counts().cached, 1);
    assert_int_equal(cuMemGetAddressRange_v2(&base, &size, p + 16), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(counts().cached, 0);
    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p),
                     CUDA_ERROR_INVALID_VALUE);
    /* reused: the allocation the program has now, as a new one would be */
    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&q, MIB), CUDA_SUCCESS);
    assert_int_equal(q, p);
    assert_int_equal(cuMemGetAddressRange_v2(&base, &size, q + 100), CUDA_SUCCESS);
    assert_int_equal(base, q);
    assert_int_equal(size, MIB);
    assert_int_equal(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, q),
                     CUDA_SUCCESS);
    assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
    assert_int_equal(F.failed_nowait, 0);
}

/* A second free of a cached address fails at once, as natively; so does a free inside one. */
static void second_free_fails(void **state)
{
    (void)state;
    CUdeviceptr p = 0;
    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p + 256), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(F.failed_nowait, 0);
    assert_int_equal(F.na, 0);
}

/* Refused for memory while the cache holds some: the cache is freed and the allocation asked
 * once more; refused again, the program gets the refusal. */
static void refusal_releases_the_cache_and_retries_once(void **state)
{
    (void)state;
    F.quota = 4 * MIB;
    CUdeviceptr p[3] = {0}, big = 0;
    for (int i = 0; i < 3; i++)
        assert_int_equal(cuMemAlloc_v2(&p[i], MIB), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cuMemFree_v2(p[i]), CUDA_SUCCESS);
    assert_int_equal(counts().cached, 3);
    assert_int_equal(cuMemAlloc_v2(&big, 2 * MIB), CUDA_SUCCESS);
    assert_int_equal(F.allocs, 5); /* refused, then granted */
    assert_int_equal(F.nowait_frees, 3);
    assert_int_equal(counts().cached, 0);
    assert_int_equal(F.used, 2 * MIB);
    /* nothing left to give back: refused once, no retry */
    CUdeviceptr huge = 0;
    assert_int_equal(cuMemAlloc_v2(&huge, 3 * MIB), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(F.allocs, 6);
    /* with something cached but still too little: retried once, then refused */
    CUdeviceptr one = 0;
    assert_int_equal(cuMemAlloc_v2(&one, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(one), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&huge, 3 * MIB), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(F.allocs, 9);
    assert_int_equal(F.failed_nowait, 0);
}

/* The cache keeps at most its entries and bytes (the oldest go first); a larger allocation,
 * one freed from another context, and any allocation when the cache is off go without waiting. */
static void bounds_hold(void **state)
{
    (void)state;
    CUdeviceptr p[6] = {0};
    for (int i = 0; i < 6; i++)
        assert_int_equal(cuMemAlloc_v2(&p[i], MIB + (uint64_t)i), CUDA_SUCCESS);
    for (int i = 0; i < 6; i++)
        assert_int_equal(cuMemFree_v2(p[i]), CUDA_SUCCESS);
    assert_int_equal(counts().cached, 4); /* entries */
    assert_int_equal(counts().releasing, 2);
    CUdeviceptr q = 0;
    assert_int_equal(cuMemAlloc_v2(&q, MIB), CUDA_SUCCESS); /* the oldest was given up */
    assert_int_not_equal(q, p[0]);
    assert_int_equal(F.nowait_frees, 2);
    assert_int_equal(cuMemAlloc_v2(&q, MIB + 5), CUDA_SUCCESS); /* the newest stays */
    assert_int_equal(q, p[5]);

    CUdeviceptr big = 0;
    assert_int_equal(cuMemAlloc_v2(&big, 9 * MIB), CUDA_SUCCESS); /* over the bytes */
    assert_int_equal(cuMemFree_v2(big), CUDA_SUCCESS);
    assert_int_equal(counts().cached, 3);
    CUdeviceptr six = 0, three = 0;
    assert_int_equal(cuMemAlloc_v2(&six, 6 * MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(six), CUDA_SUCCESS); /* room made: 6 + 3 MiB > 8 MiB */
    assert_true(counts().cached_bytes <= 8 * MIB);

    sl_fe_ctx_push((CUcontext)(uintptr_t)0x5000);
    assert_int_equal(cuMemAlloc_v2(&three, 3 * MIB), CUDA_SUCCESS);
    sl_fe_ctx_set_current((CUcontext)(uintptr_t)0x6000);
    size_t cached = counts().cached;
    assert_int_equal(cuMemFree_v2(three), CUDA_SUCCESS); /* another context: not cached */
    assert_int_equal(counts().cached, cached);
    sl_fe_contexts_reset();

    sl_fe_allocs_configure(0, 8 * MIB, 4);
    CUdeviceptr off = 0;
    assert_int_equal(cuMemAlloc_v2(&off, 7), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(off), CUDA_SUCCESS);
    assert_int_equal(counts().cached, cached);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(F.failed_nowait, 0);
}

/* A context destroyed (or reset): the cache is freed before it, in the same frame. */
static void context_destroy_releases_the_cache(void **state)
{
    (void)state;
    CUcontext ctx = (CUcontext)(uintptr_t)0x5000;
    sl_fe_ctx_remember(ctx, 0);
    sl_fe_ctx_push(ctx);
    CUdeviceptr p = 0;
    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    int calls = F.calls;
    assert_int_equal(cuCtxDestroy_v2(ctx), CUDA_SUCCESS);
    assert_int_equal(F.calls, calls + 2);
    assert_int_equal(F.ids[calls], SL_CALL_cuMemFree_v2);
    assert_true(F.nowait[calls]);
    assert_int_equal(F.ids[calls + 1], SL_CALL_cuCtxDestroy_v2);
    sl_fe_contexts_reset();
    assert_int_equal(counts().cached, 0);
    assert_int_equal(counts().live, 0);
    assert_int_equal(F.na, 0);
}

/* A new session: the old one's memory went with it; nothing is freed, nothing reused. */
static void new_session_forgets(void **state)
{
    (void)state;
    CUdeviceptr p = 0;
    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    sl_fe_allocs_clear();
    struct sl_fe_allocs_counts c = counts();
    assert_int_equal(c.cached + c.live + c.releasing, 0);
    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(F.allocs, 2);
}

/* 1 when the fake saw a free of dptr sent (without waiting) ahead of the last call, of id. */
static int freed_just_before(uint32_t id)
{
    return F.calls >= 2 && F.ids[F.calls - 1] == id && F.ids[F.calls - 2] == SL_CALL_cuMemFree_v2 &&
           F.nowait[F.calls - 2];
}

/* A freed allocation still cached, then the copies and memsets that name an address in it: each
 * gives that allocation up first (its free goes just before), and the driver refuses the call as
 * for any freed address (CUDA_ERROR_INVALID_VALUE), as with the cache off. */
static void copies_and_memsets_see_freed_memory(void **state)
{
    (void)state;
    uint8_t host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CUdeviceptr p = 0, live = 0;
    assert_int_equal(cuMemAlloc_v2(&live, 2 * MIB), CUDA_SUCCESS);

    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(counts().cached, 1);
    assert_int_equal(cuMemcpyHtoD_v2(p, host, sizeof host), CUDA_ERROR_INVALID_VALUE);
    assert_true(freed_just_before(SL_CALL_cuMemcpyHtoD_v2));
    assert_int_equal(counts().cached, 0);

    /* device to host goes as a batch (api/copy.c): the free still goes first */
    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(host, p + 64, sizeof host), CUDA_ERROR_INVALID_VALUE);
    assert_true(freed_just_before(SL_CALL_cuMemcpyDtoH_v2));

    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8_v2(p + MIB - 1, 0, 1), CUDA_ERROR_INVALID_VALUE); /* last byte */
    assert_true(freed_just_before(SL_CALL_cuMemsetD8_v2));

    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoD_v2(live, p, 64), CUDA_ERROR_INVALID_VALUE); /* the source */
    assert_true(freed_just_before(SL_CALL_cuMemcpyDtoD_v2));

    /* the device side of a 2D copy, inside its pod */
    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    CUDA_MEMCPY2D m;
    memset(&m, 0, sizeof m);
    m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    m.srcDevice = live;
    m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    m.dstDevice = p + 4096;
    m.WidthInBytes = 16;
    m.Height = 2;
    m.srcPitch = m.dstPitch = 64;
    assert_int_equal(cuMemcpy2D_v2(&m), CUDA_ERROR_INVALID_VALUE);
    assert_true(freed_just_before(SL_CALL_cuMemcpy2D_v2));

    /* the live allocation answers as one; the releases themselves all succeeded */
    assert_int_equal(cuMemcpyHtoD_v2(live + 8, host, sizeof host), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(host, live, sizeof host), CUDA_SUCCESS);
    assert_int_equal(F.nowait_frees, 5);
    assert_int_equal(F.failed_nowait, 0);
    assert_int_equal(F.na, 1);
}

/* A queued memset of a freed address: its free goes ahead of it in the same frame, so the
 * backend refuses it (a deferred error, as with the cache off). */
static void async_memset_of_freed_memory(void **state)
{
    (void)state;
    CUdeviceptr p = 0;
    assert_int_equal(cuMemAlloc_v2(&p, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(p + 8, 0, 8, NULL), CUDA_SUCCESS);
    assert_int_equal(counts().cached, 0);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(F.async_memset_failed, 1);
    int memset_at = -1, free_at = -1;
    for (int i = 0; i < F.calls && i < 256; i++) {
        if (F.ids[i] == SL_CALL_cuMemsetD8Async)
            memset_at = i;
        if (F.ids[i] == SL_CALL_cuMemFree_v2)
            free_at = i;
    }
    assert_true(free_at >= 0 && free_at < memset_at);
}

/* Only the allocation a call names is given up: the others stay cached and are reused without
 * a round trip; an address between cached allocations gives none up. */
static void only_the_named_allocation_is_given_up(void **state)
{
    (void)state;
    uint8_t host[8] = {0};
    CUdeviceptr a = 0, b = 0, q = 0;
    assert_int_equal(cuMemAlloc_v2(&a, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&b, 3 * MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(b), CUDA_SUCCESS);
    assert_int_equal(counts().cached, 2);
    /* the fake places allocations 2 MiB apart: a + MIB is between a and b, in neither */
    assert_int_equal(cuMemcpyHtoD_v2(a + MIB, host, sizeof host), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(counts().cached, 2);
    assert_int_equal(cuMemcpyHtoD_v2(a + 5, host, sizeof host), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(counts().cached, 1);
    int allocs = F.allocs;
    assert_int_equal(cuMemAlloc_v2(&q, 3 * MIB), CUDA_SUCCESS);
    assert_int_equal(q, b);
    assert_int_equal(F.allocs, allocs);                                    /* from the cache */
    assert_int_equal(cuMemcpyHtoD_v2(b, host, sizeof host), CUDA_SUCCESS); /* live again */
    assert_int_equal(F.failed_nowait, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(pairs_need_no_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(touched_allocation_is_freed, setup, teardown),
        cmocka_unit_test_setup_teardown(meminfo_sees_freed_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(pointer_queries_see_freed_and_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(second_free_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(refusal_releases_the_cache_and_retries_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(bounds_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(context_destroy_releases_the_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(new_session_forgets, setup, teardown),
        cmocka_unit_test_setup_teardown(copies_and_memsets_see_freed_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(async_memset_of_freed_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(only_the_named_allocation_is_given_up, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
