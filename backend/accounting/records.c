/* A session's accounting over time (docs/accounting.md), on its worker thread: per frame, the
 * GPU-share admission (a capped instance's frame waits while its bucket is in debt, share.c) and,
 * after the frame, closing and measuring the timed runs (timing.c) and charging the bucket; per
 * interval and at the session's end, one usage record per device the session used (usage.c);
 * the accounting state's life (attach, finish). */
#include "accounting/records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accounting/intervals.h"
#include "accounting/quota.h"
#include "accounting/share.h"
#include "accounting/state.h"
#include "accounting/timing.h"
#include "accounting/usage.h"
#include "bounds.h"
#include "session/contexts.h"
#include "session/devices.h"
#include "session/state.h"
#include "sluice/error.h"
#include "sluice/log.h"

static int closing(sl_be_session *s)
{
    pthread_mutex_lock(&s->mu);
    int c = s->closing;
    pthread_mutex_unlock(&s->mu);
    return c;
}

static int capped(const struct be_acct *a)
{
    return a->cfg.shm && a->sla.share > 0 && a->sla.share < 1;
}

void be_acct_frame_begin(sl_be_session *s)
{
    struct be_acct *a = s->acct;
    if (!a || !capped(a))
        return;
    struct be_acct_inst *in = &a->cfg.shm->inst[a->cfg.inst];
    for (;;) {
        be_acct_lock(a->cfg.shm);
        double share = in->sla.share; /* the server may have changed it (a new grant) */
        if (!in->bucket_set) {
            be_bucket_init(&in->bucket, share, be_acct_clock_ns(CLOCK_MONOTONIC));
            in->bucket_set = 1;
        }
        be_bucket_accrue(&in->bucket, be_acct_clock_ns(CLOCK_MONOTONIC));
        int64_t wait = share > 0 && share < 1 ? be_bucket_wait_ns(&in->bucket) : 0;
        be_acct_unlock(a->cfg.shm);
        if (wait <= 0 || closing(s))
            return;
        int64_t tick = be_acct_ms_to_tick(s) * 1000000LL;
        if (wait > tick)
            wait = tick > 1000000 ? tick : 1000000;
        if (wait > 100000000) /* look at closing at least every 100 ms */
            wait = 100000000;
        int64_t t0 = be_acct_clock_ns(CLOCK_MONOTONIC);
        struct timespec ts = {(time_t)(wait / 1000000000LL), (long)(wait % 1000000000LL)};
        nanosleep(&ts, NULL);
        a->throttled_ns += (uint64_t)(be_acct_clock_ns(CLOCK_MONOTONIC) - t0);
        if (be_acct_ms_to_tick(s) <= 0)
            be_acct_tick(s);
    }
}

void be_acct_frame_end(sl_be_session *s, int more)
{
    struct be_acct *a = s->acct;
    if (!a || !a->timing)
        return;
    int cap = capped(a);
    /* With the next frame already queued the GPU is being fed: its work continues the runs.
     * A capped session is measured after every frame (its share is charged from it). */
    if (more && !cap && ++a->frames_open < BE_ACCT_FRAMES_OPEN_MAX)
        return;
    a->frames_open = 0;
    be_acct_runs_close_all(s);
    /* a capped session's work is charged as it completes; at most BE_ACCT_CAPPED_PAIRS runs
     * stay unmeasured (in flight), so that the GPU is never drained between its frames */
    size_t wait = cap && a->npairs > BE_ACCT_CAPPED_PAIRS ? a->npairs - BE_ACCT_CAPPED_PAIRS : 0;
    uint64_t added = a->npairs ? be_acct_measure(s, wait) : 0;
    if (cap && added) {
        be_acct_lock(a->cfg.shm);
        struct be_acct_inst *in = &a->cfg.shm->inst[a->cfg.inst];
        if (in->bucket_set)
            be_bucket_charge(&in->bucket, added, be_acct_clock_ns(CLOCK_MONOTONIC));
        be_acct_unlock(a->cfg.shm);
    }
}

/* ---------------------------------------------------------------- records */

static void refresh_sla(struct be_acct *a)
{
    if (!a->cfg.shm)
        return;
    be_acct_lock(a->cfg.shm);
    a->sla = a->cfg.shm->inst[a->cfg.inst].sla;
    be_acct_unlock(a->cfg.shm);
}

/* A device "was used" in the interval when it has figures or the session has a context on it. */
static int dev_used(sl_be_session *s, int d)
{
    const struct be_acct_dev *x = &s->acct->dev[d];
    if (x->niv || x->kernel_ns || x->kernels || x->htod || x->dtoh)
        return 1;
    for (size_t i = 0; i < s->n_ctxs; i++)
        if (s->ctxs[i]->ctx && s->ctxs[i]->ordinal == d)
            return 1;
    return 0;
}

/* One record: device d's figures (d < 0: a session without devices), plus the session-wide
 * ones (calls, errors, memory, throttling, quota refusals) when first. */
static void emit_one(sl_be_session *s, int d, int first, int final, int64_t end)
{
    struct be_acct *a = s->acct;
    struct be_acct_dev none = {0}, *x = d >= 0 ? &a->dev[d] : &none;
    char gpu[41] = "";
    if (d >= 0 && s->devs->dev[d].has_uuid)
        be_usage_gpu_uuid(s->devs->dev[d].uuid, gpu);
    struct be_usage u = {
        .instance = s->instance,
        .project = s->project,
        .flavor = a->sla.flavor,
        .gpu_uuid = gpu,
        .measurement = a->timing ? BE_ACCT_MEASUREMENT : "none",
        .session_id = s->id,
        .start_ns = a->start_ns,
        .end_ns = end,
        .kernel_ns = x->kernel_ns,
        .kernels = x->kernels,
        .bytes_htod = x->htod,
        .bytes_dtoh = x->dtoh,
        .gpu_share = a->cfg.shm ? a->sla.share : 0,
        .final = final,
    };
    size_t m = be_iv_union(x->iv, x->niv, a->start_ns, end, &u.busy_ns);
    u.nbusy = be_iv_cap(x->iv, m, BE_USAGE_MAX_BUSY, &u.busy_widened_ns);
    u.busy = x->iv;
    if (first) {
        u.calls = s->calls - a->calls0;
        u.errors = s->errors - a->errors0;
        u.memory_high_water = a->mem_high;
        u.throttled_ns = a->throttled_ns;
        u.quota_refusals = a->quota_refusals;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_error e;
    if (be_usage_encode(&u, &buf, &len, &e) != SL_OK)
        sl_log(SL_LOG_ERR, BE_COMPONENT, "session %llu instance %s: usage record lost: %s",
               (unsigned long long)s->id, s->instance, e.msg);
    else if (a->cfg.emit)
        a->cfg.emit(a->cfg.user, buf, len);
    free(buf);
    x->niv = x->merged = 0;
    x->merged_total = 0;
    x->kernel_ns = x->kernels = x->htod = x->dtoh = 0;
}

/* The interval's records: one per device the session used (device 0 when it used none). */
static void emit(sl_be_session *s, int final)
{
    struct be_acct *a = s->acct;
    if (a->timing) {
        be_acct_runs_close_all(s);
        /* a session abandoned (its guest gone) is not waited for: what completed is measured,
         * the rest ends with its process (session.c, be_session_abandon) */
        be_acct_measure(s, final && atomic_load(&s->abandon) ? 0 : a->npairs);
    }
    int64_t end = be_acct_clock_ns(CLOCK_REALTIME);
    if (end < a->start_ns)
        end = a->start_ns;
    int sent = 0;
    for (int d = 0; d < a->ndev; d++)
        if (dev_used(s, d))
            emit_one(s, d, !sent++, final, end);
    if (!sent)
        emit_one(s, a->ndev ? 0 : -1, 1, final, end);
    if (a->untimed && sl_log_enabled(SL_LOG_DEBUG))
        sl_log(SL_LOG_DEBUG, BE_COMPONENT, "session %llu: %llu runs of work could not be timed",
               (unsigned long long)s->id, (unsigned long long)a->untimed);
    a->start_ns = end;
    a->calls0 = s->calls;
    a->errors0 = s->errors;
    a->throttled_ns = 0;
    a->quota_refusals = 0;
    a->untimed = 0;
    a->mem_high = a->mem;
    a->next_tick = be_acct_clock_ns(CLOCK_MONOTONIC) + a->cfg.interval_ns;
    if (!final && a->timing)
        for (size_t i = 0; i < a->nctx; i++)
            be_acct_rebase(s, a->ctxs[i]);
    refresh_sla(a);
}

int64_t be_acct_ms_to_tick(sl_be_session *s)
{
    struct be_acct *a = s->acct;
    if (!a)
        return INT64_MAX / 2;
    int64_t left = a->next_tick - be_acct_clock_ns(CLOCK_MONOTONIC);
    return left <= 0 ? 0 : (left + 999999) / 1000000;
}

void be_acct_tick(sl_be_session *s)
{
    if (!s->acct)
        return;
    atomic_store_explicit(&s->doing, "the usage interval's measurement", memory_order_relaxed);
    emit(s, 0);
    atomic_store_explicit(&s->doing, NULL, memory_order_relaxed);
}

/* ---------------------------------------------------------------- life */

sl_code be_acct_attach(sl_be_session *s, const struct be_acct_cfg *cfg, sl_error *e)
{
    struct be_acct *a = calloc(1, sizeof *a);
    int nd = s->devs ? s->devs->count : 0;
    if (a) {
        a->pairs = calloc(BE_ACCT_MAX_PAIRS, sizeof *a->pairs);
        a->dev = calloc(nd ? (size_t)nd : 1, sizeof *a->dev);
    }
    if (!a || !a->pairs || !a->dev) {
        if (a) {
            free(a->pairs);
            free(a->dev);
        }
        free(a);
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    }
    a->cfg = *cfg;
    if (a->cfg.interval_ns <= 0)
        a->cfg.interval_ns = (int64_t)BE_USAGE_INTERVAL_S * 1000000000LL;
    a->ndev = nd;
    a->timing = !cfg->no_timing && be_acct_timing_available(s->api);
    a->start_ns = be_acct_clock_ns(CLOCK_REALTIME);
    a->next_tick = be_acct_clock_ns(CLOCK_MONOTONIC) + a->cfg.interval_ns;
    a->calls0 = s->calls;
    a->errors0 = s->errors;
    a->sla.share = 1;
    s->acct = a;
    refresh_sla(a);
    return SL_OK;
}

void be_acct_final_record(sl_be_session *s)
{
    if (s->acct)
        emit(s, 1);
}

void be_acct_finish(sl_be_session *s)
{
    struct be_acct *a = s->acct;
    if (!a)
        return;
    emit(s, 1);
    be_acct_timing_free(s);
    for (int d = 0; d < a->ndev; d++)
        free(a->dev[d].iv);
    free(a->dev);
    free(a->pairs);
    free(a);
    s->acct = NULL;
}
