#!/usr/bin/env python3
"""wire.table_vs_header: the API table covers exactly the CUresult CUDAAPI functions of cuda.h.

cuda.h is preprocessed with __CUDA_API_VERSION_INTERNAL (so every declaration carries its real
symbol name and the legacy declarations appear); `_ptds`/`_ptsz` names fold into their base.
Checks: the same set of names, the same parameter count and names (first declaration), the same
ptds/ptsz flags. Calls flagged `internal` (Sluice-only, ids >= 10000) are not cuda.h functions
and are ignored. Usage: check_table.py <cc> <cuda include dir> <table> <proto/gen dir>
"""
import re
import subprocess
import sys


def header_functions(cc, include):
    text = subprocess.run([cc, "-E", "-P", "-D__CUDA_API_VERSION_INTERNAL", "-I", include,
                           "-x", "c", include + "/cuda.h"],
                          check=True, capture_output=True, text=True).stdout
    text = re.sub(r"\s+", " ", text)
    funcs = {}
    for name, params in re.findall(r"\bCUresult (cu\w+) ?\(([^;]*?)\) ?;", text):
        base = re.sub(r"_(ptds|ptsz)$", "", name)
        names = [re.search(r"(\w+)\s*$", p).group(1) for p in params.split(",")
                 if p.strip() and p.strip() != "void"]
        f = funcs.setdefault(base, {"params": names, "flags": set()})
        if len(f["params"]) != len(names):
            sys.exit(f"cuda.h declares {base} with different parameter counts")
        if name != base:
            f["flags"].add(name[-4:])
    return funcs


def main():
    cc, include, table, gendir = sys.argv[1:5]
    sys.dont_write_bytecode = True
    sys.path.insert(0, gendir)
    import apitable
    calls = [c for c in apitable.parse(table) if not c.has("internal")]  # not cuda.h calls
    header = header_functions(cc, include)
    errors = []
    names = {c.name for c in calls}
    for missing in sorted(set(header) - names):
        errors.append(f"missing from the table: {missing}")
    for extra in sorted(names - set(header)):
        errors.append(f"not declared in cuda.h: {extra}")
    for c in calls:
        h = header.get(c.name)
        if not h:
            continue
        got = [p.name for p in c.params]
        if got != h["params"]:
            errors.append(f"{c.name}: parameters {got} but cuda.h has {h['params']}")
        flags = {f for f in ("ptds", "ptsz") if c.has(f)}
        if flags != h["flags"]:
            errors.append(f"{c.name}: flags {sorted(flags)} but cuda.h has {sorted(h['flags'])}")
    for e in errors:
        print("FAIL", e)
    n_gen = sum(c.generated for c in calls)
    n_refused = sum(c.refused for c in calls)
    n_async = sum(c.has("async") for c in calls)
    print(f"{len(calls)} functions in the table ({len(header)} distinct in cuda.h): "
          f"{n_gen} generated on both sides, {len(calls) - n_gen - n_refused} with hand code, "
          f"{n_refused} refused, {n_async} async")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
