/* Simulated device time (timing.c): what the API files and kernels.c use of it.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_TIMING_H
#define SLUICE_DOUBLE_TIMING_H

#include <cuda.h>
#include <stdint.h>

#include "double.h"

/* Per-stream clocks in CLOCK_MONOTONIC microseconds. ctx is
 * the current context (the NULL, legacy and per-thread streams are one clock per context).
 * Called under the double's lock, except dbl_time_sleep_until. */
double dbl_time_now_us(void);
/* Queues dur_us of work on the stream; returns when it ends. */
double dbl_time_work(const void *ctx, CUstream s, double dur_us);
/* The time the stream reaches this point (an event recorded now). */
double dbl_time_mark(const void *ctx, CUstream s);
/* The stream waits for time t_us (cuStreamWaitEvent). */
void dbl_time_wait_for(const void *ctx, CUstream s, double t_us);
/* When the stream's / every stream of ctx's queued work ends. */
double dbl_time_stream_end(const void *ctx, CUstream s);
double dbl_time_ctx_end(const void *ctx);
void dbl_time_sleep_until(double t_us);
/* Around the host computation of a result: that time is not device time. */
int64_t dbl_time_host_begin(void);
void dbl_time_host_end(int64_t begin);

#endif
