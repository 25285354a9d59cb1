"""The frontend's generated code: the stubs, the refused calls' definitions, the export table
and the typed envelope helpers hand-written frontend code builds its calls with."""
from gen_c import (C_WIRE, HEADER, c_decl, c_params, c_upper, case_const, from_wire, rep_type,
                   req_type, to_wire)


def stub_fill_request(c, p, body, temps, frees):
    """C statements that put parameter p into the request `req`."""
    f = p.field
    if p.is_array and p.kind != "cstr":
        n = c.param(p.length).name
        body.append(f"    if ((uint64_t){n} > SL_WIRE_MAX_ARRAY || ({n} > 0 && !{p.name}))"
                    " { rc = CUDA_ERROR_INVALID_VALUE; goto out; }")
        if p.direction == "in":
            body.append(f"    req.n_{f} = (size_t){n};")
            wt = "ProtobufCBinaryData" if p.kind == "pod" else C_WIRE[p.kind]
            temps.append(f"    {wt} *t_{f} = NULL;")
            frees.append(f"    free(t_{f});")
            body.append(f"    if (req.n_{f}) {{")
            body.append(f"        t_{f} = calloc(req.n_{f}, sizeof *t_{f});")
            body.append(f"        if (!t_{f}) {{ rc = CUDA_ERROR_OUT_OF_MEMORY; goto out; }}")
            body.append(f"        for (size_t i = 0; i < req.n_{f}; i++)")
            if p.kind == "pod":
                body.append(f"            t_{f}[i] = (ProtobufCBinaryData){{sizeof {p.name}[i], "
                            f"(uint8_t *)(uintptr_t)&{p.name}[i]}};")
            else:
                body.append(f"            t_{f}[i] = {to_wire(p, p.name + '[i]')};")
            body.append("    }")
            body.append(f"    req.{f} = t_{f};")
        return
    if p.direction == "inout":
        body.append(f"    if ({p.name}) req.{f} = {to_wire(p, '*' + p.name)};")
    elif p.kind == "cstr":
        body.append(f"    if (!{p.name}) return CUDA_ERROR_INVALID_VALUE;")
        body.append(f"    req.{f} = (char *)(uintptr_t){p.name};")
    elif p.kind == "pod" and p.stars == 1:
        body.append(f"    if ({p.name}) req.{f} = (ProtobufCBinaryData){{sizeof *{p.name}, "
                    f"(uint8_t *)(uintptr_t){p.name}}};")
    elif p.kind == "pod":
        body.append(f"    req.{f} = (ProtobufCBinaryData){{sizeof {p.name}, "
                    f"(uint8_t *)&{p.name}}};")
    else:
        body.append(f"    req.{f} = {to_wire(p, p.name)};")


def stub_copy_reply(c, p, body):
    f, o = p.field, "o"
    if p.is_array and p.kind == "cstr":
        n = c.param(p.length).name
        body.append(f"        if ({p.name} && {n} > 0) {{")
        body.append(f"            size_t l = strnlen({o}->{f}, (size_t){n} - 1);")
        body.append(f"            memcpy({p.name}, {o}->{f}, l);")
        body.append(f"            {p.name}[l] = 0;")
        body.append("        }")
    elif p.is_array:
        n = c.param(p.length).name
        body.append(f"        for (size_t i = 0; {p.name} && i < {o}->n_{f} && i < (size_t){n}; i++)")
        if p.kind == "pod":
            body.append(f"            if ({o}->{f}[i].len == sizeof {p.name}[i]) "
                        f"memcpy(&{p.name}[i], {o}->{f}[i].data, sizeof {p.name}[i]);")
        else:
            body.append(f"            {p.name}[i] = {from_wire(p, f'{o}->{f}[i]')};")
    elif p.kind == "pod":
        body.append(f"        if ({p.name} && {o}->{f}.len != sizeof *{p.name}) rc = CUDA_ERROR_UNKNOWN;")
        body.append(f"        else if ({p.name}) memcpy({p.name}, {o}->{f}.data, sizeof *{p.name});")
    else:
        body.append(f"        if ({p.name}) *{p.name} = {from_wire(p, f'{o}->{f}')};")


def stub_function(c):
    impl = f"sl_stub_{c.name}"
    args = ", ".join(p.name for p in c.params)
    body, temps, frees = [], [], []
    for p in c.params:
        if p.direction in ("in", "inout") or p.is_array:
            stub_fill_request(c, p, body, temps, frees)
    outs = [p for p in c.params if p.direction in ("out", "inout")]
    lines = [f"static CUresult {impl}(bool per_thread_stream{', ' if c.params else ''}"
             f"{', '.join(c_decl(p) for p in c.params)})", "{"]
    # the driver refuses a NULL out pointer (CUDA_ERROR_INVALID_VALUE) unless it is @optional
    for p in c.params:
        if p.direction == "out" and not p.is_array and not p.optional:
            lines.append(f"    if (!{p.name})")
            lines.append("        return CUDA_ERROR_INVALID_VALUE;")
    lines.append(f"    {req_type(c)} req = {c_upper('sluice.cuda', c.message + 'Request')}__INIT;")
    lines.append("    CUresult rc = CUDA_SUCCESS;")
    lines += temps
    lines += body
    lines.append(f"    Sluice__Wire__Call call = SL_FE_CALL({c.name}, &req);")
    lines.append("    call.per_thread_stream = per_thread_stream;")
    if c.has("async"):
        lines.append("    rc = sl_fe_enqueue_async(&call);")
    else:
        if c.has("nowait"):
            lines.append("    if (sl_fe_nowait_take(&call)) {")
            lines.append("        call.no_reply = true;")
            lines.append("        rc = sl_fe_enqueue_async(&call);")
            lines.append("        goto out;")
            lines.append("    }")
        lines.append("    Sluice__Wire__Reply *rep = NULL;")
        lines.append("    rc = sl_fe_call(&call, &rep);")
        lines.append("    if (rep) {")
        lines.append("        rc = (CUresult)rep->result;")
        if outs:
            lines.append(f"        const {rep_type(c)} *o = SL_FE_REPLY({c.name}, rep);")
            lines.append("        if (rc == CUDA_SUCCESS && !o) rc = CUDA_ERROR_UNKNOWN;")
            lines.append("        if (rc == CUDA_SUCCESS) {")
            for p in outs:
                stub_copy_reply(c, p, lines)
            if c.has("layout"):
                lines.append(f"        sl_fe_layout_seed(o->{c.layout_param.field}, o->param_layout, "
                             "o->n_param_offsets, o->param_offsets, o->n_param_sizes, "
                             "o->param_sizes);")
            lines.append("        }")
        lines.append("        sl_fe_reply_free(rep);")
        lines.append("    }")
    if temps or c.has("nowait"):
        lines.append("    goto out;")
    lines.append("out:")
    lines += frees
    lines.append("    return rc;")
    lines.append("}")
    # the exported symbols: the base one and its per-thread variants
    for sym, pts in [(c.name, "false")] + [(f"{c.name}_{v}", "true")
                                           for v in ("ptds", "ptsz") if c.has(v)]:
        lines.append("")
        lines.append(f"CUresult {sym}({c_params(c)})")
        lines.append("{")
        lines.append(f"    return {impl}({pts}{', ' if args else ''}{args});")
        lines.append("}")
    return "\n".join(lines)


def frontend_stubs_c(calls):
    parts = [f"""/* {HEADER}
 * Frontend stubs: every non-handwritten call, with its exact cuda.h signature (the compiler
 * checks them: cuda.h is included with __CUDA_API_VERSION_INTERNAL, which declares every real
 * symbol). Guest-side handles are the backend's wire ids cast to the handle type. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/fe_calls.h"
#include "sluice/stub_runtime.h"
#include "sluice/wire.h"
#include "sluice_session.pb-c.h"

#pragma GCC diagnostic ignored "-Wunused-label"
"""]
    for c in calls:
        if c.fe_generated:
            parts.append(stub_function(c))
    return "\n\n".join(parts) + "\n"


def frontend_refused_c(calls):
    parts = [f"""/* {HEADER}
 * The calls Sluice does not offer (the table's refuse="..."), with their cuda.h signatures:
 * each answers sl_fe_refused(name, reason): CUDA_ERROR_NOT_SUPPORTED and one log line per name
 * giving the reason. Every other exported name is a generated stub or a hand-written definition
 * in frontend/: one missing is a link error (the export table takes its address). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "sluice/stub_runtime.h\""""]
    for c in calls:
        if not c.refused:
            continue
        voids = "".join(f"    (void){p.name};\n" for p in c.params)
        reason = c.key("refuse").replace("\\", "\\\\").replace('"', '\\"')
        for sym in c.exported:
            parts.append(f"CUresult {sym}({c_params(c)})\n{{\n{voids}"
                         f"    return sl_fe_refused(\"{sym}\", \"{reason}\");\n}}")
    return "\n\n".join(parts) + "\n"


def frontend_exports_c(calls):
    names = sorted(n for c in calls for n in c.exported)   # str order = strcmp order (ASCII)
    rows = "\n".join(f'    {{"{n}", (const void *)(uintptr_t)&{n}}},' for n in names)
    return f"""/* {HEADER}
 * The export table of libcuda.so.1 (frontend/exports/exports.h): every cuda.h call and every _ptds/_ptsz
 * twin, sorted by strcmp() of the name; internal (Sluice-only) calls are not exported. Each
 * address resolves at link time to the generated stub, the hand-written definition or the weak
 * sl_fe_unsupported one (frontend_unsupported.c). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "exports/exports.h"
#include "sluice/wire_ids.h"

static const struct sl_fe_export sl_fe_exports[] = {{
{rows}
}};

_Static_assert(sizeof sl_fe_exports / sizeof sl_fe_exports[0] == SL_FE_EXPORT_COUNT,
               "regenerate sluice/wire_ids.h");

const struct sl_fe_export *sl_fe_export_table(size_t *count)
{{
    *count = sizeof sl_fe_exports / sizeof sl_fe_exports[0];
    return sl_fe_exports;
}}
"""


def fe_calls_h(calls):
    """Typed envelope helpers: SL_FE_CALL(name, &req) makes the Call of a request,
    SL_FE_REPLY(name, reply) gives the typed reply member (NULL when the reply carries another).
    Only for the calls that travel as themselves: hand code cannot send a local, via or refused
    call (no helper exists)."""
    out = [f"""/* {HEADER}
 * Typed envelope helpers for the frontend: hand-written code never builds a Call by hand.
 *   Sluice__Wire__Call call = SL_FE_CALL(cuMemAlloc_v2, &req);   (or SL_FE_SET(name, &call, &req))
 *   const Sluice__Cuda__CuMemAllocV2Reply *o = SL_FE_REPLY(cuMemAlloc_v2, reply);
 * The request type is checked by the compiler; only calls that travel have helpers. */
#ifndef SLUICE_FE_CALLS_H
#define SLUICE_FE_CALLS_H

#include <stddef.h>

#include "sluice_session.pb-c.h"

#define SL_FE_CALL(name, rq)       sl_fe_call_of_##name(rq)
#define SL_FE_SET(name, call, rq)  sl_fe_set_##name(call, rq)
#define SL_FE_REPLY(name, rep)     sl_fe_reply_of_##name(rep)
"""]
    for c in calls:
        if not c.sent:
            continue
        out.append(f"""static inline void sl_fe_set_{c.name}(Sluice__Wire__Call *c, {req_type(c)} *rq)
{{
    c->call_id = {c.id};
    c->args_case = {case_const('call', c)};
    c->{c.member} = rq;
}}
static inline Sluice__Wire__Call sl_fe_call_of_{c.name}({req_type(c)} *rq)
{{
    Sluice__Wire__Call c = SLUICE__WIRE__CALL__INIT;
    sl_fe_set_{c.name}(&c, rq);
    return c;
}}
static inline {rep_type(c)} *sl_fe_reply_of_{c.name}(const Sluice__Wire__Reply *r)
{{
    return r && r->out_case == {case_const('reply', c)} ? r->{c.member} : NULL;
}}""")
    out.append("#endif")
    return "\n".join(out) + "\n"
