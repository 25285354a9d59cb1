/* Bulk lanes: the cut of a bulk into pieces and the assembly of pieces read on several lanes
 * (sluice/lanes.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/lanes.h"

static uint64_t piece_size(uint64_t n, uint32_t k)
{
    uint64_t p = n / k + (n % k != 0);
    return (p + SL_LANE_ALIGN - 1) / SL_LANE_ALIGN * SL_LANE_ALIGN;
}

int sl_lane_layout_ok(uint64_t n, uint32_t k, sl_error *e)
{
    if (k == 0 || k > SL_LANE_MAX_PIECES) {
        sl_fail(e, SL_ERR_PROTOCOL, "%u lane pieces (1 to %u)", k, SL_LANE_MAX_PIECES);
        return 0;
    }
    if (n == 0) {
        sl_fail(e, SL_ERR_PROTOCOL, "%u lane pieces of an empty bulk", k);
        return 0;
    }
    if ((uint64_t)(k - 1) * piece_size(n, k) >= n) {
        sl_fail(e, SL_ERR_PROTOCOL, "%llu bytes cannot be cut into %u lane pieces of %llu bytes",
                (unsigned long long)n, k, (unsigned long long)piece_size(n, k));
        return 0;
    }
    return 1;
}

void sl_lane_piece(uint64_t n, uint32_t k, uint32_t i, uint64_t *offset, uint64_t *length)
{
    uint64_t p = piece_size(n, k), off = (uint64_t)i * p;
    *offset = off;
    *length = off >= n ? 0 : (n - off < p ? n - off : p);
}

unsigned sl_lane_of(uint64_t seq, uint32_t i, unsigned lanes)
{
    return lanes ? (unsigned)((seq + i) % lanes) : 0;
}

uint32_t sl_lane_pieces_for(uint64_t n, unsigned lanes)
{
    uint64_t k = (n + SL_LANE_PIECE - 1) / SL_LANE_PIECE;
    if (k < lanes)
        k = lanes;
    if (k > SL_LANE_MAX_PIECES)
        k = SL_LANE_MAX_PIECES;
    while (k > 1 && !sl_lane_layout_ok(n, (uint32_t)k, NULL))
        k--;
    return (uint32_t)(k ? k : 1);
}

struct pend {
    uint64_t seq, n;
    uint8_t *dst;
    uint32_t k, arrived;
    uint64_t claimed; /* one bit per piece */
};

struct sl_lane_asm {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned lanes;
    uint64_t top; /* the highest seq expected so far (for a stray piece's reason) */
    struct pend p[SL_LANE_MAX_PENDING];
    unsigned np;
    sl_code failed;
    char why[SL_ERROR_MSG_MAX];
};

sl_code sl_lane_asm_new(unsigned lanes, sl_lane_asm **out, sl_error *e)
{
    *out = NULL;
    if (lanes == 0 || lanes > SL_LANE_MAX)
        return sl_fail(e, SL_ERR_INVALID, "%u lanes (1 to %u)", lanes, SL_LANE_MAX);
    sl_lane_asm *a = calloc(1, sizeof *a);
    if (!a)
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&a->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cv, &ca);
    pthread_condattr_destroy(&ca);
    a->lanes = lanes;
    *out = a;
    return SL_OK;
}

void sl_lane_asm_free(sl_lane_asm *a)
{
    if (!a)
        return;
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

static struct pend *find(sl_lane_asm *a, uint64_t seq)
{
    for (unsigned i = 0; i < a->np; i++)
        if (a->p[i].seq == seq)
            return &a->p[i];
    return NULL;
}

/* Under the lock: the first failure is kept, everyone waiting wakes. */
static sl_code fail_locked(sl_lane_asm *a, sl_code code, const char *why)
{
    if (!a->failed) {
        a->failed = code ? code : SL_ERR_PROTOCOL;
        snprintf(a->why, sizeof a->why, "%s", why);
    }
    pthread_cond_broadcast(&a->cv);
    return a->failed;
}

static sl_code failed_locked(const sl_lane_asm *a, sl_error *e)
{
    return sl_fail(e, a->failed, "%s", a->why);
}

sl_code sl_lane_asm_expect(sl_lane_asm *a, uint64_t seq, uint8_t *dst, uint64_t n, uint32_t k,
                           sl_error *e)
{
    sl_error le;
    if (!dst || !sl_lane_layout_ok(n, k, &le))
        return dst ? sl_fail(e, le.code, "call seq %llu: %s", (unsigned long long)seq, le.msg)
                   : sl_fail(e, SL_ERR_INVALID, "no destination for seq %llu's lane pieces",
                             (unsigned long long)seq);
    pthread_mutex_lock(&a->mu);
    sl_code rc = SL_OK;
    if (a->failed)
        rc = failed_locked(a, e);
    else if (find(a, seq))
        rc = sl_fail(e, SL_ERR_PROTOCOL, "lane pieces of seq %llu announced twice",
                     (unsigned long long)seq);
    else if (a->np == SL_LANE_MAX_PENDING)
        rc = sl_fail(e, SL_ERR_TOO_LARGE, "more than %u calls with lane pieces outstanding",
                     SL_LANE_MAX_PENDING);
    if (rc == SL_OK) {
        a->p[a->np++] = (struct pend){.seq = seq, .n = n, .dst = dst, .k = k};
        if (seq > a->top)
            a->top = seq;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return rc;
}

static void deadline(struct timespec *t, int ms)
{
    clock_gettime(CLOCK_MONOTONIC, t);
    t->tv_sec += ms / 1000;
    t->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

sl_code sl_lane_asm_claim(sl_lane_asm *a, unsigned lane, uint64_t seq, uint32_t piece,
                          uint64_t offset, uint64_t length, int wait_ms, uint8_t **dst, sl_error *e)
{
    char why[SL_ERROR_MSG_MAX] = "";
    *dst = NULL;
    pthread_mutex_lock(&a->mu);
    struct timespec until;
    deadline(&until, wait_ms > 0 ? wait_ms : 0);
    while (!a->failed && !find(a, seq) && wait_ms > 0 &&
           pthread_cond_timedwait(&a->cv, &a->mu, &until) != ETIMEDOUT)
        ;
    struct pend *p = a->failed ? NULL : find(a, seq);
    uint64_t off = 0, len = 0;
    if (a->failed) {
        sl_code rc = failed_locked(a, e);
        pthread_mutex_unlock(&a->mu);
        return rc;
    }
    if (!p && seq > a->top)
        snprintf(why, sizeof why, "lane %u: a piece of seq %llu, which no call announced", lane,
                 (unsigned long long)seq);
    else if (!p)
        snprintf(why, sizeof why, "lane %u: a piece of seq %llu, which has no pieces outstanding",
                 lane, (unsigned long long)seq);
    else if (piece >= p->k)
        snprintf(why, sizeof why, "lane %u: piece %u of seq %llu, which has %u pieces", lane, piece,
                 (unsigned long long)seq, p->k);
    else if (sl_lane_piece(p->n, p->k, piece, &off, &len), off != offset || len != length)
        snprintf(why, sizeof why,
                 "lane %u: piece %u of seq %llu at %llu+%llu, its place is %llu+%llu", lane, piece,
                 (unsigned long long)seq, (unsigned long long)offset, (unsigned long long)length,
                 (unsigned long long)off, (unsigned long long)len);
    else if (sl_lane_of(seq, piece, a->lanes) != lane)
        snprintf(why, sizeof why, "lane %u: piece %u of seq %llu belongs on lane %u", lane, piece,
                 (unsigned long long)seq, sl_lane_of(seq, piece, a->lanes));
    else if (p->claimed & ((uint64_t)1 << piece))
        snprintf(why, sizeof why, "lane %u: piece %u of seq %llu came twice", lane, piece,
                 (unsigned long long)seq);
    if (why[0]) {
        sl_code rc = fail_locked(a, SL_ERR_PROTOCOL, why);
        pthread_mutex_unlock(&a->mu);
        return sl_fail(e, rc, "%s", why);
    }
    p->claimed |= (uint64_t)1 << piece;
    *dst = p->dst + off;
    pthread_mutex_unlock(&a->mu);
    return SL_OK;
}

void sl_lane_asm_arrived(sl_lane_asm *a, uint64_t seq, uint32_t piece)
{
    pthread_mutex_lock(&a->mu);
    struct pend *p = find(a, seq);
    if (p && piece < p->k && (p->claimed & ((uint64_t)1 << piece))) {
        p->arrived++;
        if (p->arrived == p->k)
            pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
}

sl_code sl_lane_asm_wait(sl_lane_asm *a, uint64_t seq, int timeout_ms, sl_error *e)
{
    struct timespec until;
    deadline(&until, timeout_ms > 0 ? timeout_ms : 0);
    pthread_mutex_lock(&a->mu);
    sl_code rc = SL_OK;
    for (;;) {
        struct pend *p = find(a, seq);
        if (a->failed) {
            rc = failed_locked(a, e);
            break;
        }
        if (!p) {
            rc = sl_fail(e, SL_ERR_INVALID, "seq %llu expects no lane pieces",
                         (unsigned long long)seq);
            break;
        }
        if (p->arrived == p->k)
            break;
        int w = timeout_ms < 0 ? pthread_cond_wait(&a->cv, &a->mu)
                               : pthread_cond_timedwait(&a->cv, &a->mu, &until);
        if (w == ETIMEDOUT) {
            p = find(a, seq);
            if (p && p->arrived == p->k)
                break;
            rc = sl_fail(e, SL_ERR_TIMEOUT, "%u of %u lane pieces of seq %llu arrived in %d ms",
                         p ? p->arrived : 0, p ? p->k : 0, (unsigned long long)seq, timeout_ms);
            break;
        }
    }
    pthread_mutex_unlock(&a->mu);
    return rc;
}

void sl_lane_asm_forget(sl_lane_asm *a, uint64_t seq)
{
    pthread_mutex_lock(&a->mu);
    struct pend *p = find(a, seq);
    if (p) {
        unsigned i = (unsigned)(p - a->p);
        memmove(&a->p[i], &a->p[i + 1], (a->np - i - 1) * sizeof *p);
        a->np--;
    }
    pthread_mutex_unlock(&a->mu);
}

void sl_lane_asm_fail(sl_lane_asm *a, sl_code code, const char *why)
{
    pthread_mutex_lock(&a->mu);
    fail_locked(a, code, why);
    pthread_mutex_unlock(&a->mu);
}
