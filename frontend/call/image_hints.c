/* The image hints of the session (image_hints.h): a sorted array under its own lock, searched
 * at each module load (cudart loads a program's images at their first launch, from any
 * thread). */
#include "call/image_hints.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/wire.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *g_hints;
static size_t g_n, g_cap;

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The first index whose hint is >= h (g_n when none). */
static size_t lower_bound(uint64_t h)
{
    size_t lo = 0, hi = g_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g_hints[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void sl_fe_image_hints_set(const uint64_t *hints, size_t n)
{
    uint64_t *v = n ? malloc(n * sizeof *v) : NULL;
    if (v) {
        memcpy(v, hints, n * sizeof *v);
        qsort(v, n, sizeof *v, cmp);
    }
    pthread_mutex_lock(&g_lock);
    free(g_hints);
    g_hints = v;
    g_n = g_cap = v ? n : 0; /* out of memory: no hints, every image goes with its bytes */
    pthread_mutex_unlock(&g_lock);
}

int sl_fe_image_hinted(const uint8_t sha[32])
{
    uint64_t h = sl_wire_image_hint(sha);
    pthread_mutex_lock(&g_lock);
    size_t i = lower_bound(h);
    int hit = i < g_n && g_hints[i] == h;
    pthread_mutex_unlock(&g_lock);
    return hit;
}

void sl_fe_image_hint_add(const uint8_t sha[32])
{
    uint64_t h = sl_wire_image_hint(sha);
    pthread_mutex_lock(&g_lock);
    size_t i = lower_bound(h);
    if (i == g_n || g_hints[i] != h) {
        if (g_n == g_cap) {
            size_t c = g_cap ? 2 * g_cap : 16;
            uint64_t *v = realloc(g_hints, c * sizeof *v);
            if (!v) {
                pthread_mutex_unlock(&g_lock);
                return; /* the next load of it probes first: one round trip more */
            }
            g_hints = v;
            g_cap = c;
        }
        memmove(g_hints + i + 1, g_hints + i, (g_n - i) * sizeof *g_hints);
        g_hints[i] = h;
        g_n++;
    }
    pthread_mutex_unlock(&g_lock);
}
