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
                           "    in    size_t bytesize                                  @uint64 @quota\n",
                           "    in    size_t bytesize                                  @uint64 @quota\n"
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
    expect(r.returncode != 0 and "hand=" in r.stderr,
           "a generated call with a host pointer is refused")
    for line, what in (
            ('call 9999 cuSluiceTestOnly hand=fe refuse="no"', "a refused call with hand code"),
            ("call 9999 cuSluiceTestOnly local", "local without hand=fe"),
            ("call 9999 cuSluiceTestOnly hand=fe via=cuNoSuchCall", "via= naming no call"),
            ("call 9999 cuSluiceTestOnly hand=sideways", "an unknown hand= value"),
            ("call 9999 cuSluiceTestOnly colour=red", "an unknown annotation"),
            ("call 9999 cuSluiceTestOnly frobnicate", "an unknown flag"),
            ("call 9999 cuSluiceTestOnly quota=alloc\n    in    size_t n @uint64", "quota=alloc without @quota"),
            ("call 9999 cuSluiceTestOnly\n    in    size_t n @uint64 @bytes", "@bytes without acct=copy"),
            ("call 9999 cuSluiceTestOnly idle=wait", "idle=wait without a stream"),
            ("call 9999 cuSluiceTestOnly layout\n    out   CUstream *s @handle=stream",
             "layout answering no function or kernel"),
            ("call 9999 cuSluiceTestOnly layout hand=be\n    out   CUkernel *k @handle=kernel",
             "layout with hand code"),
            ('call 9999 cuSluiceTestOnly note="unterminated', "an unterminated quote")):
        r = run(text + "\n" + line + "\n", base, tmp)
        expect(r.returncode != 0 and "t.api" in r.stderr, f"{what} is refused with its line")

    r = run(text + "\ncall 10003 cuSluiceTestOnly\n", base, tmp)
    expect(r.returncode != 0 and "internal" in r.stderr, "a cuda.h call id >= 10000 is refused")
    r = run(text + "\ncall 9998 slSluiceTestOnly internal\n", base, tmp)
    expect(r.returncode != 0 and "10000" in r.stderr, "an internal call id < 10000 is refused")
    r = run(text + "\ncall 10099 slSluiceTestOnly internal ptds\n", base, tmp)
    expect(r.returncode != 0, "an internal call with ptds is refused")
    r = run(text + "\ncall 9998 cuSluiceTestOnly\n    out   uint64 x @uint64 @repeated\n",
            base, tmp)
    expect(r.returncode != 0 and "internal" in r.stderr, "@repeated outside internal is refused")
    r = run(text + "\ncall 10099 slSluiceTestOnly internal\n    out   uint64 x @uint64 @repeated\n"
            "    in    bytes b @bytes\n", base, tmp)
    expect(r.returncode == 0, "an internal call with @repeated and @bytes is accepted")

    calls = apitable.parse(table)
    files = sluicegen.generate(calls)
    internal = [c for c in calls if c.has("internal")]
    expect(internal and all(c.hand == "both" for c in internal),
           "internal calls are hand code on both sides")
    expect(all(f"{c.name}(" not in files["frontend_stubs.c"] + files["frontend_refused.c"]
               + files["frontend_exports.c"] + files["sluice/driver_api.h"] for c in internal),
           "internal calls get no stub, refusal, export or driver symbol")
    expect("repeated uint64 offsets = 2;" in files["sluice_cuda.proto"]
           and "repeated uint64 sizes = 3;" in files["sluice_cuda.proto"],
           "slParamLayoutReply has repeated offsets and sizes")
    layout = [c for c in calls if c.has("layout")]
    proto = files["sluice_cuda.proto"]
    expect(layout and all(re.search(rf"message {c.message}Reply {{[^}}]*"
                                     r"repeated uint64 param_offsets = 100;[^}]*"
                                     r"repeated uint64 param_sizes = 101;[^}]*"
                                     r"bool param_layout = 102;", proto) for c in layout),
           "the replies of layout calls carry the layout at 100-102")
    expect(all(f"sl_fe_layout_seed(o->{c.layout_param.field}," in files["frontend_stubs.c"]
               and f"sl_be_layout_out(s, rp->{c.layout_param.field}," in
               files["backend_handlers.c"] for c in layout),
           "layout calls' stubs seed the layout, their handlers fill it")
    refused = [n for c in calls if c.refused for n in c.exported]
    expect(refused and all(f"CUresult {n}(" in files["frontend_refused.c"] for n in refused),
           "every refused export has a refusing definition")
    expect("weak" not in files["frontend_refused.c"] + files["frontend_stubs.c"],
           "no weak definitions: every export is defined once")
    table_c = files["backend_table.c"]
    expect(all((f"be_h_{c.name}}}" in table_c) == (c.sent and c.hand in ("be", "both"))
               for c in calls), "the dispatch table binds exactly the hand handlers by name")
    expect(all(f"{{{c.id}, NULL}}" in table_c for c in calls if not c.sent),
           "calls that do not travel have no backend handler")
    expect(all(f"sl_fe_call_of_{c.name}(" in files["sluice/fe_calls.h"] for c in calls if c.sent)
           and all(f"sl_fe_call_of_{c.name}(" not in files["sluice/fe_calls.h"]
                   for c in calls if not c.sent),
           "typed envelope helpers exist exactly for the calls that travel")
    names = re.findall(r'^    \{"(\w+)", ', files["frontend_exports.c"], re.M)
    expect(names == sorted(set(names)) and len(names) == sum(len(c.exported) for c in calls),
           "the export table is sorted, unique and complete")

sys.exit(1 if failures else 0)
