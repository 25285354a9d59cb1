/* Encode, decode and validate the top-level wire messages (see sluice/wire.h). */
#include <stdlib.h>

#include "sluice/lanes.h"
#include "sluice/wire.h"

static size_t lim_message(const struct sl_wire_limits *lim)
{
    return lim && lim->max_message && lim->max_message < SL_WIRE_MAX_MESSAGE ? lim->max_message
                                                                             : SL_WIRE_MAX_MESSAGE;
}

static uint64_t lim_bulk(const struct sl_wire_limits *lim)
{
    return lim && lim->max_bulk && lim->max_bulk < SL_WIRE_MAX_BULK ? lim->max_bulk
                                                                    : SL_WIRE_MAX_BULK;
}

static size_t lim_calls(const struct sl_wire_limits *lim)
{
    return lim && lim->max_calls && lim->max_calls < SL_WIRE_MAX_FRAME_CALLS
               ? lim->max_calls
               : SL_WIRE_MAX_FRAME_CALLS;
}

const struct sl_call_info *sl_call_lookup(uint32_t call_id)
{
    if (call_id == 0 || call_id > SL_CALL_ID_MAX || sl_call_table[call_id].id != call_id)
        return NULL;
    return &sl_call_table[call_id];
}

/* The oneof member number of a call is SL_ONEOF_BASE + its id; protobuf-c's case values are
 * the member numbers. */
static sl_code check_member(uint32_t call_id, uint32_t member_case, int required, const char *what,
                            sl_error *e)
{
    if (member_case == 0) {
        if (required)
            return sl_fail(e, SL_ERR_PROTOCOL, "%s for call id %u carries no arguments", what,
                           call_id);
        return SL_OK;
    }
    if (member_case != SL_ONEOF_BASE + call_id) {
        const struct sl_call_info *other =
            member_case > SL_ONEOF_BASE ? sl_call_lookup(member_case - SL_ONEOF_BASE) : NULL;
        return sl_fail(e, SL_ERR_PROTOCOL, "%s says call id %u (%s) but carries %s", what, call_id,
                       sl_call_table[call_id].name, other ? other->name : "an unknown member");
    }
    return SL_OK;
}

sl_code sl_wire_check_call(const Sluice__Wire__Call *call, const struct sl_wire_limits *lim,
                           sl_error *e)
{
    const struct sl_call_info *info = sl_call_lookup(call->call_id);
    if (!info)
        return sl_fail(e, SL_ERR_PROTOCOL, "call seq %llu has unknown call id %u",
                       (unsigned long long)call->seq, call->call_id);
    sl_code rc = check_member(call->call_id, (uint32_t)call->args_case, 1, "call", e);
    if (rc != SL_OK)
        return rc;
    if (call->per_thread_stream && !(info->flags & (SL_CALL_PTDS | SL_CALL_PTSZ)))
        return sl_fail(e, SL_ERR_PROTOCOL, "%s has no per-thread-stream variant", info->name);
    if (call->bulk_length > lim_bulk(lim))
        return sl_fail(e, SL_ERR_TOO_LARGE, "%s announces %llu bulk bytes, over the limit %llu",
                       info->name, (unsigned long long)call->bulk_length,
                       (unsigned long long)lim_bulk(lim));
    sl_error le;
    if (call->lane_pieces && !sl_lane_layout_ok(call->bulk_length, call->lane_pieces, &le))
        return sl_fail(e, SL_ERR_PROTOCOL, "%s seq %llu: %s", info->name,
                       (unsigned long long)call->seq, le.msg);
    return SL_OK;
}

sl_code sl_wire_check_reply(const Sluice__Wire__Reply *reply, const struct sl_wire_limits *lim,
                            sl_error *e)
{
    if (!sl_call_lookup(reply->call_id))
        return sl_fail(e, SL_ERR_PROTOCOL, "reply seq %llu has unknown call id %u",
                       (unsigned long long)reply->seq, reply->call_id);
    sl_code rc = check_member(reply->call_id, (uint32_t)reply->out_case, 0, "reply", e);
    if (rc != SL_OK)
        return rc;
    if (reply->failed_seq >= reply->seq && reply->failed_seq != 0)
        return sl_fail(e, SL_ERR_PROTOCOL, "reply seq %llu names a later failed call %llu",
                       (unsigned long long)reply->seq, (unsigned long long)reply->failed_seq);
    if (reply->bulk_length > lim_bulk(lim))
        return sl_fail(e, SL_ERR_TOO_LARGE, "reply seq %llu announces %llu bulk bytes, over %llu",
                       (unsigned long long)reply->seq, (unsigned long long)reply->bulk_length,
                       (unsigned long long)lim_bulk(lim));
    sl_error le;
    if (reply->lane_pieces && !sl_lane_layout_ok(reply->bulk_length, reply->lane_pieces, &le))
        return sl_fail(e, SL_ERR_PROTOCOL, "reply seq %llu: %s", (unsigned long long)reply->seq,
                       le.msg);
    if (reply->stdout_data.len > SL_WIRE_MAX_STDOUT)
        return sl_fail(e, SL_ERR_TOO_LARGE, "reply seq %llu carries %zu bytes of stdout, over %zu",
                       (unsigned long long)reply->seq, reply->stdout_data.len, SL_WIRE_MAX_STDOUT);
    if (reply->stderr_data.len > SL_WIRE_MAX_STDOUT)
        return sl_fail(e, SL_ERR_TOO_LARGE, "reply seq %llu carries %zu bytes of stderr, over %zu",
                       (unsigned long long)reply->seq, reply->stderr_data.len, SL_WIRE_MAX_STDOUT);
    return SL_OK;
}

/* SessionAccept: at most SL_WIRE_MAX_DEVICES devices, each with a 16-byte uuid (or none), an
 * 8-byte LUID (or none) and at most SL_WIRE_MAX_DEVICE_ATTRIBUTES attributes; at most
 * SL_WIRE_MAX_IMAGE_HINTS image hints. */
static sl_code check_accept(const Sluice__Wire__SessionAccept *a, sl_error *e)
{
    if (!a)
        return sl_fail(e, SL_ERR_PROTOCOL, "SessionAccept without a body");
    if (a->n_devices > SL_WIRE_MAX_DEVICES)
        return sl_fail(e, SL_ERR_TOO_LARGE, "SessionAccept lists %zu devices, over the limit %u",
                       a->n_devices, SL_WIRE_MAX_DEVICES);
    for (size_t i = 0; i < a->n_devices; i++) {
        const Sluice__Wire__DeviceInfo *d = a->devices[i];
        if (!d)
            return sl_fail(e, SL_ERR_PROTOCOL, "SessionAccept device %zu is empty", i);
        if (d->uuid.len != 0 && d->uuid.len != 16)
            return sl_fail(e, SL_ERR_PROTOCOL, "device %zu has a %zu-byte uuid (not 16)", i,
                           d->uuid.len);
        if (d->luid.len != 0 && d->luid.len != 8)
            return sl_fail(e, SL_ERR_PROTOCOL, "device %zu has a %zu-byte luid (not 8)", i,
                           d->luid.len);
        if (d->n_attributes > SL_WIRE_MAX_DEVICE_ATTRIBUTES)
            return sl_fail(e, SL_ERR_TOO_LARGE, "device %zu has %zu attributes, over the limit %u",
                           i, d->n_attributes, SL_WIRE_MAX_DEVICE_ATTRIBUTES);
    }
    if (a->n_lane_ports > SL_LANE_MAX || a->n_lane_ports != a->n_lane_tickets)
        return sl_fail(e, SL_ERR_PROTOCOL,
                       "SessionAccept offers %zu lane ports and %zu lane tickets (at most %u, "
                       "one ticket per port)",
                       a->n_lane_ports, a->n_lane_tickets, SL_LANE_MAX);
    if (a->n_image_hints > SL_WIRE_MAX_IMAGE_HINTS)
        return sl_fail(e, SL_ERR_TOO_LARGE, "SessionAccept has %zu image hints, over the limit %u",
                       a->n_image_hints, SL_WIRE_MAX_IMAGE_HINTS);
    if (a->n_lane_ports && !a->direct_port)
        return sl_fail(e, SL_ERR_PROTOCOL, "SessionAccept offers lanes without a direct port");
    for (size_t i = 0; i < a->n_lane_ports; i++) {
        if (!a->lane_ports[i] || a->lane_ports[i] > 65535)
            return sl_fail(e, SL_ERR_PROTOCOL, "SessionAccept lane %zu has port %u", i,
                           a->lane_ports[i]);
        if (a->lane_tickets[i].len != SL_LANE_TICKET)
            return sl_fail(e, SL_ERR_PROTOCOL,
                           "SessionAccept lane %zu has a %zu-byte ticket (not %u)", i,
                           a->lane_tickets[i].len, SL_LANE_TICKET);
    }
    return SL_OK;
}

/* A LaneBulk's own facts; its place in the call's bulk is the assembly's to check (lanes.c). */
static sl_code check_lane(const Sluice__Wire__LaneBulk *l, const struct sl_wire_limits *lim,
                          sl_error *e)
{
    if (!l)
        return sl_fail(e, SL_ERR_PROTOCOL, "LaneBulk without a body");
    if (!l->seq || l->piece >= SL_LANE_MAX_PIECES || !l->length || l->length > lim_bulk(lim) ||
        l->offset > lim_bulk(lim) - l->length)
        return sl_fail(e, SL_ERR_PROTOCOL,
                       "LaneBulk seq %llu piece %u at %llu+%llu (seq above 0, piece below %u, "
                       "1 to %llu bytes inside the bulk)",
                       (unsigned long long)l->seq, l->piece, (unsigned long long)l->offset,
                       (unsigned long long)l->length, SL_LANE_MAX_PIECES,
                       (unsigned long long)lim_bulk(lim));
    return SL_OK;
}

/* Frame-level rule shared by calls and replies: 1..max entries, seq > 0, strictly increasing. */
static sl_code check_seq(uint64_t prev, uint64_t seq, size_t i, const char *what, sl_error *e)
{
    if (seq == 0)
        return sl_fail(e, SL_ERR_PROTOCOL, "%s %zu of the frame has seq 0", what, i);
    if (i > 0 && seq <= prev)
        return sl_fail(e, SL_ERR_PROTOCOL,
                       "%s %zu of the frame has seq %llu, not above the previous %llu", what, i,
                       (unsigned long long)seq, (unsigned long long)prev);
    return SL_OK;
}

static sl_code check_frame_size(size_t n, const struct sl_wire_limits *lim, const char *what,
                                sl_error *e)
{
    if (n == 0)
        return sl_fail(e, SL_ERR_PROTOCOL, "empty %s frame", what);
    if (n > lim_calls(lim))
        return sl_fail(e, SL_ERR_TOO_LARGE, "%s frame of %zu entries, over the limit %zu", what, n,
                       lim_calls(lim));
    return SL_OK;
}

sl_code sl_wire_check_client(const Sluice__Wire__ClientMessage *m, const struct sl_wire_limits *lim,
                             sl_error *e)
{
    sl_code rc;
    switch (m->kind_case) {
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_OPEN:
        if (!m->open)
            return sl_fail(e, SL_ERR_PROTOCOL, "SessionOpen without a body");
        if (m->open->lanes > SL_LANE_MAX)
            return sl_fail(e, SL_ERR_PROTOCOL, "SessionOpen asks for %u lanes (at most %u)",
                           m->open->lanes, SL_LANE_MAX);
        return SL_OK;
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_LANE:
        return check_lane(m->lane, lim, e);
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_CLOSE:
        return m->close ? SL_OK : sl_fail(e, SL_ERR_PROTOCOL, "SessionClose without a body");
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLBACK_DONE:
        if (!m->callback_done)
            return sl_fail(e, SL_ERR_PROTOCOL, "CallbackDone without a body");
        return m->callback_done->id ? SL_OK
                                    : sl_fail(e, SL_ERR_PROTOCOL, "CallbackDone for callback id 0");
    case SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS:
        if (!m->calls)
            return sl_fail(e, SL_ERR_PROTOCOL, "client message kind set without a body");
        rc = check_frame_size(m->calls->n_calls, lim, "call", e);
        for (size_t i = 0; rc == SL_OK && i < m->calls->n_calls; i++) {
            const Sluice__Wire__Call *c = m->calls->calls[i];
            rc = check_seq(i ? m->calls->calls[i - 1]->seq : 0, c->seq, i, "call", e);
            if (rc == SL_OK)
                rc = sl_wire_check_call(c, lim, e);
        }
        return rc;
    default:
        return sl_fail(e, SL_ERR_PROTOCOL, "client message of no known kind (%d)",
                       (int)m->kind_case);
    }
}

sl_code sl_wire_check_server(const Sluice__Wire__ServerMessage *m, const struct sl_wire_limits *lim,
                             sl_error *e)
{
    sl_code rc;
    switch (m->kind_case) {
    case SLUICE__WIRE__SERVER_MESSAGE__KIND_ACCEPT:
        return check_accept(m->accept, e);
    case SLUICE__WIRE__SERVER_MESSAGE__KIND_LANE:
        return check_lane(m->lane, lim, e);
    case SLUICE__WIRE__SERVER_MESSAGE__KIND_CLOSE:
        return m->close ? SL_OK : sl_fail(e, SL_ERR_PROTOCOL, "SessionClose without a body");
    case SLUICE__WIRE__SERVER_MESSAGE__KIND_CALLBACK:
        if (!m->callback)
            return sl_fail(e, SL_ERR_PROTOCOL, "HostCallback without a body");
        if (!m->callback->id || !m->callback->fn)
            return sl_fail(e, SL_ERR_PROTOCOL, "HostCallback with id %llu, function %#llx",
                           (unsigned long long)m->callback->id,
                           (unsigned long long)m->callback->fn);
        return SL_OK;
    case SLUICE__WIRE__SERVER_MESSAGE__KIND_STREAM_DONE:
        if (!m->stream_done || !m->stream_done->seq)
            return sl_fail(e, SL_ERR_PROTOCOL, "StreamDone without the seq of its query");
        return SL_OK;
    case SLUICE__WIRE__SERVER_MESSAGE__KIND_REPLIES:
        if (!m->replies)
            return sl_fail(e, SL_ERR_PROTOCOL, "server message kind set without a body");
        rc = check_frame_size(m->replies->n_replies, lim, "reply", e);
        for (size_t i = 0; rc == SL_OK && i < m->replies->n_replies; i++) {
            const Sluice__Wire__Reply *r = m->replies->replies[i];
            rc = check_seq(i ? m->replies->replies[i - 1]->seq : 0, r->seq, i, "reply", e);
            if (rc == SL_OK)
                rc = sl_wire_check_reply(r, lim, e);
        }
        return rc;
    default:
        return sl_fail(e, SL_ERR_PROTOCOL, "server message of no known kind (%d)",
                       (int)m->kind_case);
    }
}

static sl_code pack(const ProtobufCMessage *m, const struct sl_wire_limits *lim, uint8_t **buf,
                    size_t *len, sl_error *e)
{
    size_t n = sl_wire_message_packed_size(m);
    if (n > lim_message(lim))
        return sl_fail(e, SL_ERR_TOO_LARGE, "%s of %zu bytes, over the limit %zu",
                       m->descriptor->short_name, n, lim_message(lim));
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return sl_fail(e, SL_ERR_NOMEM, "no memory for a %zu-byte %s", n,
                       m->descriptor->short_name);
    size_t done = sl_wire_message_pack(m, b);
    if (done != n) {
        free(b);
        return sl_fail(e, SL_ERR_INVALID, "%s packed to %zu bytes, expected %zu",
                       m->descriptor->short_name, done, n);
    }
    *buf = b;
    *len = n;
    return SL_OK;
}

sl_code sl_wire_encode_client(const Sluice__Wire__ClientMessage *m,
                              const struct sl_wire_limits *lim, uint8_t **buf, size_t *len,
                              sl_error *e)
{
    sl_code rc = sl_wire_check_client(m, lim, e);
    return rc != SL_OK ? rc : pack(&m->base, lim, buf, len, e);
}

sl_code sl_wire_encode_server(const Sluice__Wire__ServerMessage *m,
                              const struct sl_wire_limits *lim, uint8_t **buf, size_t *len,
                              sl_error *e)
{
    sl_code rc = sl_wire_check_server(m, lim, e);
    return rc != SL_OK ? rc : pack(&m->base, lim, buf, len, e);
}

sl_code sl_wire_decode_client(const uint8_t *buf, size_t len, const struct sl_wire_limits *lim,
                              Sluice__Wire__ClientMessage **out, sl_error *e)
{
    *out = NULL;
    if (len > lim_message(lim))
        return sl_fail(e, SL_ERR_TOO_LARGE, "client message of %zu bytes, over the limit %zu", len,
                       lim_message(lim));
    Sluice__Wire__ClientMessage *m = (Sluice__Wire__ClientMessage *)sl_wire_message_unpack(
        &sluice__wire__client_message__descriptor, len, buf);
    if (!m)
        return sl_fail(e, SL_ERR_PROTOCOL,
                       "client message of %zu bytes is not a valid ClientMessage", len);
    sl_code rc = sl_wire_check_client(m, lim, e);
    if (rc != SL_OK) {
        sl_wire_free_client(m);
        return rc;
    }
    *out = m;
    return SL_OK;
}

sl_code sl_wire_decode_server(const uint8_t *buf, size_t len, const struct sl_wire_limits *lim,
                              Sluice__Wire__ServerMessage **out, sl_error *e)
{
    *out = NULL;
    if (len > lim_message(lim))
        return sl_fail(e, SL_ERR_TOO_LARGE, "server message of %zu bytes, over the limit %zu", len,
                       lim_message(lim));
    Sluice__Wire__ServerMessage *m = (Sluice__Wire__ServerMessage *)sl_wire_message_unpack(
        &sluice__wire__server_message__descriptor, len, buf);
    if (!m)
        return sl_fail(e, SL_ERR_PROTOCOL,
                       "server message of %zu bytes is not a valid ServerMessage", len);
    sl_code rc = sl_wire_check_server(m, lim, e);
    if (rc != SL_OK) {
        sl_wire_free_server(m);
        return rc;
    }
    *out = m;
    return SL_OK;
}

void sl_wire_free_client(Sluice__Wire__ClientMessage *m)
{
    if (m)
        sl_wire_message_free(&m->base);
}

void sl_wire_free_server(Sluice__Wire__ServerMessage *m)
{
    if (m)
        sl_wire_message_free(&m->base);
}
