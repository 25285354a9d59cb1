/* Shared GPU time: a sweep over the intervals' ends (usage_share.h has the rule). */
#include "usage_share.h"

#include <stdlib.h>

struct edge {
    int64_t t;
    int up; /* +1 an interval starts, -1 it ends */
    size_t who;
};

static int by_time(const void *x, const void *y)
{
    const struct edge *a = x, *b = y;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    if (a->who != b->who)
        return a->who < b->who ? -1 : 1;
    return a->up - b->up;
}

/* The sessions busy now: act[0..k), pos[who] = its place in act (or SIZE_MAX). */
struct active {
    size_t *act, *pos, *depth, k, turn;
};

static void enter(struct active *s, size_t who)
{
    if (s->depth[who]++ == 0) {
        s->pos[who] = s->k;
        s->act[s->k++] = who;
    }
}

static void leave(struct active *s, size_t who)
{
    if (s->depth[who] == 0 || --s->depth[who] > 0)
        return;
    size_t at = s->pos[who], last = s->act[--s->k];
    s->act[at] = last;
    s->pos[last] = at;
    s->pos[who] = SIZE_MAX;
}

/* A segment of len ns shared by the k busy sessions: len / k each, the remainder one by one
 * to the sessions in turn (a rotating start, so no session is always the one favoured). */
static void share(struct active *s, uint64_t len, uint64_t *shared)
{
    uint64_t each = len / s->k, rest = len % s->k;
    for (size_t i = 0; i < s->k; i++)
        shared[s->act[i]] += each;
    for (uint64_t i = 0; i < rest; i++)
        shared[s->act[(s->turn + i) % s->k]]++;
    s->turn = (s->turn + (size_t)rest) % (s->k ? s->k : 1);
}

int ag_share_apportion(const ag_share_iv *iv, size_t n, size_t nwho, int64_t lo, int64_t hi,
                       uint64_t *shared, uint64_t *busy)
{
    *busy = 0;
    if (!n || !nwho || hi <= lo)
        return 0;
    struct edge *ed = malloc(2 * n * sizeof *ed);
    struct active s = {calloc(nwho, sizeof(size_t)), calloc(nwho, sizeof(size_t)),
                       calloc(nwho, sizeof(size_t)), 0, 0};
    if (!ed || !s.act || !s.pos || !s.depth) {
        free(ed);
        free(s.act);
        free(s.pos);
        free(s.depth);
        return -1;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t a = iv[i].a < lo ? lo : iv[i].a, b = iv[i].b > hi ? hi : iv[i].b;
        if (b <= a || iv[i].who >= nwho)
            continue;
        ed[m++] = (struct edge){a, 1, iv[i].who};
        ed[m++] = (struct edge){b, -1, iv[i].who};
    }
    qsort(ed, m, sizeof *ed, by_time);
    uint64_t total = 0;
    for (size_t i = 0; i < m;) {
        int64_t t = ed[i].t;
        for (; i < m && ed[i].t == t; i++) {
            if (ed[i].up > 0)
                enter(&s, ed[i].who);
            else
                leave(&s, ed[i].who);
        }
        if (i < m && s.k) {
            uint64_t len = (uint64_t)(ed[i].t - t);
            share(&s, len, shared);
            total += len;
        }
    }
    *busy = total;
    free(ed);
    free(s.act);
    free(s.pos);
    free(s.depth);
    return 0;
}
