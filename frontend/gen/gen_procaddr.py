#!/usr/bin/env python3
"""Generates the cuGetProcAddress resolution table of the Sluice frontend.

Inputs (CUDA toolkit headers, read only):
  cudaTypedefs.h (+ the GL, EGL, VDPAU and profiler typedef headers): one
      `PFN_<name>_v<version>` typedef per ABI of every driver call, where <version> is the
      CUDA version that introduced that ABI, and `PFN_<name>_v<version>_ptds/_ptsz` for the
      per-thread-default-stream entry points (version = when the per-thread variant appeared).
  cuda.h (+ cudaGL.h, cudaEGL.h, cudaVDPAU.h, cudaProfiler.h): the real exported symbol names:
      every `CUresult CUDAAPI <name>(` declaration, the `#define <base> <versioned>` lines and
      the `__CUDA_API_PTDS/__CUDA_API_PTSZ` wrappers.

Mapping rule (checked, not assumed): for each base name the sorted PFN versions and the sorted
symbol variants (<base>, <base>_v2, <base>_v3, ...) must have equal counts; the i-th ABI is the
i-th symbol. A per-thread typedef PFN_<base>_v<P>_pt?? belongs to the ABI active at version P and
names <that symbol>_pt??, which must be declared in the headers. Any violation aborts the build.

Output: a C file with one entry per base name, sorted by strcmp order for bsearch.
Usage: gen_procaddr.py <cuda include dir> <output .c>
"""
import re
import sys
from collections import defaultdict

TYPEDEF_HEADERS = ["cudaTypedefs.h", "cudaGLTypedefs.h", "cudaEGLTypedefs.h",
                   "cudaVDPAUTypedefs.h", "cudaProfilerTypedefs.h"]
API_HEADERS = ["cuda.h", "cudaGL.h", "cudaEGL.h", "cudaVDPAU.h", "cudaProfiler.h"]

# Declared in the headers but never resolved by the Linux driver (580: SYMBOL_NOT_FOUND at
# every version; tests/unit/frontend/procaddr_probe.c). cuWGL* is Windows-only.
NOT_RESOLVED = {"cuWGLGetDevice", "cuEventCreateFromEGLSync"}

PFN_RE = re.compile(r"typedef\s+CUresult\s*\(\s*CUDAAPI\s+\*PFN_(\w+)\)")
DEFINE_RE = re.compile(
    r"^\s*#\s*define\s+(cu\w+)\s+(?:__CUDA_API_PT(DS|SZ)\((\w+)\)|(cu\w+))\s*$", re.M)
DECL_RE = re.compile(r"CUresult\s+CUDAAPI\s+(cu\w+)\s*\(")
SPLIT_RE = re.compile(r"(\w+?)(?:_v(\d+))?(?:_(ptds|ptsz))?")


def fail(msg):
    sys.stderr.write("gen_procaddr.py: " + msg + "\n")
    sys.exit(1)


def read(inc, names, required):
    text = []
    for n in names:
        try:
            with open(f"{inc}/{n}", encoding="utf-8", errors="replace") as f:
                text.append(f.read())
        except OSError as e:
            if n in required:
                fail(f"cannot read {inc}/{n}: {e}")
    return "\n".join(text)


def main():
    if len(sys.argv) != 3:
        fail("usage: gen_procaddr.py <cuda include dir> <output .c>")
    inc, out = sys.argv[1], sys.argv[2]
    typedefs = read(inc, TYPEDEF_HEADERS, {"cudaTypedefs.h"})
    api = read(inc, API_HEADERS, {"cuda.h"})

    abis = defaultdict(set)  # base -> {version}
    per_thread = []          # (base, version, "ptds"|"ptsz")
    for m in PFN_RE.finditer(typedefs):
        mm = re.fullmatch(r"(\w+?)_v(\d+)(?:_(ptds|ptsz))?", m.group(1))
        if not mm:
            fail(f"unexpected typedef name PFN_{m.group(1)}")
        base, ver, pt = mm.group(1), int(mm.group(2)), mm.group(3)
        if pt:
            per_thread.append((base, ver, pt))
        else:
            abis[base].add(ver)

    defines = {}
    for m in DEFINE_RE.finditer(api):
        defines[m.group(1)] = (m.group(3) or m.group(4), m.group(2))
    symbols = set()
    for d in DECL_RE.findall(api):
        symbols.add(d)
        if d in defines:
            symbols.add(defines[d][0])
    for target, pt in defines.values():
        symbols.add(target)
        if pt:
            symbols.add(f"{target}_pt{pt.lower()}")

    variants = defaultdict(set)
    for s in symbols:
        b, n, pt = SPLIT_RE.fullmatch(s).groups()
        if pt is None:
            variants[b].add(int(n or 1))

    entries = {}
    for base in sorted(abis):
        vers = sorted(abis[base])
        have = sorted(variants.get(base, ()))
        if have != list(range(1, len(vers) + 1)):
            fail(f"{base}: {len(vers)} ABI versions {vers} but symbols v{have}")
        names = [base if i == 1 else f"{base}_v{i}" for i in range(1, len(vers) + 1)]
        entries[base] = [[v, names[i], None, 0] for i, v in enumerate(vers)]
    for base, ver, pt in per_thread:
        if base not in entries:
            fail(f"per-thread typedef for {base} without a plain one")
        abi = [e for e in entries[base] if e[0] <= ver]
        if not abi:
            fail(f"{base}_v{ver}_{pt}: no ABI at that version")
        e = abi[-1]
        name = f"{e[1]}_{pt}"
        if name not in symbols:
            fail(f"{name} is not declared in the headers")
        if e[2] is not None:
            fail(f"{e[1]}: two per-thread variants")
        e[2], e[3] = name, ver
    for base in sorted(variants):
        if base not in entries:
            fail(f"{base} is declared but has no PFN typedef (add a version)")
    for base in NOT_RESOLVED:
        entries.pop(base, None)

    keys = sorted(entries, key=lambda s: s.encode())
    lines = [
        "/* GENERATED by frontend/gen/gen_procaddr.py from the CUDA headers. Do not edit. */",
        '#include "exports/procaddr_table.h"',
        "",
    ]
    for i, base in enumerate(keys):
        lines.append(f"static const struct sl_fe_proc_abi abi_{i}[] = {{")
        for v, name, pt, ptv in entries[base]:
            ptname = f'"{pt}"' if pt else "NULL"
            lines.append(f'    {{{v}, {ptv}, "{name}", {ptname}}},')
        lines.append("};")
    lines.append("")
    lines.append("static const struct sl_fe_proc_entry entries[] = {")
    for i, base in enumerate(keys):
        lines.append(f'    {{"{base}", abi_{i}, {len(entries[base])}}},')
    lines.append("};")
    lines.append("")
    lines.append("const struct sl_fe_proc_entry *sl_fe_proc_table(size_t *count)")
    lines.append("{")
    lines.append(f"    *count = {len(keys)};")
    lines.append("    return entries;")
    lines.append("}")
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    n_abi = sum(len(v) for v in entries.values())
    print(f"gen_procaddr.py: {len(keys)} names, {n_abi} ABIs, {len(per_thread)} per-thread")


if __name__ == "__main__":
    main()
