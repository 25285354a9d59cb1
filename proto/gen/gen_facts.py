"""The call table with every per-call fact, and the generated accessors that read the facts'
parameters out of a Call or Reply (sluice/wire.h, sluice/call_facts.h). Everything in Sluice that
depends on what a call is asks these; no hand code switches on call ids."""
import apitable
from gen_c import (HEADER, ONEOF_BASE, PROTOCOL_VERSION, SCALAR_KINDS, c_lower, case_const,
                   handle_enum)

FLAG_BITS = ["async", "ptds", "ptsz", "internal", "memo", "unmemo", "uncapture", "local",
             "prints", "unsticky", "nowait"]
ENUMS = {  # key -> (C enum prefix, values in order; index 0 = not given)
    "hand": ("SL_HAND_", ["none", "fe", "be", "both"]),
    "quota": ("SL_QUOTA_", ["none", "alloc", "counted", "array", "free-array", "meminfo"]),
    "acct": ("SL_ACCT_", ["none", "launch", "kernel", "copy", "marker"]),
    "dir": ("SL_DIR_", ["none", "htod", "dtoh"]),
    "idle": ("SL_IDLE_", ["work", "sync-ctx", "sync-stream", "query-stream", "completes-stream",
                          "keep", "record", "wait", "query-event"]),
    "blocks": ("SL_BLOCKS_", ["none", "stream", "event", "ctx"]),
    "fattr": ("SL_FATTR_", ["none", "get", "set", "uses"]),
}


def enum_name(key, value):
    prefix, values = ENUMS[key]
    return prefix + (value or values[0]).upper().replace("-", "_")


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"' if s else "NULL"


def flags_of(c):
    bits = [f"SL_CALL_{f.upper()}" for f in FLAG_BITS if c.has(f)]
    if c.sent:
        bits.append("SL_CALL_SENT")
    if c.key("capture") == "begin":
        bits.append("SL_CALL_CAPTURE_BEGIN")
    return " | ".join(bits) or "0"


def info_row(c):
    hand = enum_name("hand", c.hand)
    answers = f"CUDA_ERROR_{c.key('answers')}" if c.key("answers") else "0"
    return (f'    [{c.id}] = {{{c.id}, "{c.name}", {flags_of(c)}, {hand}, '
            f'{enum_name("quota", c.key("quota"))}, {enum_name("acct", c.key("acct"))}, '
            f'{enum_name("dir", c.key("dir"))}, {enum_name("idle", c.key("idle"))}, '
            f'{enum_name("blocks", c.key("blocks"))}, {enum_name("fattr", c.key("fattr"))}, '
            f'{answers}, '
            f'{c_string(c.key("refuse"))}, {c_string(c.key("via"))}}},')


def enums_h():
    out = []
    for key, (prefix, values) in ENUMS.items():
        out.append(f"enum sl_call_{key} {{")
        out += [f"    {prefix}{v.upper().replace('-', '_')}," for v in values]
        out.append("};")
    return "\n".join(out)


def wire_tables_c(calls):
    rows, descs = [], []
    for c in calls:
        rows.append(info_row(c))
        for s in ("Request", "Reply"):
            descs.append(f"    &{c_lower('sluice.cuda', c.message + s)}__descriptor,")
    for m in ("Call", "CallFrame", "Reply", "ReplyFrame", "SessionOpen", "SessionAccept",
              "SessionClose", "ClientMessage", "ServerMessage", "DeviceInfo", "HostCallback",
              "CallbackDone", "LaneBulk"):
        descs.append(f"    &{c_lower('sluice.wire', m)}__descriptor,")
    max_id = max(c.id for c in calls)
    return f"""/* {HEADER} */
#include <cuda.h>

#include "sluice/wire.h"

#include "sluice_session.pb-c.h"

const struct sl_call_info sl_call_table[SL_CALL_ID_MAX + 1] = {{
{chr(10).join(rows)}
}};

const ProtobufCMessageDescriptor *const sl_wire_descriptors[] = {{
{chr(10).join(descs)}
}};
const size_t sl_wire_descriptor_count = sizeof sl_wire_descriptors / sizeof sl_wire_descriptors[0];

_Static_assert(SL_CALL_ID_MAX == {max_id}, "regenerate sluice/wire_ids.h");
_Static_assert(SL_CALL_COUNT == {len(calls)}, "regenerate sluice/wire_ids.h");
"""


def wire_ids_h(calls):
    ids = "\n".join(f"#define SL_CALL_{c.name} {c.id}" for c in calls)
    return f"""/* {HEADER} */
#ifndef SLUICE_WIRE_IDS_H
#define SLUICE_WIRE_IDS_H

#define SL_CALL_ID_MAX {max(c.id for c in calls)}
#define SL_CALL_COUNT {len(calls)}
#define SL_PROTOCOL_VERSION {PROTOCOL_VERSION}
#define SL_ONEOF_BASE {ONEOF_BASE}
#define SL_CALL_INTERNAL_BASE {apitable.INTERNAL_BASE} /* ids from here up: Sluice-only calls */
/* Entries of sl_fe_export_table(): every exported name (cuda.h calls and _ptds/_ptsz twins) */
#define SL_FE_EXPORT_COUNT {sum(len(c.exported) for c in calls)}

{ids}

/* The facts of the table's key=value annotations (docs/api-table.md), in struct sl_call_info. */
{enums_h()}

#endif
"""


def handle_kinds_h():
    kinds = "\n".join(f"    {handle_enum(h)}," for h in apitable.HANDLE_KINDS)
    return f"""/* {HEADER} */
#ifndef SLUICE_HANDLE_KINDS_H
#define SLUICE_HANDLE_KINDS_H

/* The kinds of opaque objects the backend issues ids for (the table's @handle=<kind>). */
enum sl_handle_kind {{
{kinds}
    SL_H_KIND_COUNT
}};

#endif
"""


# ---------------------------------------------------------------- accessors

def _request(c):
    return f"c->{c.member}"


def _pod_local(p):
    t = p.value_type.replace("const ", "")
    return t, f"{t} v; memcpy(&v, rq->{p.field}.data, sizeof v);"


def _case(c, body, guard="rq"):
    """One `case` of an accessor: rq is the call's request, NULL-checked."""
    return (f"    case SL_CALL_{c.name}: {{\n"
            f"        const {apitable_req(c)} *rq = {_request(c)};\n"
            f"        if (!{guard})\n            return 0;\n"
            + "".join(f"        {line}\n" for line in body) + "    }")


def apitable_req(c):
    from gen_c import req_type
    return req_type(c)


def _switch(name, sig, cases, tail="    default:\n        return 0;\n    }"):
    return (f"{sig}\n{{\n    switch (c->call_id) {{\n" + "\n".join(cases) + "\n" + tail +
            "\n}")


def stream_accessor(calls):
    cases = []
    for c in calls:
        p = c.stream_param
        if not p or c.refused:
            continue
        if p.stream:
            t = p.value_type.replace("const ", "")
            body = [f"if (rq->{p.field}.len != sizeof({t}))", "    return 0;",
                    f"{t} v;", f"memcpy(&v, rq->{p.field}.data, sizeof v);",
                    f"return sl_pod_stream_{t}(&v, stream);"]
        else:
            body = [f"*stream = rq->{p.field};", "return 1;"]
        cases.append(_case(c, body))
    return _switch("stream", "int sl_call_stream(const Sluice__Wire__Call *c, uint64_t *stream)",
                   cases)


def fattr_accessor(calls):
    cases = [_case(c, ["*attrib = (uint32_t)rq->attrib;", "return 1;"]) for c in calls
             if c.key("fattr") in ("get", "set") and not c.refused]
    return _switch("fattr", "int sl_call_fattr(const Sluice__Wire__Call *c, uint32_t *attrib)",
                   cases)


def copy_accessor(calls):
    cases = []
    for c in calls:
        if c.key("acct") != "copy" or c.refused:
            continue
        bp = [p for p in c.params if p.bytes]
        d = enum_name("dir", c.key("dir"))
        if not bp:
            body = [f"*dir = {d};", "return 0;"]
        elif bp[0].kind == "pod":
            t = bp[0].value_type.replace("const ", "")
            body = [f"if (rq->{bp[0].field}.len != sizeof({t}))", "    return 0;",
                    f"{t} v;", f"memcpy(&v, rq->{bp[0].field}.data, sizeof v);",
                    f"return sl_pod_copy_{t}(&v, dir);"]
        else:
            body = [f"*dir = {d};", f"return (uint64_t)rq->{bp[0].field};"]
        cases.append(_case(c, body))
    return _switch("copy", "uint64_t sl_call_copy_bytes(const Sluice__Wire__Call *c, "
                   "enum sl_call_dir *dir)", cases)


def quota_accessor(calls):
    cases = []
    for c in calls:
        qp = [p for p in c.params if p.quota]
        if not qp or c.refused:
            continue
        if qp[0].kind == "pod":
            t = qp[0].value_type.replace("const ", "")
            body = [f"if (rq->{qp[0].field}.len != sizeof({t}))", "    return 0;",
                    f"{t} v;", f"memcpy(&v, rq->{qp[0].field}.data, sizeof v);",
                    f"return sl_pod_quota_{t}(&v);"]
        else:
            body = ["uint64_t b = 1;"]
            for p in qp:
                body += [f"if (rq->{p.field} && b > UINT64_MAX / (uint64_t)rq->{p.field})",
                         "    return UINT64_MAX;", f"b *= (uint64_t)rq->{p.field};"]
            body.append("return b;")
        cases.append(_case(c, body))
    return _switch("quota", "uint64_t sl_call_quota_bytes(const Sluice__Wire__Call *c)", cases)


def handle_arg_accessor(calls, fname, kind, doc, release=False, arg_kind="handle"):
    cases = []
    for c in calls:
        if c.refused:
            continue
        for p in c.params:
            if p.kind == arg_kind and p.direction == "in" and not p.is_array and \
                    (p.release if release else p.handle == kind):
                cases.append(_case(c, [f"return rq->{p.field};"]))
                break
    return f"/* {doc} */\n" + _switch(fname, f"uint64_t {fname}(const Sluice__Wire__Call *c)",
                                       cases)


# The struct types whose device sides sl_call_devptrs reads (sl_pod_devptrs_<type> in
# proto/codec/pod_facts.c).
DEVPTR_PODS = ("CUDA_MEMCPY2D", "CUDA_MEMCPY3D")
DEVPTRS_MAX = 4  # SL_CALL_DEVPTRS_MAX in sluice/call_facts.h


def devptrs_accessor(calls):
    """Every device address a call names as an in-parameter: its @devptr scalars and the device
    sides of a copy pod."""
    cases = []
    for c in calls:
        if c.refused:
            continue
        body, most = [], 0
        for p in c.params:
            if p.direction != "in" or p.is_array:
                continue
            if p.kind == "devptr":
                body.append(f"out[n++] = rq->{p.field};")
                most += 1
            elif p.kind == "pod" and p.value_type.replace("const ", "") in DEVPTR_PODS:
                t = p.value_type.replace("const ", "")
                body += [f"if (rq->{p.field}.len == sizeof({t})) {{", f"    {t} v;",
                         f"    memcpy(&v, rq->{p.field}.data, sizeof v);",
                         f"    n += sl_pod_devptrs_{t}(&v, out + n);", "}"]
                most += 2
        if not body:
            continue
        if most > DEVPTRS_MAX:
            raise apitable.TableError(f"{c.name}: more than {DEVPTRS_MAX} device addresses")
        cases.append(_case(c, ["size_t n = 0;"] + body + ["return n;"]))
    return ("/* The device addresses a call names (@devptr in-parameters, copy pods' device "
            "sides). */\n" +
            _switch("devptrs", "size_t sl_call_devptrs(const Sluice__Wire__Call *c, "
                    "uint64_t out[SL_CALL_DEVPTRS_MAX])", cases))


def reply_accessor(calls, fname, kinds, doc):
    """A pointer to the reply's first out field of these kinds (the layer may clear it)."""
    from gen_c import rep_type
    cases = []
    for c in calls:
        if c.refused or not c.key("quota"):
            continue
        for p in c.params:
            if p.direction == "out" and p.kind in kinds and not p.is_array:
                cases.append(f"    case SL_CALL_{c.name}:\n"
                             f"        if (r->out_case != {case_const('reply', c)} || "
                             f"!r->{c.member})\n            return NULL;\n"
                             f"        return &r->{c.member}->{p.field};")
                break
    return (f"/* {doc} */\nuint64_t *{fname}(Sluice__Wire__Reply *r)\n{{\n"
            f"    switch (r->call_id) {{\n" + "\n".join(cases) +
            "\n    default:\n        return NULL;\n    }\n}")


def call_facts_c(calls):
    parts = [f"""/* {HEADER}
 * Accessors of the per-call facts' parameters (sluice/call_facts.h). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stdint.h>
#include <string.h>

#include "sluice/call_facts.h"
#include "sluice/pod_facts.h"
#include "sluice_session.pb-c.h"
""", stream_accessor(calls), fattr_accessor(calls), copy_accessor(calls), quota_accessor(calls),
        handle_arg_accessor(calls, "sl_call_event", "event",
                            "The event an idle=record|wait call names."),
        handle_arg_accessor(calls, "sl_call_context_arg", "context",
                            "The context a call names as a parameter (0: none, current)."),
        handle_arg_accessor(calls, "sl_call_released", None,
                            "The handle a call releases (@release), 0: none.", release=True),
        handle_arg_accessor(calls, "sl_call_released_devptr", None,
                            "The device address a call releases (@release), 0: none.",
                            release=True, arg_kind="devptr"),
        devptrs_accessor(calls),
        reply_accessor(calls, "sl_reply_out_devptr", ("devptr",),
                       "The device address a quota call's reply carries."),
        reply_accessor(calls, "sl_reply_out_handle", ("handle",),
                       "The handle a quota call's reply carries.")]
    return "\n\n".join(parts) + "\n"
