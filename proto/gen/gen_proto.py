"""The .proto schemas generated from the table, and the stability check of their numbers."""
import os
import re

from apitable import SCALAR_KINDS
from gen_c import HEADER, ONEOF_BASE, PROTOCOL_VERSION

PROTO_SCALAR = {"int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
                "float": "float", "double": "double", "enum": "uint32"}


def proto_type(p):
    if p.kind in SCALAR_KINDS:
        return PROTO_SCALAR[p.kind]
    if p.kind in ("pod", "bytes"):
        return "bytes"
    if p.kind == "cstr":
        return "string"
    if p.kind == "device":
        return "int32"
    return "uint64"    # handle, devptr, hostptr (a length), callback


def proto_field(p):
    rep = "repeated " if p.is_repeated else ""
    note = {"hostptr": "  // byte length; the data travels as bulk",
            "callback": "  // guest-side callback id"}.get(p.kind, "")
    return f"  {rep}{proto_type(p)} {p.field} = {p.pos};{note}"


# The reply of a `layout` call also carries the parameter layout of the function or kernel it
# answers (slParamLayout's answer, without its round trip), at these fixed numbers, far above
# any parameter's (a parameter's number is its position).
LAYOUT_FIELDS = [
    "  repeated uint64 param_offsets = 100;  // layout: the answer's parameters, as slParamLayout",
    "  repeated uint64 param_sizes = 101;",
    "  bool param_layout = 102;  // true: the two above are its layout; false: ask slParamLayout",
]


def gen_cuda_proto(calls):
    out = [f"// {HEADER}", 'syntax = "proto3";', "package sluice.cuda;", ""]
    for c in calls:
        for suffix, dirs in (("Request", ("in", "inout")), ("Reply", ("out", "inout"))):
            fields = [proto_field(p) for p in c.params if p.direction in dirs]
            if suffix == "Reply" and c.has("layout"):
                fields += LAYOUT_FIELDS
            tag = f"  // call {c.id} {c.name}" if suffix == "Request" else ""
            out.append(f"message {c.message}{suffix} {{{tag}")
            out.extend(fields)
            out.append("}")
    return "\n".join(out) + "\n"


def gen_session_proto(calls):
    args = "\n".join(f"    sluice.cuda.{c.message}Request {c.member} = {ONEOF_BASE + c.id};"
                     for c in calls)
    outs = "\n".join(f"    sluice.cuda.{c.message}Reply {c.member} = {ONEOF_BASE + c.id};"
                     for c in calls)
    return f"""// {HEADER}
syntax = "proto3";
package sluice.wire;

import "sluice_cuda.proto";

// One forwarded driver call. Bulk data (host buffers, module images) is not in the message:
// bulk_length bytes follow the message on the channel, after the bulk of earlier calls.
message Call {{
  uint64 seq = 1;                // strictly increasing per session
  uint32 call_id = 2;            // the id from proto/api/cuda_driver.api
  uint64 bulk_length = 3;
  bool per_thread_stream = 4;    // the _ptds/_ptsz variant was called
  uint64 context = 5;            // the calling guest thread's current context id, 0 = none
  bool no_reply = 6;             // a nowait call sent without waiting: answered as an async one
  // Bulk lanes (docs/remoting.md, "Lanes"): bulk_length bytes arrive as lane_pieces LaneBulk
  // pieces on the lanes instead of after the message (0: after the message, as before).
  uint32 lane_pieces = 7;
  bool reply_on_lanes = 8;       // the reply's bulk may come back on the lanes
  // A stream query (docs/remoting.md, "Busy streams"): if the stream is busy, the worker may
  // watch it and send StreamDone{{seq}} once the work queued before this call is done.
  bool watch = 9;
  reserved 10 to 99;
  oneof args {{
{args}
  }}
}}

// Consecutive calls coalesced into one frame (async calls queued before a synchronizing one).
message CallFrame {{
  repeated Call calls = 1;
}}

message Reply {{
  uint64 seq = 1;                // the seq of the call answered
  uint32 call_id = 2;
  int32 result = 3;              // CUresult
  uint64 failed_seq = 4;         // an earlier deferred (async) call that failed, 0 = none
  uint64 bulk_length = 5;
  string detail = 6;             // human-readable reason for a Sluice-side refusal
  bytes stdout_data = 7;         // device printf output produced up to this reply (<= 1 MiB);
                                 // the frontend writes it to its stdout
  repeated MappedData mapped = 8; // device writes to mapped host memory seen at this reply
  bytes stderr_data = 9;         // what the device wrote to stderr up to this reply (failed
                                 // device-side asserts; <= 1 MiB): the frontend writes it to
                                 // its stderr
  bool mapped_more = 10;         // more device writes to mapped host memory than one reply
                                 // carries (8 MiB): the frontend asks again (slFence) until
                                 // a reply has none left
  uint32 lane_pieces = 11;       // bulk_length bytes come as this many LaneBulk pieces on the
                                 // lanes (only when the call asked reply_on_lanes); 0: after
  bool watched = 12;             // a NOT_READY answer to a call that asked watch: StreamDone
                                 // with this seq follows, before any later reply that could
                                 // only come after that work
  reserved 13 to 99;
  oneof out {{
{outs}
  }}
}}

// Bytes of a mapped host buffer (slMappedAlloc): the buffer's device address, an offset into
// it and the bytes found there, sent with a synchronous reply when they changed.
message MappedData {{
  uint64 dptr = 1;
  uint64 offset = 2;
  bytes data = 3;
}}

message ReplyFrame {{
  repeated Reply replies = 1;
}}

message SessionOpen {{
  uint32 protocol_version = 1;   // {PROTOCOL_VERSION} for this schema
  uint32 cuda_version = 2;       // CUDA_VERSION the frontend was built against
  string client = 3;             // free text: process name, pid, frontend version
  uint32 pid = 4;                // the guest process id
  string hostname = 5;           // the guest's host name
  // Only on the session worker's direct endpoint (SessionAccept.direct_port): the ticket of
  // SessionAccept.direct_ticket, once; the worker answers a SessionAccept without devices.
  // On a lane's endpoint: that lane's ticket (SessionAccept.lane_tickets), once.
  bytes ticket = 6;
  uint32 lanes = 7;              // bulk lanes the guest asks for (SLUICE_LANES; <= 8, 0/1: none)
  // On the worker's direct endpoint and on a lane's: the guest seals that channel's large bulk
  // (docs/channel.md, "Sealed bulk") if the worker's SessionAccept.sealed_bulk says it does too.
  bool sealed_bulk = 8;
}}

message SessionAccept {{
  uint32 protocol_version = 1;
  uint32 driver_version = 2;     // cuDriverGetVersion on the host
  uint64 session_id = 3;
  uint64 max_message_bytes = 4;
  uint64 max_bulk_bytes = 5;
  repeated DeviceInfo devices = 6;  // the devices the session sees (<= 64), by ordinal
  // The session worker's own endpoint (docs/remoting.md, "The direct channel"): a TCP port on
  // the backend's address (0: none offered) and the single-use random ticket (32 bytes) that
  // opens it.
  uint32 direct_port = 7;
  bytes direct_ticket = 8;
  // The session's bulk lanes (only with a direct port, only as many as SessionOpen.lanes asked,
  // <= 8): lane i is the worker's port lane_ports[i], opened by SessionOpen{{lane_tickets[i]}}
  // (32 random bytes, single use) after the direct channel.
  repeated uint32 lane_ports = 9;
  repeated bytes lane_tickets = 10;
  // The module images the backend holds for this tenant (its cache and image store, <= 4096):
  // the first 8 bytes of each one's SHA-256, big-endian (sl_wire_image_hint). The frontend sends an image without a hint with
  // its first slLoadImage (the backend would answer FILE_NOT_FOUND), one with a hint without.
  repeated fixed64 image_hints = 11;
  // On the worker's direct endpoint and on a lane's, answering SessionOpen.sealed_bulk: from
  // this message on, that channel's large bulk goes sealed both ways.
  bool sealed_bulk = 12;
}}

// One device as the guest sees it; lets the frontend answer device queries locally.
message DeviceInfo {{
  int32 ordinal = 1;
  string name = 2;
  bytes uuid = 3;                // 16 bytes (CUuuid), or empty
  uint64 total_mem = 4;
  repeated int32 attributes = 5; // index = CUdevice_attribute value, 0..CU_DEVICE_ATTRIBUTE_MAX-1
  bytes luid = 6;                // 8 bytes, or empty (no LUID)
  uint32 luid_device_node_mask = 7;
  uint64 primary_context = 8;    // the context id the guest uses as this device's primary context
}}

message SessionClose {{
  uint32 reason = 1;             // sl_code of the reason, 0 = normal close
  string detail = 2;
}}

message ClientMessage {{
  oneof kind {{
    SessionOpen open = 1;
    CallFrame calls = 2;
    SessionClose close = 3;
    CallbackDone callback_done = 4;
    LaneBulk lane = 5;
  }}
}}

message ServerMessage {{
  oneof kind {{
    SessionAccept accept = 1;
    ReplyFrame replies = 2;
    SessionClose close = 3;
    HostCallback callback = 4;
    LaneBulk lane = 5;
    StreamDone stream_done = 6;
  }}
}}

// The work a watched stream query (Call.watch, Reply.watched) found queued is done.
message StreamDone {{
  uint64 seq = 1;                // the seq of that query
}}

// The backend asks the guest to run a host function registered with cuLaunchHostFunc or
// cuStreamAddCallback; the stream waits until the guest answers with CallbackDone.
message HostCallback {{
  uint64 id = 1;                 // non-zero, echoed by CallbackDone
  uint64 fn = 2;                 // the guest function pointer
  uint64 user_data = 3;          // the guest's userData pointer
}}

message CallbackDone {{
  uint64 id = 1;                 // the HostCallback.id that finished
}}

// One piece of a call's (guest to worker) or a reply's (worker to guest) bulk, on a lane: the
// piece's length bytes follow the message on that lane. The pieces of a bulk of n bytes in k
// pieces are cut by sl_lane_piece (proto/codec/lanes.c): offset and length must be its.
message LaneBulk {{
  uint64 seq = 1;                // the call's seq (its reply's)
  uint32 piece = 2;              // 0 .. k-1
  uint64 offset = 3;             // into the call's (reply's) bulk
  uint64 length = 4;
}}
"""


def proto_numbers(text):
    """{(message, field or oneof member): (number, type)} from a .proto file we generated."""
    nums, msg = {}, None
    for line in text.splitlines():
        line = line.split("//", 1)[0].strip()
        m = re.match(r"message (\w+) \{", line)
        if m:
            msg = m.group(1)
            continue
        m = re.match(r"(?:repeated )?([\w.]+) (\w+) = (\d+);", line)
        if m and msg:
            full = line.startswith("repeated ")
            nums[(msg, m.group(2))] = (int(m.group(3)), ("repeated " if full else "") + m.group(1))
    return nums


def check_stability(old_dir, generated):
    """Only additions are allowed: every existing field keeps its number and type."""
    problems = []
    for fname, new_text in generated.items():
        path = os.path.join(old_dir, fname)
        if not os.path.exists(path):
            continue
        old, new = proto_numbers(open(path).read()), proto_numbers(new_text)
        for key, (num, typ) in sorted(old.items()):
            if key not in new:
                problems.append(f"{fname}: {key[0]}.{key[1]} = {num} was removed")
            elif new[key] != (num, typ):
                problems.append(f"{fname}: {key[0]}.{key[1]} changes from "
                                f"{typ} = {num} to {new[key][1]} = {new[key][0]}")
        used = {}
        for (m, f), (num, _) in new.items():
            if (m, num) in used and used[(m, num)] != f:
                problems.append(f"{fname}: {m}: number {num} used by {used[(m, num)]} and {f}")
            used[(m, num)] = f
    return problems
