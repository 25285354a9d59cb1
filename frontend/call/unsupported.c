/* Calls Sluice does not offer: CUDA_ERROR_NOT_SUPPORTED, logged once per name
 * (sluice/stub_runtime.h: the generated stubs and the hand-written families call these). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "component.h"
#include "sluice/log.h"
#include "sluice/stub_runtime.h"

struct seen {
    struct seen *next;
    const char *name;
};
static struct seen *g_seen;
static pthread_mutex_t g_seen_lock = PTHREAD_MUTEX_INITIALIZER;

/* Logs once per name; reason NULL: "not supported by Sluice". */
static CUresult refuse_once(const char *name, const char *reason)
{
    pthread_mutex_lock(&g_seen_lock);
    struct seen *s = g_seen;
    while (s && strcmp(s->name, name) != 0)
        s = s->next;
    if (!s) {
        s = malloc(sizeof *s);
        if (s) {
            s->name = name;
            s->next = g_seen;
            g_seen = s;
        }
        if (reason)
            sl_log(SL_LOG_WARNING, SL_FE_COMPONENT,
                   "%s is not offered by Sluice (%s): returning CUDA_ERROR_NOT_SUPPORTED", name,
                   reason);
        else
            sl_log(SL_LOG_WARNING, SL_FE_COMPONENT,
                   "%s is not supported by Sluice: returning CUDA_ERROR_NOT_SUPPORTED", name);
    }
    pthread_mutex_unlock(&g_seen_lock);
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult sl_fe_unsupported(const char *name)
{
    return refuse_once(name, NULL);
}

CUresult sl_fe_refused(const char *name, const char *reason)
{
    return refuse_once(name, reason);
}
