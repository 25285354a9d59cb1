/* Memoized queries. Frameworks ask the same immutable questions again and again (PyTorch asks
 * cuKernelGetAttribute, cuKernelGetFunction and occupancy queries for every launch); each would
 * cost a round trip. Calls flagged `memo` in proto/api/cuda_driver.api keep their successful
 * answer, keyed by the packed call (arguments, context, per-thread flag; the seq excluded), and
 * answer it again locally; any call flagged `unmemo` (setting an attribute or limit, unloading,
 * destroying or resetting a context) forgets every answer first, except a kernel's or function's
 * attribute setter (the table's fattr=set), which forgets only what it can change: the answers
 * about that attribute (fattr=get|set, of any kernel or function) and those that use every
 * attribute (fattr=uses: occupancy). cuBLAS and PyTorch set an attribute of each
 * new kernel they use; each set used to cost every later query a round trip again (a first
 * sgemm: 17, run 28). Handle ids are never reused,
 * so an answer cannot be mistaken for another object's. Bounded: the table is emptied when full.
 * Also what the memo forgets as calls go (an `unmemo` call, an answer with an error) and when an
 * answer may be kept. Called with the call layer's lock held (filters.c). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "call/memo.h"
#include "sluice/call_facts.h"
#include "sluice/fe_calls.h"
#include "sluice/wire.h"

#define MEMO_BUCKETS 4096u
#define MEMO_MAX     65536u

struct memo {
    struct memo *next;
    uint32_t call_id;
    uint32_t attribute; /* a kernel or function attribute's call: the attribute + 1, else 0 */
    uint64_t hash;
    size_t key_len, reply_len;
    uint8_t *key, *reply; /* one allocation: key bytes then packed reply */
};

static struct memo *g_bucket[MEMO_BUCKETS];
static size_t g_count;
static uint32_t g_forget_by_call[SL_CALL_ID_MAX + 1]; /* the memo emptied, per call id */
static atomic_int g_capture_begun; /* a stream capture was begun in this process */
static uint64_t g_forget_seq;      /* the seq sent when the memo was last emptied */

/* The attribute a fattr=get|set call is about, + 1; 0 for other calls. */
static uint32_t attribute_of(const Sluice__Wire__Call *call)
{
    uint32_t a;
    return sl_call_fattr(call, &a) ? a + 1u : 0;
}

/* Whether a kept answer depends on every attribute of its kernel or function (fattr=uses). */
static int uses_attributes(uint32_t call_id)
{
    const struct sl_call_info *ci = sl_call_lookup(call_id);
    return ci && ci->fattr == SL_FATTR_USES;
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

void sl_fe_memo_clear(void)
{
    for (size_t i = 0; i < MEMO_BUCKETS; i++)
        while (g_bucket[i]) {
            struct memo *m = g_bucket[i];
            g_bucket[i] = m->next;
            free(m);
        }
    g_count = 0;
}

/* Forgets the answers of call_id (0: none) and, with attribute, those about that attribute and
 * those that use every attribute. */
static void forget(uint32_t call_id, uint32_t attribute)
{
    if (!g_count)
        return;
    for (size_t i = 0; i < MEMO_BUCKETS; i++)
        for (struct memo **pp = &g_bucket[i]; *pp;) {
            struct memo *m = *pp;
            if (m->call_id == call_id ||
                (attribute && (m->attribute == attribute || uses_attributes(m->call_id)))) {
                *pp = m->next;
                free(m);
                g_count--;
            } else {
                pp = &m->next;
            }
        }
}

int sl_fe_memo_capture_begun(void)
{
    return atomic_load(&g_capture_begun);
}

void sl_fe_memo_uncapture(void)
{
    forget(SL_CALL_cuStreamIsCapturing, 0);
}

/* Only "not capturing" is kept of the capture-status answers: a capture may be invalidated by
 * work whose error arrives later, so a stream seen capturing is asked again. */
static int keepable(const Sluice__Wire__Reply *r)
{
    return !SL_FE_REPLY(cuStreamIsCapturing, r) ||
           r->cu_stream_is_capturing->capture_status == CU_STREAM_CAPTURE_STATUS_NONE;
}

/* The key: the call packed with seq 0. Returns a malloc'd buffer, NULL on failure. */
static uint8_t *key_of(const Sluice__Wire__Call *call, size_t *len)
{
    Sluice__Wire__Call k = *call;
    k.seq = 0;
    k.bulk_length = 0;
    *len = sl_wire_call_packed_size(&k);
    uint8_t *b = malloc(*len ? *len : 1);
    if (b)
        sl_wire_call_pack(&k, b);
    return b;
}

int sl_fe_memo_get(const Sluice__Wire__Call *call, Sluice__Wire__Reply **reply)
{
    if (!g_count)
        return 0;
    size_t len;
    uint8_t *key = key_of(call, &len);
    if (!key)
        return 0;
    uint64_t h = fnv1a(key, len);
    const struct memo *m = g_bucket[h % MEMO_BUCKETS];
    while (m && !(m->hash == h && m->key_len == len && !memcmp(m->key, key, len)))
        m = m->next;
    free(key);
    if (!m)
        return 0;
    *reply = sl_wire_reply_unpack(m->reply_len, m->reply);
    if (!*reply)
        return 0;
    (*reply)->seq = call->seq;
    return 1;
}

void sl_fe_memo_put(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *reply)
{
    if (reply->result != 0 || reply->bulk_length || reply->failed_seq || reply->n_mapped ||
        reply->stdout_data.len || reply->stderr_data.len || !keepable(reply))
        return; /* only clean answers are worth repeating */
    if (g_count >= MEMO_MAX)
        sl_fe_memo_clear();
    size_t klen;
    uint8_t *key = key_of(call, &klen);
    if (!key)
        return;
    size_t rlen = sl_wire_reply_packed_size(reply);
    struct memo *m = malloc(sizeof *m + klen + rlen);
    if (!m) {
        free(key);
        return;
    }
    m->call_id = call->call_id;
    m->attribute = attribute_of(call);
    m->hash = fnv1a(key, klen);
    m->key_len = klen;
    m->reply_len = rlen;
    m->key = (uint8_t *)(m + 1);
    m->reply = m->key + klen;
    memcpy(m->key, key, klen);
    free(key);
    sl_wire_reply_pack(reply, m->reply);
    m->next = g_bucket[m->hash % MEMO_BUCKETS];
    g_bucket[m->hash % MEMO_BUCKETS] = m;
    g_count++;
}

/* ------------------------------------------------------------------ what the memo forgets */
void sl_fe_memo_forget(uint32_t call_id, uint64_t seq_now)
{
    sl_fe_memo_clear();
    g_forget_seq = seq_now; /* an answer to a call up to here may be stale now */
    if (call_id <= SL_CALL_ID_MAX)
        g_forget_by_call[call_id]++;
}

/* Before call goes out: an `unmemo` call empties the memo (an attribute setter forgets only
 * what it changes, above); an `uncapture` one forgets the
 * capture answers, unless no capture was ever begun in this process (a stream can join a
 * capture by waiting on an event only when some stream captures: cuDNN waits on events every
 * step, and each wait used to cost a cuStreamIsCapturing round trip). */
void sl_fe_memo_before(const Sluice__Wire__Call *call, uint32_t flags, uint64_t seq_now)
{
    if (flags & SL_CALL_UNMEMO) {
        uint32_t attribute = attribute_of(call);
        if (attribute) { /* fattr=set */
            forget(0, attribute);
            g_forget_seq = seq_now;
            if (call->call_id <= SL_CALL_ID_MAX)
                g_forget_by_call[call->call_id]++;
        } else {
            sl_fe_memo_forget(call->call_id, seq_now);
        }
    }
    if (!(flags & SL_CALL_UNCAPTURE))
        return;
    if (flags & SL_CALL_CAPTURE_BEGIN)
        g_capture_begun = 1;
    if (g_capture_begun)
        sl_fe_memo_uncapture();
}

void sl_fe_memo_answered(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *reply)
{
    /* other threads' calls may have gone out while this one waited: an answer is kept only if
     * nothing sent after it made it stale (docs/frontend-internals.md) */
    if (g_forget_seq < call->seq)
        sl_fe_memo_put(call, reply);
}

const uint32_t *sl_fe_memo_forget_counts(void)
{
    return g_forget_by_call;
}

void sl_fe_memo_reset(void)
{
    memset(g_forget_by_call, 0, sizeof g_forget_by_call);
    g_capture_begun = 0;
    g_forget_seq = 0;
    sl_fe_memo_clear();
}
