#!/usr/bin/env python3
"""Where a synchronous call's time goes, call by call, on the GPU machine (docs/performance.md,
"Tracing the data path"). Not a test: run by hand there.

Runs sluice-bench-datapath (its --only parts) through Sluice with the frontend's and the
session worker's debug logs and joins their lines by seq. Both sides log CLOCK_MONOTONIC on the
same machine: the frontend when the call began, how long its send took and the round trip from
the send's end to the reply; the worker when it began the call and how long the call took there.
Per call name it reports medians of:

  send   the guest from the call's start to the end of its send (encoding, encryption, ZeroMQ)
  out    the end of the guest's send to the worker's start of the call (the wire, the worker's
         threads, the calls ahead of it in the frame)
  run    the call in the worker (the driver, the accounting)
  back   the end of the call in the worker to the guest thread having its reply
  total  send + out + run + back

and the channel floor of the same machine (sluice-bench-channel --processes --latency) for
comparison with out + back.

usage: datapath_trace.py --bundle DIR --frontend DIR --out DIR [--parts latency,first]
       [--quick]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from datapath import channel_floor  # noqa: E402
from run_samples import guest_library_path, start_backend  # noqa: E402

FE = re.compile(r"frontend: (\S+) seq (\d+) .*?-> (-?\d+).*\(([\d.]+) us; sent in ([\d.]+) us "
                r"from (\d+) ns\)")
WK = re.compile(r"session (\d+) instance \S+: seq (\d+) (\S+) -> (-?\d+).*\(([\d.]+) us from "
                r"(\d+) ns\)")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--frontend", required=True)
    ap.add_argument("--out", required=True,
                    help="a folder: summary.txt, calls.txt, backend.log, guest.log")
    ap.add_argument("--parts", default="latency")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--driver", default="/usr/local/nvidia/lib64/libcuda.so.1")
    a = ap.parse_args()
    bundle = os.path.abspath(a.bundle)
    bench = os.path.join(bundle, "build", "tests", "bench", "sluice-bench-datapath")
    work = tempfile.mkdtemp(prefix="sluice-trace-")
    os.makedirs(a.out, exist_ok=True)
    saved = os.environ.get("SLUICE_LOG_LEVEL")
    os.environ["SLUICE_LOG_LEVEL"] = "debug"  # the backend and its workers
    be, cfg = start_backend(bundle, work, a.driver, [])
    if saved is None:
        del os.environ["SLUICE_LOG_LEVEL"]
    else:
        os.environ["SLUICE_LOG_LEVEL"] = saved
    env = dict(os.environ, LD_LIBRARY_PATH=guest_library_path(a.frontend) + ":/usr/local/cuda/lib64",
               SLUICE_CONFIG_DIR=cfg, SLUICE_LOG_LEVEL="debug")
    args = [bench, "--only", a.parts] + (["--quick"] if a.quick else [])
    try:
        p = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=600)
    finally:
        be.terminate()
        be.wait(timeout=10)
    guest = p.stdout.decode(errors="replace").splitlines()
    with open(os.path.join(a.out, "guest.log"), "w") as f:  # the guest's debug lines, as run
        f.write("\n".join(guest) + "\n")
    worker = {}
    for line in open(os.path.join(work, "backend.log"), errors="replace"):
        m = WK.search(line)
        if m:
            worker[int(m.group(2))] = (float(m.group(5)), int(m.group(6)))
    per = {}
    rows = []
    for line in guest:
        m = FE.search(line)
        if not m or int(m.group(2)) not in worker:
            continue
        name, seq = m.group(1), int(m.group(2))
        rt, send, began = float(m.group(4)), float(m.group(5)), int(m.group(6))
        run, w_began = worker[seq]
        sent_at = began + send * 1e3
        out = (w_began - sent_at) / 1e3
        back = (sent_at + rt * 1e3 - (w_began + run * 1e3)) / 1e3
        per.setdefault(name, []).append((send, out, run, back))
        rows.append("%-28s seq %7d send %7.1f out %7.1f run %9.1f back %7.1f" %
                    (name, seq, send, out, run, back))
    floor = channel_floor(os.path.dirname(bench), dict(os.environ))
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write("sluice-bench-datapath --only %s%s: rc %d, %d synchronous calls joined\n" %
                (a.parts, " --quick" if a.quick else "", p.returncode, len(rows)))
        f.write("channel floor (TLS in ZeroMQ, 64 B, two processes) p50: %.1f us\n" % floor)
        f.write("%-36s %6s %7s %7s %9s %7s %8s\n" % ("call (medians, us)", "count", "send", "out",
                                                   "run", "back", "total"))
        for name, v in sorted(per.items(), key=lambda kv: -len(kv[1])):
            med = [statistics.median(x[i] for x in v) for i in range(4)]
            f.write("%-36s %6d %7.1f %7.1f %9.1f %7.1f %8.1f\n" % (name[:36], len(v), *med,
                                                                  sum(med)))
        for line in guest:  # with SLUICE_STATS=1: frames, frames taken along, answers here
            if "session stats" in line:
                f.write(line.strip() + "\n")
    with open(os.path.join(a.out, "calls.txt"), "w") as f:
        f.write("\n".join(rows) + "\n")
    os.system("cp %s/backend.log %s/backend.log" % (work, a.out))
    print(open(os.path.join(a.out, "summary.txt")).read())
    return 0 if p.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
