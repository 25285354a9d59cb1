/* The server's queue of usage records the agent has not acknowledged yet (usage_queue.c). */
#ifndef SLUICE_BE_ACCOUNTING_USAGE_QUEUE_H
#define SLUICE_BE_ACCOUNTING_USAGE_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "sluice_control.pb-c.h"

#define BE_USAGE_RESEND_S  30   /* default --usage-resend: unacknowledged records */
#define BE_USAGE_QUEUE_MAX 4096 /* unacknowledged records kept; the oldest go first */

struct be_uq;
struct be_uq *be_uq_new(size_t max);
void be_uq_free(struct be_uq *q);
/* Takes an encoded UsageRecord; the oldest is dropped (with an error log) past the bound.
 * -1 when rec does not decode or has no id. */
int be_uq_add(struct be_uq *q, const uint8_t *rec, size_t len);
/* Drops the acknowledged records; returns how many were found. */
size_t be_uq_ack(struct be_uq *q, char *const *ids, size_t n);
size_t be_uq_len(const struct be_uq *q);
/* Calls send for each record never sent, sent resend_ms ago or more, or (all) every one; stops
 * at the first send that fails (returns nonzero: the socket is full), which goes again after
 * resend_ms. */
void be_uq_due(struct be_uq *q, int64_t now_ms, int64_t resend_ms, int all,
               int (*send)(void *user, const Sluice__Control__UsageRecord *r), void *user);

#endif
