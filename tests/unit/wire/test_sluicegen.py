#!/usr/bin/env python3
"""wire.generator_selftest: the generator's stability rule and table checks.

Usage: test_sluicegen.py <proto/gen dir> <table>. Builds a baseline schema from the table in a
temporary folder, then checks that renumbering a call or reordering parameters is refused,
that adding a call is accepted, and that malformed tables are refused with a message."""
import os
import re
import subprocess
import sys
import tempfile

gen_dir, table = sys.argv[1], sys.argv[2]
sys.dont_write_bytecode = True
sys.path.insert(0, gen_dir)
import apitable  # noqa: E402
import sluicegen  # noqa: E402

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
    print(("ok   " if cond else "FAIL ") + what)


def run(tbl_text, schema_dir, tmp):
    path = os.path.join(tmp, "t.api")
    with open(path, "w") as f:
        f.write(tbl_text)
    return subprocess.run([sys.executable, os.path.join(gen_dir, "sluicegen.py"), "--table", path,
                           "--check-stability", schema_dir], capture_output=True, text=True)


text = open(table).read()
with tempfile.TemporaryDirectory() as tmp:
    base = os.path.join(tmp, "schema")
    os.makedirs(base)
    files = sluicegen.generate(apitable.parse(table))
    for name in sluicegen.PROTOS:
        open(os.path.join(base, name), "w").write(files[name])

    expect(run(text, base, tmp).returncode == 0, "the unchanged table passes")

    m = re.search(r"^call (\d+) cuInit\b", text, re.M)
    renumbered = text.replace(m.group(0), f"call 9999 cuInit")
    r = run(renumbered, base, tmp)
    expect(r.returncode != 0 and "cu_init" in r.stderr, "renumbering a call is refused")

    swapped = text.replace("    out   CUdeviceptr *dptr                                @devptr @span=bytesize\n"
                           "    in    size_t bytesize                                  @uint64\n",
                           "    in    size_t bytesize                                  @uint64\n"
                           "    out   CUdeviceptr *dptr                                @devptr @span=bytesize\n", 1)
    expect(swapped != text, "test setup: reordered cuMemAlloc_v2")
    r = run(swapped, base, tmp)
    expect(r.returncode != 0 and "CuMemAllocV2" in r.stderr, "reordering parameters is refused")

    added = text + "\ncall 9999 cuSluiceTestOnly\n    in    int x @int32\n"
    expect(run(added, base, tmp).returncode == 0, "adding a call is accepted")

    dup = text + "\ncall 1 cuSluiceTestOnly\n"
    r = run(dup, base, tmp)
    expect(r.returncode != 0 and "already used" in r.stderr, "a duplicate call id is refused")

    bad = text + "\ncall 9999 cuSluiceTestOnly\n    in    void *p @hostptr\n"
    r = run(bad, base, tmp)
    expect(r.returncode != 0 and "handwritten" in r.stderr,
           "a generated call with a host pointer is refused")

sys.exit(1 if failures else 0)
