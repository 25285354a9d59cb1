/* The send window and the sender thread (rpc_sender.c): when the pending frame leaves, and the
 * outbox the sender thread sends from. Everything runs with the call layer's lock held. */
#ifndef SLUICE_FRONTEND_CALL_RPC_SENDER_H
#define SLUICE_FRONTEND_CALL_RPC_SENDER_H

#include <stddef.h>
#include <sys/uio.h>

#include <cuda.h>

/* Drops the frames not sent yet (the session is new or gone); a frame the sender thread is
 * sending stays its own. */
void sl_fe_pending_clear(void);
/* Waits until the sender thread is not using the transport. */
void sl_fe_outbox_settle(void);
/* Empties the outbox before a send of this thread, the older frame first. */
CUresult sl_fe_outbox_drain(void);
/* The same before a synchronous call whose frame goes next: an outbox the sender thread has
 * not taken yet joins the pending frame, in front (its calls are older). */
CUresult sl_fe_outbox_join(void);
/* Sends the outbox, then the pending frame followed by its copied bulk and the extra
 * segments. */
CUresult sl_fe_pending_send(const struct iovec *extra, size_t n_extra);
/* An async call joined the pending frame: sends it, hands it to the sender thread or lets it
 * wait, as the window says. */
CUresult sl_fe_frame_queued(void);

#endif
