/* The contexts this process knows and each thread's current-context stack (docs/remoting.md
 * "Handles and pointers"): the stack lives here and never travels; every Call carries the
 * current context id (rpc.c reads it). The CUDA calls on contexts are api/context.c's. */
#include <pthread.h>
#include <stdlib.h>

#include "call/contexts.h"

#define STACK_MAX 64
#define MAX_CTX   256

static _Thread_local CUcontext t_stack[STACK_MAX];
static _Thread_local int t_depth;

static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    CUcontext ctx;
    int device;
} g_known[MAX_CTX];
static int g_nknown;

void sl_fe_ctx_remember(CUcontext ctx, int device)
{
    if (!ctx)
        return;
    pthread_mutex_lock(&g_ctx_lock);
    int i;
    for (i = 0; i < g_nknown && g_known[i].ctx != ctx; i++)
        ;
    if (i == g_nknown && g_nknown < MAX_CTX)
        g_nknown++;
    if (i < MAX_CTX) {
        g_known[i].ctx = ctx;
        g_known[i].device = device;
    }
    pthread_mutex_unlock(&g_ctx_lock);
}

void sl_fe_ctx_drop(CUcontext ctx)
{
    pthread_mutex_lock(&g_ctx_lock);
    for (int i = 0; i < g_nknown; i++) {
        if (g_known[i].ctx == ctx) {
            g_known[i] = g_known[--g_nknown];
            break;
        }
    }
    pthread_mutex_unlock(&g_ctx_lock);
}

void sl_fe_ctx_forget(CUcontext ctx)
{
    sl_fe_ctx_drop(ctx);
    for (int i = 0; i < t_depth; i++)
        if (t_stack[i] == ctx)
            t_stack[i] = NULL;
}

int sl_fe_ctx_device(CUcontext ctx)
{
    int dev = -1;
    pthread_mutex_lock(&g_ctx_lock);
    for (int i = 0; i < g_nknown; i++)
        if (g_known[i].ctx == ctx)
            dev = g_known[i].device;
    pthread_mutex_unlock(&g_ctx_lock);
    return dev;
}

void sl_fe_contexts_reset(void)
{
    t_depth = 0;
    pthread_mutex_lock(&g_ctx_lock);
    g_nknown = 0;
    pthread_mutex_unlock(&g_ctx_lock);
}

CUcontext sl_fe_current_context(void)
{
    return t_depth ? t_stack[t_depth - 1] : NULL;
}

uint64_t sl_fe_current_ctx_id(void)
{
    return (uint64_t)(uintptr_t)sl_fe_current_context();
}

int sl_fe_ctx_stack_full(void)
{
    return t_depth >= STACK_MAX;
}

void sl_fe_ctx_push(CUcontext ctx)
{
    if (t_depth < STACK_MAX)
        t_stack[t_depth++] = ctx;
}

int sl_fe_ctx_pop(CUcontext *ctx)
{
    if (!t_depth)
        return 0;
    *ctx = t_stack[--t_depth];
    return 1;
}

void sl_fe_ctx_set_current(CUcontext ctx)
{
    if (!ctx) {
        if (t_depth)
            t_depth--;
        return;
    }
    if (t_depth)
        t_stack[t_depth - 1] = ctx;
    else
        t_stack[t_depth++] = ctx;
}

void sl_fe_ctx_pop_if_current(CUcontext ctx)
{
    if (t_depth && t_stack[t_depth - 1] == ctx)
        t_depth--;
}
