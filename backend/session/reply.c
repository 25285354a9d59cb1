/* A synchronous call's reply on its way to the guest: what device work changed in mapped host
 * memory, the printf output, the deferred error, the reply's bulk; encoded and handed to the
 * outbox (the session thread's replies, and those of the waits completed off its call path). */
#include <stdlib.h>
#include <string.h>

#include "session/reply.h"
#include "api/mapped.h"
#include "bounds.h"
#include "daemon/lanes.h"
#include "daemon/outbox.h"
#include "session/bulk_pool.h"
#include "session/deferred.h"
#include "session/printf.h"
#include "session/state.h"
#include "sluice/log.h"
#include "sluice/wire.h"

int be_reply_on_lanes(const sl_be_session *s, const Sluice__Wire__Call *call, uint64_t blen)
{
    return call && call->reply_on_lanes && blen >= BE_LANE_MIN_BULK && be_lanes_up(s->lanes);
}

void be_session_send_reply(sl_be_session *s, struct sl_be_call *c)
{
    Sluice__Wire__Reply *reply = c->reply;
    be_mapped_collect(s, reply); /* mapped.c: device writes to mapped host memory */
    struct be_output out;
    be_printf_take(s, &out);
    if (out.out_len) {
        reply->stdout_data.data = out.out;
        reply->stdout_data.len = out.out_len;
    }
    if (out.err_len) {
        reply->stderr_data.data = out.err;
        reply->stderr_data.len = out.err_len;
    }
    be_deferred_stamp(&s->def, reply->seq, &reply->failed_seq, &reply->result);
    uint8_t *bulk = NULL;
    size_t blen = 0;
    if (c->out) {
        if (reply->result == CUDA_SUCCESS) {
            bulk = c->out;
            blen = c->out_len;
            reply->bulk_length = blen;
        } else {
            be_bulk_free(c->out);
        }
        c->out = NULL;
        c->out_len = 0;
    }
    /* a large reply its call asked for on the lanes leaves there, in pieces (daemon/lanes.c) */
    uint8_t *lane_bulk = NULL;
    if (bulk && be_reply_on_lanes(s, c->call, blen)) {
        reply->lane_pieces = sl_lane_pieces_for(blen, be_lanes_count(s->lanes));
        lane_bulk = bulk;
        bulk = NULL;
    } else if (bulk && s->srv && be_bulk_is_slot(bulk)) {
        /* a session on the server's own thread (no worker process): its channel frees what it
         * sends, so a slot's bytes go in a buffer of their own */
        uint8_t *own = malloc(blen ? blen : 1);
        if (own)
            memcpy(own, bulk, blen);
        be_bulk_free(bulk);
        bulk = own;
        if (!own) {
            blen = 0;
            reply->bulk_length = 0;
            reply->result = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    Sluice__Wire__Reply *one[1] = {reply};
    Sluice__Wire__ReplyFrame rf = SLUICE__WIRE__REPLY_FRAME__INIT;
    rf.n_replies = 1;
    rf.replies = one;
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES;
    m.replies = &rf;
    uint8_t *buf = NULL;
    size_t len = 0;
    sl_error e;
    if (sl_wire_encode_server(&m, NULL, &buf, &len, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "session %llu instance %s project %s: reply: %s",
               (unsigned long long)s->id, s->instance, s->project, e.msg);
        be_bulk_free(bulk);
        be_outbox_push_close(s->srv, s->peer, SL_ERR_PROTOCOL, "backend could not encode a reply");
        be_bulk_free(lane_bulk);
    } else {
        be_outbox_push_reply(s->srv, s->peer, buf, len, bulk, bulk ? blen : 0);
        if (lane_bulk)
            be_lanes_send(s->lanes, reply->seq, lane_bulk, blen, reply->lane_pieces);
    }
    reply->lane_pieces = 0;
    reply->stdout_data.data = NULL;
    reply->stdout_data.len = 0;
    reply->stderr_data.data = NULL;
    reply->stderr_data.len = 0;
    free(out.out);
    free(out.err);
    be_mapped_collect_done(reply);
}
