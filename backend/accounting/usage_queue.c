/* The server's queue of usage records the agent has not acknowledged yet. A record stays until
 * a UsageAck names its id (the agent acknowledges only what it has stored durably); it is sent
 * again every --usage-resend seconds and at once after the control socket reconnects. Bounded:
 * past BE_USAGE_QUEUE_MAX the oldest record is dropped with an error in the log (the agent has
 * not answered for a long time; the records are lost for billing). */
#include "accounting/usage_queue.h"

#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "sluice/log.h"
#include "sluice_control.pb-c.h"

struct be_uq_item {
    Sluice__Control__UsageRecord *r;
    int64_t sent_ms; /* 0: never sent */
};

struct be_uq {
    struct be_uq_item *v; /* oldest first */
    size_t n, max;
    uint64_t dropped;
};

struct be_uq *be_uq_new(size_t max)
{
    struct be_uq *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->max = max ? max : BE_USAGE_QUEUE_MAX;
    q->v = calloc(q->max, sizeof *q->v);
    if (!q->v) {
        free(q);
        return NULL;
    }
    return q;
}

void be_uq_free(struct be_uq *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->n; i++)
        sluice__control__usage_record__free_unpacked(q->v[i].r, NULL);
    free(q->v);
    free(q);
}

int be_uq_add(struct be_uq *q, const uint8_t *rec, size_t len)
{
    Sluice__Control__UsageRecord *r = sluice__control__usage_record__unpack(NULL, len, rec);
    if (!r || !r->record_id || !*r->record_id) {
        if (r)
            sluice__control__usage_record__free_unpacked(r, NULL);
        return -1;
    }
    if (q->n == q->max) {
        Sluice__Control__UsageRecord *old = q->v[0].r;
        q->dropped++;
        sl_log(SL_LOG_ERR, BE_COMPONENT,
               "usage record %s (session %llu instance %s) DROPPED: %zu records wait for the "
               "agent's acknowledgement, the most kept (%llu dropped so far)",
               old->record_id, (unsigned long long)old->session_id, old->instance_uuid, q->max,
               (unsigned long long)q->dropped);
        sluice__control__usage_record__free_unpacked(old, NULL);
        memmove(&q->v[0], &q->v[1], (q->n - 1) * sizeof *q->v);
        q->n--;
    }
    q->v[q->n++] = (struct be_uq_item){r, 0};
    return 0;
}

size_t be_uq_ack(struct be_uq *q, char *const *ids, size_t n)
{
    size_t found = 0, k = 0;
    for (size_t i = 0; i < q->n; i++) {
        int acked = 0;
        for (size_t j = 0; j < n && !acked; j++)
            acked = ids[j] && !strcmp(ids[j], q->v[i].r->record_id);
        if (acked) {
            sluice__control__usage_record__free_unpacked(q->v[i].r, NULL);
            found++;
        } else {
            q->v[k++] = q->v[i];
        }
    }
    q->n = k;
    return found;
}

size_t be_uq_len(const struct be_uq *q)
{
    return q ? q->n : 0;
}

void be_uq_due(struct be_uq *q, int64_t now_ms, int64_t resend_ms, int all,
               int (*send)(void *user, const Sluice__Control__UsageRecord *r), void *user)
{
    for (size_t i = 0; i < q->n; i++) {
        struct be_uq_item *it = &q->v[i];
        if (all || !it->sent_ms || now_ms - it->sent_ms >= resend_ms) {
            int failed = send(user, it->r);
            it->sent_ms = now_ms ? now_ms : 1; /* failed: again after resend_ms */
            if (failed)
                return; /* the socket takes no more now */
        }
    }
}
