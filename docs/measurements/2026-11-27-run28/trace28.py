#!/usr/bin/env python3
"""Ad hoc (run 28): sluice-bench-datapath parts through Sluice with the frontend's and the
backend's debug logs (each synchronous call's round trip in the guest, each call's time in the
worker), joined by seq. Writes OUT/trace-summary.txt (per call: count, median round trip, median
time in the worker, the difference), OUT/trace-matmul.txt (the joined lines of the matmul part)
and OUT/trace-first.txt (the first-launch part)."""
import os, re, statistics, subprocess, sys, tempfile
sys.path.insert(0, "tests/gpu")
from run_samples import guest_library_path, start_backend
B = os.path.abspath(".bundle"); OUT = os.environ["OUT"]
work = tempfile.mkdtemp(prefix="trace-")
os.environ["SLUICE_LOG_LEVEL"] = "debug"
be, cfg = start_backend(B, work, "/usr/local/nvidia/lib64/libcuda.so.1", [])
env = dict(os.environ, LD_LIBRARY_PATH=guest_library_path(B + "/build/frontend") + ":/usr/local/cuda/lib64",
           SLUICE_CONFIG_DIR=cfg, SLUICE_LOG_LEVEL="debug")
bench = B + "/build/tests/bench/sluice-bench-datapath"
FE = re.compile(r"frontend: (\S+) seq (\d+) .*?-> (-?\d+) \(([\d.]+) us\)")
FEQ = re.compile(r"frontend: (\S+) seq (\d+) .*queued")
BE = re.compile(r"seq (\d+) (\S+) -> (-?\d+).*\(([\d.]+) us\)$")
runs = [("first", ["--only", "first"]), ("matmul", ["--only", "matmul"])]
fe_text = {}
for name, args in runs:
    p = subprocess.run([bench] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=300)
    fe_text[name] = (p.returncode, p.stdout.decode(errors="replace").splitlines())
be.terminate(); be.wait(10)
belog = open(work + "/backend.log", errors="replace").read().splitlines()
# sessions in order: one per run
sessions = []
be_calls = {}
for line in belog:
    m = re.search(r"session (\d+) instance \S+: seq (\d+) (\S+) -> (-?\d+).*\(([\d.]+) us\)", line)
    if m:
        sid = int(m.group(1))
        if sid not in be_calls:
            be_calls[sid] = {}
            sessions.append(sid)
        be_calls[sid][int(m.group(2))] = (m.group(3), float(m.group(5)))
summ = open(OUT + "/trace-summary.txt", "w")
for k, (name, _) in enumerate(runs):
    rc, lines = fe_text[name]
    bec = be_calls.get(sessions[k], {}) if k < len(sessions) else {}
    joined = []
    per = {}
    for line in lines:
        m = FE.search(line)
        if m:
            seq = int(m.group(2)); rt = float(m.group(4))
            b = bec.get(seq)
            joined.append("%-28s seq %6d rc %4s rt %9.1f be %9s path %9s" % (
                m.group(1), seq, m.group(3), rt, "%.1f" % b[1] if b else "-",
                "%.1f" % (rt - b[1]) if b else "-"))
            if b:
                per.setdefault(m.group(1), []).append((rt, b[1]))
            continue
        m = FEQ.search(line)
        if m:
            seq = int(m.group(2)); b = bec.get(seq)
            joined.append("%-28s seq %6d queued            be %9s" % (m.group(1), seq, "%.1f" % b[1] if b else "-"))
            if b:
                per.setdefault(m.group(1) + " (async)", []).append((0.0, b[1]))
            continue
        if "frontend:" not in line and "channel:" not in line:
            joined.append(line)
    summ.write("==== %s rc %s: %d frontend lines, %d worker calls\n" % (name, rc, len(lines), len(bec)))
    summ.write("%-36s %7s %10s %10s %10s\n" % ("call", "count", "rt p50", "worker p50", "path p50"))
    for call, v in sorted(per.items(), key=lambda kv: -len(kv[1])):
        rts = [a for a, _ in v]; bes = [b for _, b in v]
        summ.write("%-36s %7d %10.1f %10.1f %10.1f\n" % (call, len(v), statistics.median(rts),
                   statistics.median(bes), statistics.median([a - b for a, b in v])))
    with open(OUT + "/trace-%s.txt" % name, "w") as f:
        f.write("\n".join(joined[:3000]) + "\n")
summ.close()
os.system("xz -c %s/backend.log > %s/trace-backend.log.xz" % (work, OUT))
