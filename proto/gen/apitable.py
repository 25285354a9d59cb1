"""Reads and checks proto/api/cuda_driver.api (format: see the top of that file and docs/api-table.md).

Standard library only. Used by sluicegen.py and by the table tests.
"""
import re
from dataclasses import dataclass, field

SCALAR_KINDS = {"int32", "uint32", "int64", "uint64", "float", "double", "enum"}
HANDLE_KINDS = [
    "context", "module", "function", "kernel", "library", "stream", "event", "graph",
    "graphexec", "graphnode", "mempool", "texref", "surfref", "texobj", "surfobj", "array",
    "mipmappedarray", "linker", "greenctx", "devresource", "memhandle", "extmem", "extsem",
    "graphicsresource", "userobject", "callbackhandle", "condhandle",
]
OTHER_KINDS = {"device", "devptr", "pod", "cstr", "hostptr", "callback", "bytes"}
FLAGS = {"async", "handwritten", "ptds", "ptsz", "internal", "memo", "unmemo", "uncapture"}
MODIFIERS = {"len", "span", "release", "repeated"}
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
class Param:
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

    def has(self, flag):
        return flag in self.flags

    @property
    def generated(self):
        """The generator writes its stub and handler (neither handwritten nor internal)."""
        return not self.has("handwritten") and not self.has("internal")

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
    words = line.split()
    if len(words) < 3 or not words[1].isdigit() or not re.fullmatch(r"(cu|sl)\w+", words[2]):
        raise TableError(f"{where}: malformed call line: {line!r}")
    flags = set(words[3:])
    bad = flags - FLAGS
    if bad:
        raise TableError(f"{where}: unknown flag(s) {sorted(bad)}")
    if "internal" in flags:
        # internal calls are always hand code: messages generated, no stub, no handler
        if flags & {"ptds", "ptsz"}:
            raise TableError(f"{where}: an internal call takes no other flag than handwritten, "
                             f"async, memo or unmemo")
        if not words[2].startswith("sl") or int(words[1]) < INTERNAL_BASE:
            raise TableError(f"{where}: internal calls are named sl* and have ids >= "
                             f"{INTERNAL_BASE}")
        flags.add("handwritten")
    elif not words[2].startswith("cu") or int(words[1]) >= INTERNAL_BASE:
        raise TableError(f"{where}: a cuda.h call is named cu* and has an id below "
                         f"{INTERNAL_BASE} (ids from {INTERNAL_BASE} up are internal calls)")
    return Call(int(words[1]), words[2], flags)


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
        if c.has("memo") and c.has("async"):
            raise TableError(f"{where}: a memo call is synchronous")
        if not c.has("handwritten"):
            for p in c.params:
                why = unsupported(c, p)
                if why:
                    raise TableError(f"{where}: {p.name}: {why}; mark the call handwritten")


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
