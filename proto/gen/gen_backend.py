"""The backend's generated code: the handlers of the calls whose backend side is generated, the
one static dispatch table (hand handlers bound by name: a missing one is a link error), and the
driver's function table."""
import apitable
from gen_c import (C_WIRE, HEADER, SCALAR_KINDS, c_lower, c_params, case_const, handle_enum,
                   rep_type, req_type)


def has_generated_handler(c):
    """A generated handler exists for every call that travels whose shape the generator can
    marshal (hand=be handlers may wrap it)."""
    return c.sent and not c.has("internal") and \
        all(not apitable.unsupported(c, p) for p in c.params)


def has_hand_handler(c):
    return c.sent and c.hand in ("be", "both")


def be_decode(c, p, lines, frees, args):
    """Declares local a_<name> for p, decoded and validated from rq; appends the driver arg."""
    f, v, t = p.field, f"a_{p.name}", p.value_type
    fail = "goto out;"
    if p.is_array and p.kind == "cstr":
        n = c.param(p.length).name
        lines.append(f"    if (a_{n} <= 0 || (uint64_t)a_{n} > SL_WIRE_MAX_STRING) "
                     f"{{ rc = CUDA_ERROR_INVALID_VALUE; {fail} }}")
        lines.append(f"    {v} = calloc((size_t)a_{n} + 1, 1);")
        lines.append(f"    if (!{v}) {{ rc = CUDA_ERROR_OUT_OF_MEMORY; {fail} }}")
        frees.append(f"    free({v});")
        args.append(v)
        return
    if p.is_array:
        n = c.param(p.length).name
        lines.append(f"    if ((uint64_t)a_{n} > SL_WIRE_MAX_ARRAY) {{ rc = CUDA_ERROR_INVALID_VALUE; {fail} }}")
        if p.direction == "in":
            lines.append(f"    if (rq->n_{f} != (size_t)a_{n}) {{ rc = CUDA_ERROR_INVALID_VALUE; {fail} }}")
        lines.append(f"    if (a_{n} > 0) {{")
        lines.append(f"        {v} = calloc((size_t)a_{n}, sizeof *{v});")
        lines.append(f"        if (!{v}) {{ rc = CUDA_ERROR_OUT_OF_MEMORY; {fail} }}")
        lines.append("    }")
        frees.append(f"    free({v});")
        if p.direction == "in":
            lines.append(f"    for (size_t i = 0; i < rq->n_{f}; i++) {{")
            be_decode_value(p, f"rq->{f}[i]", f"{v}[i]", lines, "        ")
            lines.append("    }")
        args.append(v)
        return
    if p.direction == "out":
        lines.append(f"    memset(&{v}, 0, sizeof {v});")
        args.append("&" + v)
        return
    if p.kind == "cstr":
        lines.append(f"    {v} = rq->{f};")
        args.append(v)
        return
    if p.kind == "pod" and p.stars == 1:
        lines.append(f"    if (rq->{f}.len != 0) {{")
        lines.append(f"        if (rq->{f}.len != sizeof b_{p.name}) {{ rc = CUDA_ERROR_INVALID_VALUE; {fail} }}")
        lines.append(f"        memcpy(&b_{p.name}, rq->{f}.data, sizeof b_{p.name});")
        lines.append(f"        {v} = &b_{p.name};")
        lines.append("    }")
        args.append(v)
        return
    be_decode_value(p, f"rq->{f}", v, lines, "    ")
    args.append("&" + v if p.direction == "inout" else v)


def be_decode_value(p, src, dst, lines, ind):
    fail = "goto out;"
    if p.kind == "handle":
        lines.append(f"{ind}{{")
        lines.append(f"{ind}    void *native = NULL;")
        lines.append(f"{ind}    rc = sl_be_handle_get(s, {handle_enum(p.handle)}, {src}, &native);")
        lines.append(f"{ind}    if (rc != CUDA_SUCCESS) {fail}")
        lines.append(f"{ind}    {dst} = ({p.value_type.replace('const ', '')})(uintptr_t)native;")
        lines.append(f"{ind}}}")
    elif p.kind == "device":
        lines.append(f"{ind}rc = sl_be_device_get(s, {src}, &{dst});")
        lines.append(f"{ind}if (rc != CUDA_SUCCESS) {fail}")
    elif p.kind == "devptr":
        span = f"(uint64_t)rq->{p.span_field}" if p.span else "0"
        lines.append(f"{ind}rc = sl_be_devptr_check(s, {src}, {span});")
        lines.append(f"{ind}if (rc != CUDA_SUCCESS) {fail}")
        lines.append(f"{ind}{dst} = ({p.value_type.replace('const ', '')})({src});")
    elif p.kind == "pod":
        lines.append(f"{ind}if ({src}.len != sizeof {dst}) {{ rc = CUDA_ERROR_INVALID_VALUE; {fail} }}")
        lines.append(f"{ind}memcpy(&{dst}, {src}.data, sizeof {dst});")
    else:
        lines.append(f"{ind}{dst} = ({p.value_type.replace('const ', '')})({src});")


def be_local(p):
    """Declaration of the local that holds p for the driver call."""
    v, t = f"a_{p.name}", p.value_type
    if p.is_array and p.kind == "cstr":
        return [f"    char *{v} = NULL;"]
    if p.is_array:
        return [f"    {t.replace('const ', '')} *{v} = NULL;"]
    if p.kind == "cstr":
        return [f"    const char *{v} = NULL;"]
    if p.kind == "pod" and p.stars == 1 and p.direction == "in":
        return [f"    {t} b_{p.name};", f"    {t} *{v} = NULL;"]
    return [f"    {t} {v};"]


def be_encode(c, p, lines, ind="        "):
    """Reply field from local a_<name> (only after the driver succeeded)."""
    f, v = p.field, f"a_{p.name}"
    fail = "goto out;"
    if p.is_array and p.kind == "cstr":
        n = c.param(p.length).name
        lines.append(f"{ind}rp->{f} = strndup({v}, (size_t)a_{n});")
        lines.append(f"{ind}if (!rp->{f}) {{ rc = CUDA_ERROR_OUT_OF_MEMORY; {fail} }}")
        return
    if p.is_array:
        n = c.param(p.length).name
        wt = "ProtobufCBinaryData" if p.kind == "pod" else C_WIRE[p.kind]
        lines.append(f"{ind}if (a_{n} > 0) {{")
        lines.append(f"{ind}    rp->{f} = calloc((size_t)a_{n}, sizeof ({wt}));")
        lines.append(f"{ind}    if (!rp->{f}) {{ rc = CUDA_ERROR_OUT_OF_MEMORY; {fail} }}")
        lines.append(f"{ind}    rp->n_{f} = (size_t)a_{n};")
        lines.append(f"{ind}}}")
        lines.append(f"{ind}for (size_t i = 0; i < rp->n_{f}; i++) {{")
        be_encode_value(c, p, f"{v}[i]", f"rp->{f}[i]", lines, ind + "    ")
        lines.append(f"{ind}}}")
        return
    be_encode_value(c, p, v, f"rp->{f}", lines, ind)


def parent_of(c, p):
    """The module or library an out function/kernel/texref/surfref comes from: the call's first
    module or library in-parameter (its wire id), else 0."""
    if p.handle not in ("function", "kernel", "texref", "surfref"):
        return "0"
    for q in c.params:
        if q.kind == "handle" and q.handle in ("module", "library") and q.direction == "in" \
                and not q.is_array:
            return f"rq->{q.field}"
    return "0"


def be_encode_value(c, p, src, dst, lines, ind):
    fail = "goto out;"
    if p.kind == "handle":
        lines.append(f"{ind}rc = sl_be_handle_put(s, {handle_enum(p.handle)}, "
                     f"(void *)(uintptr_t){src}, {parent_of(c, p)}, &{dst});")
        lines.append(f"{ind}if (rc != CUDA_SUCCESS) {fail}")
    elif p.kind == "device":
        lines.append(f"{ind}rc = sl_be_device_put(s, {src}, &{dst});")
        lines.append(f"{ind}if (rc != CUDA_SUCCESS) {fail}")
    elif p.kind == "devptr":
        span = f"(uint64_t)a_{p.span}" if p.span else "0"
        lines.append(f"{ind}rc = sl_be_devptr_add(s, {c.id}, (uint64_t){src}, {span});")
        lines.append(f"{ind}if (rc != CUDA_SUCCESS) {fail}")
        lines.append(f"{ind}{dst} = (uint64_t){src};")
    elif p.kind == "pod":
        lines.append(f"{ind}{dst}.data = malloc(sizeof {src});")
        lines.append(f"{ind}if (!{dst}.data) {{ rc = CUDA_ERROR_OUT_OF_MEMORY; {fail} }}")
        lines.append(f"{ind}memcpy({dst}.data, &{src}, sizeof {src});")
        lines.append(f"{ind}{dst}.len = sizeof {src};")
    else:
        lines.append(f"{ind}{dst} = ({C_WIRE[p.kind]}){src};")


def handler_function(c):
    lines = [f"CUresult sl_be_gen_{c.name}(struct sl_be_call *c)", "{",
             "    sl_be_session *s = c->s;",
             "    const struct sl_driver_api *api = c->api;",
             "    const Sluice__Wire__Call *call = c->call;",
             "    Sluice__Wire__Reply *reply = c->reply;"]
    lines.append(f"    const {req_type(c)} *rq = call->{c.member};")
    lines.append(f"    {rep_type(c)} *rp = NULL;")
    lines.append("    CUresult rc = CUDA_SUCCESS;")
    lines.append(f"    CUresult (*fn)({c_params(c)}) = api->{c.name};")
    for p in c.params:
        lines += be_local(p)
    frees, args, decode = [], [], []
    scalars_first = sorted(c.params, key=lambda p: not (p.kind in SCALAR_KINDS and p.stars == 0))
    argmap = {}
    for p in scalars_first:
        one = []
        be_decode(c, p, decode, frees, one)
        argmap[p.name] = one[0]
    args = [argmap[p.name] for p in c.params]
    lines.append("    (void)s;")
    for v in ("ptds", "ptsz"):
        if c.has(v):
            lines.append(f"    if (call->per_thread_stream && api->{c.name}_{v}) fn = api->{c.name}_{v};")
    lines.append("    if (!rq) return CUDA_ERROR_INVALID_VALUE;")
    lines.append("    if (!fn) return CUDA_ERROR_NOT_SUPPORTED;")
    lines.append("    rp = malloc(sizeof *rp);")
    lines.append("    if (!rp) return CUDA_ERROR_OUT_OF_MEMORY;")
    lines.append(f"    {c_lower('sluice.cuda', c.message + 'Reply')}__init(rp);")
    lines.append(f"    reply->out_case = {case_const('reply', c)};")
    lines.append(f"    reply->{c.member} = rp;")
    lines += decode
    lines.append(f"    rc = fn({', '.join(args)});")
    lines.append("    if (rc == CUDA_SUCCESS) {")
    for p in c.params:
        if p.direction in ("out", "inout"):
            be_encode(c, p, lines)
    if c.has("layout"):
        f = c.layout_param.field
        lines.append(f"        sl_be_layout_out(s, rp->{f}, &rp->n_param_offsets, "
                     "&rp->param_offsets, &rp->n_param_sizes, &rp->param_sizes, "
                     "&rp->param_layout);")
    for p in c.params:
        if p.release and p.kind == "handle":
            lines.append(f"        sl_be_handle_drop(s, {handle_enum(p.handle)}, rq->{p.field});")
        elif p.release and p.kind == "devptr":
            lines.append(f"        sl_be_devptr_release(s, rq->{p.field});")
    lines.append("    }")
    lines.append("    goto out;")
    lines.append("out:")
    lines += frees
    lines.append("    return rc;")
    lines.append("}")
    return "\n".join(lines)


def backend_handlers_c(calls):
    parts = [f"""/* {HEADER}
 * The generated backend handlers: every handle, device and device pointer from the wire goes
 * through the session hooks of sluice/backend_hooks.h before it reaches the driver; array
 * lengths are checked against their count parameters. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/backend_handlers.h"
#include "sluice/backend_hooks.h"
#include "sluice/driver_api.h"
#include "sluice/wire.h"
#include "sluice_session.pb-c.h"
"""]
    for c in calls:
        if has_generated_handler(c):
            parts.append(handler_function(c))
    return "\n\n".join(parts) + "\n"


def backend_handlers_h(calls):
    gen = [f"CUresult sl_be_gen_{c.name}(struct sl_be_call *c);" for c in calls
           if has_generated_handler(c)]
    hand = [f"CUresult be_h_{c.name}(struct sl_be_call *c);" for c in calls
            if has_hand_handler(c)]
    return f"""/* {HEADER} */
#ifndef SLUICE_BACKEND_HANDLERS_H
#define SLUICE_BACKEND_HANDLERS_H

#include <cuda.h>

#include "sluice/backend_dispatch.h"

/* The generated handlers (backend_handlers.c): one per call that travels and whose shape the
 * generator marshals. A hand handler may run its call's generated one inside. */
{chr(10).join(gen)}

/* The hand-written handlers (hand=be or hand=both in the table), in backend/api/: the dispatch
 * table binds them by name, so a missing one fails the link. */
{chr(10).join(hand)}

#endif
"""


def backend_table_c(calls):
    rows = []
    for c in calls:
        if has_hand_handler(c):
            h = f"be_h_{c.name}"
        elif c.be_generated:
            h = f"sl_be_gen_{c.name}"
        else:
            h = "NULL"   # refused, local or sent as other calls: sl_be_dispatch says which
        rows.append(f"    [{c.id}] = {{{c.id}, {h}}},")
    return f"""/* {HEADER}
 * The backend's dispatch table, built at compile time: call id -> handler. Compiled into the
 * backend itself (the hand handlers live there). */
#include "sluice/backend_handlers.h"

const struct sl_be_dispatch_entry sl_be_table[SL_CALL_ID_MAX + 1] = {{
{chr(10).join(rows)}
}};
"""


def driver_api_h(calls):
    members = []
    for c in calls:
        for n in c.exported:   # internal calls have no driver symbol
            members.append(f"    CUresult (*{n})({c_params(c)});")
    return f"""/* {HEADER} */
#ifndef SLUICE_DRIVER_API_H
#define SLUICE_DRIVER_API_H

/* Include with __CUDA_API_VERSION_INTERNAL defined before cuda.h, so that the names below are
 * the real symbols and not cuda.h's versioning macros. */
#include <cuda.h>
#if defined(cuMemAlloc)
#error "sluice/driver_api.h needs cuda.h included with __CUDA_API_VERSION_INTERNAL defined"
#endif

/* The real driver as the backend sees it: one function pointer per call (and per _ptds/_ptsz
 * variant), named by the real symbol. Tests provide a fake one. */
struct sl_driver_api {{
{chr(10).join(members)}
}};

/* Fills *api from dl_handle (a dlopen() of libcuda.so.1) with dlsym; absent symbols stay
 * NULL (their calls answer CUDA_ERROR_NOT_SUPPORTED). Returns how many were found. */
int sl_driver_api_load(struct sl_driver_api *api, void *dl_handle);

#endif
"""


def driver_api_c(calls):
    rows = []
    for c in calls:
        for n in c.exported:
            rows.append(f'    {{"{n}", offsetof(struct sl_driver_api, {n})}},')
    return f"""/* {HEADER} */
#define __CUDA_API_VERSION_INTERNAL 1
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "sluice/driver_api.h"

static const struct {{
    const char *symbol;
    size_t offset;
}} sl_driver_symbols[] = {{
{chr(10).join(rows)}
}};

int sl_driver_api_load(struct sl_driver_api *api, void *dl_handle)
{{
    int found = 0;
    memset(api, 0, sizeof *api);
    for (size_t i = 0; i < sizeof sl_driver_symbols / sizeof sl_driver_symbols[0]; i++) {{
        void *sym = dl_handle ? dlsym(dl_handle, sl_driver_symbols[i].symbol) : NULL;
        if (sym) {{
            /* POSIX guarantees object and function pointers convert; copy the bits. */
            memcpy((char *)api + sl_driver_symbols[i].offset, &sym, sizeof sym);
            found++;
        }}
    }}
    return found;
}}
"""
