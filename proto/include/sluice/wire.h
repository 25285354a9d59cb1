/* The Sluice wire: limits, the call table and the envelope codec.
 *
 * The messages themselves are generated (proto/gen/sluicegen.py from proto/api/cuda_driver.api)
 * into sluice_cuda.pb-c.h / sluice_session.pb-c.h. This header adds what hand code needs around
 * them: the limits every decoder enforces, the call table (id -> name, flags), the list of all
 * message descriptors, and encode/decode/validate of the top-level ClientMessage/ServerMessage.
 * Every function reports failures through sl_error with a message naming what was wrong. */
#ifndef SLUICE_WIRE_H
#define SLUICE_WIRE_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/error.h"
#include "sluice/wire_ids.h"
#include "sluice_session.pb-c.h"

/* Hard bounds on values from the wire (the limits struct below can only lower the first three). */
#define SL_WIRE_MAX_MESSAGE           ((size_t)64 << 20) /* one encoded ClientMessage/ServerMessage */
#define SL_WIRE_MAX_BULK              ((uint64_t)1 << 40) /* bulk bytes announced by one call or reply */
#define SL_WIRE_MAX_FRAME_CALLS       4096u               /* calls (or replies) in one frame */
#define SL_WIRE_MAX_ARRAY             65536u              /* elements of one array parameter */
#define SL_WIRE_MAX_STRING            65536u /* bytes of one string out-parameter buffer */
#define SL_WIRE_MAX_STDOUT            ((size_t)1 << 20) /* Reply.stdout_data, stderr_data bytes */
#define SL_WIRE_MAX_DEVICES           64u               /* SessionAccept.devices */
#define SL_WIRE_MAX_IMAGE_HINTS       4096u             /* SessionAccept.image_hints */
#define SL_WIRE_MAX_IMAGE_KERNELS     64u               /* SlLoadImageReply.kernel_handles */
#define SL_WIRE_MAX_DEVICE_ATTRIBUTES 1024u             /* DeviceInfo.attributes */
/* Set in a handle id the guest chose (slLoadImageAs): the kind in the top byte, this bit, a
 * counter of the guest's below it. The backend's own ids never have it. */
#define SL_WIRE_GUEST_ID (UINT64_C(1) << 55)

/* The table's flags (proto/api/cuda_driver.api, docs/api-table.md). */
enum sl_call_flag {
    SL_CALL_ASYNC = 1u << 0,    /* may be sent without waiting for the reply */
    SL_CALL_PTDS = 1u << 1,     /* the driver also has <name>_ptds */
    SL_CALL_PTSZ = 1u << 2,     /* the driver also has <name>_ptsz */
    SL_CALL_INTERNAL = 1u << 3, /* Sluice-only call (ids >= SL_CALL_INTERNAL_BASE), not in cuda.h */
    SL_CALL_MEMO = 1u << 4,     /* a query the frontend may answer again from its last answer */
    SL_CALL_UNMEMO = 1u << 5,   /* may change what memo calls answer: forgets their answers */
    SL_CALL_UNCAPTURE = 1u << 6, /* may change capture status: forgets cuStreamIsCapturing's */
    SL_CALL_LOCAL = 1u << 7,     /* answered in the guest, never sent */
    SL_CALL_PRINTS = 1u << 8,    /* device printf output is due after it */
    SL_CALL_UNSTICKY = 1u << 9,  /* runs even when its context holds a sticky error */
    SL_CALL_SENT = 1u << 10,     /* travels as itself (not refused, local or sent as other calls) */
    SL_CALL_CAPTURE_BEGIN = 1u << 11, /* begins a stream capture */
    SL_CALL_NOWAIT = 1u << 12,        /* may go without waiting when the guest sets Call.no_reply */
};

/* Everything the table says of one call. The enums (sluice/wire_ids.h) are the table's
 * key=value annotations: hand, quota, acct, dir, idle, blocks, fattr. */
struct sl_call_info {
    uint32_t id;        /* 0 for an unused slot */
    const char *name;   /* the real symbol, e.g. "cuMemAlloc_v2" */
    uint32_t flags;     /* enum sl_call_flag */
    uint8_t hand;       /* enum sl_call_hand: where hand code lives */
    uint8_t quota;      /* enum sl_call_quota */
    uint8_t acct;       /* enum sl_call_acct: device work for accounting */
    uint8_t dir;        /* enum sl_call_dir: acct=copy direction (or from its pod) */
    uint8_t idle;       /* enum sl_call_idle: what the frontend learns of idle streams */
    uint8_t blocks;     /* enum sl_call_blocks: a wait the backend completes off its call path */
    uint8_t fattr;      /* enum sl_call_fattr: a kernel's or function's attribute (the memo) */
    int32_t answers;    /* a CUresult that is an answer of this call, not an error; 0: none */
    const char *refuse; /* why Sluice does not offer it; NULL: offered */
    const char *via;    /* the calls the frontend sends it as ("a,b"); NULL: none */
};

/* Indexed by call id; slot 0 and unused ids are zero (the internal calls at
 * SL_CALL_INTERNAL_BASE and up make it sparse). Generated. */
extern const struct sl_call_info sl_call_table[SL_CALL_ID_MAX + 1];
/* Every message of sluice.cuda and sluice.wire. Generated. */
extern const ProtobufCMessageDescriptor *const sl_wire_descriptors[];
extern const size_t sl_wire_descriptor_count;

/* The table entry of a call id, or NULL when the id is not a known call. */
const struct sl_call_info *sl_call_lookup(uint32_t call_id);

/* SessionAccept.image_hints: an image's hint is the first 8 bytes of its SHA-256, big-endian. */
static inline uint64_t sl_wire_image_hint(const uint8_t sha[32])
{
    uint64_t h = 0;
    for (int i = 0; i < 8; i++)
        h = h << 8 | sha[i];
    return h;
}

/* Whether call (whose entry is ci, may be NULL) is answered as an async one: no reply, its
 * error deferred. An async call always; a nowait call when the guest sent it without waiting
 * (Call.no_reply); no_reply on any other call is ignored. */
static inline int sl_call_is_async(const struct sl_call_info *ci, const Sluice__Wire__Call *call)
{
    return ci && ((ci->flags & SL_CALL_ASYNC) || ((ci->flags & SL_CALL_NOWAIT) && call->no_reply));
}

/* Per-session limits; zero fields mean the SL_WIRE_MAX_* defaults. */
struct sl_wire_limits {
    size_t max_message;
    uint64_t max_bulk;
    size_t max_calls;
};

/* Structural checks of one call/reply: known call id, oneof member matching it, per-thread
 * flag only on calls that have a per-thread variant, bulk_length within the limit. */
sl_code sl_wire_check_call(const Sluice__Wire__Call *call, const struct sl_wire_limits *lim,
                           sl_error *e);
sl_code sl_wire_check_reply(const Sluice__Wire__Reply *reply, const struct sl_wire_limits *lim,
                            sl_error *e);

/* Whole-message checks: a kind is set; frames are non-empty, within max_calls, and their seq
 * numbers are non-zero and strictly increasing; every call/reply passes the checks above. */
sl_code sl_wire_check_client(const Sluice__Wire__ClientMessage *m, const struct sl_wire_limits *lim,
                             sl_error *e);
sl_code sl_wire_check_server(const Sluice__Wire__ServerMessage *m, const struct sl_wire_limits *lim,
                             sl_error *e);

/* Validates m, then packs it into a new malloc'd buffer (*buf, *len); free() it. */
sl_code sl_wire_encode_client(const Sluice__Wire__ClientMessage *m,
                              const struct sl_wire_limits *lim, uint8_t **buf, size_t *len,
                              sl_error *e);
sl_code sl_wire_encode_server(const Sluice__Wire__ServerMessage *m,
                              const struct sl_wire_limits *lim, uint8_t **buf, size_t *len,
                              sl_error *e);

/* Unpacks and validates; on success *out must be freed with sl_wire_free_client/server. */
sl_code sl_wire_decode_client(const uint8_t *buf, size_t len, const struct sl_wire_limits *lim,
                              Sluice__Wire__ClientMessage **out, sl_error *e);
sl_code sl_wire_decode_server(const uint8_t *buf, size_t len, const struct sl_wire_limits *lim,
                              Sluice__Wire__ServerMessage **out, sl_error *e);

void sl_wire_free_client(Sluice__Wire__ClientMessage *m);
void sl_wire_free_server(Sluice__Wire__ServerMessage *m);

/* oneof_codec.c: Call and Reply encoded and freed without visiting each of their thousand
 * oneof members (protobuf-c does, on every pack, size and free); the same bytes as protobuf-c.
 * The frees take what protobuf-c's unpack made. The message functions do the same for a
 * ClientMessage of calls and a ServerMessage of replies and hand anything else to protobuf-c. */
size_t sl_wire_call_packed_size(const Sluice__Wire__Call *c);
size_t sl_wire_call_pack(const Sluice__Wire__Call *c, uint8_t *out);
size_t sl_wire_reply_packed_size(const Sluice__Wire__Reply *r);
size_t sl_wire_reply_pack(const Sluice__Wire__Reply *r, uint8_t *out);
void sl_wire_call_free(Sluice__Wire__Call *c);
void sl_wire_reply_free(Sluice__Wire__Reply *r);
size_t sl_wire_message_packed_size(const ProtobufCMessage *m);
size_t sl_wire_message_pack(const ProtobufCMessage *m, uint8_t *out);
void sl_wire_message_free(ProtobufCMessage *m);
Sluice__Wire__Call *sl_wire_call_unpack(size_t len, const uint8_t *data);
Sluice__Wire__Reply *sl_wire_reply_unpack(size_t len, const uint8_t *data);
ProtobufCMessage *sl_wire_message_unpack(const ProtobufCMessageDescriptor *d, size_t len,
                                         const uint8_t *data);

#endif
