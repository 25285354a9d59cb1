/* Bulk lanes, the guest's side (lanes.c; docs/remoting.md "Lanes and page-locked staging"):
 * SLUICE_LANES=N (2..8; 1, the default: none) asks the backend for N lanes besides the direct
 * channel (connection.c opens them); each is a channel of its own to the session worker with a
 * thread of its own that
 * encrypts the pieces of large host-to-device copies and decrypts those of large device-to-host
 * replies straight into the program's memory. */
#ifndef SLUICE_FRONTEND_CALL_LANES_H
#define SLUICE_FRONTEND_CALL_LANES_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "sluice/channel.h"
#include "sluice/wire.h"

/* A copy's bulk goes on the lanes from this size on. */
#define SL_FE_LANE_MIN_BULK ((uint64_t)1 << 20)

/* Starts the n (2..SL_LANE_MAX) lanes connection.c opened (clients, taken: closed on failure
 * too), a thread each. */
sl_code sl_fe_lanes_start(sl_client **clients, unsigned n, sl_error *err);
/* The number of open lanes, 0 when none (or when one was lost). */
unsigned sl_fe_lanes_active(void);
/* Sends the n segments (blen bytes) of call seq as k pieces on the lanes and waits until each
 * piece is encrypted and handed to its channel (the caller may then reuse the memory).
 * CUDA_SUCCESS, or the session is lost (a lane failed). */
CUresult sl_fe_lanes_send(uint64_t seq, const struct iovec *in, size_t n, uint64_t blen,
                          uint32_t k);
/* Reply seq's bulk (blen bytes in k pieces) arrives on the lanes into dst: waits for all of
 * it. SL_OK, or the lane's failure. */
sl_code sl_fe_lanes_recv(uint64_t seq, void *dst, uint64_t blen, uint32_t k, sl_error *e);
/* What the lanes carried: their number, pieces and bytes sent and received. */
void sl_fe_lanes_stats(unsigned *lanes, uint64_t *sent, uint64_t *sent_bytes, uint64_t *got,
                       uint64_t *got_bytes);
/* Stops the lanes' threads and closes them. */
void sl_fe_lanes_close(void);

#endif
