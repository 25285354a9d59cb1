/* A frame of calls kept encoded: the CallFrame of a ClientMessage, with the copied bulk of
 * async calls. */
#ifndef SLUICE_FRONTEND_CALL_FRAME_H
#define SLUICE_FRONTEND_CALL_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "call/transport.h"
#include "sluice/error.h"
#include "sluice_session.pb-c.h"

struct sl_fe_frame {
    uint8_t *buf; /* room for the ClientMessage header, then the CallFrame elements */
    size_t len;   /* bytes of CallFrame elements */
    size_t cap;
    size_t calls;
    uint8_t *bulk; /* copied bulk of the async calls, in call order */
    size_t bulk_len, bulk_cap;
};
/* Room for more bytes of bulk (0, or -1: out of memory). */
int sl_fe_frame_reserve_bulk(struct sl_fe_frame *f, size_t more);
/* Copies len bytes of bulk behind the frame's (room reserved before). */
void sl_fe_frame_add_bulk(struct sl_fe_frame *f, const void *data, size_t len);
/* Appends call, checked before (0, or -1: out of memory). */
int sl_fe_frame_append(struct sl_fe_frame *f, const Sluice__Wire__Call *call);
/* Moves later's calls and bulk behind f's (0, or -1: out of memory, nothing moved). */
int sl_fe_frame_join(struct sl_fe_frame *f, struct sl_fe_frame *later);
/* Sends the frame, its bulk and then extra (at most 7 segments in all), and empties it. */
sl_code sl_fe_frame_send(struct sl_fe_frame *f, const struct sl_fe_transport *tr,
                         const struct iovec *extra, size_t n_extra, sl_error *e);
void sl_fe_frame_clear(struct sl_fe_frame *f);
void sl_fe_frame_free(struct sl_fe_frame *f);

#endif
