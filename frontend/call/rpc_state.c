/* The state of the call layer: one instance, under one lock (rpc_state.h). */
#include <time.h>

#include "call/rpc_state.h"

static struct sl_fe_rpc_state g_rpc = {
    .io = PTHREAD_MUTEX_INITIALIZER,
    .sent_cv = PTHREAD_COND_INITIALIZER,
    .lim = {256, (size_t)4 << 20, 4096, (uint64_t)256 << 20, SL_FE_FLUSH_US_DEFAULT,
            SL_FE_START_US_DEFAULT, 0, 0},
};

struct sl_fe_rpc_state *sl_fe_rpc_state(void)
{
    return &g_rpc;
}

uint64_t sl_fe_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
