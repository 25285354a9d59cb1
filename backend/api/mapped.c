/* Mapped host memory (cuMemHostAlloc / cuMemHostRegister with DEVICEMAP in the guest).
 *
 * The guest's range cannot be seen by the GPU, so the session keeps a buffer of page-locked
 * host memory of its own, registered with the driver as mapped memory, and the two copies are
 * kept coherent at call boundaries: slMappedWrite brings the bytes the guest changed before its
 * next call, and every synchronous reply carries (Reply.mapped) the bytes that device work
 * changed since the last reply. The buffer is mapped at the guest's own address when that
 * address is free in this process, so that (unified addressing) the device address the guest
 * sees equals its pointer, as it does natively. Mapped memory counts against the instance's
 * memory quota (accounting/quota.c), as device memory does, and is bounded per session by
 * BE_MAPPED_MAX_BYTES of page-locked host memory. */
#include "api/mapped.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "accounting/quota.h"
#include "api/reply.h"
#include "session/ranges.h"
#include "session/state.h"
#include "session/streams.h"
#include "sluice/backend_handlers.h"
#include "sluice/diffspan.h"

#define BE_MAPPED_MAX_BYTES ((uint64_t)1 << 30) /* page-locked host memory per session */

struct be_map {
    struct be_map *next;
    uint64_t dptr;   /* device address of the guest's first byte (the record's key) */
    uint64_t len;    /* the guest's length */
    uint8_t *host;   /* our copy of the guest's first byte */
    uint8_t *shadow; /* what the guest was last told / last sent */
    uint64_t resume; /* where the next reply's comparison starts (a change too large for one) */
    void *page;      /* the mapping */
    size_t page_len;
};

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static struct be_map *find(sl_be_session *s, uint64_t dptr)
{
    for (struct be_map *m = s->mapped; m; m = m->next)
        if (m->dptr == dptr)
            return m;
    return NULL;
}

static void release(sl_be_session *s, struct be_map *m)
{
    if (s->api->cuMemHostUnregister)
        s->api->cuMemHostUnregister(m->page);
    be_mem_remove(&s->mem, m->dptr - (uint64_t)(m->host - (uint8_t *)m->page));
    munmap(m->page, m->page_len);
    s->mapped_bytes -= m->page_len;
    free(m->shadow);
    free(m);
    be_acct_mem_publish(s);
}

/* An anonymous mapping at want (page-aligned) if it is free here, else anywhere. */
static void *map_at(uintptr_t want, size_t len)
{
    void *p = MAP_FAILED;
    if (want)
        p = mmap((void *)want, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != MAP_FAILED && (uintptr_t)p != want) {
        munmap(p, len); /* an old kernel took the hint only */
        p = MAP_FAILED;
    }
    if (p == MAP_FAILED)
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

CUresult be_h_slMappedAlloc(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const struct sl_driver_api *api = c->api;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__SlMappedAllocRequest *rq = call->sl_mapped_alloc;
    size_t pg = page_size();
    uint64_t off = rq->address % pg;
    if (rq->bytesize == 0 || rq->bytesize > BE_MAPPED_MAX_BYTES) {
        sl_be_detail(reply, "mapped host memory of %llu bytes (at most %llu per session)",
                     (unsigned long long)rq->bytesize, (unsigned long long)BE_MAPPED_MAX_BYTES);
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t len = (size_t)((off + rq->bytesize + pg - 1) / pg * pg);
    if (s->mapped_bytes + len > BE_MAPPED_MAX_BYTES) {
        sl_be_detail(reply, "mapped host memory: the session's %llu bytes are in use",
                     (unsigned long long)BE_MAPPED_MAX_BYTES);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (!api->cuMemHostRegister_v2 || !api->cuMemHostGetDevicePointer_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    char why[200]; /* the twin counts against the instance's memory quota (quota.c) */
    if (be_acct_mem_admit(s, len, why, sizeof why) != 0) {
        sl_be_detail(reply, "mapped host memory: %s", why);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    Sluice__Cuda__SlMappedAllocReply *rp =
        BE_REPLY(reply, sl_mapped_alloc, SLUICE__WIRE__REPLY__OUT_SL_MAPPED_ALLOC,
                 Sluice__Cuda__SlMappedAllocReply, sluice__cuda__sl_mapped_alloc_reply__init);
    struct be_map *m = calloc(1, sizeof *m);
    uint8_t *shadow = calloc(1, (size_t)rq->bytesize);
    void *page = map_at((uintptr_t)(rq->address - off), len);
    if (!rp || !m || !shadow || !page) {
        if (page)
            munmap(page, len);
        free(m);
        free(shadow);
        be_acct_mem_publish(s); /* the reservation goes */
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = api->cuMemHostRegister_v2(
        page, len, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
    CUdeviceptr d = 0;
    if (rc == CUDA_SUCCESS) {
        rc = api->cuMemHostGetDevicePointer_v2(&d, page, 0);
        if (rc == CUDA_SUCCESS)
            rc = be_mem_add(&s->mem, d, len, BE_R_OTHER, s->cur_ctx == UINT64_MAX ? 0 : s->cur_ctx,
                            0);
        if (rc != CUDA_SUCCESS && api->cuMemHostUnregister)
            api->cuMemHostUnregister(page);
    }
    if (rc != CUDA_SUCCESS) {
        munmap(page, len);
        free(m);
        free(shadow);
        be_acct_mem_publish(s);
        return rc;
    }
    *m = (struct be_map){.next = s->mapped,
                         .dptr = d + off,
                         .len = rq->bytesize,
                         .host = (uint8_t *)page + off,
                         .shadow = shadow,
                         .page = page,
                         .page_len = len};
    s->mapped = m;
    s->mapped_bytes += len;
    rp->dptr = m->dptr;
    be_acct_mem_publish(s); /* what is held now replaces the reservation */
    return CUDA_SUCCESS;
}

CUresult be_h_slMappedFree(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    uint64_t dptr = call->sl_mapped_free->dptr;
    for (struct be_map **pp = &s->mapped; *pp; pp = &(*pp)->next)
        if ((*pp)->dptr == dptr) {
            struct be_map *m = *pp;
            *pp = m->next;
            release(s, m);
            return CUDA_SUCCESS;
        }
    sl_be_detail(reply, "no mapped host memory at 0x%llx", (unsigned long long)dptr);
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult be_h_slMappedWrite(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__SlMappedWriteRequest *rq = call->sl_mapped_write;
    struct be_map *m = find(s, rq->dptr);
    uint64_t n = c->in_len;
    if (!m || rq->offset > m->len || n > m->len - rq->offset) {
        sl_be_detail(reply, "mapped write of %llu bytes at 0x%llx+%llu is outside mapped memory",
                     (unsigned long long)n, (unsigned long long)rq->dptr,
                     (unsigned long long)rq->offset);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (n) {
        memcpy(m->host + rq->offset, c->in, (size_t)n);
        memcpy(m->shadow + rq->offset, c->in, (size_t)n);
    }
    return CUDA_SUCCESS;
}

/* A settle whose stream was still busy: its range becomes settled once ev is done. */
struct be_settle {
    struct be_settle *next;
    uint64_t dptr, len; /* the twin's range */
    CUevent ev;         /* recorded on the settle's stream */
};

#define BE_MAX_SETTLES 64u /* pending at once per session; past that a settle waits inline */

/* The twin's bytes of [dptr, dptr + len) are what the guest has (its shadow). */
static void settle_range(sl_be_session *s, uint64_t dptr, uint64_t len)
{
    for (struct be_map *m = s->mapped; m; m = m->next)
        if (dptr >= m->dptr && dptr - m->dptr < m->len && len <= m->len - (dptr - m->dptr)) {
            size_t off = (size_t)(dptr - m->dptr);
            memcpy(m->shadow + off, m->host + off, (size_t)len);
            return;
        }
}

void be_mapped_settle_pending(sl_be_session *s, int wait)
{
    for (struct be_settle **pp = &s->settles; *pp;) {
        struct be_settle *x = *pp;
        CUresult rc = wait ? s->api->cuEventSynchronize(x->ev) : s->api->cuEventQuery(x->ev);
        if (rc == CUDA_ERROR_NOT_READY) {
            pp = &x->next;
            continue;
        }
        if (rc == CUDA_SUCCESS)
            settle_range(s, x->dptr, x->len);
        s->api->cuEventDestroy_v2(x->ev);
        *pp = x->next;
        s->n_settles--;
        free(x);
    }
}

/* The settle's stream st still busy past the poll: its range settles when the stream's work
 * queued so far is done (be_mapped_settle_pending, before each reply's changes are
 * collected), so that the session thread does not wait for a kernel another guest thread's
 * calls would wait behind. 0: settle inline. */
static int settle_later(sl_be_session *s, CUstream st, uint64_t dptr, uint64_t len)
{
    const struct sl_driver_api *api = s->api;
    if (!s->waits || s->n_settles >= BE_MAX_SETTLES || !api->cuEventCreate || !api->cuEventRecord ||
        !api->cuEventQuery || !api->cuEventSynchronize || !api->cuEventDestroy_v2)
        return 0;
    struct be_settle *x = calloc(1, sizeof *x);
    if (!x)
        return 0;
    CUstreamCaptureMode mode = be_capture_relax(s);
    int later = !be_poll_done(s, st, NULL) && be_event_on(s, st, CU_EVENT_DISABLE_TIMING, &x->ev);
    be_capture_restore(s, mode);
    if (!later) {
        free(x);
        return 0;
    }
    x->dptr = dptr;
    x->len = len;
    x->next = s->settles;
    s->settles = x;
    s->n_settles++;
    return 1;
}

/* frontend/api/copy.c: the device copied into the twin (queued before this on the stream) what
 * the guest's range gets by the ordinary copy that follows: once the stream is done, the twin's
 * bytes are what the guest has, so no reply sends them again. */
CUresult be_h_slMappedSettle(struct sl_be_call *c)
{
    sl_be_session *s = c->s;
    Sluice__Wire__Reply *reply = c->reply;
    const Sluice__Cuda__SlMappedSettleRequest *rq = c->call->sl_mapped_settle;
    struct be_map *m = s->mapped;
    while (m && !(rq->dptr >= m->dptr && rq->dptr - m->dptr < m->len))
        m = m->next;
    if (!m || rq->length > m->len - (rq->dptr - m->dptr)) {
        sl_be_detail(reply, "mapped range 0x%llx+%llu is outside mapped memory",
                     (unsigned long long)rq->dptr, (unsigned long long)rq->length);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUstream st;
    CUresult rc = be_stream(s, rq->h_stream, &st);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (settle_later(s, c->call->per_thread_stream && !st ? CU_STREAM_PER_THREAD : st, rq->dptr,
                     rq->length))
        return CUDA_SUCCESS;
    CUresult (*sync)(CUstream) = c->call->per_thread_stream && s->api->cuStreamSynchronize_ptsz
                                     ? s->api->cuStreamSynchronize_ptsz
                                     : s->api->cuStreamSynchronize;
    rc = sync ? sync(st) : CUDA_ERROR_NOT_SUPPORTED;
    if (rc != CUDA_SUCCESS)
        return rc;
    size_t off = (size_t)(rq->dptr - m->dptr);
    memcpy(m->shadow + off, m->host + off, (size_t)rq->length);
    return CUDA_SUCCESS;
}

/* What one reply carries of device writes to mapped memory: the rest goes with the next replies
 * (Reply.mapped_more; the frontend asks with slFence until none is left), so that a reply stays
 * within the channel's message bound whatever is mapped. Each run of changed pages is one span
 * (sluice/diffspan.h), so a kernel that sets a flag at each end of a large range sends two small
 * spans, not the range. */
#define BE_MAPPED_REPLY_MAX   ((size_t)8 << 20) /* the channel takes 16 MiB messages */
#define BE_MAPPED_REPLY_SPANS 1024              /* spans per reply */

/* Adds the span [lo, hi) of m to the reply's list; 0 when out of memory. */
static int add_span(Sluice__Wire__Reply *reply, size_t *cap, const struct be_map *m, size_t lo,
                    size_t hi)
{
    if (reply->n_mapped == *cap) {
        size_t ncap = *cap ? 2 * *cap : 4;
        Sluice__Wire__MappedData **v = realloc(reply->mapped, ncap * sizeof *v);
        if (!v)
            return 0;
        reply->mapped = v;
        *cap = ncap;
    }
    Sluice__Wire__MappedData *d = malloc(sizeof *d + (hi - lo));
    if (!d)
        return 0;
    sluice__wire__mapped_data__init(d);
    d->dptr = m->dptr;
    d->offset = lo;
    d->data.data = (uint8_t *)(d + 1);
    d->data.len = hi - lo;
    memcpy(d->data.data, m->host + lo, hi - lo);
    memcpy(m->shadow + lo, d->data.data, hi - lo);
    reply->mapped[reply->n_mapped++] = d;
    return 1;
}

/* The spans of m in [from, end) into the reply while room lasts: 0 when the reply is full (m's
 * resume then says where the next reply goes on), 1 when every change there is taken. */
static int collect_range(Sluice__Wire__Reply *reply, size_t *cap, size_t *room, struct be_map *m,
                         size_t from, size_t end)
{
    size_t lo, hi = from;
    while (sl_diff_next(m->host, m->shadow, end, hi, &lo, &hi)) {
        if (!*room || reply->n_mapped == BE_MAPPED_REPLY_SPANS) {
            m->resume = lo;
            return 0;
        }
        size_t take = hi - lo > *room ? *room : hi - lo;
        if (!add_span(reply, cap, m, lo, lo + take)) {
            m->resume = lo; /* out of memory: tried again at the next reply */
            return 0;
        }
        *room -= take;
        if (lo + take < hi) {
            m->resume = lo + take;
            return 0;
        }
    }
    return 1;
}

void be_mapped_collect(sl_be_session *s, Sluice__Wire__Reply *reply)
{
    size_t room = BE_MAPPED_REPLY_MAX, cap = 0;
    if (s->settles) /* what settled since: not sent again */
        be_mapped_settle_pending(s, 0);
    for (struct be_map *m = s->mapped; m; m = m->next) {
        /* from where the last full reply stopped, then the rest: a large change crosses in
         * several replies without each comparing the part already sent */
        size_t start = m->resume < m->len ? (size_t)m->resume : 0;
        if (!collect_range(reply, &cap, &room, m, start, (size_t)m->len) ||
            !collect_range(reply, &cap, &room, m, 0, start)) {
            reply->mapped_more = 1; /* the rest differs still: a later reply takes it */
            return;
        }
        m->resume = 0;
    }
}

void be_mapped_collect_done(Sluice__Wire__Reply *reply)
{
    for (size_t i = 0; i < reply->n_mapped; i++)
        free(reply->mapped[i]);
    free(reply->mapped);
    reply->mapped = NULL;
    reply->n_mapped = 0;
}

void be_mapped_release_all(sl_be_session *s)
{
    be_mapped_settle_pending(s, 1);
    while (s->mapped) {
        struct be_map *m = s->mapped;
        s->mapped = m->next;
        release(s, m);
    }
}
