/* Host callbacks (docs/remoting.md "Host callbacks and printf"): (fn, userData) stay here under
 * a callback id; the backend's own host function on the stream sends ServerMessage{callback}
 * and the call layer runs the function when it reads it (rpc_replies.c, through filters.c),
 * then answers callback_done. The CUDA calls that register them are api/callback.c's. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <pthread.h>
#include <stdlib.h>

#include <cuda.h>

#include "call/callbacks.h"

struct cb {
    struct cb *next;
    uint64_t id;
    int kind;
    void (*fn)(void);
    void *user;
    CUstream stream;
};

static struct cb *g_cbs;
static uint64_t g_next_id = 1;
static pthread_mutex_t g_cb_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t sl_fe_callback_register(int kind, void (*fn)(void), void *user, CUstream stream)
{
    struct cb *c = malloc(sizeof *c);
    if (!c)
        return 0;
    c->kind = kind;
    c->fn = fn;
    c->user = user;
    c->stream = stream;
    pthread_mutex_lock(&g_cb_lock);
    c->id = g_next_id++;
    c->next = g_cbs;
    g_cbs = c;
    pthread_mutex_unlock(&g_cb_lock);
    return c->id;
}

static struct cb *take(uint64_t id)
{
    pthread_mutex_lock(&g_cb_lock);
    struct cb *found = NULL;
    for (struct cb **pp = &g_cbs; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            found = *pp;
            *pp = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&g_cb_lock);
    return found;
}

void sl_fe_callback_forget(uint64_t id)
{
    free(take(id));
}

int sl_fe_callback_run(uint64_t id)
{
    if (!id)
        return 0;
    struct cb *c = take(id);
    if (!c)
        return 0;
    if (c->kind == 0)
        ((CUhostFn)(void (*)(void))c->fn)(c->user);
    else
        ((CUstreamCallback)(void (*)(void))c->fn)(c->stream, CUDA_SUCCESS, c->user);
    free(c);
    return 1;
}

static _Thread_local int t_in_callback;

int sl_fe_callback_run_asked(uint64_t id)
{
    t_in_callback = 1; /* no CUDA call from a host function (CUDA's rule too) */
    int ran = sl_fe_callback_run(id);
    t_in_callback = 0;
    return ran;
}

int sl_fe_in_callback(void)
{
    return t_in_callback;
}
