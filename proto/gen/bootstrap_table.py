#!/usr/bin/env python3
"""One-time / maintenance tool: draft proto/api/cuda_driver.api from cuda.h.

This is NOT run by the build. The API table (proto/api/cuda_driver.api) is the source of
truth; this script only produced its first draft (call ids 1..N in header order) and can be
used when a new CUDA release adds functions, to draft blocks for the new names:

    python3 proto/gen/bootstrap_table.py --cuda-include /usr/local/cuda/include \
        --existing proto/api/cuda_driver.api > /tmp/new-blocks.api

With --existing, only functions missing from the table are printed, numbered after the
table's highest call id; review them by hand and append them. Never renumber.

How it works: cuda.h is run through the C preprocessor with __CUDA_API_VERSION_INTERNAL
defined, which turns every declaration into its real symbol name (cuMemAlloc -> cuMemAlloc_v2,
cuMemcpyHtoD -> cuMemcpyHtoD_v2_ptds) and exposes the legacy unversioned declarations.
`_ptds`/`_ptsz` names fold into their base entry, flagged `ptds`/`ptsz`. Parameters are
annotated by heuristics (type tables, sibling `num*`/`count` parameters, struct bodies with
pointers or handles); whatever the heuristics cannot prove safe is flagged `handwritten`.
"""
import argparse
import re
import subprocess
import sys

HANDLE_TYPES = {
    "CUcontext": "context", "CUmodule": "module", "CUfunction": "function",
    "CUkernel": "kernel", "CUlibrary": "library", "CUstream": "stream", "CUevent": "event",
    "CUgraph": "graph", "CUgraphExec": "graphexec", "CUgraphNode": "graphnode",
    "CUmemoryPool": "mempool", "CUtexref": "texref", "CUsurfref": "surfref",
    "CUtexObject": "texobj", "CUsurfObject": "surfobj", "CUarray": "array",
    "CUmipmappedArray": "mipmappedarray", "CUlinkState": "linker", "CUgreenCtx": "greenctx",
    "CUdevResourceDesc": "devresource", "CUmemGenericAllocationHandle": "memhandle",
    "CUexternalMemory": "extmem", "CUexternalSemaphore": "extsem",
    "CUgraphicsResource": "graphicsresource", "CUuserObject": "userobject",
    "CUlogsCallbackHandle": "callbackhandle", "CUasyncCallbackHandle": "callbackhandle",
    "CUgraphConditionalHandle": "condhandle",
}
CALLBACK_TYPES = {"CUhostFn", "CUstreamCallback", "CUasyncCallback", "CUlogsCallback",
                  "CUoccupancyB2DSize"}
DEVPTR_TYPES = {"CUdeviceptr", "CUdeviceptr_v1", "CUdeviceptr_v2"}
SCALAR_TYPES = {
    "int": "int32", "unsigned int": "uint32", "unsigned": "uint32", "short": "int32",
    "unsigned short": "uint32", "char": "int32", "unsigned char": "uint32",
    "size_t": "uint64", "unsigned long long": "uint64", "long long": "int64",
    "cuuint32_t": "uint32", "cuuint64_t": "uint64", "float": "float", "double": "double",
    "CUlogIterator": "uint32",
}
# Names that always need hand code whatever their parameters look like.
HANDWRITTEN_NAMES = re.compile(
    r"^cu(GetProcAddress|GetExportTable|GetErrorString|GetErrorName|LaunchKernel|"
    r"LaunchCooperativeKernel|ModuleLoad|LibraryLoad|Link|Memcpy|MemHostAlloc|MemAllocHost|"
    r"MemHostRegister|MemHostUnregister|MemFreeHost|MemHostGetDevicePointer|"
    r"MemHostGetFlags|IpcOpenMemHandle|ModuleGetGlobal|LibraryGetGlobal|LibraryGetManaged|"
    r"FuncGetParamInfo|KernelGetParamInfo|Checkpoint|Logs|Coredump|Graphics|"
    r"StreamBatchMemOp|DeviceGetName|DeviceGetUuid|MemBatchDecompress|TensorMap)")
ASYNC_NAMES = re.compile(
    r"^cu(Launch\w*|\w*Async(_v\d)?|EventRecord\w*|StreamWaitEvent|StreamWaitValue\w*|"
    r"StreamWriteValue\w*|StreamBatchMemOp\w*|GraphLaunch|GraphUpload|ModuleUnload|"
    r"LibraryUnload)$")
COUNT_NAME = re.compile(r"^(num\w*|\w*[cC]ount|n\w*s|size)$")


def preprocess(include_dir):
    """Returns cuda.h preprocessed with __CUDA_API_VERSION_INTERNAL, whitespace squeezed."""
    out = subprocess.run(
        ["cc", "-E", "-P", "-D__CUDA_API_VERSION_INTERNAL", "-I", include_dir, "-x", "c",
         include_dir + "/cuda.h"], check=True, capture_output=True, text=True).stdout
    return re.sub(r"\s+", " ", out)


def declarations(text):
    """[(real name, [(ctype, pname)], ptds, ptsz)] in header order, _ptds/_ptsz folded."""
    order, seen = [], {}
    for name, params in re.findall(r"\bCUresult (cu\w+) ?\(([^;]*?)\) ?;", text):
        base = re.sub(r"_(ptds|ptsz)$", "", name)
        plist = []
        for p in params.split(","):
            p = p.strip()
            if not p or p == "void":
                continue
            m = re.match(r"(.*?)\s*(\w+)$", p)
            plist.append((re.sub(r"\s*\*", " *", m.group(1)).replace("* *", "**"),
                          m.group(2)))
        if base not in seen:
            seen[base] = {"params": plist, "ptds": False, "ptsz": False}
            order.append(base)
        elif len(seen[base]["params"]) != len(plist):
            sys.exit(f"{base}: declarations disagree on the parameter count")
        if name.endswith("_ptds"):
            seen[base]["ptds"] = True
        if name.endswith("_ptsz"):
            seen[base]["ptsz"] = True
    return [(n, seen[n]["params"], seen[n]["ptds"], seen[n]["ptsz"]) for n in order]


def type_tables(text):
    """enum type names, {struct name: body} and {alias: target} from the preprocessed header."""
    enums = set(re.findall(r"typedef enum \w* ?\{[^}]*\} ?(\w+) ?;", text))
    aliases = dict((b, a) for a, b in re.findall(r"typedef (?:enum |struct |union )?(\w+) (\w+) ?;", text))
    structs = {}
    for m in re.finditer(r"typedef (struct|union) \w* ?\{", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        name = re.match(r" ?(\w+)", text[i:]).group(1)
        structs[name] = text[m.end():i - 1]
    for a, b in list(aliases.items()):
        if b in enums:
            enums.add(a)
    return enums, structs, aliases


class Classifier:
    def __init__(self, text):
        self.enums, self.structs, self.aliases = type_tables(text)
        self._plain = {}

    def resolve(self, t):
        seen = 0
        while t not in self.structs and t in self.aliases and seen < 10:
            if t in HANDLE_TYPES or t in DEVPTR_TYPES or t in SCALAR_TYPES or t in self.enums:
                break
            t = self.aliases[t]
            seen += 1
        return t

    def plain_struct(self, t):
        """True when the struct holds no pointers, handles or device pointers (copyable as bytes)."""
        t = self.resolve(t)
        if t in self._plain:
            return self._plain[t]
        self._plain[t] = False
        body = self.structs.get(t)
        ok = body is not None and "*" not in body
        if ok:
            for tok in set(re.findall(r"\b[A-Za-z_]\w*\b", body)):
                if tok in HANDLE_TYPES or tok in DEVPTR_TYPES or tok in CALLBACK_TYPES:
                    ok = False
                elif tok in self.structs or (tok in self.aliases and tok not in self.enums
                                             and tok not in SCALAR_TYPES):
                    if self.resolve(tok) in self.structs and not self.plain_struct(tok):
                        ok = False
        self._plain[t] = ok
        return ok

    def kind(self, base):
        """Wire kind of a C base type: ('int32'|...|'enum'|'handle=K'|'device'|'devptr'|'pod'|...)."""
        if base in HANDLE_TYPES:
            return "handle=" + HANDLE_TYPES[base]
        if base in ("CUdevice", "CUdevice_v1"):
            return "device"
        if base in DEVPTR_TYPES:
            return "devptr"
        if base in CALLBACK_TYPES:
            return "callback"
        if base in SCALAR_TYPES:
            return SCALAR_TYPES[base]
        if base in self.enums or base == "CUresult":
            return "enum"
        if base == "void":
            return "hostptr"
        r = self.resolve(base)
        if r in SCALAR_TYPES:
            return SCALAR_TYPES[r]
        if r in self.structs:
            return "pod"
        return "hostptr"


# Reviewed by hand after the first draft: calls whose pointer directions or array lengths the
# header does not express (non-const input arrays, capacity protocols, in/out structs).
FORCE_HANDWRITTEN = {
    "cuCtxCreate_v3", "cuDevResourceGenerateDesc", "cuDevSmResourceSplitByCount",
    "cuMemPoolImportPointer", "cuMemPoolGetAccess", "cuStreamUpdateCaptureDependencies",
    "cuStreamUpdateCaptureDependencies_v2", "cuMemPrefetchBatchAsync", "cuMemDiscardBatchAsync",
    "cuMemDiscardAndPrefetchBatchAsync", "cuDeviceGetHostAtomicCapabilities",
    "cuDeviceGetP2PAtomicCapabilities", "cuMipmappedArrayCreate", "cuGraphDebugDotPrint",
    "cuDeviceUnregisterAsyncNotification",
}
# Non-const pointers that the driver only reads.
IN_POINTER_NAMES = {"location"}
RELEASING = re.compile(r"(Destroy\w*|Unload|MemRelease|MemFree(Async)?|MemFree_v2|MemAddressFree)$")


def annotate(name, params, cls):
    """Returns (flags, [(dir, ctype, pname, [annotations])])."""
    flags, out = [], []
    handwritten = bool(HANDWRITTEN_NAMES.match(name)) or name in FORCE_HANDWRITTEN
    pnames = [p for _, p in params]
    bytype = dict((p, t) for t, p in params)
    released = False
    for ctype, pname in params:
        stars = ctype.count("*")
        const = ctype.startswith("const ")
        base = ctype.replace("const ", "").replace("*", "").strip()
        kind = cls.kind(base)
        ann = [kind]
        direction = "in"
        if stars == 0:
            if kind == "pod" and not cls.plain_struct(base):
                handwritten = True
            if kind in ("hostptr", "callback", "handle=callbackhandle"):
                handwritten = True
            if RELEASING.search(name) and not released and (
                    kind.startswith("handle=") or kind == "devptr"):
                ann.append("release")
                released = True
        elif stars > 1 or kind == "hostptr":
            handwritten = True
            direction = "out" if stars > 1 else "in"
            if base == "char":
                ann = ["cstr"]
        elif base == "char":
            ann = ["cstr"]
            if not const:
                direction = "out"
                count = _count_sibling(pname, pnames, bytype)
                if count:
                    ann.append("len=" + count)
                else:
                    handwritten = True
        else:
            direction = "in" if const or pname in IN_POINTER_NAMES else "out"
            count = _count_sibling(pname, pnames, bytype)
            if count:
                ann.append("len=" + count)
                if "*" in bytype[count]:
                    handwritten = True  # length passed by pointer: capacity/size protocol
                if not const and "Enumerate" not in name:
                    handwritten = True  # non-const array: direction not expressed by the header
            elif const and kind != "pod":
                handwritten = True  # an array without a known length
            elif not const and _plural(pname) and kind not in ("pod",):
                handwritten = True  # probably an array whose length the header does not name
            if kind == "pod" and not cls.plain_struct(base):
                handwritten = True
            if kind in ("callback", "handle=callbackhandle"):
                handwritten = True
        out.append([direction, ctype, pname, ann])
    # a count parameter that is passed by pointer is both sent and returned
    for row in out:
        if row[0] == "out" and any(("len=" + row[2]) in r[3] for r in out):
            row[0] = "inout"
            handwritten = True
    # a count returned by pointer next to other pointers: a capacity protocol
    if any(r[0] == "out" and re.match(r"^(num|count)", r[2]) for r in out) and \
            sum(1 for r in out if "*" in r[1]) > 1:
        handwritten = True
    has_out = any(r[0] != "in" for r in out)
    if ASYNC_NAMES.match(name) and not has_out:
        flags.append("async")
    if handwritten:
        flags.append("handwritten")
    return flags, out


def _plural(pname):
    return pname.endswith("s") and not pname.endswith(("ss", "lags", "tatus", "ytes", "Attributes"))


def _count_sibling(pname, pnames, bytype):
    """The parameter that holds the element count of array parameter pname, if any."""
    stem = re.sub(r"^(p|ph|h)(?=[A-Z])", "", pname)
    stem = stem[:1].upper() + stem[1:]
    wanted = ["num" + stem, "num" + stem.rstrip("s"), "num" + stem + "s", stem.lower() + "Count",
              "n" + stem]
    for w in wanted:
        for p in pnames:
            if p.lower() == w.lower() and p != pname:
                return p
    i = pnames.index(pname)
    if not _plural(pname):
        return None
    for j in (i + 1, i - 1):
        if 0 <= j < len(pnames) and pnames[j] != pname and COUNT_NAME.match(pnames[j]) \
                and pnames[j] != "size" and "*" not in bytype[pnames[j]].replace("size_t", "") \
                and pnames[j].lower().startswith(("num", "count")):
            return pnames[j]
    return None


def render(entries, first_id):
    lines = []
    for i, (name, params, ptds, ptsz, flags, rows) in enumerate(entries):
        fl = flags + (["ptds"] if ptds else []) + (["ptsz"] if ptsz else [])
        lines.append(f"call {first_id + i} {name}" + ("" if not fl else " " + " ".join(fl)))
        for d, ctype, pname, ann in rows:
            decl = f"{ctype}{'' if ctype.endswith('*') else ' '}{pname}"
            lines.append(f"    {d:<5} {decl:<48} " + " ".join("@" + a for a in ann))
        lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda-include", default="/usr/local/cuda/include")
    ap.add_argument("--existing", help="only print functions missing from this table")
    args = ap.parse_args()
    text = preprocess(args.cuda_include)
    cls = Classifier(text)
    known, first = set(), 1
    if args.existing:
        tbl = open(args.existing).read()
        ids = [int(x) for x in re.findall(r"^call (\d+) ", tbl, re.M)]
        known = set(re.findall(r"^call \d+ (\w+)", tbl, re.M))
        first = max(ids, default=0) + 1
    entries = []
    for name, params, ptds, ptsz in declarations(text):
        if name in known:
            continue
        flags, rows = annotate(name, params, cls)
        entries.append((name, params, ptds, ptsz, flags, rows))
    sys.stdout.write(render(entries, first))


if __name__ == "__main__":
    main()
