/* Simulated device time of the driver TEST DOUBLE (never a GPU result, README.md).
 *
 * The double computes every result at once, on the calling thread, but it keeps the time a
 * device would have taken: each stream has a clock, the time (CLOCK_MONOTONIC, microseconds)
 * until which its queued work runs. Work of d microseconds on a stream runs from
 * max(clock, now) to that + d, as on a device that executes one stream's work in order and
 * different streams concurrently. Events record the time their stream reaches them, queries
 * answer CUDA_ERROR_NOT_READY until then, and the synchronize calls sleep until then (outside
 * the double's lock). So the accounting of sluice-backend measures, through events, exactly the
 * simulated durations, and a throttled worker really waits.
 *
 * The host time the double spends computing results (a kernel's host implementation, a copy's
 * memmove) is not device time: it is taken out of the clock (dbl_time_host_begin/_end), so a
 * kernel takes its nominal duration whatever the host needs to compute it.
 *
 * Streams: a real stream is its own clock; the NULL, legacy and per-thread streams of a context
 * share one clock of that context. Under the double's lock, except dbl_time_sleep_until. */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "double.h"
#include "timing.h"

#define SLOTS 4096

struct clock_slot {
    const void *ctx;    /* the context the clock was first used in */
    const void *stream; /* a real stream (the key), or NULL for the context's NULL stream */
    double until_us;
};

static struct clock_slot slots[SLOTS];
static size_t nslots;
static _Atomic int64_t host_ns; /* host computation taken out of the clock */

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double dbl_time_now_us(void)
{
    return (double)(mono_ns() - atomic_load(&host_ns)) / 1e3;
}

int64_t dbl_time_host_begin(void)
{
    return mono_ns();
}

void dbl_time_host_end(int64_t begin)
{
    atomic_fetch_add(&host_ns, mono_ns() - begin);
}

static int null_stream(CUstream s)
{
    return (uintptr_t)s <= 2; /* 0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD */
}

/* The clock of stream s of context ctx (created at "idle" when new). */
static double *clock_of(const void *ctx, CUstream s)
{
    const void *key = null_stream(s) ? NULL : (const void *)s;
    for (size_t i = 0; i < nslots; i++)
        if (slots[i].stream == key && (key || slots[i].ctx == ctx))
            return &slots[i].until_us;
    if (nslots == SLOTS) { /* forget the clocks that are idle now (streams long destroyed) */
        double now = dbl_time_now_us();
        size_t k = 0;
        for (size_t i = 0; i < nslots; i++)
            if (slots[i].until_us > now)
                slots[k++] = slots[i];
        nslots = k;
        if (nslots == SLOTS)
            nslots--; /* every clock busy: reuse the last one (never happens in the tests) */
    }
    slots[nslots] = (struct clock_slot){ctx, key, 0.0};
    return &slots[nslots++].until_us;
}

double dbl_time_work(const void *ctx, CUstream s, double dur_us)
{
    double *c = clock_of(ctx, s);
    double now = dbl_time_now_us();
    double start = *c > now ? *c : now;
    *c = start + (dur_us > 0 ? dur_us : 0);
    return *c;
}

double dbl_time_mark(const void *ctx, CUstream s)
{
    return dbl_time_work(ctx, s, 0);
}

void dbl_time_wait_for(const void *ctx, CUstream s, double t_us)
{
    double *c = clock_of(ctx, s);
    if (t_us > *c)
        *c = t_us;
}

double dbl_time_stream_end(const void *ctx, CUstream s)
{
    return *clock_of(ctx, s);
}

double dbl_time_ctx_end(const void *ctx)
{
    double end = 0;
    for (size_t i = 0; i < nslots; i++)
        if (slots[i].ctx == ctx && slots[i].until_us > end)
            end = slots[i].until_us;
    return end;
}

void dbl_time_sleep_until(double t_us)
{
    for (;;) {
        double left = t_us - dbl_time_now_us();
        if (left <= 0)
            return;
        time_t sec = (time_t)(left / 1e6);
        struct timespec ts = {sec, (long)((left - (double)sec * 1e6) * 1e3)};
        if (nanosleep(&ts, NULL) != 0 && errno != EINTR)
            return;
    }
}
