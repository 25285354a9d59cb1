/* The session worker's bulk lanes (lanes.c, docs/remoting.md "Lanes and page-locked staging"):
 * up to 8 mutual-TLS channel servers of the worker beside its direct endpoint, each served by a
 * thread of its own, that carry the pieces of large copies in both directions. */
#ifndef SLUICE_BE_DAEMON_LANES_H
#define SLUICE_BE_DAEMON_LANES_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/direct.h"
#include "sluice/lanes.h"

/* A reply's bulk goes on the lanes from this size on (when its call asked: reply_on_lanes). */
#define BE_LANE_MIN_BULK ((uint64_t)1 << 20)

struct be_lanes;

/* Binds n (2..SL_LANE_MAX) lane servers as the direct endpoint's (c), draws their tickets and
 * starts their threads. A lane accepts only the certificate the session was admitted with, only
 * once d is attached, only with its own ticket, once; a lane refused after its ticket, lost or
 * broken ends the session through d (be_direct_push_close) with the lane's reason. */
sl_code be_lanes_open(const struct be_direct_cfg *c, unsigned n, struct be_direct *d,
                      struct be_lanes **out, sl_error *e);
unsigned be_lanes_count(const struct be_lanes *l);
uint16_t be_lanes_port(const struct be_lanes *l, unsigned i);
const uint8_t *be_lanes_ticket(const struct be_lanes *l, unsigned i);
/* The assembly of the guest's pieces (guest to worker). */
sl_lane_asm *be_lanes_in(struct be_lanes *l);
/* 1 while every lane is open (attached and not lost). */
int be_lanes_up(const struct be_lanes *l);
/* Sends bulk (blen bytes from malloc, taken: freed once every piece is sent or dropped) as k
 * pieces of reply seq on the lanes. Any thread. */
void be_lanes_send(struct be_lanes *l, uint64_t seq, uint8_t *bulk, uint64_t blen, uint32_t k);
/* Stops the lanes' threads (they fail what waits on the assembly with code and why), closes
 * the servers. NULL is fine. */
void be_lanes_close(struct be_lanes *l, sl_code code, const char *why);

#endif
