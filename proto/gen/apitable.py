"""Reads and checks proto/api/cuda_driver.api (format: see the top of that file and docs/api-table.md).

Standard library only. Used by sluicegen.py and by the table tests.
"""
import re
import shlex
from dataclasses import dataclass, field

SCALAR_KINDS = {"int32", "uint32", "int64", "uint64", "float", "double", "enum"}
HANDLE_KINDS = [
    "context", "module", "function", "kernel", "library", "stream", "event", "graph",
    "graphexec", "graphnode", "mempool", "texref", "surfref", "texobj", "surfobj", "array",
    "mipmappedarray", "linker", "greenctx", "devresource", "memhandle", "extmem", "extsem",
    "graphicsresource", "userobject", "callbackhandle", "condhandle",
]
OTHER_KINDS = {"device", "devptr", "pod", "cstr", "hostptr", "callback", "bytes"}
FLAGS = {"async", "ptds", "ptsz", "internal", "memo", "unmemo", "uncapture", "local", "prints",
         "unsticky", "nowait", "layout"}
# key=value annotations of a call line, and the values each key takes (None: free text).
KEYS = {
    "hand": {"fe", "be", "both"},          # where hand code lives; the other side is generated
    "via": None,                           # hand=fe: the calls the frontend sends it as
    "refuse": None,                        # not offered: the reason shown to the guest
    "note": None,                          # a line for docs/coverage.md
    "quota": {"alloc", "counted", "array", "free-array", "meminfo"},
    "acct": {"launch", "kernel", "copy", "marker"},
    "dir": {"htod", "dtoh"},
    "idle": {"sync-ctx", "sync-stream", "query-stream", "completes-stream", "keep", "record",
             "wait", "query-event"},
    "capture": {"begin"},
    "blocks": {"stream", "event", "ctx"},  # a wait the backend completes off the call path
    "fattr": {"get", "set", "uses"},      # a kernel's or function's attribute: the memo's scope
    "answers": {"FILE_NOT_FOUND"},
}
MODIFIERS = {"len", "span", "release", "repeated", "quota", "bytes", "stream", "optional"}
INTERNAL_BASE = 10000   # internal (Sluice-only) calls have ids >= INTERNAL_BASE, all others below
C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "bool", "true", "false",
}


class TableError(Exception):
    pass


@dataclass
class Param:  # noqa: E302
    pos: int            # 1-based position: also the proto field number
    direction: str      # in | out | inout
    ctype: str          # C type as declared, e.g. "const CUDA_MEMCPY2D *"
    name: str           # C parameter name
    kind: str           # scalar kind, "handle", "device", "devptr", "pod", "cstr", ...
    handle: str = ""    # handle kind when kind == "handle"
    length: str = ""    # name of the parameter holding the element count (arrays)
    span: str = ""      # name of the parameter holding the byte length (devptr)
    release: bool = False
    repeated: bool = False  # internal calls only: a repeated field with no C buffer behind it
    span_field: str = ""  # proto field of the span parameter (set by check())
    quota: bool = False   # @quota: a factor of the bytes an allocation asks (quota=alloc/array)
    bytes: bool = False   # @bytes: the bytes a copy moves (acct=copy)
    stream: bool = False  # @stream: a pod that carries the call's stream (cuLaunchKernelEx)
    optional: bool = False  # @optional: an out pointer the driver accepts as NULL

    @property
    def stars(self):
        return self.ctype.count("*")

    @property
    def field(self):
        """proto field name: snake_case of the C name, never a C keyword."""
        f = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", self.name).lower()
        return f + "_" if f in C_KEYWORDS else f

    @property
    def is_array(self):
        return bool(self.length)

    @property
    def is_repeated(self):
        """A repeated field on the wire (an array with len=, or @repeated of an internal call)."""
        return (self.is_array or self.repeated) and self.kind != "cstr"

    @property
    def value_type(self):
        """The C type of one value: the declared type for by-value parameters, the pointee for
        pointers (top-level const dropped so it can be a local variable)."""
        t = self.ctype.strip()
        if self.stars == 0 or self.kind == "cstr" and self.direction == "in":
            return t
        t = t[: t.rindex("*")].strip()
        if "*" not in t and t.startswith("const "):
            t = t[len("const "):]
        return t


@dataclass
class Call:
    id: int
    name: str
    flags: set
    params: list = field(default_factory=list)
    line: int = 0
    keys: dict = field(default_factory=dict)  # key=value annotations

    def has(self, flag):
        return flag in self.flags

    def key(self, k, default=""):
        return self.keys.get(k, default)

    @property
    def hand(self):
        """Where hand code lives: "none", "fe", "be" or "both" (internal calls: both)."""
        return "both" if self.has("internal") else self.key("hand", "none")

    @property
    def refused(self):
        return "refuse" in self.keys

    @property
    def sent(self):
        """The call travels as itself: not refused, not local, not sent as other calls."""
        return not self.refused and not self.has("local") and "via" not in self.keys

    @property
    def fe_generated(self):
        """The generator writes the frontend stub (no hand code there, not refused)."""
        return self.hand in ("none", "be") and not self.refused

    @property
    def be_generated(self):
        """The generator writes the backend handler (the call arrives and needs no hand code)."""
        return self.hand in ("none", "fe") and self.sent

    @property
    def generated(self):
        """The generator writes both the stub and the handler."""
        return self.fe_generated and self.be_generated

    @property
    def stream_param(self):
        """The parameter naming the stream the call works on: a @stream pod, else the first
        @handle=stream in-parameter; None when the call has none."""
        for p in self.params:
            if p.stream:
                return p
        for p in self.params:
            if p.kind == "handle" and p.handle == "stream" and p.direction == "in" and \
                    not p.is_array:
                return p
        return None

    @property
    def layout_param(self):
        """The function or kernel a `layout` call answers: its only out-parameter, a single
        handle of kind function or kernel; None otherwise."""
        outs = [p for p in self.params if p.direction != "in"]
        if len(outs) == 1 and outs[0].kind == "handle" and not outs[0].is_array and \
                outs[0].handle in ("function", "kernel"):
            return outs[0]
        return None

    @property
    def exported(self):
        """The symbols libcuda exports for this call: the name and its _ptds/_ptsz twins.
        Internal calls are not cuda.h functions and export nothing."""
        if self.has("internal"):
            return []
        return [self.name] + [f"{self.name}_{v}" for v in ("ptds", "ptsz") if self.has(v)]

    @property
    def message(self):
        """CamelCase message stem: cuMemAlloc_v2 -> CuMemAllocV2."""
        parts = self.name.split("_")
        return "".join(p[:1].upper() + p[1:] for p in parts)

    @property
    def member(self):
        """oneof member name: cuMemAlloc_v2 -> cu_mem_alloc_v2."""
        return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", self.name).lower()

    def param(self, name):
        for p in self.params:
            if p.name == name:
                return p
        return None


def parse(path):
    """Parses the table file; raises TableError naming the line on any format error."""
    calls, cur = [], None
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            if line.startswith("call "):
                cur = _parse_call(line, where)
                cur.line = lineno
                calls.append(cur)
            elif line.startswith((" ", "\t")) and cur is not None:
                cur.params.append(_parse_param(line.strip(), len(cur.params) + 1, where))
            else:
                raise TableError(f"{where}: expected 'call <id> <name>' or an indented parameter")
    check(calls, path)
    return calls


def _parse_call(line, where):
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise TableError(f"{where}: malformed call line ({e}): {line!r}") from None
    if len(words) < 3 or not words[1].isdigit() or not re.fullmatch(r"(cu|sl)\w+", words[2]):
        raise TableError(f"{where}: malformed call line: {line!r}")
    flags, keys = set(), {}
    for w in words[3:]:
        k, eq, v = w.partition("=")
        if not eq:
            if w not in FLAGS:
                raise TableError(f"{where}: unknown flag {w!r}")
            flags.add(w)
        elif k not in KEYS:
            raise TableError(f"{where}: unknown annotation {k!r}")
        elif k in keys:
            raise TableError(f"{where}: {k}= given twice")
        elif KEYS[k] is not None and v not in KEYS[k]:
            raise TableError(f"{where}: {k}={v!r}: expected one of {sorted(KEYS[k])}")
        elif not v:
            raise TableError(f"{where}: {k}= needs a value")
        else:
            keys[k] = v
    if "internal" in flags:
        # internal calls are always hand code on both sides: messages generated, no stub, no
        # handler, no driver symbol, no export
        if flags & {"ptds", "ptsz", "local"} or set(keys) - {"quota", "acct", "idle",
                                                             "answers", "note"}:
            raise TableError(f"{where}: an internal call takes no flag but async, memo, unmemo, "
                             f"uncapture, prints, unsticky")
        if not words[2].startswith("sl") or int(words[1]) < INTERNAL_BASE:
            raise TableError(f"{where}: internal calls are named sl* and have ids >= "
                             f"{INTERNAL_BASE}")
    elif not words[2].startswith("cu") or int(words[1]) >= INTERNAL_BASE:
        raise TableError(f"{where}: a cuda.h call is named cu* and has an id below "
                         f"{INTERNAL_BASE} (ids from {INTERNAL_BASE} up are internal calls)")
    return Call(int(words[1]), words[2], flags, keys=keys)


def _parse_param(text, pos, where):
    m = re.fullmatch(r"(in|out|inout)\s+([^@]*?)\s*((?:@\S+\s*)+)", text)
    if not m:
        raise TableError(f"{where}: parameter needs '<dir> <C declaration> @<kind>': {text!r}")
    direction, decl, anns = m.group(1), m.group(2), m.group(3).split()
    dm = re.fullmatch(r"(.*?)\s*\b(\w+)", decl)
    if not dm or not dm.group(1):
        raise TableError(f"{where}: cannot split {decl!r} into type and name")
    ctype = re.sub(r"\s*\*", " *", dm.group(1)).replace("* *", "**").strip()
    p = Param(pos, direction, ctype, dm.group(2), "")
    for a in anns:
        key, _, val = a[1:].partition("=")
        if not p.kind:
            if key == "handle":
                if val not in HANDLE_KINDS:
                    raise TableError(f"{where}: unknown handle kind {val!r}")
                p.kind, p.handle = "handle", val
            elif key in SCALAR_KINDS or key in OTHER_KINDS:
                p.kind = key
            else:
                raise TableError(f"{where}: the first annotation must be a kind, not {a!r}")
        elif key == "len":
            p.length = val
        elif key == "span":
            p.span = val
        elif key == "release" and not val:
            p.release = True
        elif key == "repeated" and not val:
            p.repeated = True
        elif key == "quota" and not val:
            p.quota = True
        elif key == "bytes" and not val:
            p.bytes = True
        elif key == "stream" and not val:
            p.stream = True
        elif key == "optional" and not val:
            p.optional = True
        else:
            raise TableError(f"{where}: unknown annotation {a!r}")
    return p


def check(calls, path):
    """Whole-table checks: unique ids and names, references, supported generated shapes."""
    ids, names, members, messages = {}, {}, {}, {}
    for c in calls:
        where = f"{path}:{c.line} ({c.name})"
        for seen, key in ((ids, c.id), (names, c.name), (members, c.member),
                          (messages, c.message)):
            if key in seen:
                raise TableError(f"{where}: {key!r} already used by {seen[key]}")
            seen[key] = c.name
        if c.id <= 0:
            raise TableError(f"{where}: call ids start at 1")
        fields = set()
        for p in c.params:
            if (p.kind == "bytes" or p.repeated) and not c.has("internal"):
                raise TableError(f"{where}: {p.name}: @bytes and @repeated are for internal calls")
            if p.repeated and (p.kind not in SCALAR_KINDS and p.kind != "handle" or p.length):
                raise TableError(f"{where}: {p.name}: @repeated needs a scalar or handle kind "
                                 "and no len=")
            if p.optional and (p.direction != "out" or p.is_array or p.repeated):
                raise TableError(f"{where}: {p.name}: @optional is for a single out pointer")
            if p.field in fields:
                raise TableError(f"{where}: two parameters map to field {p.field!r}")
            fields.add(p.field)
            if p.span:
                p.span_field = c.param(p.span).field if c.param(p.span) else ""
            for ref in (p.length, p.span):
                if ref and (c.param(ref) is None or c.param(ref).kind not in SCALAR_KINDS):
                    raise TableError(f"{where}: {p.name}: {ref!r} is not an integer parameter")
        if c.has("async") and any(p.direction != "in" for p in c.params):
            raise TableError(f"{where}: an async call cannot have out-parameters")
        if c.has("nowait") and (c.has("async") or any(p.direction != "in" for p in c.params)
                                or not any(p.release and p.kind == "devptr" for p in c.params)):
            raise TableError(f"{where}: a nowait call is synchronous, has no out-parameters and "
                             "releases a device address")
        if c.has("memo") and c.has("async"):
            raise TableError(f"{where}: a memo call is synchronous")
        if c.has("layout") and (not c.generated or c.layout_param is None):
            raise TableError(f"{where}: layout is for a generated call whose one out-parameter "
                             "is a function or kernel handle")
        check_facts(c, where, names)
        if c.fe_generated or c.be_generated:
            for p in c.params:
                why = unsupported(c, p)
                if why:
                    raise TableError(f"{where}: {p.name}: {why}; write hand code for the side "
                                     f"the generator would write (hand=fe, be or both)")
    for c in calls:
        for v in c.key("via").split(",") if c.key("via") else []:
            if v not in names:
                raise TableError(f"{path}:{c.line} ({c.name}): via={v}: no such call")


def check_facts(c, where, names):
    """The key=value annotations of one call are consistent with each other and its params."""
    if c.refused and (c.hand != "none" or c.has("local") or c.key("via")):
        raise TableError(f"{where}: a refused call has no hand code, local or via")
    if (c.has("local") or c.key("via")) and c.hand != "fe":
        raise TableError(f"{where}: local and via= are frontend hand code: add hand=fe")
    if c.has("local") and c.key("via"):
        raise TableError(f"{where}: local (answered in the guest) or via= (sent as other "
                         "calls), not both")
    q = c.key("quota")
    qp = [p for p in c.params if p.quota]
    if q in ("alloc", "array") and not qp:
        raise TableError(f"{where}: quota={q} needs @quota on the parameters giving its bytes")
    if qp and q not in ("alloc", "array"):
        raise TableError(f"{where}: @quota is for quota=alloc or quota=array")
    if q == "array" and (len(qp) != 1 or qp[0].kind != "pod"):
        raise TableError(f"{where}: quota=array takes one @quota pod (the array descriptor)")
    if q == "alloc" and any(p.kind not in SCALAR_KINDS or p.direction != "in" for p in qp):
        raise TableError(f"{where}: quota=alloc multiplies in-parameters that are integers")
    if q in ("alloc", "array", "counted") and not any(
            p.direction == "out" and p.kind in ("devptr", "handle") for p in c.params):
        raise TableError(f"{where}: quota={q} needs an out device pointer or handle")
    bp = [p for p in c.params if p.bytes]
    if bp and c.key("acct") != "copy":
        raise TableError(f"{where}: @bytes is for acct=copy")
    if len(bp) > 1 or any(p.direction != "in" or (p.kind != "pod" and p.kind not in
                                                   SCALAR_KINDS) for p in bp):
        raise TableError(f"{where}: one @bytes in-parameter, an integer or a pod")
    if c.key("dir") and c.key("acct") != "copy":
        raise TableError(f"{where}: dir= is for acct=copy")
    if c.key("dir") and bp and bp[0].kind == "pod":
        raise TableError(f"{where}: a @bytes pod gives the direction itself: no dir=")
    sp = [p for p in c.params if p.stream]
    if len(sp) > 1 or any(p.kind != "pod" or p.direction != "in" for p in sp):
        raise TableError(f"{where}: @stream marks one in-pod carrying the stream")
    if c.key("idle") in ("sync-stream", "query-stream", "completes-stream", "record", "wait") \
            and not c.stream_param:
        raise TableError(f"{where}: idle={c.key('idle')} needs a stream parameter")
    if c.key("blocks") == "stream" and not c.stream_param:
        raise TableError(f"{where}: blocks=stream needs a stream parameter")
    if c.key("blocks") == "event" and not any(
            p.kind == "handle" and p.handle == "event" for p in c.params):
        raise TableError(f"{where}: blocks=event needs an event parameter")
    if c.key("blocks") and c.has("async"):
        raise TableError(f"{where}: blocks= is for a synchronous call")
    if c.key("fattr") and not c.has("memo"):
        raise TableError(f"{where}: fattr= is for memo calls")
    if c.key("fattr") in ("get", "set") and not any(
            p.name == "attrib" and p.ctype == "CUfunction_attribute" and p.direction == "in"
            for p in c.params):
        raise TableError(f"{where}: fattr={c.key('fattr')} needs an in CUfunction_attribute "
                         f"attrib")
    if c.key("fattr") == "set" and not c.has("unmemo"):
        raise TableError(f"{where}: fattr=set is an unmemo call")
    if c.key("idle") in ("record", "wait", "query-event") and not any(
            p.kind == "handle" and p.handle == "event" for p in c.params):
        raise TableError(f"{where}: idle={c.key('idle')} needs an event parameter")


def unsupported(call, p):
    """Why the generator cannot marshal p, or '' when it can."""
    if p.kind in ("hostptr", "callback"):
        return f"kind {p.kind} needs hand code"
    if p.kind == "handle" and p.handle == "callbackhandle":
        return "callback handles need hand code"
    if p.stars > 1:
        return "pointers to pointers need hand code"
    if p.direction == "in":
        if p.kind == "cstr":
            return "" if p.stars == 1 and not p.length else "cstr arrays are not supported"
        if p.stars == 0:
            return "" if not p.length else "len= on a by-value parameter"
        if p.is_array:
            return _length_ok(call, p)
        return "" if p.kind == "pod" else "an in-pointer must be a pod or an array with len="
    if p.stars != 1:
        return "out/inout parameters must be pointers"
    if p.direction == "inout":
        return "" if p.kind in SCALAR_KINDS and not p.is_array else "inout only for scalars"
    if p.kind == "cstr":
        return _length_ok(call, p) if p.is_array else "an out string needs len=<buffer size>"
    if p.is_array:
        return _length_ok(call, p)
    return ""


def _length_ok(call, p):
    lp = call.param(p.length)
    if lp.direction != "in" or lp.stars != 0:
        return f"length {lp.name} must be a by-value in-parameter"
    return ""
