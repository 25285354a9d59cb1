#!/usr/bin/env python3
"""frontend.exports: libcuda.so.1 exports exactly the names of the generated export table
(frontend_exports.c: every cuda.h call and _ptds/_ptsz twin, cuGetProcAddress(_v2) and
cuGetExportTable included) and nothing else (no sl_*, nothing of the libraries linked in)."""
import re
import subprocess
import sys


def main():
    lib, table = sys.argv[1], sys.argv[2]
    want = set(re.findall(r'^\s*\{"([A-Za-z0-9_]+)",', open(table).read(), re.M))
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    have = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            have.add(parts[2].split("@")[0])
    # cudaProfiler.h's calls, answered locally (frontend/api/profiler.c), are not in the API table
    for extra in ("cuGetProcAddress", "cuGetProcAddress_v2", "cuGetExportTable",
                  "cuProfilerInitialize", "cuProfilerStart", "cuProfilerStop"):
        want.add(extra)
    missing = sorted(want - have)
    leaked = sorted(have - want)
    print(f"{lib}: {len(have)} defined dynamic symbols, export table {len(want)} names")
    for n in missing:
        print(f"missing: {n}")
    for n in leaked:
        print(f"not in the export table: {n}")
    return 1 if missing or leaked else 0


if __name__ == "__main__":
    sys.exit(main())
