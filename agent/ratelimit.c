/* Token buckets per source address; fractional tokens kept in thousandths. */
#include "ratelimit.h"

#include <stdlib.h>
#include <string.h>

typedef struct rl_entry {
    char addr[AG_RL_ADDR_MAX];
    int64_t milli; /* tokens x 1000 at last_ms */
    int64_t last_ms;
} rl_entry;

struct ag_ratelimit {
    ag_ratelimit_opts o;
    rl_entry *e;
    size_t n;
};

ag_ratelimit *ag_ratelimit_new(const ag_ratelimit_opts *o)
{
    ag_ratelimit *rl = calloc(1, sizeof *rl);
    if (!rl)
        return NULL;
    if (o)
        rl->o = *o;
    if (rl->o.burst <= 0)
        rl->o.burst = 5;
    if (rl->o.per_minute <= 0)
        rl->o.per_minute = 5;
    if (rl->o.max_entries == 0)
        rl->o.max_entries = 4096;
    rl->e = calloc(rl->o.max_entries, sizeof *rl->e);
    if (!rl->e) {
        free(rl);
        return NULL;
    }
    return rl;
}

void ag_ratelimit_free(ag_ratelimit *rl)
{
    if (!rl)
        return;
    free(rl->e);
    free(rl);
}

static int64_t cap(const ag_ratelimit *rl)
{
    return (int64_t)rl->o.burst * 1000;
}

static void refill(const ag_ratelimit *rl, rl_entry *x, int64_t now_ms)
{
    if (now_ms <= x->last_ms)
        return;
    int64_t add = (now_ms - x->last_ms) * rl->o.per_minute / 60;
    if (add == 0 && x->milli < cap(rl))
        return; /* under a thousandth: keep the time, so frequent calls still refill */
    x->milli = x->milli + add > cap(rl) ? cap(rl) : x->milli + add;
    x->last_ms = now_ms;
}

static rl_entry *find(ag_ratelimit *rl, const char *addr, int64_t now_ms, int create)
{
    if (!addr)
        addr = "";
    for (size_t i = 0; i < rl->n; i++)
        if (strcmp(rl->e[i].addr, addr) == 0) {
            refill(rl, &rl->e[i], now_ms);
            return &rl->e[i];
        }
    if (!create)
        return NULL;
    rl_entry *x;
    if (rl->n < rl->o.max_entries) {
        x = &rl->e[rl->n++];
    } else {
        /* reuse the entry with the most tokens (a full bucket forgets nothing), oldest first */
        x = &rl->e[0];
        for (size_t i = 0; i < rl->n; i++) {
            refill(rl, &rl->e[i], now_ms);
            if (rl->e[i].milli > x->milli ||
                (rl->e[i].milli == x->milli && rl->e[i].last_ms < x->last_ms))
                x = &rl->e[i];
        }
    }
    memset(x, 0, sizeof *x);
    size_t l = strlen(addr);
    if (l >= sizeof x->addr)
        l = sizeof x->addr - 1;
    memcpy(x->addr, addr, l);
    x->milli = cap(rl);
    x->last_ms = now_ms;
    return x;
}

int ag_ratelimit_allow(ag_ratelimit *rl, const char *addr, int64_t now_ms)
{
    rl_entry *x = find(rl, addr, now_ms, 0);
    return !x || x->milli >= 1000;
}

int ag_ratelimit_fail(ag_ratelimit *rl, const char *addr, int64_t now_ms)
{
    rl_entry *x = find(rl, addr, now_ms, 1);
    x->milli = x->milli >= 1000 ? x->milli - 1000 : 0;
    return (int)(x->milli / 1000);
}

int ag_ratelimit_retry_after(ag_ratelimit *rl, const char *addr, int64_t now_ms)
{
    rl_entry *x = find(rl, addr, now_ms, 0);
    if (!x || x->milli >= 1000)
        return 0;
    int64_t ms = (1000 - x->milli) * 60 / rl->o.per_minute;
    return (int)((ms + 999) / 1000);
}
